"""Hostile ``$BISECTBOT_RUNNER_OVERRIDES`` files (issue 24's runner overrides) through ``bisectbot runner check``.

* A device, mount or cache path whose ``${VAR}`` names a secret (``BISECTBOT_GITHUB_TOKEN``) is refused
  (exit 2, FILE:LINE:COL and field): expanded, the token became ``/dev/ghp_...`` and a mount point in
  the server container (``ls /dev``, ``/proc/mounts``) and a Docker argument, where no redactor reaches.
* An unknown field is one located line (``FILE:LINE:COL: PROFILE.FIELD: unknown field``), as in a profile,
  not pydantic's multi-line dump without a line.

Real parts: the CLI in its own process, real files.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TOKEN = "ghp_" + "HostileOverridesToken0123456789"


def check(tmp_path: Path, overrides: str) -> subprocess.CompletedProcess:
    f = tmp_path / "overrides.yaml"
    f.write_text(overrides)
    env = {**os.environ, "BISECTBOT_RUNNER_OVERRIDES": str(f), "BISECTBOT_GITHUB_TOKEN": TOKEN,
           "HF_TOKEN": "hf_" + "x" * 30}
    return subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp_path / "state"), "runner", "check",
                           "--profile", "cpu"], capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("field,value,line_col", [
    ("devices", "['/dev/null:/dev/${BISECTBOT_GITHUB_TOKEN}']", "2:12"),
    ("mounts", "['/tmp:/x/${BISECTBOT_GITHUB_TOKEN}:ro']", "2:11"),
    ("cache_dirs", "['/tmp/$HF_TOKEN']", "2:15"),
])
def test_an_override_path_naming_a_secret_is_refused(tmp_path: Path, field: str, value: str, line_col: str) -> None:
    r = check(tmp_path, f"cpu:\n  {field}: {value}\n")
    f = tmp_path / "overrides.yaml"
    assert r.returncode == 2, (r.returncode, r.stdout[-1500:], r.stderr[-1500:])
    assert f"{f}:{line_col}: cpu.{field}: " in r.stderr and ", a secret: " in r.stderr, r.stderr
    assert TOKEN not in r.stdout + r.stderr


def test_a_non_secret_variable_still_expands(tmp_path: Path) -> None:
    r = check(tmp_path, "cpu:\n  cache_dirs: ['${BISECTBOT_TEST_NOT_SET:-/tmp/hostile-default-cache}']\n")
    assert r.returncode in (0, 1) and "/tmp/hostile-default-cache" in r.stdout, (r.returncode, r.stdout, r.stderr)


def test_an_unknown_override_field_is_one_located_line(tmp_path: Path) -> None:
    r = check(tmp_path, "cpu:\n  shm_size: 1g\n  nosuchfield: 1\n")
    assert r.returncode == 2
    assert r.stderr.strip().startswith(
        f"bisectbot: error: {tmp_path / 'overrides.yaml'}:3:3: cpu.nosuchfield: unknown field (known: "), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_misspelled_override_field_names_the_closest_one(tmp_path: Path) -> None:
    r = check(tmp_path, "cpu:\n  shm_sise: 1g\n")
    assert r.returncode == 2
    assert "cpu.shm_sise: unknown field (did you mean 'shm_size'?)" in r.stderr, r.stderr


def test_a_mistyped_profile_name_is_refused_not_dropped(tmp_path: Path) -> None:
    """A section naming no profile (``cpuu:``) is an error at its line, naming the known profiles:
    before, it was dropped without a word and the host's device paths with it."""
    r = check(tmp_path, "mi355x:\n  shm_size: 1g\ncpuu:\n  shm_size: 2g\n")
    assert r.returncode == 2, (r.returncode, r.stdout[-800:], r.stderr[-800:])
    assert f"{tmp_path / 'overrides.yaml'}:3:1: cpuu: no runner profile of this name (known: " in r.stderr, r.stderr
    assert "mi355x" in r.stderr.splitlines()[-1]
