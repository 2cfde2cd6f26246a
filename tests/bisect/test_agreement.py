"""Issue 40: what one probe's verdict holds in independent measurements (:mod:`bisectbot.verdict.agreement`)
and what a search does with them (:meth:`bisectbot.bisect.Bisection.measurements_of`).

Kind: *a role's second measurement taken from its own probe*. Parameters varied: the flake unit; the
verdict (bad, good, skip); how many distinct prompts agree (0, 1, 2, the same prompt twice); the regress
mode (garbage, threshold-below with GARBAGE above and below the limit, command repeats, slower, a fix);
where the verdict came from (this run, another run's ledger row); the bad end's failing prompts answered
one way, both ways, or not at all; and a search that learns of a disagreement after counting two.
"""

from __future__ import annotations

import pytest

from bisectbot.bisect import Bisection
from bisectbot.models import Candidate, CandidateKind, ProbeResult, PromptKey, Status, Verdict
from bisectbot.recipe import parse_recipe
from bisectbot.verdict.agreement import agreeing, mixed
from bisectbot.verdict.scope import Scope

from .test_search import drive, exact_oracle

C = Candidate(CandidateKind.COMMIT, "c" * 40, "c1")


def recipe(unit: str = "request", regress: str = "garbage", extra: str = ""):
    return parse_recipe(f"name: t\nsource: {{kind: git, repo: /x}}\nregress: {regress}\n"
                        f"bisect: {{flake_unit: {unit}}}\n{extra}")


def row(size: int, words: int, outcome: str, seed: int = 0) -> dict:
    return {"requested": size, "prompt_tokens": size, "outcome": outcome,
            "evidence": {"prompt_words": words, "prompt_seed": seed}}


def res(verdict: Verdict, rows: list[dict], threshold: tuple | None = None, **extra) -> ProbeResult:
    return ProbeResult(C, verdict, table=rows, threshold=threshold, extra=dict(extra))


SCOPE = Scope((PromptKey(8000, 0, 6000), PromptKey(9000, 0, 6800)), 8000)


@pytest.mark.parametrize("rows,count", [
    ([row(8000, 6000, "GARBAGE"), row(9000, 6800, "GARBAGE")], 2),
    ([row(4000, 3000, "OK"), row(8000, 6000, "GARBAGE")], 1),
    ([row(8000, 6000, "GARBAGE"), row(8000, 6000, "GARBAGE")], 1),  # the same prompt twice: one draw
    # GARBAGE on prompts the bad end did not fail counts nothing: one of the failing prompts, one measurement
    ([row(8000, 6000, "GARBAGE"), row(8000, 6000, "GARBAGE", seed=1), row(12000, 9000, "GARBAGE")], 1),
    ([row(8000, 6000, "GARBAGE"), row(9000, 6800, "GARBAGE"), row(12000, 9000, "GARBAGE")], 2),
    # the hostile pass's member: OK on both failing prompts, GARBAGE on two others -- another failure
    ([row(8000, 6000, "OK"), row(9000, 6800, "OK"), row(9500, 7200, "GARBAGE"), row(10000, 7600, "GARBAGE")], 1),
])
@pytest.mark.parametrize("unit", ["request", "start"])
def test_a_bad_verdict_counts_its_garbage_on_the_bad_ends_failing_prompts(rows, count, unit) -> None:
    """Kind: *a bad verdict's second measurement taken from GARBAGE that is not the bad end's failure*.
    Members: the failing prompts both GARBAGE, one of them, the same prompt twice, other prompts (another
    filler seed, a larger size) beside one or both, and both failing prompts OK with GARBAGE elsewhere
    (under ``start`` within :data:`REPROBE_BAND` of the bad end's first failing size, 8000)."""
    threshold = (None, min(r["requested"] for r in rows if r["outcome"] == "GARBAGE"))
    assert agreeing(recipe(unit), res(Verdict.BAD, rows, threshold), SCOPE, this_run=True,
                    bad_end_ref="e" * 40, shows_every_start=True).count == count


def test_the_bad_ends_own_probe_counts_every_prompt_it_failed() -> None:
    """The bad end's probe is where the failing prompts come from: its GARBAGE counts as is."""
    rows = [row(8000, 6000, "GARBAGE"), row(8000, 6000, "GARBAGE", seed=1), row(12000, 9000, "GARBAGE")]
    bad_end = ProbeResult(C, Verdict.BAD, table=rows, threshold=(None, 8000))
    assert agreeing(recipe(), bad_end, None, this_run=True, bad_end_ref=C.ref).count == 3
    assert agreeing(recipe(), bad_end, None, this_run=True, bad_end_ref="e" * 40).count == 1  # not known: one


