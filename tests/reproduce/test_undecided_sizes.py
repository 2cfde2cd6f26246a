"""Issue 37, input 6: one inconclusive size does not end the search. An undecided size is asked again
with a sibling prompt (another filler seed) and, in a refinement, at a neighbouring size before the
refinement stops; a size decided GARBAGE is a bad result (exit 1) with the undecided part said, not
exit 3. Real engine processes (``cut_sizes``: prompt-token ranges where every reply is hidden thinking
cut by ``max_tokens``, no visible text -- undecidable whatever the prompt), through ``bisectbot probe``.
On main (e838d31): the refinement stops 1.7x wide, the undecided largest size ends the probe with
exit 3 after 2 requests, and an undecided smallest size turns a decided GARBAGE into exit 3."""

from __future__ import annotations

import json
import subprocess
import sys

from bisectbot.demo.engine import start_engine

PROBE = [sys.executable, "-m", "bisectbot", "--json", "probe"]


def _probe(url: str, *args: str) -> tuple[int, dict]:
    p = subprocess.run(PROBE + ["--endpoint", url, "--max-size", "32000", "--needles", "2", *args],
                       capture_output=True, text=True, timeout=240)
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, json.loads(p.stdout)


def _rows(res: dict) -> list[tuple[int, int, str]]:
    return [(r["requested"], r["prompt_tokens"], r["outcome"]) for r in res["table"]]


def test_an_undecided_size_inside_the_refinement_is_stepped_around():
    # the refinement's first split of [8388, 31997] lands at ~15.3K: undecided there, for any prompt
    with start_engine(threshold=9000, cut_sizes=[[15000, 15500]]) as e:
        rc, res = _probe(e.url)
    lo, hi = res["last_ok"], res["first_garbage"]
    assert rc == 1 and res["status"] == "garbage", (res["status"], _rows(res))
    assert any(15000 <= s < 15500 and o == "INCONCLUSIVE" for _, s, o in _rows(res)), _rows(res)
    assert lo < 9000 <= hi and hi - lo <= max(0.02 * lo, 64), _rows(res)  # refined to the tolerance anyway
    undecided = [r for r in res["table"] if r["outcome"] == "INCONCLUSIVE"]
    assert len({r["requested"] for r in undecided}) == 1 and len(undecided) == 2  # the size, then its sibling
    assert undecided[1]["evidence"]["sibling_of"] == undecided[0]["prompt_tokens"]


def test_an_undecided_largest_size_does_not_end_the_probe():
    with start_engine(threshold=3000, cut_sizes=[[30000, 34000]]) as e:
        rc, res = _probe(e.url)
    assert rc == 1 and res["status"] == "garbage", (res["status"], _rows(res))
    assert res["last_ok"] < 3000 <= res["first_garbage"]
    assert [o for _, _, o in _rows(res)[:2]] == ["INCONCLUSIVE", "INCONCLUSIVE"]  # the size and its sibling
    largest = res["table"][0]["prompt_tokens"]  # the measured size (the sizing's last token may move)
    assert 31900 < largest < 32100 and any("undecided" in n and str(largest) in n for n in res["notes"]), res["notes"]


def test_a_decided_garbage_size_is_a_bad_result_with_the_undecided_part_said():
    with start_engine(threshold=8000, cut_sizes=[[0, 6000]]) as e:
        p = subprocess.run([sys.executable, "-m", "bisectbot", "probe", "--endpoint", e.url, "--max-size", "32000",
                            "--needles", "2"], capture_output=True, text=True, timeout=240)
        rc, res = _probe(e.url)
    assert rc == 1 and res["status"] == "garbage" and res["last_ok"] is None, (res["status"], _rows(res))
    assert 8000 <= res["first_garbage"] < 9000
    assert sum(o == "INCONCLUSIVE" for _, _, o in _rows(res)) >= 3  # smallest size, its sibling, a neighbour
    assert p.returncode == 1
    said = " ".join(p.stdout.split())
    assert f"GARBAGE at {res['first_garbage']} prompt tokens (decided); below it undecided at" in said, said
