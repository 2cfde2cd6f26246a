"""The local runner applies the recipe's patch stack in each candidate's worktree;
a required patch that conflicts makes the candidate `skip`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

CHECK = """\
import sys
src = open("vllm/knob.py").read()
if "PATCHED = True" not in src:
    sys.exit(125)  # the stack was not applied: untestable
sys.exit(1 if "BUG = True" in src else 0)
"""

PATCH = """\
--- a/knob.py
+++ b/knob.py
@@ -1,2 +1,3 @@
 # anchor
+PATCHED = True
 VERSION = 1
"""


def test_patch_stack_applied_per_candidate_conflicts_are_skip(tmp_path: Path, kit, monkeypatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    kit.git(repo, "init", "-q", "-b", "main")
    (repo / "vllm").mkdir()
    (repo / "check.py").write_text(CHECK)
    shas = []
    n, k, conflicts = 16, 10, {6, 7}
    for i in range(n):
        anchor = "# moved\n" if i in conflicts else "# anchor\n"
        (repo / "vllm" / "knob.py").write_text(f"{anchor}VERSION = 1\nBUG = {i >= k}\n")
        (repo / "n.txt").write_text(str(i))
        kit.git(repo, "add", "-A")
        kit.git(repo, "commit", "-q", "-m", f"c{i}")
        shas.append(kit.git(repo, "rev-parse", "HEAD"))
    pdir = tmp_path / "patches"
    (pdir / "knob").mkdir(parents=True)
    (pdir / "knob" / "v1.patch").write_text(PATCH)
    (pdir / "stack.yaml").write_text(yaml.safe_dump({"version": 1, "patches": [{
        "id": "knob-fix", "package": "vllm", "path": "knob.py", "required": True, "fuzz": 0,
        "variants": [{"id": "v1", "diff": "knob/v1.patch"}]}]}))
    monkeypatch.setenv("BISECTBOT_PATCHES_DIR", str(pdir))
    rec = tmp_path / "r.yaml"
    rec.write_text(yaml.safe_dump({
        "name": "patched", "source": {"kind": "git", "repo": str(repo)}, "patches": ["knob-fix"],
        "reproducer": {"kind": "command", "command": [sys.executable, "check.py"]}, "regress": "command",
        "bisect": {"good": shas[0], "bad": shas[-1]}, "report": {"dir": str(tmp_path / "out")}}))
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(rec))
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    st = res["stages"][-1]
    assert st["first_bad"]["ref"] == shas[k]
    skipped = [pr for pr in st["probes"] if pr["verdict"] == "skip"]
    assert skipped and all("patch conflict" in pr["reason"] and "knob-fix" in pr["reason"] for pr in skipped)
    assert {pr["candidate"]["ref"] for pr in skipped} <= {shas[i] for i in conflicts}
    ok = [pr for pr in st["probes"] if pr["verdict"] != "skip"]
    assert ok and all(pr["patches"] for pr in ok)  # per-patch states recorded with each probe
    # the source repository itself is untouched
    assert "PATCHED" not in (repo / "vllm" / "knob.py").read_text()
