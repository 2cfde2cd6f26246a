"""Where a probe's verdict came from: measured in this run, or taken from the ledger's probe cache
(issue 23: a verdict claims only what was tested, and when).

A result the :class:`bisectbot.session.probing.prober.Prober` answers from the ledger carries
``extra["cached"] = {"measured_at": ISO, "session": ID}``: when its probe finished (the ledger row's
time, UTC ISO 8601) and the session that measured it (``""`` for rows stored before sessions were
recorded). A fresh result carries ``extra["session"]``, the session that measured it, before it is
stored, so a later run's cache hit can name that session.

Pure functions on :class:`~bisectbot.models.ProbeResult`; the report, the progress lines and the
run's notes all word it through :func:`measured_text`.
"""

from __future__ import annotations

from typing import Any

from .models import ProbeResult

CACHED_KEY = "cached"
"""``ProbeResult.extra`` key of a verdict taken from the ledger cache."""
SESSION_KEY = "session"
"""``ProbeResult.extra`` key: the session that measured the result."""
HOST_KEY = "host"
"""``ProbeResult.extra`` key: the host facts recorded with a fresh probe (:func:`host_facts`, issue 35)."""


def host_facts(runner_profile: str, versions: dict[str, str] | None = None) -> dict[str, Any]:
    """What the ledger records about the host with each probe (issue 35, item 3): bisectbot's version,
    the runner profile, this host's name, Python and kernel, and the server environment's package
    versions where the probe knows them (``versions``). A contradiction between a cached and a fresh
    verdict names the facts that differ."""
    import platform

    from . import __version__

    facts: dict[str, Any] = {"bisectbot": __version__, "runner": runner_profile, "host": platform.node(),
                             "python": platform.python_version(), "kernel": platform.release()}
    if versions:
        facts["packages"] = dict(versions)
    return facts


def facts_diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """``key: A -> B`` for each host fact that differs between two probes' :func:`host_facts` (values shown
    at most 80 characters; a ledger row's facts of any other shape compared as they are, never a crash)."""
    out = []
    a = a if isinstance(a, dict) else {}
    b = b if isinstance(b, dict) else {}
    for k in sorted(set(map(str, a)) | set(map(str, b))):
        pa, pb = a.get(k), b.get(k)
        if k == "packages" and isinstance(pa or {}, dict) and isinstance(pb or {}, dict):
            pa, pb = pa or {}, pb or {}
            out += [f"{n}: {str(pa.get(n, '-'))[:80]} -> {str(pb.get(n, '-'))[:80]}"
                    for n in sorted(set(map(str, pa)) | set(map(str, pb))) if pa.get(n) != pb.get(n)]
        elif pa != pb:  # any other value (a row's odd type included) compared as it is, shown short
            out.append(f"{k}: {str(pa if k in a else '-')[:80]} -> {str(pb if k in b else '-')[:80]}")
    return out


def mark_cached(res: ProbeResult, stored_at: str) -> ProbeResult:
    """Mark ``res`` (read from the ledger, stored at ``stored_at``, UTC ISO) as a cache hit, in place;
    returned. The measuring session is the result's own (``extra["session"]``, or the round session
    that imported it)."""
    session = str(res.extra.get(SESSION_KEY) or res.extra.get("round_session") or "")
    res.extra[CACHED_KEY] = {"measured_at": stored_at, "session": session}
    return res


def cached_from(res: ProbeResult | dict[str, Any]) -> dict[str, str] | None:
    """``{"measured_at", "session"}`` of a cache hit (a result or its ``to_dict()``), None when the
    verdict was measured in the run that holds it."""
    extra = res.get("extra") if isinstance(res, dict) else res.extra
    mark = extra.get(CACHED_KEY) if isinstance(extra, dict) else None
    if not isinstance(mark, dict):
        return None
    return {"measured_at": str(mark.get("measured_at") or ""), "session": str(mark.get("session") or "")}


def when_text(iso: str) -> str:
    """``2026-12-02T05:04:57+00:00`` as ``2026-12-02 05:04:57 UTC`` (the ledger stores UTC); other text as is."""
    if len(iso) >= 19 and iso[10] == "T" and iso[19:] in ("", "+00:00", "Z"):
        return f"{iso[:10]} {iso[11:19]} UTC"
    return iso or "an unknown time"


def measured_text(res: ProbeResult | dict[str, Any], current_session: str = "") -> str:
    """``this run``, or ``ledger cache: measured 2026-12-02 05:04:57 UTC in session 84601e0d964f``
    (``by an earlier run of this session`` when that session is ``current_session``: a resumed run)."""
    mark = cached_from(res)
    if mark is None:
        return "this run"
    who = mark["session"]
    by = ("" if not who else " by an earlier run of this session" if who == current_session
          else f" in session {who}")
    return f"ledger cache: measured {when_text(mark['measured_at'])}{by}"


__all__ = ["CACHED_KEY", "SESSION_KEY", "cached_from", "mark_cached", "measured_text", "when_text"]
