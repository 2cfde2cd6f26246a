"""The try job's answer as Markdown (``try.md``, the reply to ``/bisectbot test``, issue 42).

Input: the ``try.json`` document (:meth:`bisectbot.session.trial.TryOutcome.to_dict`). Model output
never appears here (the table shows outcomes and sizes); every value that came from outside -- the
change's source, labels, reasons -- goes through :func:`bisectbot.sanitize.sanitize`.
"""

from __future__ import annotations

from typing import Any

from ..sanitize import sanitize

__all__ = ["render_try"]

_ICON = {"fixed": "fixed", "partly": "partly fixed", "still broken": "still broken", "untested": "not tested"}


def _cell(x: Any, n: int = 120) -> str:
    return sanitize(str(x if x is not None else "-"), n).replace("|", "\\|").replace("\n", " ")


def _threshold(th: Any, verdict: Any = None) -> str:
    if verdict == "skip":
        return "not measured (skip)"
    if not isinstance(th, list) or len(th) != 2 or th[1] is None:
        return "no GARBAGE at any size asked"
    lo, hi = th
    return f"GARBAGE from {hi:,} prompt tokens" + (f" (OK at {lo:,})" if isinstance(lo, int) else "")


def render_try(doc: dict[str, Any], *, probe_link: str = "") -> str:
    """``try.md``: the answer, both thresholds, the per-prompt evidence, both probes' reasons and what
    was tried where (candidate, change source and SHA-256, files, the ledger session). ``probe_link``:
    the dashboard's page of the try session, when the recipe publishes one."""
    cand, change = doc.get("candidate") or {}, doc.get("change") or {}
    before, after = doc.get("before") or {}, doc.get("after") or {}
    answer = str(doc.get("answer") or "untested")
    lines = [f"### Try job: **{_ICON.get(answer, answer)}**", "",
             sanitize(str(doc.get("words") or ""), 1500), "",
             f"- tried on: `{_cell(cand.get('label') or cand.get('ref'), 100)}` ({_cell(doc.get('on_from'), 100)})",
             f"- change: {_cell(change.get('source'), 200)} (SHA-256 `{_cell(str(change.get('sha256'))[:16])}`), "
             f"{len(change.get('files') or [])} file(s): "
             + ", ".join(f"`{_cell(f, 100)}`" for f in (change.get("files") or [])[:10]),
             f"- without the change: {_threshold(before.get('threshold'), before.get('verdict'))}; with it: "
             f"{_threshold(after.get('threshold'), after.get('verdict'))}",
             f"- ledger session `{_cell(doc.get('session'), 40)}` (`bisectbot bisect log {_cell(doc.get('session'), 40)}`)"
             + (f"; [the probes on the dashboard]({probe_link})" if probe_link else ""), ""]
    rows = doc.get("prompts") or []
    if rows:
        lines += ["| prompt | requested tokens | measured tokens | without the change | with the change |",
                  "|---|---:|---:|---|---|"]
        for r in rows:
            lines.append(f"| {_cell(r.get('prompt'), 80)} | {_cell(r.get('requested'))} | {_cell(r.get('measured'))} | "
                         f"{_cell(r.get('before'))} | {_cell(r.get('after'))} |")
        lines.append("")
    for name, p in (("without the change", before), ("with the change", after)):
        mark = p.get("cached_from") if isinstance(p.get("cached_from"), dict) else None
        cached = (f" (from the ledger: measured {_cell(mark.get('measured_at'), 40)} in session "
                  f"{_cell(mark.get('session'), 20)})" if mark else "")
        lines.append(f"- probe {name}: **{_cell(p.get('verdict'))}**{cached}: {_cell(p.get('reason'), 600)}")
    lines.append("")
    lines.append("Both probes ran the same reproducer with cold prefills; the probe with the change asked the "
                 "prompts on which the candidate failed without it first, and the two are compared on the same "
                 "prompts only.")
    return "\n".join(lines) + "\n"
