"""Issue 37, input 4: no "no garbage up to N" from one request. Garbage only in a band of sizes
(``band_to``: a kernel chosen by size range, tt-metal#55102's 12K-20K) read "OK: no garbage up to
32004 prompt tokens", exit 0, after one request at 32,000 on main (e838d31). Without explicit sizes
the probe now asks a coarse ladder (steps <= 2x) before any OK claim, and the claim names the sizes
asked. Real engine processes, through ``bisectbot probe``."""

from __future__ import annotations

import json
import subprocess
import sys

from bisectbot.demo.engine import start_engine

PROBE = [sys.executable, "-m", "bisectbot", "--json", "probe"]


def _probe(url: str, *args: str, json_out: bool = True) -> tuple[int, dict | str, str]:
    cmd = PROBE if json_out else [sys.executable, "-m", "bisectbot", "probe"]
    p = subprocess.run(cmd + ["--endpoint", url, *args], capture_output=True, text=True, timeout=240)
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, (json.loads(p.stdout) if json_out else p.stdout), p.stderr


def test_garbage_in_a_band_below_the_largest_size_is_found_not_ok():
    with start_engine(threshold=12000, band_to=20000) as e:
        rc, res, err = _probe(e.url, "--max-size", "32000")
    rows = [(r["prompt_tokens"], r["outcome"]) for r in res["table"]]
    assert rc == 1 and res["status"] == "non-monotone", (res["status"], rows)
    assert res["last_ok"] < 12000 <= res["first_garbage"] < 20000, rows
    assert any(o == "OK" and s > 20000 for s, o in rows)  # the OK above the band is reported beside it


def test_an_ok_claim_names_every_size_asked():
    with start_engine(threshold=None) as e:
        rc, out, _ = _probe(e.url, "--max-size", "32000", json_out=False)
        st = e.stats()
    assert rc == 0
    last = " ".join(out.split())  # the console wraps long lines
    last = last[last.rindex("OK at "):]
    served = sorted(st["prompt_tokens"])
    assert len(served) == 5 and st["chat_requests"] == 5  # 2K, 4K, 8K, 16K, 32K: the price of the claim
    assert last.startswith("OK at ") and all(str(s) in last for s in served), (last, served)
    assert "up to" not in last


def test_the_coarse_ladder_steps_at_most_2x_over_the_whole_range():
    with start_engine(threshold=None) as e:
        rc, res, _ = _probe(e.url, "--min-size", "1000", "--max-size", "120000")
    sizes = sorted(r["prompt_tokens"] for r in res["table"])
    assert rc == 0 and sizes[0] <= 1010 and sizes[-1] >= 119000
    assert all(b / a <= 2.02 for a, b in zip(sizes, sizes[1:])), sizes
    assert res["requests"] == 8
