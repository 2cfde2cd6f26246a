"""Pure search logic (bisectbot.bisect): no I/O, driven by oracles over simulated histories."""

from __future__ import annotations

import math
import random

import pytest

from bisectbot.bisect import Bisection, Signature, burnashev_bound, may_blame, plausibility_flags
from bisectbot.errors import BadInput, BisectbotError
from bisectbot.models import Status, Verdict
from bisectbot.recipe import Regress
from bisectbot.verdict import judge_command, judge_patches, judge_threshold, register_patch_rule

G, B, S = Verdict.GOOD, Verdict.BAD, Verdict.SKIP


def drive(b: Bisection, oracle, k: int = 1) -> list[int]:
    probed = []
    while not b.done:
        batch = b.next_probes(k)
        assert batch, "search stalled without finishing"
        for i in batch:
            probed.append(i)
            v = oracle(i)
            if isinstance(v, tuple):
                b.feed(i, *v)
            else:
                b.feed(i, v)
    return probed


def exact_oracle(first_bad: int, untestable: frozenset[int] = frozenset()):
    return lambda i: S if i in untestable else (B if i >= first_bad else G)


def reference_binary(n: int, first_bad: int, untestable: set[int]) -> tuple[list[int], tuple]:
    """git-bisect-like plain binary search with skip (nearest testable to the midpoint, lower on ties)."""
    lo, hi, skipped, probes = 0, n - 1, set(), []
    while True:
        inside = [j for j in range(lo + 1, hi) if j not in skipped]
        if not inside:
            break
        mid = (lo + hi) / 2
        j = min(inside, key=lambda x: (abs(x - mid), x))
        probes.append(j)
        if j in untestable:
            skipped.add(j)
        elif j >= first_bad:
            hi = j
        else:
            lo = j
    return probes, (lo, hi)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 9, 17, 33, 100, 257])
def test_exact_mode_is_binary_search_worst_case_ceil_log2(n: int) -> None:
    hyps = n - 1
    worst = 0
    for h in range(1, n):
        b = Bisection(n, verify=False, check_boundary=False)
        probed = drive(b, exact_oracle(h))
        r = b.result()
        assert (r.status, r.first_bad, r.last_good, r.confidence) == (Status.CULPRIT, h, h - 1, 1.0)
        ref, _ = reference_binary(n, h, set())
        assert probed == ref
        worst = max(worst, len(probed))
    assert worst == math.ceil(math.log2(hyps)) if hyps > 1 else worst == 0


def test_exact_mode_with_skips_matches_reference_and_reports_ranges() -> None:
    rng = random.Random(7)
    ranges = 0
    for _ in range(300):
        n = rng.randint(3, 120)
        h = rng.randint(1, n - 1)
        untestable = frozenset(j for j in range(1, n - 1) if rng.random() < 0.25)
        b = Bisection(n, verify=False, check_boundary=False)
        probed = drive(b, exact_oracle(h, untestable))
        ref, (lo, hi) = reference_binary(n, h, set(untestable))
        assert probed == ref
        r = b.result()
        assert r.last_good == lo and r.first_bad == hi
        assert r.culprits == list(range(lo + 1, hi + 1))
        assert h in r.culprits
        if hi - lo > 1:
            ranges += 1
            assert r.status is Status.RANGE and "only skipped candidates left to test" in r.message
        else:
            assert r.status is Status.CULPRIT
    assert ranges > 10


def test_boundary_verification_and_final_verification_probes() -> None:
    b = Bisection(20)
    probed = drive(b, exact_oracle(13))
    assert probed[:2] == [19, 0]  # bad end first, then good end
    assert probed[-2:] == [13, 12]  # culprit re-probed bad, predecessor good
    r = b.result()
    assert r.status is Status.CULPRIT and r.first_bad == 13 and r.verified
    assert b.history[-1].phase == "verify" and b.history[0].phase == "boundary"


