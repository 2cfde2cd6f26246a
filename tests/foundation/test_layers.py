"""The package's import structure (issue 34): no import circles and no import from a lower layer
into a higher one, over every import -- deferred (function-level) and ``TYPE_CHECKING`` ones
included. The layers are declared once, in ``pyproject.toml`` (``[tool.importlinter]``), and
checked by import-linter's ``lint-imports`` on the installed package.

The second test shows the check can fail: a copy of the installed package with one circle or
one upward import planted (deferred, ``TYPE_CHECKING``, top level) is refused.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import bisectbot

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "pyproject.toml"


def _lint(env_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if env_path is not None:
        env["PYTHONPATH"] = str(env_path)
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(exe), "--no-cache", str(CONFIG)], capture_output=True, text=True,
                          env=env, cwd=env_path or ROOT, timeout=300)


def test_the_package_keeps_its_layers_and_has_no_circles() -> None:
    p = _lint()
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert "2 kept, 0 broken" in p.stdout, p.stdout[-2000:]


PLANTS = {
    # a circle through a deferred import (bisect/bounds <-> bisect/search was one)
    "deferred circle": ("bisect/bounds.py", "\n\ndef _planted():\n    from .search import Bisection\n    return Bisection\n",
                        "bisectbot.bisect"),
    # an upward import hidden behind TYPE_CHECKING (the models layer naming the session)
    "type-checking upward": ("models.py", "\n\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                             "    from .session.core import Session  # noqa: F401\n", "bisectbot.session"),
    # a top-level upward import: reproduce asking verdict
    "top-level upward": ("reproduce/prompts.py", "\n\nfrom ..verdict import rules as _planted  # noqa: F401,E402\n",
                         "bisectbot.verdict"),
}


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_a_planted_circle_or_upward_import_is_refused(tmp_path: Path, kind: str) -> None:
    rel, code, named = PLANTS[kind]
    pkg = Path(bisectbot.__file__).parent
    copy = tmp_path / "site"
    shutil.copytree(pkg, copy / "bisectbot", ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "bisectbot" / rel
    target.write_text(target.read_text() + code)
    p = _lint(copy)
    assert p.returncode != 0, p.stdout[-3000:]
    assert "BROKEN" in p.stdout and named in p.stdout, p.stdout[-3000:]


def test_every_top_level_module_has_a_layer() -> None:
    # a module on no layer is checked by nothing: a new one must be placed (import-linter's
    # `exhaustive` needs containers, which this flat layout has not)
    import tomllib

    layers = tomllib.loads(CONFIG.read_text())["tool"]["importlinter"]["contracts"][0]["layers"]
    named = {m.strip() for layer in layers for m in layer.replace("|", ":").split(":")}
    pkg = Path(bisectbot.__file__).parent
    tops = {f"bisectbot.{p.stem}" for p in pkg.glob("*.py") if p.stem != "__init__"}
    tops |= {f"bisectbot.{p.parent.name}" for p in pkg.glob("*/__init__.py")}
    assert tops - named == set(), f"modules on no layer in pyproject.toml: {sorted(tops - named)}"
    assert named - tops == set(), f"layers name modules that do not exist: {sorted(named - tops)}"
