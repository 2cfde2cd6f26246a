"""Unit test of :func:`bisectbot.session.fill_patch_states` (the report's patch-stack table)."""

from __future__ import annotations

from bisectbot.models import Candidate, CandidateKind, ProbeResult, RunResult, StageResult, Status, Verdict
from bisectbot.session import fill_patch_states


def test_patch_states_come_from_the_first_bad_probe() -> None:
    lg = Candidate(CandidateKind.COMMIT, "a" * 40, "aaaa good", "aiter")
    fb = Candidate(CandidateKind.COMMIT, "b" * 40, "bbbb bad", "aiter")
    recs = [{"id": "p1", "state": "applies", "label": "applies [variant v1]", "detail": ""},
            {"id": "p2", "state": "upstream", "label": "already upstream", "detail": "code.any matched"}]
    st = StageResult("aiter commits", "aiter", Status.CULPRIT, candidates=[lg, fb], first_bad=fb, last_good=lg,
                     probes=[ProbeResult(lg, Verdict.GOOD, patches=[{"id": "p1", "state": "conflict"}]),
                             ProbeResult(fb, Verdict.BAD, patches=recs)])
    result = RunResult(recipe="r", kind="regression", status=Status.CULPRIT, stages=[st],
                       patch_stack=[{"id": "p1"}, {"id": "p2"}, {"id": "p3"}])
    fill_patch_states(result)
    assert result.patch_stack == [
        {"id": "p1", "state": "applies [variant v1]", "detail": "on first bad bbbb bad"},
        {"id": "p2", "state": "already upstream", "detail": "code.any matched"},
        {"id": "p3"},
    ]
