"""Where a candidate's verdict is decided: good, bad or skip, from what its probe recorded.

**The rule** (issue 35, stated here once). A probe records per request the prompt's identity
(:class:`bisectbot.models.PromptKey`: filler seed and words, the text itself, or a command's
``{size}`` with the recipe's argv; the per-request ``cache_salt`` is recorded, not part of it),
the measured tokens and the outcome. A candidate is compared with the end that shows the
behaviour (the bad end) **on the same prompts**: it is *good* only when it answered OK the
prompts on which the bad end failed; *bad* when it fails one of them (or shows any GARBAGE
under ``regress: garbage``); otherwise a *skip*, "could not be asked at the size where the bad
end fails: …". No tolerance, slack or precision parameter enters the comparison; measured
tokens are shown, never compared. Later probes ask those prompts first
(:mod:`bisectbot.reproduce.focus`), so candidates are asked them.

How the evidence becomes a verdict before the comparison:

* A probe's measurement becomes a :class:`Judgement` (verdict, one-line reason, failure
  signature) by the recipe's regress mode: a threshold search by :func:`judge_threshold`
  (``garbage``, ``threshold-below: N``, ``error``, ``success``), a command's exit code by
  :func:`judge_command` (``git bisect run``'s contract: 0 good, 1..127 bad except 125 skip,
  126/127 unrunnable), patch states by :func:`judge_patches` (``patch-upstream``,
  ``patch-conflict``), the drift search by :func:`judge_drift`. A server or host error is
  never ``bad``.
* Repeats of one probe combine one-sidedly (bad when any run is bad; in a fix bisection
  still broken when any run fails): :func:`bisectbot.verdict.honesty.run_repeats`.
* The comparison on the same prompts: :mod:`bisectbot.verdict.scope`.
* A cached verdict is evidence only when it agrees with its own record: recomputed from the
  row's evidence by these same rules (:func:`bisectbot.verdict.record.contradiction`); a row
  that contradicts it or cannot be decoded is dropped and probed again.
* The known-failing end is re-probed until its "not bad" is believable
  (:mod:`bisectbot.verdict.badend`); a command that cannot run at either end stops the run
  (:func:`bisectbot.verdict.honesty.check_runnable`).

One job per file:

* :mod:`.rules` -- the regress-mode rules above (pure, no I/O);
* :mod:`.judge` -- :func:`bisectbot.verdict.judge.judge`: run the recipe's reproducer on a
  prepared candidate and apply the rules (the one place a probe's verdict is made);
* :mod:`.scope` -- the comparison with the bad end on the same prompts;
* :mod:`.record` -- a cached verdict against its own recorded evidence; what "verified" means;
* :mod:`.honesty` -- repeats, derived flake rates, unrunnable commands;
* :mod:`.badend` -- the sequential re-probe of the known-failing end.

Other modules ask these; none decides good or bad on its own. Only the rules are importable
from ``bisectbot.verdict`` itself (light: no pydantic, no runner); the others by module.
"""

from .rules import _PATCH_RULES as _PATCH_RULES  # the patch-rule registry (tests swap rules in it)
from .rules import (
    UNRUNNABLE,
    Judgement,
    PatchRule,
    judge_command,
    judge_drift,
    judge_patch_conflict,
    judge_patch_upstream,
    judge_patches,
    judge_threshold,
    register_patch_rule,
)

__all__ = [
    "UNRUNNABLE",
    "Judgement",
    "PatchRule",
    "judge_command",
    "judge_drift",
    "judge_patch_conflict",
    "judge_patch_upstream",
    "judge_patches",
    "judge_threshold",
    "register_patch_rule",
]
