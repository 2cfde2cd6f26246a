"""Issue 35: verdicts derived from recorded evidence, through ``bisectbot run`` on real git
histories of the reference engine (each commit's ``engine.json`` sets its behaviour).

The rule (:mod:`bisectbot.verdict`): a candidate is good only when it answered OK the prompts on
which the bad end failed; bad when it fails one of them; otherwise a skip. No tolerance enters.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import zlib
from pathlib import Path

from .test_scope import history, recipe, result


def test_a_coarse_recipe_never_counts_a_good_below_the_failing_size(tmp_path, kit) -> None:
    """Issue 35, input 1: bug from 20,000 tokens at every commit; c0..c2 serve max_model_len 16384,
    c3 raises it. A coarse ladder (2K/8K/16K/32K, tolerance 0.5, tolerance_tokens 1000): the bad end
    fails first at ~21.8K and c0/c2 answer "OK up to 16,004". Their "good" never answered the prompt
    the bad end failed on: never "c3 is the culprit", never verified."""
    cfgs = [{"threshold": 20000, "max_model_len": 16384 if i < 3 else 131072} for i in range(8)]
    shas = history(kit, tmp_path / "repo", cfgs)
    r = recipe(tmp_path, tmp_path / "repo", shas,
               {"sizes": [2000, 8000, 16000, 32000], "max_size": 32000, "tolerance": 0.5,
                "tolerance_tokens": 1000})
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    out = p.stdout + p.stderr
    final = result(tmp_path)["stages"][-1]
    assert final["status"] != "culprit", out
    assert not any(x["ref"] == shas[3] for x in final.get("culprits") or []) or final["status"] == "range", out
    assert "could not be asked at the size where the bad end fails (" in out, out


CHECK = """\
import json, sys
sys.exit(1 if json.load(open("engine.json")).get("bug") else 0)
"""


def _rewrite_verdicts(state: Path, ref: str, verdict: str, garble: bool = False) -> int:
    """Rewrite the ledger's cached rows of ``ref`` to ``verdict`` (their recorded exit codes stay),
    as a process with the candidates' uid could; ``garble``: make the rows undecodable instead."""
    db = sqlite3.connect(state / "ledger.sqlite3")
    n = 0
    for key, raw in db.execute("SELECT cache_key, result FROM probes").fetchall():
        d = json.loads(zlib.decompress(raw)) if isinstance(raw, bytes) else json.loads(raw)
        if d["candidate"]["ref"] != ref:
            continue
        d["verdict"] = verdict
        blob = b"\x00not zlib" if garble else zlib.compress(json.dumps(d).encode())
        db.execute("UPDATE probes SET result=?, verdict=? WHERE cache_key=?", (blob, verdict, key))
        n += 1
    db.commit()
    db.close()
    return n


def test_a_cached_verdict_that_contradicts_its_own_record_is_dropped_and_probed_again(tmp_path, kit) -> None:
    """Issue 35, input 6: the culprit c7's cached rows were rewritten to 'good' (their recorded
    command exit stayed 1); the next run took them and named c8, verified. A row that contradicts
    its own record is no evidence: dropped, probed again, c7 named; an undecodable row likewise
    (never exit 70)."""
    shas = history(kit, tmp_path / "repo", [{"bug": i >= 7} for i in range(10)], files=[{"check.py": CHECK}] * 10)
    r = recipe(tmp_path, tmp_path / "repo", shas, {"kind": "command", "command": [sys.executable, "check.py"]},
               regress="command")
    state = tmp_path / "s"
    p = kit.run_cli("--state", str(state), "run", str(r))
    assert result(tmp_path)["stages"][-1]["first_bad"]["ref"] == shas[7], p.stdout + p.stderr
    assert _rewrite_verdicts(state, shas[7], "good") >= 1
    p = kit.run_cli("--state", str(state), "run", str(r))
    out = p.stdout + p.stderr
    final = result(tmp_path)["stages"][-1]
    assert final["status"] == "culprit" and final["first_bad"]["ref"] == shas[7], out
    assert "c7: its cached verdict good" in out and "contradicts its own record" in out and "dropped, probing it again" in out, out
    assert _rewrite_verdicts(state, shas[7], "good", garble=True) >= 1
    p = kit.run_cli("--state", str(state), "run", str(r))
    out = p.stdout + p.stderr
    assert p.returncode != 70 and "Traceback" not in out, out
    assert "its cached verdict cannot be decoded" in out, out
    assert result(tmp_path)["stages"][-1]["first_bad"]["ref"] == shas[7], out
