"""Pure logic of a bisection: no I/O, plain data in and out. One job per file:

* :mod:`.search` -- :class:`Bisection`, the search state machine (posterior, next probes,
  verification; :class:`Step`, :class:`SearchResult`; :func:`budget_text`);
* :mod:`.bounds` -- information bounds and probe budgets (``binary_entropy`` ...
  :func:`channel_bound`, :func:`default_budget`, :func:`search_settings`);
* :mod:`.repeats` -- repeats of one probe (:func:`combine_repeats`, :func:`per_probe_rates`,
  :func:`estimate_hit_rate`, :func:`hit_rate_prior`, :func:`two_sided_prior`, :func:`minority`);
* :mod:`.signatures` -- failure signatures (:class:`Signature`, :func:`command_failures`);
* :mod:`.drift` -- :class:`Drift`, the data of the second search when the threshold moved;
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
from .drift import Drift
from .repeats import (
    MIN_HIT_RATE,
    RUN_FALSE_POSITIVE,
    clean_probes_needed,
    combine_repeats,
    estimate_hit_rate,
    hit_rate_prior,
    minority,
    per_probe_rates,
    two_sided_prior,
)
from .search import CONFIRMATION_MASS, REPROBE_BAND, Bisection, SearchResult, Step, budget_text
from .signatures import Signature, command_failures

__all__ = [
    "Bisection",
    "MIN_HIT_RATE",
    "clean_probes_needed",
    "confidence_text",
    "SearchResult",
    "Step",
    "Signature",
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
    "two_sided_prior",
    "minority",
    "RUN_FALSE_POSITIVE",
    "CONFIRMATION_MASS",
    "REPROBE_BAND",
    "Drift",
    "merge_descent",
    "Attribution",
    "attribute_components",
    "BUILD_FILES",
    "command_failures",
    "binary_entropy",
    "binary_kl",
]
