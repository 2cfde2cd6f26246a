"""Issue 37, input 5: prompt log-probabilities judged where a bug shows. A bug that touches only the
prompt's tail (``tail_logprobs``: the last 32 prompt positions' log-probabilities shift by 1.6 nats at
bad sizes, the reply text stays healthy) reads a mean |Δ| of ~0.01 nats over the prompt -- below the
0.05 floor -- so main (e838d31) says "OK" with ``--regress diverges --prompt-logprobs``. The worst
16-position window, judged against the window noise calibrated between two different good builds,
sees it. Real engine processes through ``bisectbot probe``."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = [sys.executable, "-m", "bisectbot", "--json", "probe"]
QUESTION = "Summarize the document in two sentences."
T = 4000


def _probe(url: str, *args: str) -> tuple[int, dict, str]:
    p = subprocess.run(PROBE + ["--endpoint", url, "--question", QUESTION, "--no-expected-answer", *args],
                       capture_output=True, text=True, timeout=300)
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, json.loads(p.stdout), p.stderr


def test_a_bug_in_the_prompts_tail_is_judged_by_its_worst_window(engine_factory):
    bad = engine_factory(threshold=T, grounded=True, tail_logprobs=32, numerics=1)
    good = engine_factory(threshold=None, grounded=True, numerics=2)
    other = engine_factory(threshold=None, grounded=True, numerics=3)
    rc, doc, err = _probe(bad.url, "--min-size", "1000", "--max-size", "8000", "--reference-endpoint", good.url,
                          "--noise-endpoint", other.url, "--prompt-logprobs", "--regress", "diverges")
    rows = [(r["prompt_tokens"], r["outcome"]) for r in doc["table"]]
    assert rc == 1 and doc["status"] == "garbage", (doc["status"], rows)
    assert doc["last_ok"] < T <= doc["first_garbage"], rows
    at = [r for r in doc["table"] if r["prompt_tokens"] == doc["first_garbage"]][0]["evidence"]["reference"]
    assert at["logprob_mean"] < at["tolerance"]["logprob"]  # the mean alone is averaged away
    assert at["logprob_window"] > at["tolerance"]["logprob_window"] and at["logprob_window"] > 1.0
    assert at["logprob_window_at"] >= doc["first_garbage"] - 32 - 16  # where the bug is: the tail
    assert "worst 16-position window" in doc["reasons"][0]
    noise = doc["reference"]["noise"]
    assert noise["logprob_window"] and all(v is not None and v < 0.05 for v in noise["logprob_window"].values())
    below = [r for r in doc["table"] if r["prompt_tokens"] < T and r["outcome"] != "ERROR"]
    assert below and all(not r["evidence"]["reference"]["diverges"] for r in below)  # good sizes stay OK