@pytest.mark.parametrize("oracle,status,text", [
    (lambda i: B, Status.BOUNDARY_FAILED, "good end is bad"),
    (lambda i: G, Status.NO_REGRESSION, "bad end is not bad"),
    (lambda i: S if i == 0 else B, Status.BOUNDARY_FAILED, "good end is untestable"),
    (lambda i: S if i == 9 else G, Status.BOUNDARY_FAILED, "bad end is untestable"),
])
def test_boundary_failures_stop_with_a_clear_message(oracle, status, text) -> None:
    b = Bisection(10)
    drive(b, oracle)
    r = b.result()
    assert r.status is status and text in r.message
    assert b.probes <= 2


def test_failed_verification_is_inconclusive_in_exact_mode() -> None:
    calls: dict[int, int] = {}

    def oracle(i: int) -> Verdict:
        calls[i] = calls.get(i, 0) + 1
        if i == 6 and calls[i] == 2:
            return G  # the culprit is good on re-probe: flaky
        return B if i >= 6 else G

    b = Bisection(12)
    drive(b, oracle)
    r = b.result()
    assert r.status is Status.INCONCLUSIVE
    assert r.message.startswith("verification failed")


def test_foreign_failure_signature_is_skip() -> None:
    # culprit 20 (garbage near 20K tokens); from 28 on an unrelated breakage: every size fails.
    def oracle(i: int):
        if i >= 28:
            return B, Signature("all-garbage", None, "exit 3")
        if i >= 20:
            return B, Signature("garbage", 20480)
        return G, None

    b = Bisection(64, check_boundary=False)
    b.reference = Signature("garbage", 20000)  # as if the bad end had been probed
    drive(b, oracle)
    r = b.result()
    assert r.status is Status.CULPRIT and r.first_bad == 20
    used_as_skip = [s for s in b.history if s.verdict is B and s.effective is S]
    assert used_as_skip and "different failure signature" in used_as_skip[0].note


def test_moved_threshold_is_drift_not_a_foreign_failure() -> None:
    # issue 12 input 5: garbage above 20K from 20, the threshold drops to 500 tokens at 28
    def oracle(i: int):
        if i >= 28:
            return B, Signature("garbage", 500)
        if i >= 20:
            return B, Signature("garbage", 20480)
        return G, None

    b = Bisection(64, check_boundary=False)
    b.reference = Signature("garbage", 500)
    drive(b, oracle)
    assert b.result().first_bad == 20 and not [s for s in b.history if s.effective is S]


def test_signature_parse_and_match() -> None:
    s = Signature("garbage", 20480, "word-loop")
    assert Signature.parse(str(s)) == s
    assert Signature.parse("") is None
    assert s.matches(Signature("garbage", 16384)) and not s.matches(Signature("garbage", 4000))
    assert not s.matches(Signature("all-garbage"))
    assert not Signature("exit", None, "1").matches(Signature("exit", None, "2"))


def test_flaky_oracle_ten_percent_finds_culprit_in_99_of_100_seeds() -> None:
    hits = 0
    for seed in range(100):
        rng = random.Random(seed)
        n = 80
        k = rng.randint(1, n - 1)

        def oracle(i: int, rng=rng, k=k) -> Verdict:
            bad = i >= k
            return (G if bad else B) if rng.random() < 0.10 else (B if bad else G)

        b = Bisection(n, false_positive=0.1, false_negative=0.1, confidence=0.99, max_probes=200)
        drive(b, oracle)
        r = b.result()
        hits += r.status is Status.CULPRIT and r.first_bad == k
        assert r.confidence >= 0.99 or r.status is not Status.CULPRIT
    assert hits >= 99


def test_noisy_mode_with_zero_rates_is_plain_binary() -> None:
    a = Bisection(1000, false_positive=0.0, false_negative=0.0, verify=False, check_boundary=False)
    assert a.exact
    probed = drive(a, exact_oracle(377))
    assert probed == reference_binary(1000, 377, set())[0]


def test_noisy_mean_probes_close_to_burnashev() -> None:
    rng = random.Random(1)
    n, p, total, ok = 257, 0.1, 0, 0
    for _ in range(60):
        k = rng.randint(1, n - 1)
        b = Bisection(n, false_positive=p, false_negative=p, verify=False, check_boundary=False)
        drive(b, lambda i, k=k: (G if i >= k else B) if rng.random() < p else (B if i >= k else G))
        total += b.probes
        ok += b.result().first_bad == k
    assert total / 60 <= 1.25 * burnashev_bound(n - 1, p, 0.01)
    assert ok >= 57


