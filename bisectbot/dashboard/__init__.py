"""``bisectbot dashboard``: a static site of the nights, the thresholds and the regressions.

Data flows one way: the ledger (read only) and the archive of run reports (:mod:`.archive`) ->
:func:`.data.collect` (plain dataclasses) -> :mod:`.views` (contexts of cleaned strings,
:mod:`.safe`) -> :func:`.site.write_site` (Jinja2 templates, autoescaped; SVG charts laid out by
:mod:`.chart`; only pages whose inputs changed are rendered).

:func:`build_dashboard` is the whole command in one call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .archive import archive_reports, publish_charts, read_archive
from .site import RenderStats, write_site


def build_dashboard(state_dir: Path, out: Path, *, reports: list[Path] | None = None, job_url: str = "",
                    recipes: dict[str, Any] | None = None, github_url: str = "https://github.com") -> RenderStats:
    """Archive ``reports`` (report.json files or directories, with ``job_url``) under ``state_dir``,
    then render the site of the ledger in ``state_dir`` into ``out`` and publish the reports'
    threshold charts there (``charts/<recipe>/<hash>.png``: where issues embed them). ``recipes``: name -> loaded
    :class:`bisectbot.recipe.Recipe`. Raises :class:`bisectbot.errors.BadInput` for a report that
    is not one, :class:`bisectbot.errors.LedgerError` for an unreadable ledger."""
    from ..ledger import Ledger
    from .data import collect

    if reports:
        archive_reports(state_dir, reports, job_url)
    with Ledger(state_dir) as led:
        data = collect(led, read_archive(state_dir), recipes, github_url)
    stats = write_site(data, out)
    stats.charts = publish_charts(state_dir, out)  # the charts issues embed (report.pages_url)
    return stats


__all__ = ["RenderStats", "build_dashboard"]
