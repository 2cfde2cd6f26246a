"""Issue 39: the built-in load (``reproducer.kind: load``) against real servers of a git history.

Each candidate is the reference engine (``bisectbot.demo.engine``) served from its worktree; from
commit k on it answers every chat request ``delay_s`` later (a planted slowdown). A probe starts the
server once and draws every sample of the load there, so a bisection costs one server start per
probe (counted in ENGINE_STARTS).

Members: the metric (output throughput, higher is better; TTFT p50, lower is better), the change's
place, a server that dies (an error/skip, never a slow verdict).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import yaml

PY = sys.executable


def history(kit, path: Path, n: int, k: int, delay_s: float, broken: set[int] = frozenset()) -> list[str]:
    kit.make_engine_repo(path, 1, 1)  # the engine's files (serve.py, engine.json) in one first commit
    shas = []
    for i in range(n):
        cfg = json.loads((path / "engine.json").read_text())
        # every commit waits (the good ones delay_s / 3): a reply's time is then mostly the wait, not CPU, so
        # the suite's other worker loading the CPU moves it little (a CI run measured a delay-free good end
        # at 2,403 tok/s and its good neighbours at 3,000-3,900 beside a busier moment: skips, inconclusive)
        cfg.update({"threshold": None, "delay_s": delay_s if i >= k else delay_s / 3, "seed": 100 + i})
        if i in broken:
            cfg["broken"] = True
        else:
            cfg.pop("broken", None)
        (path / "engine.json").write_text(json.dumps(cfg))
        kit.git(path, "add", "-A")
        kit.git(path, "commit", "-q", "--allow-empty", "-m", f"load change {i}")
        shas.append(kit.git(path, "rev-parse", "HEAD"))
    return shas


def recipe(path: Path, repo: Path, good: str, bad: str, out: Path, **measure) -> Path:
    data = {
        "name": "engine-load",
        "source": {"kind": "git", "repo": str(repo)},
        "server": {"command": [PY, "serve.py", "--port", "{port}"], "health_timeout_s": 30, "request_timeout_s": 30},
        "reproducer": {"kind": "load", "load": {"requests": 4, "concurrency": 2, "prompt_tokens": 64,
                                                "output_tokens": 16},
                       "measure": {"samples": 5, "max_samples": 15, **measure}},
        "regress": "slower",
        "bisect": {"good": good, "bad": bad},
        "report": {"dir": str(out)},
        "env_passthrough": ["ENGINE_STARTS", "RUN_ID"],
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize("metric", ["output_throughput", "ttft_p50"])
def test_a_planted_slowdown_is_named_with_one_server_start_per_probe(tmp_path, kit, starts_file, metric) -> None:
    shas = history(kit, tmp_path / "repo", 10, 6, 0.15)
    out = tmp_path / "out"
    r = recipe(tmp_path / "r.yaml", tmp_path / "repo", shas[0], shas[-1], out, metric=metric)
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    st = json.loads((out / "result.json").read_text())["stages"][-1]
    assert st["first_bad"]["ref"] == shas[6] and st["last_good"]["ref"] == shas[5]
    probes = st["probes"]
    starts = kit.read_starts(starts_file)
    assert len(starts) == len(probes) <= math.ceil(math.log2(10)) + 4  # ends, search, verification
    culprit = next(pr for pr in probes if pr["candidate"]["ref"] == shas[6])
    m = culprit["extra"]["measure"]
    assert m["metric"] == metric and m["better"] == ("higher" if metric == "output_throughput" else "lower")
    assert len(culprit["extra"]["load_samples"]) == len(m["samples"]) >= 5
    assert set(culprit["extra"]["load_samples"][0]) >= {"output_throughput", "ttft_p50", "itl_p50"}
    assert "slower than the good end" in culprit["reason"]


def test_a_server_that_dies_is_never_a_slow_verdict(tmp_path, kit, starts_file) -> None:
    shas = history(kit, tmp_path / "repo", 8, 4, 0.15, broken={4, 5})
    out = tmp_path / "out"
    r = recipe(tmp_path / "r.yaml", tmp_path / "repo", shas[0], shas[-1], out)
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert p.returncode in (0, 3), p.stdout[-4000:]
    st = json.loads((out / "result.json").read_text())["stages"][-1]
    for pr in st["probes"]:
        if pr["candidate"]["ref"] in (shas[4], shas[5]):
            assert pr["verdict"] == "skip" and "server" in pr["reason"], pr["reason"]
    assert st.get("first_bad") is None or st["first_bad"]["ref"] in (shas[4], shas[6])
