"""Issue 37: prefills stay cold where a server ignores ``cache_salt``. Every size's prompt starts with
a preamble derived from its filler seed and word count, so a prefix cache cannot serve a larger
prompt's start from a smaller one's blocks. Real engine process (``prefix_cache`` with
``ignore_cache_salt``: blocks of 16 tokens keyed by their prefix, ``usage...cached_tokens`` and
``/metrics`` counters like vLLM's), through ``bisectbot probe``. On main (8153601) the filler of one
seed is one text, every smaller prompt shares its start with the next: 3,280 of 22,004 queried prompt
tokens were cache hits and six sizes came out INCONCLUSIVE ("served from the prefix cache")."""

from __future__ import annotations

import json
import subprocess
import sys

from bisectbot.demo.engine import chat_prompt_tokens, start_engine
from bisectbot.models import PromptKey
from bisectbot.reproduce.prompts import PromptBuilder, build_messages

PROBE = [sys.executable, "-m", "bisectbot", "--json", "probe"]


def test_prefills_stay_cold_when_the_server_ignores_cache_salt():
    with start_engine(threshold=None, prefix_cache=True, ignore_cache_salt=True) as e:
        p = subprocess.run(PROBE + ["--endpoint", e.url, "--min-size", "1000", "--max-size", "8000", "--needles", "2"],
                           capture_output=True, text=True, timeout=240)
        assert "Traceback" not in p.stderr, p.stderr
        res = json.loads(p.stdout)
    assert p.returncode == 0 and res["status"] == "ok", (res["status"], res["table"])
    caches = [r["evidence"]["prefix_cache"] for r in res["table"]]
    assert len(caches) >= 4 and all(c["checked"] and c["cached_tokens"] == 0 and c["metrics_hits"] == 0
                                    for c in caches), caches
    assert not any(r["outcome"] == "INCONCLUSIVE" for r in res["table"]), res["table"]
    note = next(n for n in res["notes"] if n.startswith("prefix cache:"))
    assert " 0 of " in note and "cold prefills" in note, note


def test_the_engine_cache_does_serve_shared_prefixes():
    """The shape is real: a prompt sent again, or one that starts like an earlier one, is a cache hit."""
    import requests

    with start_engine(threshold=None, prefix_cache=True, ignore_cache_salt=True) as e:
        msgs = [{"role": "system", "content": "word " * 200}, {"role": "user", "content": "What is 2+2?"}]
        longer = [{"role": "system", "content": "word " * 400}, {"role": "user", "content": "What is 2+2?"}]
        hits = []
        for m, salt in ((msgs, "a"), (msgs, "b"), (longer, "c")):
            r = requests.post(e.url + "/v1/chat/completions", json={"messages": m, "max_tokens": 8, "cache_salt": salt},
                              timeout=10).json()
            hits.append(r["usage"]["prompt_tokens_details"]["cached_tokens"])
        metrics = requests.get(e.url + "/metrics", timeout=10).text
    assert hits[0] == 0 and hits[1] >= 192 and hits[2] >= 192, hits
    assert "vllm:prefix_cache_hits_total" in metrics and "vllm:prefix_cache_queries_total" in metrics


def test_the_preamble_keeps_the_prompt_identity():
    """The same (seed, words) -- a PromptKey -- is the same text; other words or another seed start differently."""
    q = "What is 2+2? Answer in one sentence."
    key = PromptKey(4000, 0, 2500)
    exact = PromptBuilder(q, needles=1, seed=0).exact(key.requested, key.words)
    assert build_messages(key.seed, key.words, q, exact.needles) == exact.messages
    starts = {build_messages(s, w, q, [])[0]["content"][:10] for s, w in ((0, 2500), (0, 2501), (1, 2500), (0, 100))}
    assert len(starts) == 4, starts
    # the builder still sizes within its slack and the same size and seed give the same text
    b1 = PromptBuilder(q, needles=2, seed=3, tokenize=chat_prompt_tokens)
    b2 = PromptBuilder(q, needles=2, seed=3, tokenize=chat_prompt_tokens)
    assert b1.build(9999).messages == b2.build(9999).messages


def test_prefix_cache_counters_that_overflow_or_go_negative_are_unusable_not_an_error():
    """Issue 41, item 15 (the kind: counter text a hostile or broken /metrics serves): finite lines whose
    sum overflows a float, a negative counter, NaN and infinities make the counters unusable (None:
    "not checked"), never an OverflowError at every size; ordinary sums over label sets still add up."""
    from bisectbot.reproduce.client import PREFIX_CACHE_HITS as H
    from bisectbot.reproduce.client import PREFIX_CACHE_QUERIES as Q
    from bisectbot.reproduce.client import parse_prefix_cache

    ok = f'{H}{{engine="0"}} 3\n{H}{{engine="1"}} 4\n{Q}{{engine="0"}} 10\n{Q} 5\n'
    assert parse_prefix_cache(ok) == (7, 15)
    big = "1.7e308"
    for text in (f"{H}{{a=\"1\"}} {big}\n{H}{{a=\"2\"}} {big}\n{Q} 1\n",  # the sum overflows
                 f"{H} 1\n{Q}{{a=\"1\"}} {big}\n{Q}{{a=\"2\"}} {big}\n",
                 f"{H} -5\n{Q} 10\n", f"{H} 1\n{Q} -1\n"):
        assert parse_prefix_cache(text) is None, text
    assert parse_prefix_cache(f"{H} NaN\n{Q} 1\n") is None  # only the NaN line: the counter is absent
    assert parse_prefix_cache(f"{H} +Inf\n{H} 2\n{Q} 1\n") == (2, 1)  # an infinite line is dropped
