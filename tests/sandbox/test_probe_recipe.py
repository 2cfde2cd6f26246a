"""Issue 36: ``bisectbot probe --recipe R`` runs a command reproducer outside any runner -- the
candidate's code, on the host. It runs in the candidates' sandbox too: the command sees neither the
bot nor its other processes, writes only its ``--source`` tree, and the run fails closed without
the sandbox unless ``BISECTBOT_SANDBOX=off`` says otherwise.

The command answers "bad" (exit 1) whenever it can see a ``bisectbot`` process or write beside
its tree; below its threshold it is otherwise good. Unsandboxed, every size is bad.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PY = sys.executable

CHECK = r'''
import os, sys
size, src, outside = int(sys.argv[1]), sys.argv[2], sys.argv[3]
seen = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if b"bisectbot" in cmd and b"check.py" not in cmd:
            seen.append(pid)
try:
    open(os.path.join(outside, "planted.txt"), "w").write("x")
    wrote = True
except OSError:
    wrote = False
open(os.path.join(src, f"ran-{size}.txt"), "w").write("ok")  # its own tree stays writable
print("seen", seen, "wrote", wrote)
sys.exit(1 if (seen or wrote or size >= 25000) else 0)
'''


def _recipe(tmp: Path) -> tuple[Path, Path, Path]:
    src, outside = tmp / "src", tmp / "outside"
    src.mkdir()
    outside.mkdir()
    check = src / "check.py"  # the candidate's code lives in its tree
    check.write_text(CHECK)
    recipe = tmp / "kernel.yaml"
    recipe.write_text(f"name: kernel\nsource: {{kind: git, repo: .}}\nregress: command\nreproducer:\n"
                      f"  kind: command\n  command: [{PY!r}, {str(check)!r}, '{{size}}', '{{source}}', {str(outside)!r}]\n"
                      f"  min_size: 2000\n  max_size: 120000\n")
    return recipe, src, outside


def _probe(recipe: Path, src: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "bisectbot", "--json", "probe", "--recipe", str(recipe), "--source", str(src)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, **env})


def test_probe_recipe_runs_its_command_in_the_sandbox(tmp_path: Path) -> None:
    recipe, src, outside = _recipe(tmp_path)
    # the suite makes its base temp directory writable inside the sandbox (tests/conftest.py); here
    # nothing but the tree is
    p = _probe(recipe, src, BISECTBOT_SANDBOX_WRITABLE="")
    assert p.returncode == 1, p.stderr[-2000:]
    res = json.loads(p.stdout)
    assert res["status"] == "garbage" and res["last_ok"] < 25000 <= res["first_garbage"], res
    assert not (outside / "planted.txt").exists()
    assert list(src.glob("ran-*.txt")), "the command's own tree must stay writable"


def test_the_same_command_unsandboxed_sees_the_bot(tmp_path: Path) -> None:
    # the check above can fail: without the sandbox the command sees the bot and writes outside
    recipe, src, outside = _recipe(tmp_path)
    p = _probe(recipe, src, BISECTBOT_SANDBOX="off")
    res = json.loads(p.stdout)
    assert res["status"] == "all-garbage", res
    assert (outside / "planted.txt").exists()


def test_probe_recipe_fails_closed_without_bubblewrap(tmp_path: Path) -> None:
    recipe, src, _ = _recipe(tmp_path)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(PY, bindir / "python3")
    p = _probe(recipe, src, PATH=str(bindir))
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])
    assert "bwrap" in p.stderr or "bubblewrap" in p.stderr, p.stderr[-2000:]
    assert "BISECTBOT_SANDBOX=off" in p.stderr, p.stderr[-2000:]
    assert not list(src.glob("ran-*.txt"))