def test_budget_spent_is_inconclusive_with_best_guess() -> None:
    rng = random.Random(3)
    b = Bisection(500, false_positive=0.2, false_negative=0.2, max_probes=8)
    drive(b, lambda i: (B if i >= 200 else G) if rng.random() > 0.2 else (G if i >= 200 else B))
    r = b.result()
    assert r.status is Status.INCONCLUSIVE and r.probes == 8
    assert "budget (8 probes) spent" in r.message and r.confidence < 0.99


def test_k_ary_plan_splits_evenly_and_finds_culprit() -> None:
    b = Bisection(101, check_boundary=False, verify=False)
    assert b.next_probes(3) == [25, 50, 75]
    b2 = Bisection(101)
    assert b2.next_probes(4)[:2] == [100, 0]
    probed = drive(Bisection(1001, verify=False, check_boundary=False), exact_oracle(613), k=3)
    assert len(probed) <= 3 * math.ceil(math.log(1000, 4)) + 3
    b3 = Bisection(1001, verify=False, check_boundary=False)
    drive(b3, exact_oracle(613), k=3)
    assert b3.result().first_bad == 613


def test_lookahead_names_the_two_possible_next_probes() -> None:
    b = Bisection(17, check_boundary=False, verify=False)
    (first,) = b.next_probes()
    nxt = b.lookahead(first)
    assert first == 8 and nxt[G] == 12 and nxt[B] == 4
    b.feed(first, G)
    assert b.next_probes() == [nxt[G]]


def test_replay_rebuilds_state_and_steps_left() -> None:
    b = Bisection(64)
    assert b.steps_left() == 2 + 6 + 2
    oracle = exact_oracle(40)
    for _ in range(4):
        (i,) = b.next_probes()
        b.feed(i, oracle(i))
    r = Bisection.replay(64, [(s.index, s.verdict, s.signature) for s in b.history])
    assert r.next_probes() == b.next_probes() and r.probes == 4
    assert 0 < b.steps_left() < 10


def test_feed_rejects_bad_index_and_after_end() -> None:
    b = Bisection(4, check_boundary=False, verify=False)
    with pytest.raises(ValueError):
        b.feed(9, G)
    drive(b, exact_oracle(2))
    with pytest.raises(ValueError, match="over"):
        b.feed(1, G)
    with pytest.raises(ValueError):
        Bisection(1)


# --------------------------------------------------------------------------- verdict rules

@pytest.mark.parametrize("regress,status,lo,hi,verdict", [
    ("garbage", "ok", 32000, None, G),
    ("garbage", "garbage", 19000, 20480, B),
    ("garbage", "all-garbage", None, 2000, B),
    ("garbage", "error", None, None, S),
    ("threshold-below: 20000", "garbage", 24000, 26000, G),
    ("threshold-below: 20000", "garbage", 15000, 16000, B),
    ("threshold-below: 20000", "ok", 32000, None, G),
    ("error", "error", None, None, B),
    ("error", "garbage", 1000, 2000, G),
    ("success", "garbage", 1000, 2000, G),
    ("success", "ok", 32000, None, B),
])
def test_judge_threshold_per_regress_mode(regress, status, lo, hi, verdict) -> None:
    j = judge_threshold(Regress.model_validate(regress), status, lo, hi, ["word-loop"], "HTTP 500")
    assert j.verdict is verdict and j.reason
    # a bad verdict carries its failure; so does a fix bisection's "still broken" (issue 12)
    assert (j.signature is not None) == (verdict is B or (regress == "success" and status == "garbage"))