def test_threshold_below_counts_only_the_garbage_below_its_limit() -> None:
    rows = [row(8000, 6000, "GARBAGE"), row(9000, 6800, "GARBAGE"), row(16000, 12000, "GARBAGE")]
    assert agreeing(recipe(regress="{threshold-below: 8500}"), res(Verdict.BAD, rows), SCOPE,
                    this_run=True).count == 1
    assert agreeing(recipe(regress="{threshold-below: 20000}"), res(Verdict.BAD, rows), SCOPE,
                    this_run=True).count == 2
    other = [row(8000, 6000, "OK"), row(9000, 6800, "OK"), row(9600, 7300, "GARBAGE"), row(9800, 7450, "GARBAGE")]
    for unit in ("request", "start"):
        assert agreeing(recipe(unit, regress="{threshold-below: 12000}"), res(Verdict.BAD, other, (9000, 9600)),
                        SCOPE, this_run=True, bad_end_ref="e" * 40, shows_every_start=True).count == 1


@pytest.mark.parametrize("rows,count", [
    ([row(8000, 6000, "OK"), row(9000, 6800, "OK")], 2),
    ([row(8000, 6000, "OK")], 1),  # one of the two failing prompts asked
    ([row(8000, 6000, "OK"), row(9000, 6800, "OK"), row(16000, 12000, "OK")], 2),  # only the failing prompts count
])
def test_a_good_verdict_counts_the_bad_ends_failing_prompts_it_answered(rows, count) -> None:
    assert agreeing(recipe(), res(Verdict.GOOD, rows), SCOPE, this_run=True).count == count
    assert agreeing(recipe(), res(Verdict.GOOD, rows), None, this_run=True).count == 1  # no scope yet


@pytest.mark.parametrize("case", ["start-unit", "ledger", "skip", "fix", "slower"])
def test_one_measurement_wherever_the_probe_cannot_stand_for_two(case: str) -> None:
    rows = [row(8000, 6000, "GARBAGE"), row(9000, 6800, "GARBAGE")]
    r, v, this_run = recipe(), Verdict.BAD, True
    if case == "start-unit":
        r = recipe("start")
    elif case == "ledger":
        this_run = False
    elif case == "skip":
        v = Verdict.SKIP
    elif case == "fix":
        r = recipe(regress="success")
    elif case == "slower":
        r = recipe(regress="slower", extra="reproducer: {kind: command, command: [x]}\n")
    assert agreeing(r, res(v, rows), SCOPE, this_run=this_run).count == 1


def test_command_repeats_count_their_runs() -> None:
    r = recipe(regress="command", extra="reproducer: {kind: command, command: [x]}\n")
    assert agreeing(r, res(Verdict.BAD, [], hits=3, runs=4), None, this_run=True).count == 3
    assert agreeing(r, res(Verdict.GOOD, [], hits=0, runs=4), None, this_run=True).count == 4
    assert agreeing(r, res(Verdict.GOOD, [], hits=1, runs=4), None, this_run=True).count == 1


@pytest.mark.parametrize("rows,says", [
    ([row(8000, 6000, "GARBAGE"), row(9000, 6800, "OK")], True),
    ([row(8000, 6000, "OK"), row(9000, 6800, "GARBAGE")], True),
    ([row(8000, 6000, "GARBAGE"), row(9000, 6800, "GARBAGE")], False),
    ([row(8000, 6000, "OK"), row(9000, 6800, "OK")], False),
    ([row(8000, 6000, "OK"), row(16000, 12000, "GARBAGE")], False),  # a larger, other prompt: not the bad end's
])
def test_the_bad_ends_prompts_answered_both_ways_is_a_disagreement(rows, says) -> None:
    assert bool(mixed(res(Verdict.BAD, rows), SCOPE)) is says


