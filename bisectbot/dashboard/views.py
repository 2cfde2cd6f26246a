"""Page contexts: :mod:`.data` turned into plain dicts of already-cleaned strings.

Every string that came from the ledger, a report or a candidate passes :func:`.safe.clean` (or
:func:`.safe.block`) here, once; templates only escape (autoescape) and lay out. The contexts are
also what a page's content hash is taken over (:mod:`.site`), so they hold no clock time.
"""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta
from typing import Any

from ..report.evidence import measure_text
from ..report.words import ends_words, verdict_word
from .chart import build_chart
from .data import Bisection, PatchColumn, Point, ProbeRow, RecipeData, StageView, upstream_since
from .safe import block, clean, safe_url

FLIP_WINDOW = timedelta(days=30)
"""The window the index counts flips over ("flips over the last 30 nights")."""


def slug(name: str) -> str:
    """A file name for recipe ``name``: the name itself when it is ``[A-Za-z0-9][A-Za-z0-9._-]*``
    (at most 100 characters), else a cleaned form with 8 hex of its SHA-256 (never two recipes
    on one page)."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", name):
        return name
    return (re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:80].strip("._") or "recipe") + "-" + \
        hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def short_ref(ref: str) -> str:
    """``sha256:0123456789ab`` for a digest, 12 characters of a commit SHA, a version as is."""
    if ref.startswith("sha256:"):
        return ref[:19]
    return ref[:12] if re.fullmatch(r"[0-9a-f]{40}", ref) else ref


def threshold_text(threshold: Any) -> str:
    """``[last_ok, first_garbage]`` (prompt tokens) in words; ``—`` when not measured."""
    if not threshold:
        return "—"
    lo, hi = threshold
    if lo and hi:
        return f"garbage from {hi} tokens (none up to {lo})"
    if lo:
        return f"no garbage up to {lo} tokens"
    if hi:
        return f"garbage already at {hi} tokens"
    return "—"


def _date(p: Point) -> str:
    return p.when.strftime("%Y-%m-%d") if p.dated_by == "tag" else p.when.strftime("%Y-%m-%d %H:%M")


def _word(rd: RecipeData | Bisection, verdict: str) -> str:
    return clean(verdict_word(verdict, rd.kind, rd.regress), 40)


def verdict_css(kind: str, verdict: str) -> str:
    """``bad`` (red) when the verdict shows the tracked problem, ``good`` (green) when not, ``skip``:
    in a fix bisection the *bad* verdict means fixed, so it is green."""
    if verdict not in ("good", "bad"):
        return "skip"
    return ("good" if verdict == "bad" else "bad") if kind == "fix" else verdict


def _streak_text(rd: RecipeData) -> str:
    tested = [p for p in rd.points if p.verdict != "skip"]
    if not tested:
        return "no tested night"
    present = rd.present(tested[-1])
    n, start = 0, tested[-1]
    for p in reversed(tested):
        if rd.present(p) != present:
            break
        n, start = n + 1, p
    word = _word(rd, "bad" if (present != (rd.kind == "fix")) else "good")
    return f"{word} since {_date(start)} ({n} tested night{'s' if n != 1 else ''})"


def _range_text(b: Bisection) -> str:
    st = b.first
    w = ends_words(b.kind, b.regress)
    if st.last_good and st.first_bad:
        return clean(f"{w['last']} {st.last_good[1] or st.last_good[0]} → {w['first']} "
                     f"{st.first_bad[1] or st.first_bad[0]}", 400)
    return "—"


def bisection_href(rd: RecipeData) -> dict[str, str]:
    """session id -> bisection key of the run whose page shows that session."""
    out: dict[str, str] = {}
    for b in rd.bisections:
        if b.from_report:  # a point taken from an archived report names its bisection by key
            out.setdefault(b.key, b.key)
        for st in b.stages:
            if st.session is not None:
                out.setdefault(st.session.id, b.key)
    return out


def recipe_context(rd: RecipeData) -> dict[str, Any]:
    """The recipe page's context (also used, in part, by the index)."""
    hrefs = bisection_href(rd)
    points = []
    chart_points = []
    for p in rd.points:
        present = rd.present(p)
        css = "skip" if present is None else ("bad" if present else "good")
        word = _word(rd, p.verdict)
        versions = [(clean(k, 20), clean(v, 80)) for k, v in sorted(p.versions.items())]
        href = f"../b/{hrefs[p.session]}.html" if p.session in hrefs else ""
        thr = threshold_text(p.threshold)
        title = "\n".join(x for x in [
            clean(p.label, 120), f"{_date(p)} ({p.dated_by})", clean(p.ref, 80),
            ", ".join(f"{k} {v}" for k, v in versions), f"{word}: {thr}", clean(p.reason, 200)] if x)
        points.append({"ref": clean(p.ref, 100), "short": clean(short_ref(p.ref), 40), "label": clean(p.label, 120),
                       "date": _date(p), "dated_by": p.dated_by, "versions": versions, "verdict": p.verdict, "css": css,
                       "word": word, "threshold_text": thr, "runs": p.runs, "session": p.session, "href": href})
        chart_points.append({"when": p.when, "lo": p.threshold[0] if p.threshold else None,
                             "hi": p.threshold[1] if p.threshold else None, "verdict": p.verdict, "css": css,
                             "ref": clean(p.ref, 100), "title": title, "href": href})
    bands, seen = [], set()
    for b in rd.bisections:
        st = b.first
        if st.status not in ("culprit", "range") or not (b.lg_when and b.fb_when and st.last_good and st.first_bad):
            continue
        culprit = b.culprit_text()
        k = (st.last_good[0], st.first_bad[0], culprit)
        if k in seen:
            continue
        seen.add(k)
        bands.append({"start": b.lg_when, "end": b.fb_when, "href": f"../b/{b.key}.html",
                      "label": ellipsis(clean(culprit or b.status, 200), 32),
                      "title": clean(f"bisection ({b.status}): {_range_text(b)}; culprit {culprit or '—'}", 400)})
    kind_words = ("regression: red = problem present (bad), green = good" if rd.kind != "fix" else
                  "fix bisection: red = still broken, green = fixed")
    bis = [bisection_summary(b) for b in rd.bisections]
    newest = rd.points[-1] if rd.points else None
    last = None
    if newest is not None:
        last = {"verdict": newest.verdict, "css": verdict_css(rd.kind, newest.verdict), "word": _word(rd, newest.verdict), "label": clean(newest.label, 120),
                "date": _date(newest), "threshold_text": threshold_text(newest.threshold)}
    flips = rd.history(newest.when - FLIP_WINDOW).streak().flips if newest else 0
    open_b = next((b for b in reversed(rd.bisections) if b.issue and b.issue["state"] == "open"), None)
    cols = _collapse(rd) if len(rd.patch_columns) > MAX_PATCH_COLUMNS else rd.patch_columns
    patches = {"ids": [clean(i, 100) for i in rd.patch_ids],
               "columns": [{"ref": clean(c.ref, 100), "label": clean(c.label, 140)} for c in cols],
               "rows": [{"id": clean(pid, 100), "since": clean(upstream_since(rd, pid) or "", 60),
                         "cells": [({"state": re.sub(r"[^a-z-]", "", c.cells[pid]["state"]),
                                     "label": clean(c.cells[pid]["label"], 80),
                                     "detail": clean(c.cells[pid]["detail"], 300)} if pid in c.cells else None)
                                   for c in cols]} for pid in rd.patch_ids]}
    return {"name": clean(rd.name, 120), "slug": slug(rd.name), "kind": rd.kind, "regress": clean(rd.regress, 120),
            "threshold_below": rd.threshold_below, "streak_text": _streak_text(rd), "flips30": flips,
            "last": last, "points": points, "bisections": bis, "n_bisections": len(bis),
            "chart": build_chart(chart_points, bands, rd.threshold_below, rd.max_size), "kind_words": kind_words,
            "open_issue": _issue(open_b.issue) if open_b else None,
            "open_culprit": clean(open_b.culprit_text(), 200) if open_b else "", "patches": patches,
            "tries": _tries(rd)}


