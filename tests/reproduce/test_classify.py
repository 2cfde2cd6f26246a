"""Garbage classifiers: the labelled corpus, the benchmark, errors, the engine's garbage kinds."""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from bisectbot.demo.engine import DEFAULTS, GARBAGE_KINDS, Engine
from bisectbot.models import Outcome
from bisectbot.recipe import ReproducerSpec
from bisectbot.reproduce.classify import answer_present, classify, longest_repeat
from bisectbot.reproduce.client import Reply
from bisectbot.reproduce.prompts import PromptBuilder

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "classifier.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_classifier", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_corpus_precision_and_recall_at_least_098():
    bench = _bench()
    cases = bench.load_corpus()
    assert len(cases) >= 60
    kinds = {c["kind"] for c in cases}
    for k in ("control-soup", "word-loop", "flood", "mixed-script", "reasoning-garbage", "word-salad", "fffd-noise",
              "digit-collapse", "foreign-identifiers", "repetitive-code", "numeric-list", "markdown-table",
              "json", "short-answer", "non-english", "essay", "thinking-cut", "needle-list", "fluent-but-wrong"):
        assert k in kinds, k
    res = bench.evaluate(cases)
    comb = res["combined"]
    assert comb["precision"] >= 0.98 and comb["recall"] >= 0.98, comb["wrong"]
    # the baseline really is worse: it misses salad / control soup and flags one-word answers
    naive = res["unique_ratio_only"]
    assert naive["recall"] < 0.9 and naive["precision"] < 0.9
    wrong = {w["id"] for w in naive["wrong"]}
    assert "g17-salad-naive-ok" in wrong and "k12-paris" in wrong


def test_thinking_cut_is_inconclusive_not_ok_or_garbage():
    bench = _bench()
    for c in bench.load_corpus():
        if c.get("outcome") == "INCONCLUSIVE":
            cl = classify(*bench.case_inputs(c))
            assert cl.outcome == Outcome.INCONCLUSIVE, c["id"]
            assert ("misrouted" if c["kind"] == "misrouted" else "max_tokens") in cl.reasons[0], c["id"]


