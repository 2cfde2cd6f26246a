"""A run over nightlies writes the nightly status and the threshold-over-nightlies chart."""

from __future__ import annotations

from pathlib import Path

from bisectbot.models import Candidate, CandidateKind, ProbeResult, RunResult, StageResult, Status, Verdict
from bisectbot.session import nightly_history, write_report


def _nightly(i: int) -> Candidate:
    return Candidate(CandidateKind.NIGHTLY, f"sha256:{i:064x}", f"nightly_main_202604{i:02d}", "image")


def test_nightly_stage_gives_history_chart_and_status(tmp_path: Path) -> None:
    cands = [_nightly(i) for i in range(1, 7)]
    probes = [
        ProbeResult(cands[5], Verdict.BAD, threshold=(18000, 19000)),
        ProbeResult(cands[0], Verdict.GOOD, threshold=(30000, None)),
        ProbeResult(cands[2], Verdict.GOOD, threshold=(30000, None)),
        ProbeResult(cands[3], Verdict.SKIP, reason="server never healthy"),
        ProbeResult(cands[4], Verdict.BAD, threshold=(19000, 20000)),
        ProbeResult(cands[3], Verdict.BAD, threshold=(18500, 19500)),
    ]
    st = StageResult("stage 1", "image", Status.CULPRIT, candidates=cands, probes=probes,
                     last_good=cands[2], first_bad=cands[3], culprits=[cands[3]], confidence=1.0)
    result = RunResult("glm", "regression", Status.CULPRIT, stages=[st], regress="garbage")
    hist = nightly_history(result)
    assert hist is not None
    # candidate order, one probe per nightly, a later real verdict wins over an earlier skip
    assert [p.candidate.label for p in hist.probes] == [cands[i].label for i in (0, 2, 3, 4, 5)]
    assert hist.probes[2].verdict is Verdict.BAD
    paths = write_report(result, tmp_path)
    names = {p.name for p in paths}
    assert {"result.json", "report.md", "report.json", "issue.md"} <= names
    assert "threshold.png" in names and (tmp_path / "threshold.svg").is_file()
    md = (tmp_path / "report.md").read_text()
    assert "Nightly status" in md and "20260403" in md and "threshold.png" in md


def test_no_history_for_commit_stages() -> None:
    c = Candidate(CandidateKind.COMMIT, "a" * 40, "aaaa subject", "vllm")
    st = StageResult("stage 1", "vllm", Status.CULPRIT, candidates=[c], probes=[ProbeResult(c, Verdict.BAD)])
    assert nightly_history(RunResult("r", "regression", Status.CULPRIT, stages=[st])) is None
