"""The comparison on the same prompts (issue 35; issue 23 asked it with a tolerance).

A bisection compares each candidate with its bad end. The bad end's threshold probe recorded,
per size, which prompt it sent (:class:`bisectbot.models.PromptKey`: filler seed and words,
the text itself; a command's ``{size}``) and its outcome. :func:`learn` takes the prompts on
which it failed (:func:`bisectbot.reproduce.focus.failing_prompts`: its first failing prompt and
the boundary confirmation's); every later probe asks exactly those first (``prober.focus``,
:mod:`bisectbot.reproduce.focus`). :meth:`Scope.judge` then applies the rule of
:mod:`bisectbot.verdict` to the candidate's recorded table:

* **good** only when it answered OK every one of those prompts;
* **bad** when it fails one of them (GARBAGE there), whatever its own threshold verdict
  (under ``regress: garbage`` any GARBAGE is bad already, :func:`bisectbot.verdict.judge_threshold`);
* otherwise a **skip**: "could not be asked at the size where the bad end fails: …" (not asked:
  its server's context cannot hold the prompt; over the limit; an error; inconclusive).

No tolerance, slack or precision enters which prompts are compared: two prompts are the same or
they are not. Measured token counts are recorded and shown, and compared once: the same text read
by the same model measures the same, so a candidate that measured clearly *fewer* tokens for a
failing prompt than the bad end did was not given that prompt whole (its server cut it silently:
the server-truncate worlds of issue 35, seed 103, where the cut also misled the prompt sizing and
no request of the probe looked cut) -- its OK there is a skip. "Clearly" is the agreement the bot
uses wherever two counts of one text are compared (:func:`bisectbot.reproduce.threshold.counts_agree`:
a chat template that gained or lost a few tokens between commits is the same prompt). The probe cache
keeps each measurement as it was; only the search's use of it changes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..models import ProbeResult, PromptKey, Verdict
from ..recipe import Recipe

#: Regress modes whose verdicts come from a threshold search of a regression (not a fix):
#: the bad end's failing prompts are where every candidate must be asked.
SCOPED_MODES = ("garbage", "threshold-below", "diverges")


def scoped(recipe: Recipe) -> bool:
    """True when the recipe's verdicts are threshold verdicts of a regression search."""
    if recipe.regress.mode not in SCOPED_MODES:
        return False
    r = recipe.reproducer
    return r.kind == "prefill" or any("{size}" in a for a in (r.command or []))


def table_rows(res: ProbeResult) -> list[dict[str, Any]]:
    """``res``'s threshold table as dicts (one per request: requested, prompt_tokens, outcome, ...)."""
    return [d for d in ((t.to_dict() if hasattr(t, "to_dict") else t) for t in res.table or [])
            if isinstance(d, dict)]


def covered(res: ProbeResult) -> int | None:
    """The largest prompt size (tokens, measured) the probe decided (OK or GARBAGE), or None when
    its table holds none: shown in reasons, never compared."""
    sizes = [int(d.get("prompt_tokens") or d["requested"]) for d in table_rows(res)
             if d.get("outcome") in ("OK", "GARBAGE") and isinstance(d.get("requested"), int)]
    return max(sizes) if sizes else None


