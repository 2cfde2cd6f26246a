"""The dashboard's archive of run reports: what the ledger does not hold.

A night's ``bisectbot run --out DIR`` writes ``report.json`` (``{"result": RunResult, "fingerprint",
"blame", "schema"}``) and ``result.json``. The ledger keeps probes, sessions and filed issues, but
not which sessions one run chained (stage 1 -> component -> ...), the issue fingerprint of that run,
or where its job log is. ``bisectbot dashboard --report PATH --job-url URL`` copies each report
into ``<state>/dashboard/reports/<recipe>/<key>.json`` (``key``: SHA-256 of the report, 16 hex, so
archiving the same file twice keeps one copy) with the job URL and the time it was archived; every
later render reads the whole archive back. A report's ``threshold.png`` (beside it) is kept as
``<state>/dashboard/charts/<recipe>/<hash>.png`` (:mod:`bisectbot.report.published`: the address
the issue embeds) and :func:`publish_charts` copies the kept charts into the site. Nothing here
writes the ledger.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import jsonio as _jsonio
from ..errors import BadInput
from ..ledger import now_iso
from ..models import RunResult
from ..report.load import load_result
from .safe import BLOCK_LIMIT, INLINE_LIMIT, MAX_TABLE_ROWS

MAX_ARCHIVED_BYTES = 16 * 1024 * 1024
"""Largest shown part of a report the archive keeps (bytes of JSON): every later render reads it.
A night's report is tens to hundreds of KB (``benchmarks/report_scale.py``: ~30 KB for a range of
10,000 commits; the real-vLLM night's, probe tables included, ~170 KB); a page made of 16 MiB is
more than anyone reads. A report past it is refused by name, nothing archived (a forged one of
400,000 probes made every later render take 1.7 GB; hostile pass of issue 41)."""

ARCHIVE_DIR = "dashboard/reports"
"""Where archived reports live, relative to the state directory."""

CHART_ROOT = "dashboard"
"""Archived charts live under ``<state>/dashboard/charts/`` (the site's ``charts/`` mirrors it)."""

_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class ArchivedRun:
    """One archived run: its :class:`RunResult`, the issue fingerprint its report carried (``""``
    for a bare ``result.json``), the job-log URL given with it (``""`` when none) and when it was
    archived (UTC ISO)."""

    result: RunResult
    fingerprint: str
    job_url: str
    archived: str
    key: str


def report_files(paths: list[Path]) -> list[Path]:
    """``report.json`` files named by ``paths``: a file as is, a directory searched recursively for
    ``report.json`` (else ``result.json`` where a directory has no ``report.json``). Sorted.
    Raises :class:`BadInput` for a path that does not exist."""
    out: list[Path] = []
    for p in paths:
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            found = sorted(p.rglob("report.json"))
            dirs = {f.parent for f in found}
            found += [f for f in sorted(p.rglob("result.json")) if f.parent not in dirs]
            out += found
        else:
            raise BadInput(f"--report {p}: no such file or directory")
    return sorted(set(out))


def _fingerprint_of(path: Path) -> str:
    try:
        data = _jsonio.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    fp = data.get("fingerprint") if isinstance(data, dict) else None
    return fp if isinstance(fp, str) and re.fullmatch(r"[0-9a-f]{16}", fp) else ""


def recipe_dir(recipe: str) -> str:
    """The archive's directory name of ``recipe``: characters outside ``[A-Za-z0-9._-]`` as ``_``, at most
    100, leading and trailing dots dropped (a forged ``report.json`` whose recipe is ``..`` or ``.`` named a
    directory outside the archive, issue 41 item 14); ``recipe`` when nothing is left."""
    return _NAME.sub("_", recipe)[:100].strip(".") or "recipe"


def shown_part(value: Any) -> Any:
    """``value`` (a ``RunResult.to_dict()``) cut to what a dashboard page can show: every string at
    :data:`~.safe.BLOCK_LIMIT` characters (the longest text a page shows; inline values are cut
    shorter when rendered), every key at :data:`~.safe.INLINE_LIMIT`, every probe's size ``table``
    at :data:`~.safe.MAX_TABLE_ROWS` rows.
    Every later render reads the whole archive, so an archived report costs what it shows, never
    what its file held (a 212 MB ``report.json`` made every render take ten times the memory,
    issue 41 item 15)."""
    if isinstance(value, str):
        return value if len(value) <= BLOCK_LIMIT else value[: BLOCK_LIMIT - 1] + "…"
    if isinstance(value, dict):
        return {shown_part(k)[:INLINE_LIMIT]: (shown_part(v[:MAX_TABLE_ROWS]) if k == "table" and isinstance(v, list)
                                               else shown_part(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [shown_part(v) for v in value]
    return value


def archive_reports(state_dir: Path, paths: list[Path], job_url: str = "") -> list[Path]:
    """Copy each report of ``paths`` (see :func:`report_files`) into the archive with ``job_url``;
    returns the archive files written (an already archived report is rewritten only to add a job
    URL it lacked). Raises :class:`BadInput` (file and field) for a file that is not a report."""
    written = []
    for f in report_files(paths):
        result, _ = load_result(f)  # validates: a truncated artifact is an error naming the file
        keep_chart(state_dir, result.recipe, f.parent / "threshold.png")
        raw = f.read_bytes()
        key = hashlib.sha256(raw).hexdigest()[:16]
        dest = state_dir / ARCHIVE_DIR / recipe_dir(result.recipe) / f"{key}.json"
        old: dict[str, Any] = {}
        if dest.is_file():
            try:
                old = _jsonio.loads(dest.read_text(encoding="utf-8"))
            except ValueError:
                old = {}
            if old.get("job_url") or not job_url:
                continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        doc = {"result": shown_part(result.to_dict()), "fingerprint": _fingerprint_of(f),
               "job_url": job_url or old.get("job_url", ""), "archived": old.get("archived") or now_iso()}
        text = json.dumps(doc, sort_keys=True)
        if len(text) > MAX_ARCHIVED_BYTES:
            raise BadInput(f"{f}: its shown part is {len(text)} bytes, over the archive's {MAX_ARCHIVED_BYTES} "
                           "(a night's report is KBs): not archived")
        tmp = dest.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, dest)
        written.append(dest)
    return written


def keep_chart(state_dir: Path, recipe: str, png_path: Path) -> Path | None:
    """Keep ``png_path`` (a report's chart, when it is a PNG: :func:`~bisectbot.report.published.publishable`)
    at its published path under ``<state>/dashboard``; the kept file, or None when there is none."""
    from ..report.published import chart_path, publishable

    data = publishable(png_path)
    if data is None:
        return None
    dest = state_dir / CHART_ROOT / chart_path(recipe, data)
    if not dest.is_file():  # content-addressed: a kept chart never changes
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, dest)
    return dest


def publish_charts(state_dir: Path, out: Path) -> list[str]:
    """Copy the kept charts into the site ``out`` (``out/charts/<recipe>/<hash>.png``), the ones it
    lacks; returns their site-relative paths."""
    from ..report.published import CHARTS_DIR, publishable

    root = state_dir / CHART_ROOT
    written = []
    for f in sorted((root / CHARTS_DIR).glob("*/*.png")) if (root / CHARTS_DIR).is_dir() else []:
        rel = f.relative_to(root).as_posix()
        dest = out / rel
        data = publishable(f)
        if data is None or dest.is_file():
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.tmp{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, dest)
        written.append(rel)
    return written


def read_archive(state_dir: Path) -> list[ArchivedRun]:
    """Every archived run, oldest archived first. A file that no longer reads as a report (edited
    by hand, cut short) is skipped, named on stderr by the caller through the returned count gap."""
    from ..report.load import run_result_from_dict
    from ..report.result_file import check_result_shape

    root = state_dir / ARCHIVE_DIR
    runs: list[ArchivedRun] = []
    for f in sorted(root.glob("*/*.json")) if root.is_dir() else []:
        try:
            doc = _jsonio.loads(f.read_text(encoding="utf-8"))
            check_result_shape(doc["result"], str(f))
            result = run_result_from_dict(doc["result"])
        except (OSError, ValueError, KeyError, TypeError, BadInput):
            continue
        runs.append(ArchivedRun(result, str(doc.get("fingerprint") or ""), str(doc.get("job_url") or ""),
                                str(doc.get("archived") or ""), f.stem))
    runs.sort(key=lambda r: (r.archived, r.key))
    return runs


__all__ = ["ARCHIVE_DIR", "ArchivedRun", "archive_reports", "keep_chart", "publish_charts", "read_archive",
           "report_files"]
