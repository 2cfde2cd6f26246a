"""Pure logic of a bisection: no I/O, plain data in and out. One job per file:

* :mod:`.search` -- :class:`Bisection`, the search state machine (posterior, next probes,
  verification; :class:`Step`, :class:`SearchResult`; :func:`budget_text`);
* :mod:`.bounds` -- information bounds and probe budgets (``binary_entropy`` ...
  :func:`channel_bound`, :func:`default_budget`, :func:`search_settings`);
* :mod:`.repeats` -- repeats of one probe (:func:`combine_repeats`, :func:`per_probe_rates`,
  :func:`estimate_hit_rate`, :func:`hit_rate_prior`);
* :mod:`.signatures` -- failure signatures (:class:`Signature`, :func:`command_failures`);
* :mod:`.verdicts` -- verdict rules per regress mode (:func:`judge_threshold`,
  :func:`judge_command`, :func:`judge_patches` and :func:`register_patch_rule`,
  :func:`judge_drift`), each returning a :class:`Judgement`;
* :mod:`.blame` -- blame rules (:func:`plausibility_flags`, :func:`may_blame`,
  :func:`confidence_text`, :func:`merge_descent`);
* :mod:`.attribution` -- which coupled component to bisect (:func:`attribute_components`).

Every public name is importable from ``bisectbot.bisect`` itself.
"""

from .attribution import Attribution, attribute_components
from .blame import BUILD_FILES, FLAG_TEXT, confidence_text, may_blame, merge_descent, plausibility_flags
from .bounds import (
    binary_entropy,
    binary_kl,
    burnashev_bound,
    channel_bound,
    channel_capacity,
    default_budget,
    search_settings,
)
from .repeats import (
    MIN_HIT_RATE,
    RUN_FALSE_POSITIVE,
    clean_probes_needed,
    combine_repeats,
    estimate_hit_rate,
    hit_rate_prior,
    per_probe_rates,
)
from .search import CONFIRMATION_MASS, REPROBE_BAND, Bisection, SearchResult, Step, budget_text
from .signatures import Signature, command_failures
from .verdicts import _PATCH_RULES as _PATCH_RULES  # the patch-rule registry (tests swap rules in it)
from .verdicts import (
    UNRUNNABLE,
    Drift,
    Judgement,
    PatchRule,
    is_patch_mode,
    judge_command,
    judge_drift,
    judge_patch_conflict,
    judge_patch_upstream,
    judge_patches,
    judge_threshold,
    register_patch_rule,
)

__all__ = [
    "Bisection",
    "MIN_HIT_RATE",
    "clean_probes_needed",
    "confidence_text",
    "SearchResult",
    "Step",
    "Signature",
    "Judgement",
    "judge_threshold",
    "judge_command",
    "judge_patches",
    "judge_patch_upstream",
    "judge_patch_conflict",
    "register_patch_rule",
    "is_patch_mode",
    "PatchRule",
    "plausibility_flags",
    "FLAG_TEXT",
    "may_blame",
    "burnashev_bound",
    "channel_bound",
    "channel_capacity",
    "default_budget",
    "search_settings",
    "budget_text",
    "combine_repeats",
    "per_probe_rates",
    "estimate_hit_rate",
    "hit_rate_prior",
    "RUN_FALSE_POSITIVE",
    "CONFIRMATION_MASS",
    "REPROBE_BAND",
    "Drift",
    "judge_drift",
    "merge_descent",
    "Attribution",
    "attribute_components",
    "BUILD_FILES",
    "UNRUNNABLE",
    "command_failures",
    "binary_entropy",
    "binary_kl",
]