def test_benchmark_prints_both_side_by_side():
    p = subprocess.run([sys.executable, str(BENCH)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "combined" in p.stdout and "unique-ratio only" in p.stdout
    parts = bench_parts(p.stdout)
    assert set(parts) == {"tuning", "held-out"}
    for part in ("tuning", "held-out"):
        lines = parts[part]
        assert float(lines["precision"][0]) >= 0.98 and float(lines["recall"][0]) >= 0.98, part
        assert float(lines["recall"][1]) < float(lines["recall"][0])


def bench_parts(stdout: str) -> dict[str, dict[str, list[str]]]:
    """{part: {"precision": [combined, baseline], "recall": [...]}} from the benchmark's text output."""
    parts: dict[str, dict[str, list[str]]] = {}
    cur: dict[str, list[str]] = {}
    for ln in stdout.splitlines():
        if ln.startswith("== "):
            cur = parts.setdefault(ln.split()[1], {})
        elif ln.startswith(("precision", "recall")):
            cur[ln.split()[0]] = ln.split()[1:]
    return parts


@pytest.mark.parametrize("kind", ["connection", "timeout", "http"])
def test_a_failed_request_is_error_never_garbage(kind):
    r = Reply(error=f"{kind} failed", error_kind=kind)
    cl = classify(r, ReproducerSpec(), [])
    assert cl.outcome == Outcome.ERROR and cl.reasons == [f"{kind} failed"]


def test_over_limit_is_recorded_as_over_the_limit():
    r = Reply(error="HTTP 400: This model's maximum context length is 1000 tokens.", error_kind="over-limit")
    cl = classify(r, ReproducerSpec(), [])
    assert cl.outcome == Outcome.ERROR and cl.reasons[0].startswith("over the limit")


def test_needle_near_miss_is_named():
    spec = ReproducerSpec(needles=2)
    cl = classify(Reply(content="2+2 is 4. Codes: KESTREL-4418 and HERON-7781.", finish_reason="stop"), spec,
                  ["KESTREL-4417", "HERON-7781"])
    assert cl.outcome == Outcome.GARBAGE
    assert any("KESTREL-4417 answered as KESTREL-4418" in r for r in cl.reasons)


def test_helpers():
    assert answer_present("4", "2加2等于4。") and answer_present("4", "two plus two is four")
    assert not answer_present("4", "It is 14.") and not answer_present("4", "version 2.4")
    assert longest_repeat("a b a b a b a b".split())[0] == 4


@pytest.mark.parametrize("kind", GARBAGE_KINDS)
@pytest.mark.parametrize("reasoning", [False, True])
def test_every_engine_garbage_kind_is_detected(kind, reasoning):
    settings = dict(DEFAULTS, reasoning=reasoning, garbage_kinds=[kind])
    eng = Engine(settings)
    b = PromptBuilder("What is 2+2? Answer in one sentence.", needles=3, seed=5)
    prompt = b.build(500)
    spec = ReproducerSpec(needles=3)
    for seed in range(5):
        r_text, content = eng.garbage(prompt.messages, random.Random(seed), max_tokens=1000)
        reply = Reply(content=content, reasoning=r_text, finish_reason="length" if kind == "reasoning-loop" else "stop")
        cl = classify(reply, spec, prompt.needles)
        assert cl.outcome == Outcome.GARBAGE, (kind, seed, content[:80])
    r_text, content = eng.coherent(prompt.messages)
    assert classify(Reply(content=content, reasoning=r_text, finish_reason="stop"), spec,
                    prompt.needles).outcome == Outcome.OK


def test_heldout_corpus_shape():
    """The held-out part (issue 11): >= 60 replies per class, >= 3 questions and languages,
    >= 40 paraphrased from public report shapes; disjoint from the tuning part."""
    bench = _bench()
    held = bench.load_corpus(bench.HELDOUT_CORPUS)
    tuning = bench.load_corpus(bench.DEFAULT_CORPUS)
    assert sum(c["label"] == "ok" for c in held) >= 60
    assert sum(c["label"] == "garbage" for c in held) >= 60
    assert len({c["asked"]["question"] for c in held}) >= 3
    assert len({c["lang"] for c in held}) >= 3
    assert sum(c["source"] == "report-shape" for c in held) >= 40
    assert not {c["id"] for c in held} & {c["id"] for c in tuning}


    def key(c):  # the whole input of the classifier
        return json.dumps([c["content"], c["reasoning"], c["finish_reason"], c["completion_tokens"], c["asked"]],
                          sort_keys=True)

    assert not {key(c) for c in held} & {key(c) for c in tuning}


def test_heldout_precision_and_recall_at_least_098():
    bench = _bench()
    res = bench.evaluate(bench.load_corpus(bench.HELDOUT_CORPUS))["combined"]
    assert res["precision"] >= 0.98 and res["recall"] >= 0.98, res["wrong"]


def test_terse_correct_answer_is_ok_weak_signals_only_add_weight():
    spec = ReproducerSpec()  # min_reply_tokens 3, expected "4"
    cl = classify(Reply(content="4", finish_reason="stop", completion_tokens=1), spec, [])
    assert cl.outcome == Outcome.OK
    assert any(s.classifier == "too-short" and s.flagged and s.weak for s in cl.signals)
    # a short reply without the answer is still garbage, and says both
    bad = classify(Reply(content="the", finish_reason="stop", completion_tokens=1), spec, [])
    assert bad.outcome == Outcome.GARBAGE
    assert bad.reasons[0].startswith("known-answer") and any("too-short" in r and "(weak)" in r for r in bad.reasons)
    # with no answer check at all, a too-short reply to a long ask is the symptom
    long_ask = ReproducerSpec(question="Summarise the document.", expected_answer=None)
    long_ask.classifier.min_reply_tokens = 40
    assert classify(Reply(content="Functions.", completion_tokens=2), long_ask, []).outcome == Outcome.GARBAGE


@pytest.mark.parametrize("leak", ["<start_of_turn>user", "<end_of_turn>", "[/INST]", "<|im_end|>", "<|eot_id|>"])
def test_template_leak_is_garbage_even_with_the_right_answer(leak):
    needles = ["KESTREL-4417", "OSPREY-2093"]
    r = Reply(content=f"4. Codes: KESTREL-4417, OSPREY-2093 {leak}", finish_reason="stop", completion_tokens=12)
    cl = classify(r, ReproducerSpec(needles=2), needles)
    assert cl.outcome == Outcome.GARBAGE and cl.reasons[0].startswith("template-leak")


def test_answer_only_in_reasoning_is_misrouted_unless_accepted():
    r = Reply(content="", reasoning="2 plus 2 is 4, so the answer is 4.", finish_reason="stop", completion_tokens=14)
    cl = classify(r, ReproducerSpec(), [])
    assert cl.outcome == Outcome.INCONCLUSIVE and cl.reasons[0].startswith("misrouted")
    spec = ReproducerSpec.model_validate({"classifier": {"accept_reasoning": True}})
    assert classify(r, spec, []).outcome == Outcome.OK
    # empty content with no reasoning: a failure that says "empty reply"
    for content in ("", None, "  \n"):
        e = classify(Reply(content=content, finish_reason="stop"), ReproducerSpec(), [])
        assert e.outcome == Outcome.GARBAGE and "empty reply" in e.reasons[0]