@pytest.mark.parametrize("n,first_bad", [(20, 11), (9, 1), (9, 8)])
def test_a_search_re_probes_each_role_once_it_forgets_its_in_probe_counts(n: int, first_bad: int) -> None:
    """Two measurements per verdict: no verification probe; the same search told to count one per
    verdict before its end (a disagreement was seen) re-probes both roles."""
    b = Bisection(n)
    b.in_probe_verification = True
    oracle = exact_oracle(first_bad)
    while not b.done:
        for i in b.next_probes(1):
            b.feed(i, oracle(i), measurements=2)
    assert b.result().status is Status.CULPRIT and b.result().verified
    assert not [st for st in b.history if st.phase == "verify"]
    b2 = Bisection(n)
    b2.in_probe_verification = True
    b2.single_measurements()
    drive(b2, oracle)
    assert sorted(st.index for st in b2.history if st.phase == "verify") == [first_bad - 1, first_bad]


def test_a_measurement_count_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Bisection(5).feed(4, Verdict.BAD, measurements=0)


@pytest.mark.parametrize("first,rows,bad_end,count", [
    (8000, [row(8000, 6000, "GARBAGE"), row(9000, 6800, "GARBAGE")], "e" * 40, 2),  # the bad end's failure
    (6500, [row(6500, 4900, "GARBAGE"), row(8000, 6000, "GARBAGE"), row(9000, 6800, "GARBAGE")], "e" * 40,
     2),  # 8000 / 6500 < 1.25
    (6500, [row(6500, 4900, "GARBAGE"), row(8000, 6000, "GARBAGE")], "e" * 40, 1),  # one failing prompt asked
    (6000, [row(6000, 4500, "GARBAGE"), row(8000, 6000, "GARBAGE")], "e" * 40, 1),  # 8000 / 6000 > 1.25: moved
    (8000, [row(8000, 6000, "GARBAGE")], "e" * 40, 1),  # one prompt
    (8000, [row(8000, 6000, "GARBAGE"), row(9000, 6800, "GARBAGE")], C.ref, 2),  # the bad end's own failure
    (8000, [row(8000, 6000, "GARBAGE")], C.ref, 1),  # the bad end, one prompt
])
def test_the_start_unit_takes_the_bad_ends_failure_as_decisive_for_a_bad_verdict(first, rows, bad_end, count) -> None:
    """A start-level flake hides a bug, it does not show one: once the run has seen a build fail in two starts
    (the bug does not hide from a start), a bad verdict with the bad end's failure (two prompts, a threshold
    within REPROBE_BAND of the bad end's) needs no second start; until then it holds one (generated world
    202: a bug showing in half the starts named the next commit, verified, its culprit probed once); a good
    verdict always holds one."""
    got = agreeing(recipe("start"), res(Verdict.BAD, rows, (first - 100, first)), SCOPE, this_run=True,
                   bad_end_ref=bad_end, shows_every_start=True)
    assert got.count == count, got
    assert agreeing(recipe("start"), res(Verdict.BAD, rows, (first - 100, first)), SCOPE, this_run=True,
                    bad_end_ref=bad_end).count == 1  # not yet seen: the culprit's re-probe tests it
    if count == 2:
        assert "the bad end's" in got.what and "bisect.flake_unit: start" in got.what
    good = [row(8000, 6000, "OK"), row(9000, 6800, "OK")]
    assert agreeing(recipe("start"), res(Verdict.GOOD, good), SCOPE, this_run=True).count == 1


def test_a_flaked_build_showing_another_failure_is_not_named_verified_from_one_start() -> None:
    """The hostile pass's search: 10 candidates, the first bad 7; candidate 4's one start answered the bad
    end's failing prompts OK and showed GARBAGE at 9,500 and 10,000 tokens (a flake: its next start is
    clean). Fed with the count :func:`agreeing` gives it, the search re-probes 4 and does not name it."""
    r = recipe("start")
    flaked = res(Verdict.BAD, [row(8000, 6000, "OK"), row(9000, 6800, "OK"), row(9500, 7200, "GARBAGE"),
                               row(10000, 7600, "GARBAGE")], (9000, 9500))
    count = agreeing(r, flaked, SCOPE, this_run=True, bad_end_ref="e" * 40).count
    b = Bisection(10)
    seen: dict[int, int] = {}
    while not b.done:
        for i in b.next_probes(1):
            seen[i] = seen.get(i, 0) + 1
            b.feed(i, Verdict.BAD if i >= 7 or (i == 4 and seen[i] == 1) else Verdict.GOOD,
                   measurements=count if i == 4 and seen[i] == 1 else 1)
    out = b.result()
    assert not (out.status is Status.CULPRIT and out.first_bad == 4 and out.verified), (seen, out)
    assert seen.get(4, 0) >= 2 or seen.get(4, 0) == 0
