"""Two-component attribution (mixed pairs) and component bisection over two real git repos,
plus replay of a session log, with the local runner and a command reproducer."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import yaml

CHECK = """\
import os, sys
vllm, aiter = sys.argv[1], sys.argv[2]
with open(os.environ["ENGINE_STARTS"], "a") as fh:
    fh.write("x " + open(os.path.join(vllm, "v.txt")).read().strip() + "+"
             + open(os.path.join(aiter, "v.txt")).read().strip() + "\\n")
bad = open(os.path.join(aiter, "bug.txt")).read().strip() == "1"
sys.exit(1 if bad else 0)
"""


def make_repo(kit, path: Path, name: str, n: int, bug_at: int | None) -> list[str]:
    path.mkdir(parents=True)
    kit.git(path, "init", "-q", "-b", "main")
    shas = []
    for i in range(n):
        (path / "v.txt").write_text(f"{name}{i}\n")
        (path / "bug.txt").write_text("1\n" if bug_at is not None and i >= bug_at else "0\n")
        (path / "src").mkdir(exist_ok=True)
        (path / "src" / "mod.py").write_text(f"X = {i}\n")
        kit.git(path, "add", "-A")
        kit.git(path, "commit", "-q", "-m", f"{name} {i}")
        shas.append(kit.git(path, "rev-parse", "HEAD"))
    return shas


def recipe(tmp_path: Path, vllm: Path, aiter: Path) -> Path:
    (tmp_path / "check.py").write_text(CHECK)
    data = {
        "name": "two-components",
        "source": {"kind": "git", "repo": str(vllm), "component": "vllm"},
        "reproducer": {"kind": "command",
                       "command": [sys.executable, str(tmp_path / "check.py"), "{source:vllm}", "{source:aiter}"]},
        "regress": "command",
        "bisect": {"components": {"vllm": {"repo": str(vllm), "runtime_paths": ["src/"]},
                                  "aiter": {"repo": str(aiter), "runtime_paths": ["src/"]}}},
        "report": {"dir": str(tmp_path / "out")},
        "env_passthrough": ["ENGINE_STARTS"],
    }
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_mixed_pairs_attribute_to_aiter_then_bisect_aiter_commits(tmp_path, kit, starts_file) -> None:
    v = make_repo(kit, tmp_path / "vllm", "v", 9, None)
    a = make_repo(kit, tmp_path / "aiter", "a", 21, bug_at=13)
    r = recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter")
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r),
                    "--good", f"vllm={v[2]},aiter={a[0]}", "--bad", f"vllm={v[8]},aiter={a[20]}")
    assert p.returncode == 0, p.stderr
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    att, st = res["stages"]
    assert att["name"] == "attribution" and att["status"] == "culprit"
    assert "aiter alone" in att["message"]
    assert [pr["verdict"] for pr in att["probes"]] == ["good", "bad", "good", "bad"]  # old, new, new vllm, new aiter
    assert st["component"] == "aiter" and st["status"] == "culprit"
    assert st["first_bad"]["ref"] == a[13] and st["last_good"]["ref"] == a[12]
    # the aiter stage ran with vllm pinned at the last-good commit
    starts = [s for _, s in kit.read_starts(starts_file)]
    assert {s.split("+")[0] for s in starts[4:]} == {"v2"}
    assert {"v8+a0", "v2+a20"} <= set(starts[:4])
    assert st["flags"] == []


def test_one_changed_component_is_bisected_directly(tmp_path, kit, starts_file) -> None:
    v = make_repo(kit, tmp_path / "vllm", "v", 3, None)
    a = make_repo(kit, tmp_path / "aiter", "a", 10, bug_at=6)
    r = recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter")
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r),
                    "--good", f"vllm={v[2]},aiter={a[0]}", "--bad", f"vllm={v[2]},aiter={a[9]}")
    assert p.returncode == 0, p.stderr
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert [s["name"] for s in res["stages"]] == ["aiter commits"]
    assert res["stages"][0]["first_bad"]["ref"] == a[6]


def test_replay_of_a_session_log_probes_nothing(tmp_path, kit, starts_file) -> None:
    repo = kit.make_engine_repo(tmp_path / "repo", n=20, k=11, unbuildable={9})
    rec = kit.write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out", mode="command")
    p = kit.run_cli("--state", str(tmp_path / "s1"), "run", str(rec))
    assert p.returncode == 0, p.stderr
    n_first = len(kit.read_starts(starts_file))
    log = kit.run_cli("--state", str(tmp_path / "s1"), "bisect", "log")
    logf = tmp_path / "session.log"
    logf.write_text(log.stdout)
    assert "skip " in log.stdout and "build failed" in log.stdout
    p2 = kit.run_cli("--state", str(tmp_path / "s2"), "bisect", "replay", str(rec), str(logf),
                     "--out", str(tmp_path / "out2"))
    assert p2.returncode == 0, p2.stderr
    assert len(kit.read_starts(starts_file)) == n_first  # every verdict came from the log
    res = json.loads((tmp_path / "out2" / "result.json").read_text())
    assert res["stages"][-1]["first_bad"]["ref"] == repo.shas[11]
    # an edited log changes the outcome, as git bisect replay does
    edited = log.stdout.replace(f"bad {repo.shas[11]}", f"good {repo.shas[11]}")
    logf.write_text(edited)
    p3 = kit.run_cli("--state", str(tmp_path / "s3"), "run", str(rec), "--replay", str(logf),
                     "--out", str(tmp_path / "out3"))
    assert p3.returncode in (0, 3)
    assert Counter(s for _, s in kit.read_starts(starts_file))  # probes ran for candidates the log lacks
    bad = kit.run_cli("--state", str(tmp_path / "s3"), "run", str(rec), "--replay", str(tmp_path / "r.yaml"))
    assert bad.returncode == 2 and "expected 'good|bad|skip REF" in bad.stderr


CHECK_BOTH = """\
import os, sys
vllm, aiter = sys.argv[1], sys.argv[2]
bug = lambda d: open(os.path.join(d, "bug.txt")).read().strip() == "1"
sys.exit(1 if bug(vllm) and bug(aiter) else 0)
"""


def test_regression_needing_both_changes_is_inconclusive_and_said_plainly(tmp_path, kit) -> None:
    v = make_repo(kit, tmp_path / "vllm", "v", 5, bug_at=3)
    a = make_repo(kit, tmp_path / "aiter", "a", 5, bug_at=2)
    r = recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter")
    (tmp_path / "check.py").write_text(CHECK_BOTH)
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r),
                    "--good", f"vllm={v[0]},aiter={a[0]}", "--bad", f"vllm={v[4]},aiter={a[4]}")
    assert p.returncode == 3, p.stderr
    assert "needs the changes together" in p.stdout
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert res["status"] == "inconclusive" and [pr["verdict"] for pr in res["stages"][0]["probes"]] == [
        "good", "bad", "good", "good"]
