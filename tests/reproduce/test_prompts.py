"""Prompts: deterministic, non-repetitive, needles at depths, sized in tokens."""

from __future__ import annotations

import zlib

import pytest

from bisectbot.demo.engine import chat_prompt_tokens
from bisectbot.models import Outcome
from bisectbot.recipe import ReproducerSpec
from bisectbot.reproduce.prompts import (
    SIZE_SLACK,
    PromptBuilder,
    build_messages,
    filler_sentence,
    needle_codes,
)
from bisectbot.reproduce.search import SizeResult, search

Q = "What is 2+2? Answer in one sentence."


def test_deterministic_and_seed_dependent():
    assert build_messages(1, 500, Q, ["KESTREL-4417"]) == build_messages(1, 500, Q, ["KESTREL-4417"])
    assert build_messages(1, 500, Q, []) != build_messages(2, 500, Q, [])
    assert needle_codes(3, 4) == needle_codes(3, 4) and len(set(needle_codes(3, 4))) == 4


def test_filler_does_not_compress_or_repeat():
    sentences = [filler_sentence(0, i) for i in range(3000)]
    assert len(set(sentences)) == len(sentences)
    blob = " ".join(sentences).encode()
    assert len(blob) / len(zlib.compress(blob, 9)) < 4.5


def test_needles_at_even_depths_and_question_asks_for_them():
    codes = needle_codes(0, 3)
    msgs = build_messages(0, 4000, Q, codes)
    system, user = msgs[0]["content"], msgs[1]["content"]
    pos = [system.index(c) / len(system) for c in codes]
    assert pos == sorted(pos)
    for k, p in enumerate(pos, 1):
        assert abs(p - k / 4) < 0.05
    assert user.startswith(Q) and "vaults 1 to 3" in user


@pytest.mark.parametrize("target", [300, 2000, 2048, 9999, 33333, 120000])
def test_sized_with_tokenize_within_slack(target):
    b = PromptBuilder(Q, needles=2, seed=4, tokenize=chat_prompt_tokens)
    p = b.build(target)
    assert p.measured_tokens == chat_prompt_tokens(p.messages)
    assert abs(p.measured_tokens - target) <= max(3, SIZE_SLACK * target)
    assert all(n in p.messages[0]["content"] for n in p.needles)


def test_sized_without_tokenize_after_calibration():
    b = PromptBuilder(Q, seed=4, tokenize=None)
    first = b.build(20000)
    b.calibrate(first, chat_prompt_tokens(first.messages))  # usage.prompt_tokens of a real request
    p = b.build(50000)
    assert p.measured_tokens is None
    assert abs(chat_prompt_tokens(p.messages) - 50000) / 50000 < 0.03  # one observation: a ratio
    b.calibrate(p, chat_prompt_tokens(p.messages))
    for target in (30000, 41234, 47000):
        q = b.build(target)  # two observations: interpolation
        assert abs(chat_prompt_tokens(q.messages) - target) / target < 0.003


def test_builder_rejects_nonpositive_sizes():
    with pytest.raises(ValueError):
        PromptBuilder(Q).build(0)


# ------------------------------------------------------------------ pure search edge cases


def _probe(fn):
    def probe(size):
        return SizeResult(size, size, fn(size), reasons=["r"] if fn(size) != Outcome.OK else [], requests=1)
    return probe


def test_error_in_refinement_keeps_the_interval_measured_so_far():
    res = search(_probe(lambda s: Outcome.ERROR if 9000 < s < 30000 else
                        (Outcome.OK if s < 20000 else Outcome.GARBAGE)), ReproducerSpec(min_size=2000, max_size=120000))
    assert res.status == "error" and res.error.startswith("at ")


def test_inconclusive_in_refinement_stops_with_the_interval_so_far():
    res = search(_probe(lambda s: Outcome.INCONCLUSIVE if 8000 < s < 40000 else
                        (Outcome.OK if s < 20000 else Outcome.GARBAGE)), ReproducerSpec(min_size=2000, max_size=120000))
    assert res.status == "garbage" and res.last_ok < 20000 <= res.first_garbage
    assert any("inconclusive" in n for n in res.notes)


def test_never_repeats_a_size_and_stops_when_it_cannot_split():
    seen = []

    def probe(size):
        seen.append(size)
        return SizeResult(size, size, Outcome.OK if size < 5000 else Outcome.GARBAGE, requests=1)

    res = search(probe, ReproducerSpec(min_size=2000, max_size=8000, tolerance=0.0001, tolerance_tokens=1))
    assert len(seen) == len(set(seen))
    assert res.last_ok == 4999 and res.first_garbage == 5000
