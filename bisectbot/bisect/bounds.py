"""Information bounds of a search and the probe budgets derived from them (pure functions).

``binary_entropy`` ... ``channel_bound``: what a verdict channel with false-positive rate
``fp = P(bad | good candidate)`` and false-negative rate ``fn = P(good | bad candidate)``
carries, in bits per probe, and the expected probes of an optimal search (Burnashev 1976).
:func:`default_budget` and :func:`search_settings` turn them into the cap of one
:class:`bisectbot.bisect.search.Bisection` (:func:`bisectbot.bisect.search.budget_text` says it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def binary_entropy(p: float) -> float:
    """H(p) in bits; H(0) = H(1) = 0."""
    if p <= 0.0 or p >= 1.0:
        return 0.0
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def binary_kl(p: float, q: float) -> float:
    """D(p || q) in bits for Bernoulli distributions (``inf`` when q is 0 or 1 and p is not)."""
    out = 0.0
    for a, b in ((p, q), (1 - p, 1 - q)):
        if a > 0:
            if b <= 0:
                return math.inf
            out += a * math.log2(a / b)
    return out


def burnashev_bound(n: int, p: float, delta: float) -> float:
    """Expected probes of an optimal sequential search with feedback (Burnashev 1976).

    ``B = log2(n) / (1 - H(p)) + log2(1/delta) / D(p || 1-p)`` for ``n`` hypotheses, a
    binary symmetric verdict channel with crossover ``p`` and error probability ``delta``.
    With ``p = 0`` it is ``log2(n)`` (the second term vanishes).
    """
    if p <= 0:
        return math.log2(n)
    return math.log2(n) / (1 - binary_entropy(p)) + math.log2(1 / delta) / binary_kl(p, 1 - p)


def _mutual_information(q: float, fp: float, fn: float) -> float:
    """I(X; Y) in bits of the verdict channel when P(candidate bad) = ``q``."""
    pbad = q * (1 - fn) + (1 - q) * fp
    return binary_entropy(pbad) - q * binary_entropy(fn) - (1 - q) * binary_entropy(fp)


def channel_capacity(fp: float, fn: float) -> float:
    """Capacity in bits per probe of the verdict channel ``P(bad | good) = fp``,
    ``P(good | bad) = fn`` (a binary asymmetric channel; ``1 - H(p)`` when ``fp = fn = p``,
    the Z-channel when one of them is 0). 0 when ``fp + fn >= 1`` (verdicts carry no
    information). Maximised over the input distribution by golden-section search (I is
    concave in it)."""
    if fp + fn >= 1:
        return 0.0
    lo, hi = 0.0, 1.0
    g = (math.sqrt(5) - 1) / 2
    for _ in range(60):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if _mutual_information(a, fp, fn) < _mutual_information(b, fp, fn):
            lo = a
        else:
            hi = b
    return _mutual_information((lo + hi) / 2, fp, fn)


def channel_bound(n: int, fp: float, fn: float, delta: float) -> float:
    """Burnashev's expected probes for ``n`` hypotheses over an asymmetric verdict channel.

    ``B = log2(n) / C + log2(1/delta) / C1`` (Burnashev 1976): ``C`` the channel capacity
    (:func:`channel_capacity`), ``C1 = max(D(P_bad || P_good), D(P_good || P_bad))`` the
    largest divergence between the verdict distributions of a bad and a good candidate
    (infinite, so the second term vanishes, for a one-sided channel with ``fp = 0``).
    Equals :func:`burnashev_bound` when ``fp = fn``. ``inf`` when ``fp + fn >= 1``.
    """
    cap = channel_capacity(fp, fn)
    if cap <= 0:
        return math.inf
    if fp <= 0 and fn <= 0:
        return math.log2(n)

    def kl(p: tuple[float, float], q: tuple[float, float]) -> float:
        out = 0.0
        for a, b in zip(p, q):
            if a > 0:
                if b <= 0:
                    return math.inf
                out += a * math.log2(a / b)
        return out

    pb, pg = (1 - fn, fn), (fp, 1 - fp)
    c1 = max(kl(pb, pg), kl(pg, pb))
    return math.log2(n) / cap + (0.0 if math.isinf(c1) else math.log2(1 / delta) / c1)


def default_budget(n: int, fp: float, fn: float, confidence: float, parallel: int = 1) -> int | None:
    """Probe budget of a search over ``n`` candidates when the recipe sets no ``max_probes``.

    ``ceil(3 * B) + 4``: three times the information bound :func:`channel_bound` over the
    ``n - 1`` first-bad positions at ``delta = 1 - confidence``, plus the 2 boundary and
    2 verification probes (issue 15: a fixed 64 left 14-25 % of runs at flake 0.2
    inconclusive). The factor: the budget should end no more runs inconclusive than
    ``1 - confidence``; at flake 0.2 over 800 uncapped searches, ``2 B + 4`` would have cut
    2.0 % (N = 1,000) and 2.25 % (N = 5,000) short, ``3 B + 4`` 0.1 % and 0 % (99th
    percentile of probes: 2.3 B; ``benchmarks/scale.py``'s budget rows). Only the slow
    tail spends it: the mean stays near 1.2 B. None (no limit) for an exact search, which
    ends by itself after at most ``n + 2`` probes.

    ``parallel`` = k probes per round (issue 16): the k probes of one round are chosen
    before any of their verdicts is known and carry about ``log2(k + 1)`` bits where k
    sequential probes carry k, so the search part grows by ``k / log2(k + 1)`` (without
    it, ``benchmarks/fanout_sim.py`` at flake 0.1, k = 4 ended 15-35 % of the runs
    inconclusive on a spent budget).
    """
    if fp <= 0 and fn <= 0:
        return None
    b = channel_bound(max(2, n - 1), fp, fn, 1 - confidence)
    k = max(1, parallel)
    return math.ceil(3 * b * k / math.log2(k + 1)) + 4


def search_settings(spec: Any, n: int) -> dict[str, Any]:
    """Keyword arguments of :class:`Bisection` for ``n`` candidates from a recipe's
    :class:`bisectbot.recipe.BisectSpec`: flake rates (0 when unset), confidence, verify,
    and the budget: ``max_probes`` when the recipe sets it, else :func:`default_budget`."""
    flake = getattr(spec, "flake", None)
    fp = float(getattr(flake, "false_positive", 0.0) or 0.0)
    fn = float(getattr(flake, "false_negative", 0.0) or 0.0)
    out: dict[str, Any] = {"false_positive": fp, "false_negative": fn, "confidence": spec.confidence,
                           "verify": spec.verify, "max_probes": spec.max_probes, "budget": None}
    if spec.max_probes is None:
        out["budget"] = default_budget(n, fp, fn, spec.confidence, int(getattr(spec, "parallel", 1) or 1))
    return out


def _kl_vec(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Elementwise D(Bernoulli(p) || Bernoulli(q)) in bits (q kept inside (0, 1))."""
    q = np.clip(q, 1e-300, 1.0 - 1e-16)
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = np.where(p > 0, p * np.log2(np.where(p > 0, p, 1.0) / q), 0.0)
        t0 = np.where(p < 1, (1 - p) * np.log2(np.where(p < 1, 1 - p, 1.0) / (1 - q)), 0.0)
    return np.nan_to_num(t1 + t0, nan=0.0)


def _h_vec(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = -(x * np.log2(x) + (1 - x) * np.log2(1 - x))
    return np.nan_to_num(out, nan=0.0)
