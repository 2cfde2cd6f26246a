"""The dashboard's archive of run reports: what the ledger does not hold.

A night's ``bisectbot run --out DIR`` writes ``report.json`` (``{"result": RunResult, "fingerprint",
"blame", "schema"}``) and ``result.json``. The ledger keeps probes, sessions and filed issues, but
not which sessions one run chained (stage 1 -> component -> ...), the issue fingerprint of that run,
or where its job log is. ``bisectbot dashboard --report PATH --job-url URL`` copies each report
into ``<state>/dashboard/reports/<recipe>/<key>.json`` (``key``: SHA-256 of the report, 16 hex, so
archiving the same file twice keeps one copy) with the job URL and the time it was archived; every
later render reads the whole archive back. Nothing here writes the ledger.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..ledger import now_iso
from ..models import RunResult
from ..report.render import load_result

ARCHIVE_DIR = "dashboard/reports"
"""Where archived reports live, relative to the state directory."""

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
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    fp = data.get("fingerprint") if isinstance(data, dict) else None
    return fp if isinstance(fp, str) and re.fullmatch(r"[0-9a-f]{16}", fp) else ""


def archive_reports(state_dir: Path, paths: list[Path], job_url: str = "") -> list[Path]:
    """Copy each report of ``paths`` (see :func:`report_files`) into the archive with ``job_url``;
    returns the archive files written (an already archived report is rewritten only to add a job
    URL it lacked). Raises :class:`BadInput` (file and field) for a file that is not a report."""
    written = []
    for f in report_files(paths):
        result, _ = load_result(f)  # validates: a truncated artifact is an error naming the file
        raw = f.read_bytes()
        key = hashlib.sha256(raw).hexdigest()[:16]
        dest = state_dir / ARCHIVE_DIR / (_NAME.sub("_", result.recipe)[:100] or "recipe") / f"{key}.json"
        old: dict[str, Any] = {}
        if dest.is_file():
            try:
                old = json.loads(dest.read_text(encoding="utf-8"))
            except ValueError:
                old = {}
            if old.get("job_url") or not job_url:
                continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        doc = {"result": result.to_dict(), "fingerprint": _fingerprint_of(f),
               "job_url": job_url or old.get("job_url", ""), "archived": old.get("archived") or now_iso()}
        tmp = dest.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(doc, sort_keys=True), encoding="utf-8")
        os.replace(tmp, dest)
        written.append(dest)
    return written


def read_archive(state_dir: Path) -> list[ArchivedRun]:
    """Every archived run, oldest archived first. A file that no longer reads as a report (edited
    by hand, cut short) is skipped, named on stderr by the caller through the returned count gap."""
    from ..report.render import run_result_from_dict
    from ..report.result_file import check_result_shape

    root = state_dir / ARCHIVE_DIR
    runs: list[ArchivedRun] = []
    for f in sorted(root.glob("*/*.json")) if root.is_dir() else []:
        try:
            doc = json.loads(f.read_text(encoding="utf-8"))
            check_result_shape(doc["result"], str(f))
            result = run_result_from_dict(doc["result"])
        except (OSError, ValueError, KeyError, TypeError, BadInput):
            continue
        runs.append(ArchivedRun(result, str(doc.get("fingerprint") or ""), str(doc.get("job_url") or ""),
                                str(doc.get("archived") or ""), f.stem))
    runs.sort(key=lambda r: (r.archived, r.key))
    return runs


__all__ = ["ARCHIVE_DIR", "ArchivedRun", "archive_reports", "read_archive", "report_files"]
