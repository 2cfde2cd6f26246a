"""The would-be GitHub issue of a run: :func:`render_issue` (title and body, within GitHub's
body limit) and its chart (:func:`issue_chart`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from ..models import RunResult
from ..sanitize import GITHUB_BODY_LIMIT
from .blame import DEFAULT_BLAME_CONFIDENCE, blame_decision
from .history import NightlyResult
from .markdown import render_markdown
from .views import heading


def render_issue(
    result: RunResult,
    nightly: NightlyResult | None = None,
    *,
    mentions: Iterable[str] = (),
    blame_confidence: float = DEFAULT_BLAME_CONFIDENCE,
    limit: int = GITHUB_BODY_LIMIT,
    chart_png: Path | None = None,
) -> tuple[str, str]:
    """``(title, body)`` of the would-be issue; the body carries the fingerprint marker.
    ``chart_png``: the run's ``threshold.png``: embedded from the dashboard's published address
    when ``result.pages_url`` names it (:func:`issue_chart`), else the body says where it is."""
    title = "[bisectbot] " + heading(result, blame_decision(result, blame_confidence))
    url, note = issue_chart(result, chart_png)
    body = render_markdown(result, nightly, limit=limit, for_issue=True, mentions=mentions,
                           blame_confidence=blame_confidence, chart=url, chart_note=note)
    return title[:256], body


def issue_chart(result: RunResult, chart_png: Path | None) -> tuple[str | None, str]:
    """``(url, note)`` of the issue's threshold chart: the address the dashboard publishes
    ``chart_png`` at under ``result.pages_url`` (:func:`bisectbot.report.published.chart_url`), or
    no address and a note naming the file in the run's artifacts (with the run's address inside
    GitHub Actions). ``(None, "")`` without a chart."""
    from .published import chart_url, publishable

    data = publishable(chart_png) if chart_png is not None else None
    if data is None:
        return None, ""
    if result.pages_url:
        return chart_url(result.pages_url, result.recipe, data), ""
    run = _actions_run_url()
    where = f"the [run's artifacts]({run})" if run else "the run's artifacts"
    return None, (f"The threshold chart is `{chart_png.name}` in {where}, beside `report.md` (set the recipe's "
                  "`report.pages_url` to the dashboard's address and the issue embeds it from there).")


def _actions_run_url() -> str:
    """``$GITHUB_SERVER_URL/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID`` inside GitHub Actions, else ``""``."""
    server, repo, run = (os.environ.get(k, "") for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if not (re.fullmatch(r"https?://[A-Za-z0-9.:-]+", server) and re.fullmatch(r"[\w.-]+/[\w.-]+", repo)
            and run.isdigit()):
        return ""
    return f"{server}/{repo}/actions/runs/{run}"