def _tries(rd: RecipeData) -> list[dict[str, Any]]:
    """The recipe's try jobs (issue 42; ledger sessions of stage ``try``), newest answer first: when answered, the
    candidate, the change, the answer and both thresholds; ``id`` is the anchor ``#try-<session>``."""
    out = []
    for s in sorted((s for s in rd.sessions if s.stage == "try"), key=lambda s: s.updated, reverse=True):
        st = s.row.get("state") or {}
        cand, change = st.get("candidate") or {}, st.get("change") or {}
        before, after = st.get("before") or {}, st.get("after") or {}
        out.append({"id": clean(s.id, 40), "created": clean(s.updated[:19].replace("T", " "), 30),
                    "answer": re.sub(r"[^a-z ]", "", str(s.status))[:20],
                    "candidate": clean(cand.get("label") or cand.get("ref") or s.good, 120),
                    "change": clean(change.get("source") or "", 200),
                    "sha": clean(str(change.get("sha256") or "")[:16], 20),
                    "before": threshold_text(tuple(before["threshold"]) if isinstance(before.get("threshold"), list)
                                             else None),
                    "after": "not measured" if after.get("verdict") == "skip" else
                    threshold_text(tuple(after["threshold"]) if isinstance(after.get("threshold"), list) else None),
                    "words": clean(st.get("words") or "", 500)})
    return out


MAX_PATCH_COLUMNS = 12
"""Candidates shown one column each in the patch-stack table; beyond that, runs of candidates on
which every patch is in the same state share one column (a year of nightlies is a few columns)."""


def _collapse(rd: RecipeData) -> list[PatchColumn]:
    """Consecutive columns with equal patch states (state and label of every patch) merged into
    one, labelled ``first … last (n)``."""
    out: list[PatchColumn] = []
    run: list[PatchColumn] = []

    def sig(c: PatchColumn) -> tuple:
        return tuple((pid, c.cells.get(pid, {}).get("state"), c.cells.get(pid, {}).get("label")) for pid in rd.patch_ids)

    def flush() -> None:
        if run:
            label = run[0].label if len(run) == 1 else f"{run[0].label} … {run[-1].label} ({len(run)})"
            out.append(PatchColumn(run[0].ref, label, run[-1].cells))
            run.clear()

    for c in rd.patch_columns:
        if run and sig(run[-1]) != sig(c):
            flush()
        run.append(c)
    flush()
    return out