@dataclass(frozen=True)
class Scope:
    """The prompts on which the bad end failed (``failing``, asked first by later probes: their
    focus) and the bad end's first failing size (``failing_size``, measured tokens, for messages);
    ``end`` labels the bad end in reasons; ``seed``: the recipe's filler seed (rows recorded
    without one)."""

    failing: tuple[PromptKey, ...]
    failing_size: int
    end: str = ""
    seed: int | None = None
    measured: tuple[int | None, ...] = ()
    """The bad end's measured tokens of each :attr:`failing` prompt (None: not measured)."""

    @property
    def sizes(self) -> tuple[PromptKey, ...]:
        """The focus of the next probes: :attr:`failing`."""
        return self.failing

    def answers(self, res: ProbeResult) -> dict[PromptKey, dict[str, Any]]:
        """The candidate's rows for the failing prompts it was asked (by identity)."""
        want = {k.identity: k for k in self.failing}
        out: dict[PromptKey, dict[str, Any]] = {}
        for d in table_rows(res):
            key = PromptKey.of_row(d, self.seed)
            if key is not None and key.identity in want:
                out.setdefault(want[key.identity], d)
        return out

    def _cut(self, got: dict[PromptKey, dict[str, Any]]) -> tuple[PromptKey, int, int] | None:
        """``(prompt, candidate's count, bad end's count)`` of the first failing prompt the candidate
        answered OK while measuring clearly fewer tokens than the bad end (module docstring)."""
        from ..reproduce.threshold import counts_agree

        for k, theirs in zip(self.failing, self.measured):
            d = got.get(k) or {}
            mine = d.get("prompt_tokens")
            if d.get("outcome") == "OK" and isinstance(mine, int) and isinstance(theirs, int) \
                    and mine < theirs and not counts_agree(mine, theirs):
                return k, mine, theirs
        return None

    def asked(self, res: ProbeResult) -> bool:
        """True when ``res`` was asked every failing prompt (with some outcome)."""
        return len(self.answers(res)) == len(self.failing)

    def judge(self, res: ProbeResult) -> ProbeResult:
        """``res``, or a copy as ``bad`` (GARBAGE on a failing prompt) or ``skip`` (a good verdict
        that did not answer OK every failing prompt; ``extra["scope"]`` says what it covered)."""
        if res.verdict is Verdict.SKIP or (res.verdict is Verdict.BAD):
            return res
        got = self.answers(res)
        garbage = [k for k, d in got.items() if d.get("outcome") == "GARBAGE"]
        if garbage:
            k = garbage[0]
            why = (f"GARBAGE on a prompt on which the bad end{self.end} failed ({k.text()}, measured "
                   f"{got[k].get('prompt_tokens') or k.requested} tokens)")
            return dataclasses.replace(res, verdict=Verdict.BAD, reason=f"{why}; measured: {res.reason}",
                                       extra={**res.extra, "scope": {"verdict": res.verdict.value,
                                                                     "failing": list(map(str, self.failing))}})
        missing = [k for k in self.failing if got.get(k, {}).get("outcome") != "OK"]
        short = self._cut(got)
        if not missing and short is None:
            return res
        k = missing[0] if missing else short[0]  # type: ignore[index]
        d = got.get(k)
        if not missing:
            assert short is not None
            what = (f"{k.text()} -> OK, but it measured {short[1]} tokens where the bad end measured {short[2]} "
                    f"for the same text: its server did not read the whole prompt (a silent cut)")
        elif d is None:
            cov = covered(res)
            what = (f"not asked the prompt {k.text()}"
                    + (f" (the largest size it answered: {cov} tokens)" if cov is not None else ""))
        else:
            reasons = "; ".join(str(x) for x in (d.get("reasons") or []))[:200]
            what = f"{k.text()} -> {d.get('outcome')}" + (f" ({reasons})" if reasons else "")
        why = (f"could not be asked at the size where the bad end fails ({self.failing_size} tokens"
               f"{',' + self.end if self.end else ''}): {what}; not tested at the size that matters")
        return dataclasses.replace(res, verdict=Verdict.SKIP, signature="", reason=f"{why}; measured: {res.reason}",
                                   extra={**res.extra, "scope": {"covered": covered(res), "failing": self.failing_size,
                                                                 "prompts": list(map(str, self.failing)),
                                                                 "verdict": res.verdict.value}})


def learn(recipe: Recipe, res: ProbeResult, label: str = "") -> Scope | None:
    """The scope a bad end's result sets (None unless it is a bad threshold verdict of a scoped
    recipe with a first-garbage size and a recorded failing prompt)."""
    if not scoped(recipe) or res.verdict is not Verdict.BAD or not res.threshold:
        return None
    first = res.threshold[1]
    if first is None:
        return None
    from ..reproduce.focus import failing_prompts

    seed = recipe.reproducer.seed if recipe.reproducer.kind == "prefill" else None
    keys = failing_prompts(res.table or [], int(first), seed)
    if not keys:
        return None
    counts: dict[Any, int] = {}
    for d in table_rows(res):
        key = PromptKey.of_row(d, seed)
        if key is not None and isinstance(d.get("prompt_tokens"), int):
            counts.setdefault(key.identity, int(d["prompt_tokens"]))
    return Scope(tuple(keys), int(first), f" {label}" if label else "", seed,
                 tuple(counts.get(k.identity) for k in keys))


__all__ = ["SCOPED_MODES", "Scope", "covered", "learn", "scoped", "table_rows"]
