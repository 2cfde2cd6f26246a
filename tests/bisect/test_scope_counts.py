"""The comparison on the same prompts also compares what each server read of them (issue 35, the
server-truncate member of seed 103).

Kind: a candidate answers OK a prompt on which the bad end failed, but its server read only part of
that text, and nothing in its own requests looked cut (the cut also misled the probe's sizing: a
"6000-token" prompt of 144 characters measured a plausible 40). The parameters the input fixed,
varied here: how much the candidate's count falls short of the bad end's (a cut of 59 %, a template
that lost a few tokens), its direction (fewer, more), whether the bad end's count was recorded, and
the outcome there (OK, GARBAGE). The end to end member is the world of seed 103
(``tests/worlds/test_worlds.py``).
"""

from __future__ import annotations

import pytest

from bisectbot.models import Candidate, CandidateKind, ProbeResult, PromptKey, Verdict
from bisectbot.verdict.scope import Scope

KEY = PromptKey(3009, 0, 1742)


def row(outcome: str, measured: int | None) -> dict:
    return {"requested": KEY.requested, "prompt_tokens": measured, "outcome": outcome,
            "evidence": {"prompt_seed": KEY.seed, "prompt_words": KEY.words}}


def good(measured: int | None, outcome: str = "OK") -> ProbeResult:
    c = Candidate(CandidateKind.COMMIT, "c12" * 13 + "c", "c12")
    return ProbeResult(c, Verdict.GOOD, reason="no garbage up to 1185 tokens", table=[row(outcome, measured)])


@pytest.mark.parametrize("theirs, mine, verdict", [
    (3018, 1237, Verdict.SKIP),  # the world: the server kept 1237 of 3018 tokens
    (3018, 3012, Verdict.GOOD),  # a chat template six tokens shorter: the same prompt
    (3018, 3018 - 90, Verdict.GOOD),  # within 3 % of 3018 (90.5 tokens)
    (3018, 3018 - 91, Verdict.SKIP),  # 3 % of 3018 is 90.5: beyond it
    (3018, 3400, Verdict.GOOD),  # more tokens than the bad end: it read at least as much
    (None, 1237, Verdict.GOOD),  # the bad end's count was not recorded: nothing to compare
    (3018, None, Verdict.GOOD),  # the candidate's count was not measured
])
def test_an_ok_that_read_less_of_the_same_text_is_a_skip(theirs, mine, verdict) -> None:
    scope = Scope((KEY,), 3018, " c13", 0, (theirs,))
    out = scope.judge(good(mine))
    assert out.verdict is verdict, out.reason
    if verdict is Verdict.SKIP:
        assert f"measured {mine} tokens where the bad end measured {theirs}" in out.reason
        assert "did not read the whole prompt" in out.reason


def test_garbage_on_the_failing_prompt_stays_bad_whatever_it_measured() -> None:
    scope = Scope((KEY,), 3018, " c13", 0, (3018,))
    assert scope.judge(good(1237, "GARBAGE")).verdict is Verdict.BAD
