"""A real bisection over real vLLM (issue 22): a git history of overlay commits over vLLM's Python
files -- harmless edits and one commit planting the chunked-prefill bug in the CPU attention
backend -- bisected by ``bisectbot run --runner local`` with ``reference: {candidate: last-good}``.
Each probe starts the overlaid vLLM (``launch.py`` puts the worktree first on ``PYTHONPATH``).
Kept small for CI: 4 commits, one server start per probe.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.vllm import lane

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

LAUNCH = '''\
"""Start vLLM with this overlay first on PYTHONPATH (its sitecustomize.py serves vllm/**.py from here)."""
import os, sys
here = os.path.dirname(os.path.abspath(__file__))
os.environ["PYTHONPATH"] = here + os.pathsep + os.environ.get("PYTHONPATH", "")
os.execv(sys.executable, [sys.executable, "-m", "vllm.entrypoints.openai.api_server", *sys.argv[1:]])
'''

#: A harmless edit of the planted file: a comment (the planting commit is the only behavioural change).
HARMLESS = [("        seq_lens = common_attn_metadata.seq_lens\n",
             "        # per-request lengths of the whole sequence (context + this step's tokens)\n"
             "        seq_lens = common_attn_metadata.seq_lens\n")]


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def make_history(py: Path, repo: Path) -> list[str]:
    """c0 overlay of the unchanged file, c1 a comment, c2 the planted bug, c3 another harmless edit.
    Returns the four SHAs."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    src = (lane.vllm_package(py) / lane.PLANTED_FILE).read_text(encoding="utf-8")
    target = repo / "vllm" / lane.PLANTED_FILE
    target.parent.mkdir(parents=True)
    (repo / "sitecustomize.py").write_text((lane.HERE / "overlay_sitecustomize.py").read_text(), encoding="utf-8")
    (repo / "launch.py").write_text(LAUNCH, encoding="utf-8")
    shas = []

    def commit(msg: str) -> None:
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", msg)
        shas.append(git(repo, "rev-parse", "HEAD"))

    target.write_text(src, encoding="utf-8")
    commit("overlay: vLLM's CPU attention backend as installed")
    a, b = HARMLESS[0]
    src = src.replace(a, b)
    target.write_text(src, encoding="utf-8")
    commit("cpu_attn: document seq_lens")
    assert src.count(lane.ANCHOR) == 1
    target.write_text(src.replace(lane.ANCHOR, lane.PLANT), encoding="utf-8")
    commit("cpu_attn: chunked prefill attends over the chunk's own length (#4242)")
    (repo / "NOTES.txt").write_text("overlay notes\n", encoding="utf-8")
    commit("overlay: notes")
    return shas


def test_bisection_over_real_vllm_names_the_planted_commit(vllm_python: Path, tiny_model: Path, tmp_path: Path) -> None:
    shas = make_history(vllm_python, tmp_path / "overlay-history")
    recipe = {
        "name": "vllm-lane-chunked-prefill",
        "description": "vLLM CPU: a prefill continuation chunk loses its context (planted in an overlay)",
        "model": "tiny", "tp": 1, "runner": "cpu",
        "source": {"kind": "git", "repo": str(tmp_path / "overlay-history"), "component": "vllm-overlay"},
        "server": {"command": [str(vllm_python), "launch.py", "--model", str(tiny_model), "--host", "127.0.0.1",
                               "--port", "{port}", *lane.SERVE_FLAGS],
                   "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1",
                           "VLLM_ENABLE_V1_MULTIPROCESSING": "0"},
                   "health_timeout_s": lane.HEALTH_TIMEOUT_S, "request_timeout_s": 300},
        "reproducer": {"kind": "prefill", "min_size": 1000, "max_size": 4000, "tolerance": 0.05,
                       "tolerance_tokens": 64, "question": "Summarize the document in two sentences.",
                       "expected_answer": None, "needles": 0, "max_tokens": 32, "temperature": 0.0, "seed": 0,
                       "reference": {"candidate": "last-good", "continuation_tokens": 32,
                                     "calibrate_with": shas[0]}},
        "regress": "diverges",
        "bisect": {"good": shas[1], "bad": shas[3], "verify": True},
        "report": {"dir": str(tmp_path / "out")},
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "BISECTBOT_STATE")}
    p = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp_path / "state"), "run", str(path),
                        "--runner", "local", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                       env=env, timeout=1400)
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    final = res["stages"][-1]
    assert res["status"] == "culprit", (res["status"], p.stdout[-3000:], p.stderr[-3000:])
    assert final["first_bad"]["ref"] == shas[2]
    assert final["last_good"]["ref"] == shas[1]
    assert res.get("verified") or final.get("verified") or "verified" in json.dumps(res)
    probes = [pr for st in res["stages"] for pr in st["probes"]]
    bad = [pr for pr in probes if pr["verdict"] == "bad"]
    assert bad and all("diverges from the reference" in pr["reason"] for pr in bad)
    for pr in probes:  # every probe's prefills were cold (vLLM's counters around each size)
        for row in pr.get("table") or []:
            pc = (row.get("evidence") or {}).get("prefix_cache") or {}
            assert pc.get("metrics_hits", 0) == 0, row
    # the run prints each probe's wall time (server start + search): the lane's cost per probe
    timed = re.findall(r"\((\d+\.\d)s, elapsed (\d+)s\)", p.stdout + p.stderr)
    assert len(timed) >= len(probes) - 1, (p.stdout + p.stderr)[-3000:]
    print(f"\nbisection over real vLLM: {len(probes)} probes")
    for pr in probes:
        print(f"  {pr['candidate']['ref'][:10]} {pr['verdict']:5} {pr['duration_s']:.1f} s")
