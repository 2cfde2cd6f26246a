"""Issue 36, new-user pass: the sandbox gives candidates an empty ``/tmp``, so a recipe whose command
names a file under the host's ``/tmp`` -- a virtualenv's interpreter, a reproducer script kept
outside the tree -- found nothing there, and bwrap's own exit 1 ("bwrap: execvp ...: No such file")
was read as the candidate's verdict: every probe "bad", "the regression is older than the range".

Kind: a path the candidate's argv names, on the host, below a directory the sandbox makes private.
Members: the program itself (a script; a virtualenv's python) and an absolute path argument; and,
for a program the sandbox cannot show (below a hidden directory), the run must stop as a command
that cannot run (exit 2), never a verdict.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.bisect.conftest import git

PY = sys.executable


def _history(repo: Path, n: int = 10, bad_from: int = 6) -> list[str]:
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(n):
        (repo / "state.txt").write_text("bad\n" if i >= bad_from else "good\n")
        (repo / "n.txt").write_text(f"{i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"change {i}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return shas


CHECK = "import sys\nsys.exit(1 if open('state.txt').read().strip() == 'bad' else 0)\n"


def _run(tmp: Path, command: list[str], shas: list[str], repo: Path) -> tuple[subprocess.CompletedProcess, dict]:
    recipe = tmp / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "named-paths", "source": {"kind": "git", "repo": str(repo)}, "regress": "command",
        "reproducer": {"kind": "command", "command": command},
        "bisect": {"good": shas[0], "bad": shas[-1]}, "report": {"dir": str(tmp / "out")}}))
    env = {k: v for k, v in os.environ.items() if k not in ("BISECTBOT_SANDBOX", "BISECTBOT_SANDBOX_WRITABLE")}
    p = subprocess.run([PY, "-m", "bisectbot", "--state", str(tmp / "state"), "--json", "run", str(recipe),
                        "--runner", "local", "--out", str(tmp / "out")], capture_output=True, text=True, env=env,
                       timeout=600)
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        doc = {}
    return p, doc


def _culprit(doc: dict) -> str:
    final = (doc.get("result") or doc).get("stages", [{}])[-1]
    return (final.get("first_bad") or {}).get("ref", "")


@pytest.mark.slow
def test_a_script_and_a_virtualenv_under_tmp_that_the_command_names_are_seen(tmp_path: Path) -> None:
    assert str(tmp_path).startswith("/tmp/"), tmp_path  # the case: below the sandbox's private /tmp
    repo = tmp_path / "repo"
    shas = _history(repo)
    ext = tmp_path / "outside" / "check.py"  # a reproducer kept outside the candidate's tree
    ext.parent.mkdir()
    ext.write_text(CHECK)
    venv = tmp_path / "venv"
    subprocess.run([PY, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    p, doc = _run(tmp_path, [str(venv / "bin" / "python"), str(ext)], shas, repo)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert _culprit(doc) == shas[6], (doc.get("status"), p.stderr[-2000:])


@pytest.mark.slow
@pytest.mark.parametrize("how", ["pth", "finder"])
def test_what_a_named_virtualenv_imports_from_outside_itself_is_seen(tmp_path: Path, how: str) -> None:
    """Kind: *a program the recipe names that needs files outside its own directory* (new-user pass of
    issue 40: the demo under an editable install in a checkout below ``/tmp`` ran its engine as "No module
    named 'bisectbot'"). Members: a ``.pth`` line and setuptools' editable finder (``MAPPING``), each naming
    a package directory below ``/tmp``, the sandbox's private directory."""
    repo = tmp_path / "repo"
    shas = _history(repo)
    src = tmp_path / "checkout"
    (src / "checkpkg").mkdir(parents=True)
    (src / "checkpkg" / "__init__.py").write_text(CHECK.replace("sys.exit(", "raise SystemExit("))
    venv = tmp_path / "venv"
    subprocess.run([PY, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next(venv.glob("lib/python3*/site-packages"))
    if how == "pth":
        (site / "checkpkg.pth").write_text(f"{src}\n")
    else:
        (site / "__editable___checkpkg_0_1_finder.py").write_text(
            "import sys\nfrom importlib.util import spec_from_file_location\n"
            f"MAPPING: dict[str, str] = {{'checkpkg': {str(src / 'checkpkg')!r}}}\n"
            "class F:\n    @classmethod\n    def find_spec(cls, name, path=None, target=None):\n"
            "        if name in MAPPING:\n"
            "            return spec_from_file_location(name, MAPPING[name] + '/__init__.py',\n"
            "                                           submodule_search_locations=[MAPPING[name]])\n"
            "def install():\n    sys.meta_path.append(F)\n")
        (site / "__editable__.checkpkg-0.1.pth").write_text(
            "import __editable___checkpkg_0_1_finder; __editable___checkpkg_0_1_finder.install()\n")
    p, doc = _run(tmp_path, [str(venv / "bin" / "python"), "-c", "import checkpkg"], shas, repo)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert _culprit(doc) == shas[6], (doc.get("status"), p.stderr[-2000:])


@pytest.mark.slow
def test_a_program_the_sandbox_cannot_show_is_a_command_that_cannot_run(tmp_path: Path) -> None:
    # below the bot's state directory, which every candidate's sandbox hides: bwrap cannot execvp it
    repo = tmp_path / "repo"
    shas = _history(repo)
    hidden = tmp_path / "state" / "check.sh"
    hidden.parent.mkdir()
    hidden.write_text("#!/bin/sh\nexit 0\n")
    hidden.chmod(0o755)
    p, doc = _run(tmp_path, [str(hidden)], shas, repo)
    assert p.returncode == 2, p.stdout[-3000:] + p.stderr[-3000:]
    text = p.stdout + p.stderr
    assert "cannot run" in text and "sandbox" in text, text[-3000:]
    assert "older than the range" not in text and _culprit(doc) == ""


@pytest.mark.slow
def test_a_shim_under_the_veiled_home_is_named_with_what_to_do(tmp_path: Path) -> None:
    """New-user pass of issue 40: ``python3`` found on PATH as pyenv's shim under the home, which runs its
    own tool from there; the sandbox veils the home, so the command cannot run on either end. The error
    says the program lies under the veiled home and what to name instead."""
    repo = tmp_path / "repo"
    shas = _history(repo)
    home = tmp_path / "home"
    (home / ".tool" / "shims").mkdir(parents=True)
    (home / ".tool" / "libexec").mkdir()
    (home / ".tool" / "libexec" / "tool").write_text(f"#!/bin/sh\nexec {PY} \"$@\"\n")
    (home / ".tool" / "libexec" / "tool").chmod(0o755)
    shim = home / ".tool" / "shims" / "pyshim"
    shim.write_text(f"#!/bin/sh\nexec {home / '.tool' / 'libexec' / 'tool'} \"$@\"\n")
    shim.chmod(0o755)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "shim", "source": {"kind": "git", "repo": str(repo)}, "regress": "command",
        "reproducer": {"kind": "command", "command": ["pyshim", "-c", CHECK]},
        "bisect": {"good": shas[0], "bad": shas[-1]}, "report": {"dir": str(tmp_path / "out")}}))
    env = {k: v for k, v in os.environ.items() if k not in ("BISECTBOT_SANDBOX", "BISECTBOT_SANDBOX_WRITABLE")}
    env.update(HOME=str(home), PATH=f"{shim.parent}:{env.get('PATH', '')}")
    p = subprocess.run([PY, "-m", "bisectbot", "--state", str(tmp_path / "state"), "run", str(recipe),
                        "--runner", "local"], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 2, p.stdout[-3000:] + p.stderr[-3000:]
    assert f"{shim} lies under {home}, which the candidate's sandbox veils" in p.stderr, p.stderr[-3000:]
    assert "/usr/bin/python3" in p.stderr


@pytest.mark.slow
def test_an_import_path_that_holds_the_veiled_home_does_not_unveil_it(tmp_path: Path) -> None:
    """The next member of the editable-install kind, hostile side: a named virtualenv's ``.pth`` lists the
    home itself (or a directory above it). Shown, it would put the home's files -- credentials -- in front
    of every candidate; only directories below a veiled home are an import path's own."""
    repo = tmp_path / "repo"
    shas = _history(repo)
    home = tmp_path / "home"
    (home / "src" / "okpkg").mkdir(parents=True)
    (home / "src" / "okpkg" / "__init__.py").write_text("")
    (home / "notes.txt").write_text("a token the user keeps at home\n")  # no name the sandbox knows to hide
    venv = tmp_path / "venv"
    subprocess.run([PY, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "home.pth").write_text(f"{home}\n{tmp_path}\n{home / 'src'}\n")
    check = (f"import os, sys, okpkg\nsys.exit(3 if os.path.exists({str(home / 'notes.txt')!r}) else "
             "1 if open('state.txt').read().strip() == 'bad' else 0)\n")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "home-pth", "source": {"kind": "git", "repo": str(repo)}, "regress": "command",
        "reproducer": {"kind": "command", "command": [str(venv / "bin" / "python"), "-c", check]},
        "bisect": {"good": shas[0], "bad": shas[-1]}, "report": {"dir": str(tmp_path / "out")}}))
    env = {k: v for k, v in os.environ.items() if k not in ("BISECTBOT_SANDBOX", "BISECTBOT_SANDBOX_WRITABLE")}
    env["HOME"] = str(home)
    p = subprocess.run([PY, "-m", "bisectbot", "--state", str(tmp_path / "state"), "--json", "run", str(recipe),
                        "--runner", "local", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                       env=env, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert _culprit(json.loads(p.stdout)) == shas[6]
