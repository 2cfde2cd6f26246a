"""A verdict against its own record (issue 35, input 6), and what "verified" means.

A cached probe row holds a verdict and the evidence it was decided from (a command's exit code
and runs, a threshold search's status, threshold and per-prompt table, patch states). The
cache is evidence only where the two agree: :func:`contradiction` decides the verdict again
from the recorded evidence by the same rules (:mod:`bisectbot.verdict.rules`) and names the
disagreement. A row whose verdict was rewritten (a process with the candidates' uid set it to
"good" while its recorded exit stayed 1), or one that cannot be decoded, is no evidence: the
prober drops it and probes again.

:func:`verification` defines "verified" once: of the first bad and the last good, which
verdicts were measured in this run and which were taken from the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import BisectbotError
from ..models import ProbeResult, Verdict, is_patch_mode
from ..provenance import cached_from
from ..recipe import Recipe
from .judge import threshold_regress
from .rules import judge_command, judge_patches, judge_threshold

#: ``ProbeResult.extra`` key of a verdict taken as given, never measured: its source, in words.
GIVEN_KEY = "given"

#: Threshold statuses that mean a GARBAGE size was found.
_GARBAGE_STATUSES = ("garbage", "all-garbage", "non-monotone")


def _sizeless_fix(recipe: Recipe) -> bool:
    r = recipe.reproducer
    return (recipe.regress.mode == "success" and r.kind == "command"
            and not any("{size}" in a for a in (r.command or [])))


def contradiction(recipe: Recipe, res: ProbeResult) -> str | None:
    """Why ``res``'s verdict contradicts its own recorded evidence, decided again by the rules of
    :mod:`bisectbot.verdict`; None when they agree or the row records nothing to decide from (a
    failed build, a server that never started)."""
    extra = res.extra if isinstance(res.extra, dict) else {}
    said = res.verdict
    if is_patch_mode(recipe.regress):
        if not res.patches:
            return None
        try:
            j = judge_patches(recipe.regress, res.patches)
        except BisectbotError:
            return None
        return None if j.verdict is said else f"its recorded patch states read {j.verdict.value}"
    if "returncode" in extra and (recipe.regress.mode == "command" or _sizeless_fix(recipe)):
        fix = _sizeless_fix(recipe)
        rc = extra.get("returncode")
        hits = extra.get("hits")
        shows = Verdict.GOOD if fix else Verdict.BAD
        if isinstance(hits, int) and hits > 0 and said is not shows and said is not Verdict.SKIP:
            return f"{hits} of its recorded runs showed the bug"
        if rc is None or not isinstance(rc, int):
            return None if said is Verdict.SKIP else "no exit code recorded (a timeout) but not a skip"
        try:
            j = judge_command(rc, invert=fix)
        except BisectbotError:
            return None  # a crash, judged by reproducer.command_crash
        if j.verdict is not said:
            return f"its recorded command exit {rc} reads {j.verdict.value}"
        return None
    status = extra.get("status")
    if isinstance(status, str) and recipe.regress.mode not in ("command",):
        garbage = [t for t in res.table or [] if isinstance(t, dict) and t.get("outcome") == "GARBAGE"]
        if garbage and status not in _GARBAGE_STATUSES:
            t = garbage[0]
            return (f"its recorded table has GARBAGE at {t.get('prompt_tokens') or t.get('requested')} tokens "
                    f"but its status is {status!r}")
        thr = res.threshold or (None, None)
        try:
            j = judge_threshold(threshold_regress(recipe), status, thr[0], thr[1])
        except (ValueError, TypeError):
            return None
        if j.verdict is not said:
            return f"its recorded threshold search ({status}) reads {j.verdict.value}"
    return None


@dataclass(frozen=True)
class Verification:
    """Which of the verdicts an answer rests on were measured in this run (``measured``: roles
    such as ``culprit``/``predecessor``) and which were taken from the ledger (``cached``: role ->
    ``{"measured_at", "session"}``)."""

    measured: tuple[str, ...]
    cached: dict[str, dict[str, str]]
    #: role -> where a verdict nobody measured came from (``the replay log``, ``a maintainer's verdict``)
    given: dict[str, str] = field(default_factory=dict)

    @property
    def all_measured(self) -> bool:
        """True when every verdict was re-measured in this run: only then is the answer "verified"
        by this run."""
        return not self.cached and not self.given


def verification(roles: dict[str, ProbeResult | None]) -> Verification:
    """"Verified", defined once: for each role (``culprit`` -> the first bad's last probe,
    ``predecessor`` -> the last good's), whether that verdict was measured in this run or taken
    from the ledger cache (:func:`bisectbot.provenance.cached_from`), or given without a measurement
    (a replay log's line, a maintainer's verdict: ``extra[GIVEN_KEY]``). A role without a probe counts
    as none of them."""
    measured: list[str] = []
    cached: dict[str, dict[str, str]] = {}
    given: dict[str, str] = {}
    for role, res in roles.items():
        if res is None:
            continue
        extra = res.extra if isinstance(res.extra, dict) else {}
        mark = cached_from(res)
        if extra.get(GIVEN_KEY):
            given[role] = str(extra[GIVEN_KEY])
        elif mark is None:
            measured.append(role)
        else:
            cached[role] = mark
    return Verification(tuple(measured), cached, given)


def measured_now(res: ProbeResult) -> bool:
    """True when ``res`` was measured in this run: neither a ledger cache hit nor a verdict given
    without a measurement (:func:`verification`'s ``measured``)."""
    extra = res.extra if isinstance(res.extra, dict) else {}
    return not extra.get(GIVEN_KEY) and cached_from(res) is None


def decoded(row: Any) -> ProbeResult | None:
    """``row`` (a stored probe's dict) as a :class:`ProbeResult`, or None when it cannot be decoded."""
    try:
        return ProbeResult.from_dict(row)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


__all__ = ["GIVEN_KEY", "Verification", "contradiction", "decoded", "measured_now", "verification"]
