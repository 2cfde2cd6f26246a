"""Issue 11 through `bisectbot run` over a real git history of the reference engine: terse healthy
commits do not stop the bisection, transient errors are never cached, --retry-errors re-probes skips."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bisectbot.cli.demo_cmd import concrete_recipe
from bisectbot.demo.history import make_history


def _recipe(tmp: Path, hist_path: Path, **repro) -> Path:
    data = concrete_recipe(hist_path, tmp / "out")
    data["reproducer"].update({"needles": 0, **repro})  # a terse reply is then just "4": 1 completion token
    data["triage"] = []
    data["report"].pop("github", None)
    p = tmp / "recipe.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return p


def _run(recipe: Path, state: Path, *args: str, timeout: float = 400) -> tuple[int, dict, str]:
    env = {**os.environ, "BISECTBOT_STATE": str(state)}
    env.pop("GITHUB_TOKEN", None)
    p = subprocess.run([sys.executable, "-m", "bisectbot", "--json", "run", str(recipe), "--runner", "local", *args],
                       capture_output=True, text=True, timeout=timeout, env=env)
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    return p.returncode, json.loads(p.stdout), p.stderr


def _culprit(result: dict) -> str | None:
    final = result["stages"][-1] if result.get("stages") else {}
    cs = final.get("culprits") or []
    return cs[0]["ref"] if cs else None


@pytest.mark.slow
def test_bisection_with_terse_healthy_commits_names_the_planted_culprit(tmp_path):
    hist = make_history(tmp_path / "h", commits=16, seed=5, engine_settings={"terse": 0.5})
    rc, res, err = _run(_recipe(tmp_path, hist.path), tmp_path / "state")
    assert rc == 0, err[-2000:]
    assert _culprit(res) == hist.culprit, err[-2000:]


@pytest.mark.slow
def test_transient_errors_are_not_cached_and_retry_errors_reprobes_skips(tmp_path):
    # every commit's engine answers its first chat request with HTTP 503 (Retry-After 0): retried inside
    # the probe, so the bisection goes through and nothing transient is cached
    hist = make_history(tmp_path / "h", commits=12, seed=3,
                        engine_settings={"transient": [503], "retry_after_s": 0})
    recipe = _recipe(tmp_path, hist.path)
    state = tmp_path / "state"
    rc, res, err = _run(recipe, state)
    assert rc == 0 and _culprit(res) == hist.culprit, err[-2000:]
    # a second run takes every verdict from the cache...
    rc2, _res2, err2 = _run(recipe, state)
    assert rc2 == 0 and "retrying cached skip" not in err2
    # ...and --retry-errors probes the cached skips (unbuildable / broken commits) again
    skips = [v for (v,) in _ledger_rows(state) if v == "skip"]
    assert skips, "the history's untestable commits should have been met"
    rc3, res3, err3 = _run(recipe, state, "--retry-errors")
    assert rc3 == 0 and _culprit(res3) == hist.culprit
    assert err3.count("retrying cached skip") >= len(skips)


def _ledger_rows(state: Path) -> list[tuple[str]]:
    import sqlite3

    rows: list[tuple[str]] = []
    for db in list(state.rglob("*.sqlite*")) + list(state.rglob("*.db")):
        try:
            with sqlite3.connect(db) as con:
                rows += con.execute("SELECT verdict FROM probes").fetchall()
        except sqlite3.DatabaseError:
            continue
    return rows


@pytest.mark.slow
def test_a_transient_server_error_is_a_skip_that_is_never_cached(tmp_path):
    # HTTP 500 on every request: after the bounded retries it is a transient ERROR -> skip, not stored
    hist = make_history(tmp_path / "h", commits=10, seed=2, engine_settings={"transient": [500] * 1000})
    recipe = _recipe(tmp_path, hist.path)
    state = tmp_path / "state"
    _run(recipe, state)
    rows = _ledger_rows(state)
    # only deterministic outcomes (unbuildable / broken-engine skips) may be cached; no transient error
    assert len(rows) <= len(hist.unbuildable) + len(hist.broken), rows


@pytest.mark.slow
@pytest.mark.parametrize("raw", ['{"choices": [{"message": "4", "finish_reason": "stop"}]}',
                                 '{"choices": [{"message": {"content": [1, 2]}}], "usage": {"prompt_tokens": "x"}}',
                                 "not json at all"])
def test_odd_reply_shapes_never_end_a_run_with_a_traceback(tmp_path, raw):
    hist = make_history(tmp_path / "h", commits=8, seed=4, engine_settings={"raw_reply": raw})
    recipe = _recipe(tmp_path, hist.path)
    rc, res, err = _run(recipe, tmp_path / "state")  # asserts no traceback and one JSON document
    assert rc != 0 and res.get("status") != "culprit"  # every probe is an ERROR -> skip: nothing to blame
    assert (tmp_path / "out" / "result.json").exists() and (tmp_path / "out" / "report.md").exists()
    assert "unexpected reply" in (tmp_path / "out" / "result.json").read_text(encoding="utf-8")