def ellipsis(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters with a trailing ``…`` (labels inside the chart)."""
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def _issue(issue: dict[str, Any] | None) -> dict[str, Any] | None:
    if not issue:
        return None
    url = safe_url(issue.get("url"))
    return {"url": url or "", "repo": clean(issue["repo"], 100), "number": int(issue["number"]),
            "state": clean(issue.get("state"), 20)} if url else None


def bisection_summary(b: Bisection) -> dict[str, Any]:
    return {"key": b.key, "created": clean(b.created, 40), "status": clean(b.status, 30), "range_text": _range_text(b),
            "culprit": clean(b.culprit_text(), 200), "issue": _issue(b.issue), "job_url": safe_url(b.job_url) or ""}


def _evidence(table: list[Any]) -> list[dict[str, Any]]:
    """A probe's size table (prompt tokens, outcome, reply excerpt, classifier reasons), cleaned."""
    return [{"requested": clean(r.get("requested"), 12), "prompt_tokens": clean(r.get("prompt_tokens"), 12),
             "outcome": clean(r.get("outcome"), 20), "excerpt": clean(r.get("excerpt"), 400),
             "reasons": [clean(x, 300) for x in (r.get("reasons") or [])[:8]]}
            for r in table[:40] if isinstance(r, dict)]


def _probe_row(b: Bisection, p: ProbeRow) -> dict[str, Any]:
    ev: list[dict[str, Any]] = []
    patches = []
    if p.stored is not None:
        ev = _evidence(p.stored.table)
        patches = [clean(f"{x.get('id')}: {x.get('label') or x.get('state')}", 200) for x in p.stored.patches
                   if isinstance(x, dict)]
    return {"index": p.index, "label": clean(p.label, 160), "ref": clean(p.ref, 100), "short": clean(short_ref(p.ref), 40),
            "phase": clean(p.phase, 20), "origin": clean(p.origin, 20), "verdict": p.verdict if p.verdict in
            ("good", "bad", "skip") else "skip", "css": verdict_css(b.kind, p.verdict), "word": _word(b, p.verdict), "threshold_text": threshold_text(p.threshold),
            "reason": clean(p.reason, 600), "duration": f"{p.duration_s:.1f}", "evidence": ev, "patches": patches,
            "measure": clean(p.stored.measure, 80) if p.stored is not None else ""}


def _stage(b: Bisection, st: StageView) -> dict[str, Any]:
    w = ends_words(b.kind, b.regress)
    ends = []
    if st.last_good:
        ends.append(f"{w['Last']}: {st.last_good[1] or st.last_good[0]} ({short_ref(st.last_good[0])})")
    if st.first_bad:
        ends.append(f"{w['First']}: {st.first_bad[1] or st.first_bad[0]} ({short_ref(st.first_bad[0])})")
    if st.session is not None:
        probes = [_probe_row(b, p) for p in st.session.probes]
    else:
        probes = [_probe_row(b, ProbeRow(i, p.candidate.ref, p.candidate.label, 1, p.verdict.value, p.verdict.value,
                                         p.reason, p.signature, p.threshold, p.duration_s, "report", "", "",
                                         None)) for i, p in enumerate(st.report_probes)]
        for row, p in zip(probes, st.report_probes):  # the report carries the evidence itself
            row["evidence"] = _evidence(p.table)
            row["measure"] = clean(measure_text(p), 80) if "measure" in p.extra else ""
    names = ", ".join((lbl or ref) for ref, lbl in st.culprits[:3])
    return {"name": clean(st.name, 80), "component": clean(st.component, 60), "status": clean(st.status, 30),
            "culprit": clean(names, 200) if st.status in ("culprit", "range") else "",
            "confidence": f"{st.confidence:.1%}" if st.confidence else "", "message": clean(st.message, 400),
            "ends_text": clean(" · ".join(ends), 500), "session": st.session.id if st.session else "",
            "log": block(st.session.log) if st.session else "", "probes": probes,
            # issue 39: a measured value's column (median, interquartile range, samples) instead of the threshold
            "value_head": "measured: median (IQR), n" if any(p["measure"] for p in probes) else "threshold"}


def bisection_context(b: Bisection, recipe_slug: str) -> dict[str, Any]:
    """The bisection page's context: summary, chain of stages, per stage its probes and log."""
    return {**bisection_summary(b), "recipe": clean(b.recipe, 120), "recipe_slug": recipe_slug, "kind": b.kind,
            "regress": clean(b.regress, 120), "from_report": b.from_report,
            "stages": [_stage(b, st) for st in b.stages]}


__all__ = ["bisection_context", "recipe_context", "short_ref", "slug", "threshold_text"]
