"""What a reader calls the two ends of a search and its verdicts (no heavy imports).

A regression bisection speaks of ``good`` / ``bad``, ``last good`` / ``first bad`` and a culprit.
A fix bisection (``regress: success``) inverts the predicate: its "bad" candidates are the fixed
ones, so a reader sees ``fixed`` / ``still broken`` and ``last broken`` / ``first fixed`` (issue 14,
newuser defect 6). The patch modes answer a question about the patch stack, not a regression:
``patch-upstream: <id>`` finds the first release that ships the patch upstream (``needed`` /
``upstream``, ``last needed`` / ``upstream since``), ``patch-conflict: <id>`` the first release the
patch no longer applies to (``applies`` / ``conflicts``, ``last applies`` / ``first conflicting``);
neither blames anyone (newuser defect 5).
"""

from __future__ import annotations

from typing import Any

PATCH_MODES = ("patch-upstream", "patch-conflict")


def patch_mode(regress: Any) -> tuple[str, str] | None:
    """``(mode, patch id)`` of a patch regress mode (``"patch-upstream: <id>"`` or a
    :class:`bisectbot.recipe.Regress`), None for every other mode."""
    if isinstance(regress, str):
        mode, _, arg = regress.partition(":")
    else:
        mode, arg = str(getattr(regress, "mode", "") or ""), str(getattr(regress, "arg", "") or "")
    mode = mode.strip()
    return (mode, arg.strip()) if mode in PATCH_MODES else None


def ends_words(kind: str, regress: Any = "") -> dict[str, str]:
    """What the two ends of a search are called: ``last good`` / ``first bad`` for a regression,
    ``last broken`` / ``first fixed`` for a fix bisection (never "first good" beside "first bad"),
    ``last needed`` / ``upstream since`` and ``last applies`` / ``first conflicting`` for the patch
    modes. Keys ``last``, ``first``, ``Last``, ``First``."""
    pm = patch_mode(regress)
    if pm is not None:
        last, first = ("last needed", "upstream since") if pm[0] == "patch-upstream" else \
            ("last applies", "first conflicting")
    elif kind == "fix":
        last, first = "last broken", "first fixed"
    else:
        last, first = "last good", "first bad"
    return {"last": last, "first": first, "Last": last[:1].upper() + last[1:], "First": first[:1].upper() + first[1:]}


def verdict_word(verdict: str, kind: str, regress: Any = "") -> str:
    """A probe verdict (``good`` / ``bad`` / ``skip``) in the reader's words: ``still broken`` /
    ``fixed`` in a fix bisection, ``needed`` / ``upstream`` or ``applies`` / ``conflicts`` in the
    patch modes; ``skip`` and regression verdicts unchanged."""
    pm = patch_mode(regress)
    if pm is not None:
        words = {"good": "needed", "bad": "upstream"} if pm[0] == "patch-upstream" else \
            {"good": "applies", "bad": "conflicts"}
    elif kind == "fix":
        words = {"good": "still broken", "bad": "fixed"}
    else:
        return verdict
    return words.get(verdict, verdict)


__all__ = ["PATCH_MODES", "ends_words", "patch_mode", "verdict_word"]
