"""Rounds of k parallel probes (issue 16): k-ary split, both ends in the first round,
verification folded into the last search round, noisy mode still accurate."""

from __future__ import annotations

import math
import random

import pytest

from bisectbot.bisect import Bisection
from bisectbot.models import Status, Verdict
from bisectbot.session.rounds.loop import feed_order


def drive(b: Bisection, k: int, truth, rng: random.Random | None = None, p: float = 0.0) -> list[list[int]]:
    """Run the search in rounds of ``next_probes(k)``; ``truth(i)`` -> bad? Returns the rounds."""
    rounds: list[list[int]] = []
    while not b.done:
        batch = b.next_probes(k)
        assert batch and len(batch) <= k
        rounds.append(batch)
        pairs = [((i, n), None) for n, i in enumerate(batch)]
        for (i, _), _ in feed_order(b, pairs):
            if b.done:
                break
            bad = truth(i)
            if rng is not None and rng.random() < p:
                bad = not bad
            b.feed(i, Verdict.BAD if bad else Verdict.GOOD)
    return rounds


@pytest.mark.parametrize("n,k", [(301, 4), (100, 2), (60, 8), (2, 4), (3, 4)])
def test_exact_k_ary_rounds_find_every_culprit(n: int, k: int) -> None:
    bound = math.ceil(math.log(n - 1, k + 1)) + 2 if n > 2 else 2
    for cul in range(1, n):
        b = Bisection(n)
        rounds = drive(b, k, lambda i, c=cul: i >= c)
        res = b.result()
        assert res.status is Status.CULPRIT and res.first_bad == cul and res.verified
        assert set(rounds[0][:2]) == {0, n - 1}, "both ends go in the first round"
        assert len(rounds) <= bound, (cul, rounds)


def test_verification_is_folded_into_the_last_search_round() -> None:
    """n = 101, k = 4: live sets of <= 2 hypotheses in the last search round fold (2m <= k)."""
    n, k = 101, 4
    folded = 0
    for cul in range(1, n):
        b = Bisection(n)
        rounds = drive(b, k, lambda i, c=cul: i >= c)
        last = rounds[-1]
        phases = {st.phase for st in b.history[-len(last):]}
        if "search" in phases and "verify" in phases:
            folded += 1
            # culprit and predecessor probed again in that same round
            assert last.count(cul) + last.count(cul - 1) >= 2
    assert folded >= (n - 1) // 3, folded  # 50 of 100 here


def test_k1_is_plain_binary_search() -> None:
    n = 129
    for cul in (1, 64, 128):
        b = Bisection(n)
        rounds = drive(b, 1, lambda i, c=cul: i >= c)
        assert all(len(r) == 1 for r in rounds)
        assert len(rounds) == 2 + math.ceil(math.log2(n - 1)) + 2


def test_noisy_rounds_stay_accurate() -> None:
    rng = random.Random(7)
    ok = 0
    for _ in range(40):
        cul = rng.randrange(1, 100)
        b = Bisection(100, false_positive=0.1, false_negative=0.1, confidence=0.99, max_probes=300)
        drive(b, 4, lambda i, c=cul: i >= c, rng, 0.1)
        res = b.result()
        ok += res.status is Status.CULPRIT and res.first_bad == cul
    assert ok >= 38


def test_duplicate_probe_of_one_candidate_counts_twice() -> None:
    """A folded round may probe one candidate twice (two attempts): both are fed."""
    b = Bisection(3)
    batch = b.next_probes(4)
    assert sorted(batch[:2]) == [0, 2]
    for i in batch:
        if not b.done:
            b.feed(i, Verdict.BAD if i >= 1 else Verdict.GOOD)
    batch = b.next_probes(4)
    assert b.done or len(batch) >= 1


def test_budget_grows_with_probes_per_round() -> None:
    """k probes of one round carry ~log2(k+1) bits, not k: the derived budget follows (issue 16)."""
    from bisectbot.bisect import default_budget

    one = default_budget(500, 0.1, 0.1, 0.99)
    assert default_budget(500, 0.1, 0.1, 0.99, 1) == one
    four = default_budget(500, 0.1, 0.1, 0.99, 4)
    assert four == math.ceil((one - 4) * 4 / math.log2(5)) + 4 or abs(four - ((one - 4) * 4 / math.log2(5) + 4)) <= 1
    assert default_budget(500, 0.0, 0.0, 0.99, 4) is None
    rng = random.Random(3)
    ok = 0
    for _ in range(30):
        cul = rng.randrange(1, 500)
        b = Bisection(500, false_positive=0.1, false_negative=0.1, budget=four)
        drive(b, 4, lambda i, c=cul: i >= c, rng, 0.1)
        res = b.result()
        ok += res.status is Status.CULPRIT and res.first_bad == cul
    assert ok >= 28