def test_judge_command_follows_git_bisect_run() -> None:
    assert judge_command(0).verdict is G
    assert judge_command(1).verdict is B and str(judge_command(1).signature) == "exit (1)"
    assert judge_command(124).verdict is B
    assert judge_command(125).verdict is S
    assert judge_command(None, timed_out=True).verdict is S
    assert judge_command(0, invert=True).verdict is B
    with pytest.raises(BisectbotError, match="aborts"):
        judge_command(130)
    with pytest.raises(BisectbotError):
        judge_command(-9)


def test_patch_modes_hook() -> None:
    reg = Regress.model_validate({"patch-upstream": "fix-foo"})
    from bisectbot import verdict as mod

    saved = dict(mod._PATCH_RULES)
    try:
        mod._PATCH_RULES.pop("patch-upstream", None)
        with pytest.raises(BadInput, match="patch-upstream"):
            judge_patches(reg, [])

        @register_patch_rule("patch-upstream")
        def rule(regress, states):
            st = {s["id"]: s["state"] for s in states}[regress.arg]
            return mod.Judgement(B if st == "upstream" else G, st, Signature("patch", None, st))

        assert judge_patches(reg, [{"id": "fix-foo", "state": "upstream"}]).verdict is B
    finally:
        mod._PATCH_RULES.clear()
        mod._PATCH_RULES.update(saved)


def test_plausibility_flags_and_blame() -> None:
    assert plausibility_flags(parents=2) == ["merge"]
    assert plausibility_flags(changed_paths=["docs/a.md", "tests/test_x.py"]) == ["docs-tests-only"]
    # a README is documentation by its name (issue 23, input 5); any other file outside the runtime paths is not
    assert plausibility_flags(changed_paths=["README"], runtime_paths=["vllm/"]) == ["docs-tests-only"]
    assert plausibility_flags(changed_paths=["tools/merges.txt"], runtime_paths=["vllm/"]) == ["outside-runtime-paths"]
    assert plausibility_flags(changed_paths=["setup.py"], runtime_paths=["vllm/"]) == []  # build files ship
    assert plausibility_flags(changed_paths=["vllm/attn.py"], runtime_paths=["vllm/"], parents=1) == []
    assert plausibility_flags(same_build=True) == ["no-op-build"]
    ok, why = may_blame(Status.CULPRIT, 0.995, [])
    assert ok
    ok, why = may_blame(Status.CULPRIT, 0.995, ["merge"])
    assert not ok and "merge commit" in why
    ok, why = may_blame(Status.CULPRIT, 0.5, [], blame_confidence=0.66)
    assert not ok and "below 0.66" in why
    ok, why = may_blame(Status.RANGE, 1.0, [])
    assert not ok and "range" in why


def test_benchmark_smoke() -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bisect_sim.py"
    spec = importlib.util.spec_from_file_location("bisect_sim", path)
    mod = importlib.util.module_from_spec(spec)
    import sys

    sys.modules["bisect_sim"] = mod
    spec.loader.exec_module(mod)
    row = mod.run_setting((64, 0.0, 0.0, 10, 1))
    assert row.trials == 64 and row.worst == 6 and row.acc == 1.0 and row.ratio == 1.0
    row = mod.run_setting((32, 0.1, 0.1, 40, 1))
    assert row.acc >= 0.9 and row.bin_acc < 1.0 and row.maj_mean > row.bin_mean
    # --quick (issue 23): a point figure that misses a target within its 95 % interval is noted,
    # not failed; the full run fails on it; an interval beyond the target fails both
    row = mod.Row(256, 0.2, 0.0, 300, 35.0, 100, 296 / 300, 34.3, 8, 0.2, 24, 0.4, 1.0, sd=10.0)
    lo, hi = row.acc_ci
    assert lo < 0.99 < hi and row.ratio_low < 1.15
    for quick, failed, noted in ((True, 0, 1), (False, 1, 0)):
        v = mod.Verdicts(quick)
        v.check(row.acc < 0.99, hi < 0.99, "accuracy 98.67% < 99%")
        assert (len(v.failures), len(v.noise)) == (failed, noted)
    v = mod.Verdicts(True)
    v.check(True, True, "accuracy 90% < 99%")
    v.check(False, False, "met")
    assert v.failures == ["accuracy 90% < 99%"] and not v.noise
