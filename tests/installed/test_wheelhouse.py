"""runners/README.md's air-gapped install (issue 41 item 6): the two commands it gives -- make a
wheelhouse from the checkout, then resolve the job's install from it offline -- run as written."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOWNLOAD = 'python3 -m pip download --dest wheelhouse . "setuptools>=77" wheel'
CHECK = ('env PIP_NO_INDEX=1 PIP_FIND_LINKS="$PWD/wheelhouse" python3 -m pip install --dry-run --no-cache-dir '
         '--ignore-installed .')


def _copy_of_the_checkout(dst: Path) -> Path:
    """The files a job checks out (no virtualenvs, caches or git metadata): pip writes its build
    metadata into the project directory, which must not be the developer's checkout."""
    shutil.copytree(ROOT, dst, ignore=shutil.ignore_patterns(".git", ".venv*", "__pycache__", "*.egg-info",
                                                              "build", "dist", ".gl", ".whl", "node_modules"))
    return dst


def test_the_readme_gives_these_commands_verbatim() -> None:
    text = (ROOT / "runners" / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text.split("### The bot's own Python packages", 1)[1], re.S)
    assert [b.strip() for b in blocks[:2]] == [DOWNLOAD, CHECK]
    for var in ("PIP_INDEX_URL", "PIP_NO_INDEX", "PIP_FIND_LINKS"):
        assert var in text


@pytest.mark.network
@pytest.mark.slow
def test_a_wheelhouse_made_as_documented_installs_the_bot_offline(tmp_path: Path) -> None:
    src = _copy_of_the_checkout(tmp_path / "bisectbot")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to(sys.executable)  # the commands say python3: this test's interpreter
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    for k in [k for k in env if k.startswith("PIP_")]:
        env.pop(k)
    p = subprocess.run(["bash", "-c", DOWNLOAD], cwd=src, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    wheels = {w.name.split("-")[0].lower() for w in (src / "wheelhouse").iterdir()}
    assert {"click", "pydantic", "setuptools", "wheel", "numpy"} <= wheels, wheels
    p = subprocess.run(["bash", "-c", CHECK], cwd=src, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "Would install" in p.stdout and "bisectbot-" in p.stdout, p.stdout
    # and the check fails, naming the package, when the wheelhouse lacks one
    next((src / "wheelhouse").glob("click-*")).unlink()
    p = subprocess.run(["bash", "-c", CHECK], cwd=src, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode != 0 and "click" in (p.stdout + p.stderr).lower(), p.stdout + p.stderr
