"""Verdict rules per regress mode: a probe's measurement -> :class:`Judgement` (verdict,
one-line reason, failure signature).

:func:`judge_threshold` (a threshold search), :func:`judge_command` (``git bisect run``'s
exit-code contract), :func:`judge_patches` with the rules registered by
:func:`register_patch_rule` (``patch-upstream``, ``patch-conflict``), and :func:`judge_drift`
(the second search when the threshold moved inside the bad range, :class:`Drift`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..bisect.drift import Drift
from ..bisect.signatures import Signature
from ..models import Verdict, regress_mode


@dataclass
class Judgement:
    """A verdict with its reason (one line) and failure signature: what the failure looked
    like, on a bad verdict, or on a good one of a fix bisection ("still broken"); else None."""

    verdict: Verdict
    reason: str
    signature: Signature | None = None


def judge_threshold(regress: Any, status: str, last_ok: int | None = None, first_garbage: int | None = None,
                    reasons: Sequence[str] = (), error: str | None = None) -> Judgement:
    """Verdict of a threshold search (``bisectbot.reproduce.search.ThresholdResult``).

    ``regress`` is a :class:`bisectbot.recipe.Regress` or its string form. ``status`` is
    ``ok`` | ``garbage`` | ``all-garbage`` | ``error`` | ``non-monotone``; sizes in tokens.

    * ``garbage``: any garbage -> bad; ok -> good; error -> skip (a server error is never garbage).
    * ``threshold-below: N``: garbage at a size <= N tokens -> bad; garbage only above N, or none -> good.
    * ``error``: request errors -> bad; ok or garbage -> good.
    * ``success`` (fix bisection, predicate inverted): ok -> bad (the "fixed" state); garbage -> good
      ("still broken", with the failure's signature: the search's guard makes a "still
      broken" that looks unlike the good end's a skip).
    Raises ``ValueError`` for ``command`` and patch modes (they have their own judges).
    """
    mode, arg = regress_mode(regress)
    why = ", ".join(reasons)
    thr_txt = (f"last ok {last_ok if last_ok is not None else '-'}, "
               f"first garbage {first_garbage if first_garbage is not None else '-'} tokens")
    garbage = status in ("garbage", "all-garbage", "non-monotone")
    if mode == "error":
        if status == "error":
            return Judgement(Verdict.BAD, f"requests failed: {error or 'error'}",
                             Signature("error", first_garbage))
        return Judgement(Verdict.GOOD, f"no request error (threshold search: {status})")
    if status == "error":
        return Judgement(Verdict.SKIP, f"server error, not a verdict: {error or 'error'}")
    if status == "inconclusive":
        return Judgement(Verdict.SKIP, f"threshold search inconclusive: {error or 'no size could be decided'}")
    if status not in ("ok", "garbage", "all-garbage", "non-monotone"):
        return Judgement(Verdict.SKIP, f"unknown threshold status {status!r}")
    kind = "all-garbage" if status == "all-garbage" else "garbage"
    if mode == "garbage":
        if garbage:
            return Judgement(Verdict.BAD, f"garbage ({thr_txt}){': ' + why if why else ''}",
                             Signature(kind, first_garbage, why))
        return Judgement(Verdict.GOOD, f"no garbage up to {last_ok} tokens")
    if mode == "threshold-below":
        n = int(arg)
        if garbage and (first_garbage is None or first_garbage <= n):
            return Judgement(Verdict.BAD, f"threshold below {n} ({thr_txt})", Signature(kind, first_garbage, why))
        if garbage:
            return Judgement(Verdict.GOOD, f"garbage only above {n} tokens ({thr_txt})")
        return Judgement(Verdict.GOOD, f"no garbage up to {last_ok} tokens")
    if mode == "success":
        if garbage:
            return Judgement(Verdict.GOOD, f"still broken ({thr_txt}){': ' + why if why else ''}",
                             Signature(kind, first_garbage, why))
        return Judgement(Verdict.BAD, f"fixed: no garbage up to {last_ok} tokens", Signature("fixed"))
    raise ValueError(f"regress mode {mode!r} is not judged from a threshold search")


def judge_command(returncode: int | None, timed_out: bool = False, *, invert: bool = False) -> Judgement:
    """Verdict of a command reproducer, as ``git bisect run``: 0 good, 125 skip, 1..127 bad.

    A timeout is ``skip`` (the candidate hung). Exit 126/127 (the command cannot run: not
    executable, not found) is ``skip`` with the signature ``unrunnable``: the stage checks
    the command on the good end, as ``git bisect run`` does since git 2.36, and stops when it
    cannot run there either. A signal (negative code) or a code >= 128 raises
    :class:`bisectbot.errors.BisectbotError`: the bisection must stop, as git's does.
    ``invert`` swaps good and bad (fix bisection); the "still broken" good verdict then
    carries the exit code as its signature.
    """
    from ..errors import BisectbotError

    if timed_out or returncode is None:
        return Judgement(Verdict.SKIP, "command timed out")
    if returncode == 125:
        return Judgement(Verdict.SKIP, "command exit 125 (skip)")
    if returncode < 0 or returncode >= 128:
        raise BisectbotError(
            f"command exit {returncode} (>= 128 or a signal) aborts the bisection, as in git bisect run; "
            "exit 1..127 for bad, 125 for skip, or set reproducer.command_crash: skip")
    if returncode in (126, 127):
        what = "not executable" if returncode == 126 else "not found"
        return Judgement(Verdict.SKIP, f"command cannot run (exit {returncode}: {what})",
                         Signature(UNRUNNABLE, None, str(returncode)))
    failed = returncode != 0
    sig = Signature("exit", None, str(returncode)) if failed else None
    if failed != invert:
        return Judgement(Verdict.BAD, f"command exit {returncode}", sig)
    return Judgement(Verdict.GOOD, f"command exit {returncode}" + (" (still broken)" if failed else ""), sig)


#: Signature kind of a command that could not be started (exit 126/127).
UNRUNNABLE = "unrunnable"


PatchRule = Callable[[Any, Sequence[dict[str, Any]]], Judgement]
_PATCH_RULES: dict[str, PatchRule] = {}


def register_patch_rule(mode: str) -> Callable[[PatchRule], PatchRule]:
    """Decorator: register the judge of a patch regress mode (``patch-upstream``, ``patch-conflict``).

    The judge gets the recipe's regress and the per-patch states of the candidate
    (``Prepared.patches``: dicts with ``id`` and ``state``) and returns a :class:`Judgement`.
    """
    def deco(fn: PatchRule) -> PatchRule:
        _PATCH_RULES[mode] = fn
        return fn
    return deco


def judge_patches(regress: Any, states: Sequence[dict[str, Any]]) -> Judgement:
    """Verdict of a patch regress mode from patch check states (no server is started).

    Raises :class:`bisectbot.errors.BadInput` when no rule is registered for the mode.
    """
    from ..errors import BadInput

    mode, _ = regress_mode(regress)
    rule = _PATCH_RULES.get(mode)
    if rule is None:
        raise BadInput(f"regress mode '{mode}' is not supported by this bisectbot yet (patch modes: issue 8)")
    return rule(regress, states)


def judge_drift(drift: Drift, status: str, first_garbage: int | None) -> Judgement:
    """Verdict of the drift search (issue 12): **bad** = the threshold already moved.

    Candidates are those from the first bad up to the bad end; ``status``/``first_garbage``
    (tokens) are their threshold measurements. When the threshold was lowered, garbage at
    or below :attr:`Drift.split` is bad and garbage only above it good; when it rose, the
    reverse. No garbage up to the largest size (``ok``) reads as a threshold above it (on
    these known-bad candidates it is a miss of a flaky bug: noise like any other); a
    server error or an undecided search is ``skip``.
    """
    if status == "ok":
        below = False
    elif status in ("garbage", "all-garbage", "non-monotone"):
        below = (first_garbage if first_garbage is not None else 0) <= drift.split
    else:
        return Judgement(Verdict.SKIP, f"no threshold measured ({status}): not a drift verdict")
    moved = below if drift.lowered else not below
    txt = f"first garbage {first_garbage if first_garbage is not None else '-'} tokens vs cut {drift.split}"
    return Judgement(Verdict.BAD if moved else Verdict.GOOD,
                     ("threshold moved: " if moved else "threshold not moved yet: ") + txt)


# --------------------------------------------------------------------------- patch regress modes (issue 8)


def _patch_state(regress: Any, states: Sequence[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    from ..errors import BadInput

    mode, pid = regress_mode(regress)
    pid = str(pid or "")
    for s in states:
        if s.get("id") == pid:
            return pid, s
    have = ", ".join(str(s.get("id")) for s in states) or "none"
    raise BadInput(f"regress '{mode}: {pid}': the candidate's patch check has no patch {pid!r} "
                   f"(checked: {have}); list it in the recipe's patches")


def _patch_reason(pid: str, s: dict[str, Any]) -> str:
    label = s.get("label") or str(s.get("state"))
    detail = s.get("detail") or ""
    return f"{pid}: {label}" + (f" ({detail})" if detail and detail not in label else "")


@register_patch_rule("patch-upstream")
def judge_patch_upstream(regress: Any, states: Sequence[dict[str, Any]]) -> Judgement:
    """``patch-upstream: <id>``: the first candidate where the patch is no longer needed.

    ``states`` are :meth:`bisectbot.patches.PatchStatus.to_dict` dicts (``id``, ``state``,
    ``label``, ``detail``). Rule, by the state of patch ``<id>``:

    * ``already-upstream`` -> **bad** (the fix ships: the patch can be retired),
      signature ``patch (already-upstream)``;
    * ``applies`` / ``applies-with-offset`` / ``applies-with-fuzz`` -> **good** (still needed);
    * ``conflict`` -> **skip**: the code changed so that neither the patch nor its
      upstream form is recognised; whether the fix ships cannot be told from it;
    * ``not-applicable`` (file absent, condition false, a required patch missing) -> **skip**.

    Raises :class:`bisectbot.errors.BadInput` when ``<id>`` is not among ``states``.
    """
    pid, s = _patch_state(regress, states)
    state, why = s.get("state"), _patch_reason(pid, s)
    if state == "already-upstream":
        return Judgement(Verdict.BAD, why, Signature("patch", None, "already-upstream"))
    if state in ("applies", "applies-with-offset", "applies-with-fuzz"):
        return Judgement(Verdict.GOOD, why + ": still needed")
    return Judgement(Verdict.SKIP, why + ": cannot tell whether the fix is upstream")


@register_patch_rule("patch-conflict")
def judge_patch_conflict(regress: Any, states: Sequence[dict[str, Any]]) -> Judgement:
    """``patch-conflict: <id>``: the first candidate where the patch stops applying.

    The question is "from which release on does the stack need maintenance (a new
    variant)". By the state of patch ``<id>``:

    * ``conflict`` -> **bad**, signature ``patch (conflict)``;
    * ``applies`` (any offset or fuzz) -> **good**;
    * ``already-upstream`` -> **good**: the stack still applies as a whole there (as
      :attr:`bisectbot.patches.PatchStatus.ok` says: only a conflict breaks it), nothing
      needs fixing; use ``patch-upstream`` to find when the patch became unnecessary;
    * ``not-applicable`` (file absent, condition false, a required patch missing) -> **skip**.

    Raises :class:`bisectbot.errors.BadInput` when ``<id>`` is not among ``states``.
    """
    pid, s = _patch_state(regress, states)
    state, why = s.get("state"), _patch_reason(pid, s)
    if state == "conflict":
        return Judgement(Verdict.BAD, why, Signature("patch", None, "conflict"))
    if state in ("applies", "applies-with-offset", "applies-with-fuzz"):
        return Judgement(Verdict.GOOD, why)
    if state == "already-upstream":
        return Judgement(Verdict.GOOD, why + ": the stack still applies")
    return Judgement(Verdict.SKIP, why + ": cannot tell whether it would apply")
