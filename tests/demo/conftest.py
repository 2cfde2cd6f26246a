"""Fixtures of the demo area: run ``bisectbot demo`` in a subprocess, find left-over engines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_demo(*args: str, timeout: float = 300, cwd: Path = ROOT, before: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """``python -m bisectbot demo ARGS`` with the bisectbot this interpreter has installed (the wheel under
    scripts/test-all.sh)."""
    env = dict(os.environ)
    env.pop("GITHUB_TOKEN", None)
    env.pop("BISECTBOT_STATE", None)
    return subprocess.run([sys.executable, "-m", "bisectbot", *before, "demo", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=cwd)


def engines_using(prefix: Path) -> list[int]:
    """Pids of live processes of the reference engine whose candidate source lies under ``prefix``."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
            if b"bisectbot.demo.engine" not in cmd:
                continue
            env = (d / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        src = next((e.split(b"=", 1)[1] for e in env if e.startswith(b"BISECTBOT_SOURCE=")), b"")
        if src.decode(errors="replace").startswith(str(prefix)):
            pids.append(int(d.name))
    return pids


class Kit:
    run_demo = staticmethod(run_demo)
    engines_using = staticmethod(engines_using)
    root = ROOT


@pytest.fixture
def kit() -> Kit:
    return Kit()
