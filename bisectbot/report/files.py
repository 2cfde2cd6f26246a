"""The report directory of a run: :func:`write_report` writes ``report.md``, ``result.json``,
``issue.md``, the chart and the reproduce kit, and returns their :class:`ReportPaths`;
:func:`render_summary` is the short text for ``$GITHUB_STEP_SUMMARY``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..models import ProbeResult, RunResult, Verdict
from ..sanitize import sanitize
from .blame import DEFAULT_BLAME_CONFIDENCE, blame_decision
from .history import NightlyResult
from .issue import render_issue
from .markdown import render_json, render_markdown
from .templating import template
from .views import heading, summary_line
from .words import ends_words


@dataclass
class ReportPaths:
    """Files written by :func:`write_report` (absolute paths)."""

    markdown: Path
    json: Path
    issue: Path
    charts: list[Path] = field(default_factory=list)
    step_summary: Path | None = None
    reproduce: list[Path] = field(default_factory=list)
    """``request.json`` and ``make_request.py`` of the Reproduce section (issue 25), when there is a request."""

    def all(self) -> list[Path]:
        return [self.markdown, self.json, self.issue, *self.charts, *self.reproduce]


def run_thresholds(result: RunResult) -> NightlyResult | None:
    """The final stage's probed candidates in history order (oldest first; the last non-skip probe
    of each) as a :class:`NightlyResult`, for the threshold chart of a single run. None when the run
    has no final stage or no probe measured a threshold."""
    final = result.final
    if final is None or not final.probes:
        return None
    last: dict[str, ProbeResult] = {}
    for p in final.probes:
        if p.verdict is not Verdict.SKIP or p.candidate.ref not in last:
            last[p.candidate.ref] = p
    order = final.position_map()
    probes = sorted(last.values(), key=lambda p: order.get(p.candidate.ref, len(order)))
    run = NightlyResult(recipe=result.recipe, probes=probes, kind=result.kind, regress=result.regress)
    return run if run.has_thresholds() else None


def chart_positions(result: RunResult) -> dict[str, int] | None:
    """Each candidate's index in the final stage's range (0 = the good end): the chart's x for commits
    and releases (commit distance, issue 25). None for nightlies, which the chart places by date."""
    final = result.final
    if final is None or not final.candidates or all(c.kind.value == "nightly" for c in final.candidates):
        return None
    return final.position_map()


def render_summary(result: RunResult, nightly: NightlyResult | None, files: Sequence[Path]) -> str:
    """Short Markdown for ``$GITHUB_STEP_SUMMARY`` (the full report is an artifact)."""
    blame = blame_decision(result)
    return template("summary.md.j2").render(
        recipe=result.recipe, status=result.status.value, summary=sanitize(heading(result, blame), 250) + ". "
        + summary_line(result, blame), streak=nightly.streak() if nightly and nightly.probes else None,
        files=[str(p) for p in files], words=ends_words(result.kind, result.regress),
    )


def write_report(
    result: RunResult,
    out_dir: Path,
    nightly: NightlyResult | None = None,
    *,
    mentions: Iterable[str] = (),
    blame_confidence: float = DEFAULT_BLAME_CONFIDENCE,
    step_summary: bool = True,
    result_data: dict[str, Any] | None = None,
) -> ReportPaths:
    """Write ``report.md``, ``report.json``, ``issue.md`` (title on the first line as ``# ...``),
    ``request.json`` and ``make_request.py`` (the Reproduce section's request, when the probes
    recorded it) and, when ``nightly`` has threshold data, ``threshold.png``/``threshold.svg`` into ``out_dir``
    (created). When ``step_summary`` and ``$GITHUB_STEP_SUMMARY`` is set (GitHub Actions), a
    short summary is appended to that file. ``result_data``: ``result.to_dict()`` when the caller
    already made it (for ``result.json``). Raises ``OSError`` when a file cannot be written.
    """
    from .chart import threshold_chart

    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    final = result.final
    ends = {"first_bad": final.first_bad.ref if final is not None and final.first_bad else None,
            "last_good": final.last_good.ref if final is not None and final.last_good else None}
    charts = threshold_chart(nightly, out_dir, **ends) if nightly is not None else []
    if not charts:  # a single run (commits, releases): the thresholds of its probed candidates, in order
        run = run_thresholds(result)
        if run is not None:
            pos = chart_positions(result)
            charts = threshold_chart(run, out_dir, over="probed candidates" if pos else "nightlies", positions=pos,
                                     **ends)
    if not charts:  # an earlier run's chart must not stand beside (or be filed with) this report
        for stale in ("threshold.png", "threshold.svg"):
            (out_dir / stale).unlink(missing_ok=True)
    md = render_markdown(result, nightly, chart=charts[0].name if charts else None,
                         blame_confidence=blame_confidence)
    paths = ReportPaths(markdown=out_dir / "report.md", json=out_dir / "report.json",
                        issue=out_dir / "issue.md", charts=charts)
    paths.markdown.write_text(md, encoding="utf-8")
    paths.json.write_text(render_json(result, nightly, result_data=result_data), encoding="utf-8")
    png = next((c for c in charts if c.suffix == ".png"), None)
    title, body = render_issue(result, nightly, mentions=mentions, blame_confidence=blame_confidence, chart_png=png)
    paths.issue.write_text(f"# {title}\n\n{body}", encoding="utf-8")
    from .reproduce_kit import kit

    k = kit(result)
    if k is not None and k.request is not None:  # the Reproduce section's files, beside the report
        for name, text in (("request.json", k.request_json()), ("make_request.py", k.make_request)):
            (out_dir / name).write_text(text, encoding="utf-8")
            paths.reproduce.append(out_dir / name)
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary and summary_file:
        with open(summary_file, "a", encoding="utf-8") as fh:
            fh.write(render_summary(result, nightly, paths.all()))
        paths.step_summary = Path(summary_file)
    return paths
