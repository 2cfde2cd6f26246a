"""Issue 23: verdicts that claim only what was tested, through ``bisectbot run`` / ``probe`` on
real git histories of the reference engine (each commit's ``engine.json`` sets its behaviour).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

PY = sys.executable

SERVE = """\
import sys
from bisectbot.demo.engine import main
sys.exit(main(["--config", "engine.json"] + sys.argv[1:]))
"""


def history(kit, path: Path, configs: list[dict], files: list[dict[str, str]] | None = None) -> list[str]:
    """A git history of the reference engine: commit i serves ``configs[i]`` (and writes ``files[i]``)."""
    path.mkdir(parents=True)
    kit.git(path, "init", "-q", "-b", "main")
    (path / "serve.py").write_text(SERVE)
    shas = []
    for i, cfg in enumerate(configs):
        (path / "engine.json").write_text(json.dumps({"seed": i, **cfg}))
        for rel, text in ((files or [{}] * len(configs))[i] or {}).items():
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).write_text(text)
        kit.git(path, "add", "-A")
        kit.git(path, "commit", "-q", "-m", f"c{i}")
        shas.append(kit.git(path, "rev-parse", "HEAD"))
    return shas


def recipe(tmp_path: Path, repo: Path, shas: list[str], reproducer: dict | None = None, **extra) -> Path:
    data = {
        "name": "scope",
        "source": {"kind": "git", "repo": str(repo)},
        "server": {"command": [PY, "serve.py", "--port", "{port}"], "health_timeout_s": 30,
                   "request_timeout_s": 60},
        "reproducer": {"min_size": 2000, "max_tokens": 256, **(reproducer or {})},
        "regress": "garbage",
        "bisect": {"good": shas[0], "bad": shas[-1]},
        "report": {"dir": str(tmp_path / "out")},
    }
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(data.get(k), dict):
            data[k].update(v)
        else:
            data[k] = v
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def result(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "out" / "result.json").read_text())


# ----------------------------------------------------------------- 1: good below the size that matters


def test_good_below_the_failing_size_is_no_culprit(tmp_path, kit) -> None:
    """Old builds serve max_model_len 16384, c3 raises it to 131072; garbage from 20,000 tokens at
    every commit. c0..c2 cannot be asked at the bad end's failing size: never 'c3 is the culprit'."""
    cfgs = [{"threshold": 20000, "max_model_len": 16384 if i < 3 else 131072} for i in range(8)]
    shas = history(kit, tmp_path / "repo", cfgs)
    r = recipe(tmp_path, tmp_path / "repo", shas)
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    out = p.stdout + p.stderr
    final = result(tmp_path)["stages"][-1]
    assert final["status"] != "culprit", out
    assert final["status"] in ("boundary-failed", "range"), out
    assert "the good end is untestable (skip): good only up to 16066 < failing size 20013 tokens" in out, out
    assert not any(x["ref"] == shas[3] for x in final.get("culprits") or []), out
    # the measurement is cached as it was (good up to 16066); the search's use of it changed
    p2 = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert "good only up to 16066 < failing size" in p2.stdout + p2.stderr, p2.stdout + p2.stderr


def test_a_build_inside_the_range_that_cannot_reach_the_failing_size_is_a_skip(tmp_path, kit) -> None:
    """Next member: c3..c4 serve only 16384 tokens (c5 restores 131072) and the bug starts at c3.
    Taken as good, they made c5 (the limit restore) the culprit; untestable, the answer is a range."""
    cfgs = [{"threshold": 20000 if i >= 3 else None, "max_model_len": 16384 if i in (3, 4) else 131072}
            for i in range(8)]
    shas = history(kit, tmp_path / "repo", cfgs)
    r = recipe(tmp_path, tmp_path / "repo", shas)
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    out = p.stdout + p.stderr
    final = result(tmp_path)["stages"][-1]
    assert final["status"] == "range", out
    assert {c["ref"] for c in final["culprits"]} >= {shas[3], shas[5]}, out
    assert "good only up to 16066 < failing size" in out, out


# ----------------------------------------------------------------- 2: a crash above the threshold


def test_a_crash_above_the_threshold_does_not_hide_the_culprit(tmp_path, kit) -> None:
    """c3..c7 crash the server on prompts >= 28K; c5 also turns to garbage from 20,000 tokens (the
    bad end c8 has the bug, no crash). Opened at the maximum, c3..c7 were skips and the answer the
    range c3..c8; asked first where the bad end fails, c5 is the culprit and the crash a second finding."""
    cfgs = [{"threshold": 20000 if i >= 5 else None, "crash_above": 28000 if 3 <= i <= 7 else None}
            for i in range(9)]
    shas = history(kit, tmp_path / "repo", cfgs)
    r = recipe(tmp_path, tmp_path / "repo", shas)
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    out = p.stdout + p.stderr
    final = result(tmp_path)["stages"][-1]
    assert final["status"] == "culprit" and final["first_bad"]["ref"] == shas[5], out
    assert final["last_good"]["ref"] == shas[4], out
    assert "second finding above the bad end's failing sizes" in out, out
