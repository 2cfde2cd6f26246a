"""What a threshold verdict covered, and the rule that compares candidates only there (issue 23).

A bisection compares each candidate with its bad end. A threshold probe's "good" says
"no garbage up to N tokens"; when N is below the size where the bad end failed (an old
build that serves ``max_model_len`` 16384 while the bad end fails from 21,822 tokens,
vllm#2655), the probe never asked the question the bisection asks, and a search that takes
it as "good" names the commit that raised the context limit as the culprit.

:class:`Scope` holds the bad end's failing sizes (learnt from its bad verdict,
:func:`learn`); :meth:`Scope.judge` turns a good verdict whose measured sizes all lie below
them into a ``skip`` with the reason ``good only up to X < failing size Y tokens``; the
search then treats the candidate as untestable (a skip at the good end ends the run as
``boundary-failed``, one inside the range widens the answer to a range). The probe cache
keeps the measurement as it was; only the search's use of it changes.

The same sizes go to the next probes as their *focus* (:mod:`bisectbot.reproduce.focus`):
asked first, so that a failure at larger sizes does not hide the answer at these.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ..models import ProbeResult, Verdict
from ..recipe import Recipe

#: Regress modes whose verdicts come from a threshold search of a regression (not a fix):
#: the bad end's failing size is where every candidate must be asked.
SCOPED_MODES = ("garbage", "threshold-below", "diverges")


def scoped(recipe: Recipe) -> bool:
    """True when the recipe's verdicts are threshold verdicts of a regression search."""
    if recipe.regress.mode not in SCOPED_MODES:
        return False
    r = recipe.reproducer
    return r.kind == "prefill" or any("{size}" in a for a in (r.command or []))


def _size(row: Any) -> int | None:
    d = row.to_dict() if hasattr(row, "to_dict") else row
    if not isinstance(d, dict):
        return None
    v = d.get("prompt_tokens") or d.get("requested")
    return int(v) if isinstance(v, (int, float)) else None


def covered(res: ProbeResult) -> int | None:
    """The largest prompt size (tokens) the probe decided (OK or GARBAGE), or None when its
    table holds none (an error, a probe without a size table)."""
    sizes = []
    for row in res.table or []:
        d = row.to_dict() if hasattr(row, "to_dict") else row
        if isinstance(d, dict) and d.get("outcome") in ("OK", "GARBAGE"):
            s = _size(d)
            if s is not None:
                sizes.append(s)
    if not sizes and res.threshold:
        sizes = [int(x) for x in res.threshold if x is not None]
    return max(sizes) if sizes else None


@dataclass(frozen=True)
class Scope:
    """Where the bad end failed: ``failing`` (its first garbage size, tokens), ``sizes`` (that
    and its confirmation size, the probes' focus) and ``slack`` (tokens: a candidate's prompt at
    the failing size may measure this much less -- another tokenizer, another template)."""

    failing: int
    sizes: tuple[int, ...]
    slack: int
    end: str = ""

    def judge(self, res: ProbeResult) -> ProbeResult:
        """``res``, or a copy of it as ``skip`` when it is a good verdict measured only below
        :attr:`failing` (``extra["scope"]`` says what it covered)."""
        if res.verdict is not Verdict.GOOD:
            return res
        cov = covered(res)
        if cov is None or cov >= self.failing - self.slack:
            return res
        why = (f"good only up to {cov} < failing size {self.failing} tokens (where the bad end{self.end} fails): "
               "not tested at the size that matters")
        return dataclasses.replace(res, verdict=Verdict.SKIP, signature="", reason=f"{why}; measured: {res.reason}",
                                   extra={**res.extra, "scope": {"covered": cov, "failing": self.failing,
                                                                 "verdict": res.verdict.value}})


def learn(recipe: Recipe, res: ProbeResult, label: str = "") -> Scope | None:
    """The scope a bad end's result sets (None unless it is a bad threshold verdict of a scoped
    recipe with a first-garbage size)."""
    if not scoped(recipe) or res.verdict is not Verdict.BAD or not res.threshold:
        return None
    first = res.threshold[1]
    if first is None:
        return None
    from ..reproduce.focus import focus_sizes

    spec = recipe.reproducer
    slack = max(math.ceil(spec.tolerance * first), spec.tolerance_tokens)
    return Scope(int(first), tuple(focus_sizes(res.table or [], int(first))), slack,
                 f" {label}" if label else "")


__all__ = ["SCOPED_MODES", "Scope", "covered", "learn", "scoped"]
