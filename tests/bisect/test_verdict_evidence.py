"""Issue 35: verdicts derived from recorded evidence, through ``bisectbot run`` on real git
histories of the reference engine (each commit's ``engine.json`` sets its behaviour).

The rule (:mod:`bisectbot.verdict`): a candidate is good only when it answered OK the prompts on
which the bad end failed; bad when it fails one of them; otherwise a skip. No tolerance enters.
"""

from __future__ import annotations

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
