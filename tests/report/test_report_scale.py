"""Issue 25, input 7: a report grows with the work, not the range.

At 10,000 commits ``result.json`` (4.0 MB) and ``report.json`` (4.3 MB) listed every candidate and
384,356 strings went through the redactor. ``bisectbot run`` over a real 10,000-commit git history
(one ``git fast-import``; a command reproducer that exits 1 where the file ``BUG`` exists) must write
what was probed, the range's ends and the final range, and the range as a count. The time this
costs is a benchmark (``benchmarks/report_scale.py``), not an assert here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

N, CULPRIT = 10_000, 6_203
CHECK = "import os, sys\nsys.exit(1 if os.path.exists('BUG') else 0)\n"


def fast_history(path: Path, n: int, culprit: int) -> list[str]:
    """``n`` commits on ``main`` in one ``git fast-import``; ``BUG`` exists from commit ``culprit`` on.
    Returns the SHAs, oldest first."""
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    out: list[str] = []

    def data(text: str) -> str:
        return f"data {len(text.encode())}\n{text}"

    for i in range(n):
        out += ["commit refs/heads/main", f"mark :{i + 1}", f"committer t <t@example.com> {1_700_000_000 + 60 * i} +0000",
                data(f"change {i}\n")]
        if i:
            out.append(f"from :{i}")
        else:
            out += ["M 644 inline check.py", data(CHECK)]
        out += ["M 644 inline n.txt", data(f"{i}\n")]
        if i == culprit:
            out += ["M 644 inline BUG", data("the planted regression\n")]
        out.append("")
    subprocess.run(["git", "-C", str(path), "fast-import", "--quiet"], input="\n".join(out) + "\n", text=True,
                   check=True, capture_output=True)
    shas = subprocess.run(["git", "-C", str(path), "rev-list", "--reverse", "main"], capture_output=True, text=True,
                          check=True).stdout.split()
    assert len(shas) == n
    return shas


def bot(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


@pytest.mark.slow
def test_report_of_a_10000_commit_bisection_lists_the_work_not_the_range(tmp_path) -> None:
    shas = fast_history(tmp_path / "repo", N, CULPRIT)
    out = tmp_path / "out"
    recipe = tmp_path / "scale.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "scale-10k", "source": {"kind": "git", "repo": str(tmp_path / "repo")},
        "reproducer": {"kind": "command", "command": [sys.executable, "check.py"], "command_timeout_s": 60},
        "regress": "command", "bisect": {"good": shas[0], "bad": shas[-1]}, "report": {"dir": str(out)}}))
    p = bot("--state", str(tmp_path / "state"), "run", str(recipe))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]

    res = json.loads((out / "result.json").read_text())
    final = res["stages"][-1]
    assert final["first_bad"]["ref"] == shas[CULPRIT] and final["last_good"]["ref"] == shas[CULPRIT - 1]
    # the range is a count and its ends; the listed candidates are what the work touched
    assert final["count"] == N
    listed = [c["ref"] for c in final["candidates"]]
    assert len(final["positions"]) == len(listed)
    assert [shas[i] for i in final["positions"]] == listed  # each listed candidate at its index in the range
    assert listed[0] == shas[0] and listed[-1] == shas[-1]
    probed = {pr["candidate"]["ref"] for pr in final["probes"]}
    assert set(listed) == probed | {shas[0], shas[-1], shas[CULPRIT - 1], shas[CULPRIT]}
    assert len(listed) <= 20 < N  # ~log2(10,000) + the boundary and the verification
    # sizes: a few KB per probe, nowhere near the 4 MB of every candidate
    per_probe = 4096
    for name in ("result.json", "report.json"):
        size = (out / name).stat().st_size
        assert size < per_probe * len(final["probes"]) + 16_384, (name, size)
    # report.json wraps the same result (one serialisation, not a second different one)
    wrapped = json.loads((out / "report.json").read_text())
    assert wrapped["schema"] == "bisectbot.report/1" and wrapped["result"] == res
    md = (out / "report.md").read_text()
    assert f"Searched 10,000 candidates, from `{shas[0][:12]}` change 0 to `{shas[-1][:12]}` change 9999" in md

    # read back: `report render` of the abridged result.json renders the same report
    p = bot("report", "render", str(out / "result.json"), "--out", str(tmp_path / "again"))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "again" / "report.md").read_text() == md
    again = json.loads((tmp_path / "again" / "report.json").read_text())
    assert again["result"]["stages"][-1]["count"] == N
    assert again["result"]["stages"][-1]["positions"] == final["positions"]


def test_redactor_passes_grow_with_the_probes_not_the_candidates(tmp_path, monkeypatch) -> None:
    """The run's in-memory result holds every candidate of the range; writing it must pass only what
    the files list through the redactor (bounded by the probes), at 10,000 candidates as at 100."""
    import bisectbot.secrets as secrets
    from bisectbot.models import (
        Candidate,
        CandidateKind,
        ProbeResult,
        RunResult,
        StageResult,
        Status,
        Verdict,
    )
    from bisectbot.session.result import write_report

    def result(n: int) -> RunResult:
        cands = [Candidate(CandidateKind.COMMIT, f"{i:040x}", f"{i:07x} change {i}", "repo",
                           {"subject": f"change {i}", "author": "t"}) for i in range(n)]
        at = [0, n - 1, n // 2, n // 2 + 1]
        probes = [ProbeResult(cands[i], Verdict.GOOD if i <= n // 2 else Verdict.BAD, f"command exit {int(i > n // 2)}",
                              cache_key=f"k{i}") for i in at]
        st = StageResult("stage 1", "repo", Status.CULPRIT, cands, probes, last_good=cands[n // 2],
                         first_bad=cands[n // 2 + 1], culprits=[cands[n // 2 + 1]], confidence=1.0)
        return RunResult("scale", "regression", Status.CULPRIT, [st], regress="command")

    calls = {"n": 0}
    real = secrets.redact

    def counting(text: str, secrets_: object = None) -> str:
        calls["n"] += 1
        return real(text, secrets_)  # type: ignore[arg-type]

    monkeypatch.setattr(secrets, "redact", counting)
    counts = {}
    for n in (100, 10_000):
        calls["n"] = 0
        write_report(result(n), tmp_path / f"out-{n}")
        counts[n] = calls["n"]
        doc = json.loads((tmp_path / f"out-{n}" / "result.json").read_text())
        assert len(doc["stages"][0]["candidates"]) == 4 and doc["stages"][0]["count"] == n
    assert counts[10_000] == counts[100], counts  # 384,356 passes at 10,000 commits before
