"""Pure search logic of a bisection: no I/O, plain data in and out.

The search runs over an ordered list of ``n`` candidates, index ``0`` the known-good
end (oldest) and index ``n - 1`` the known-bad end (newest). A *hypothesis* ``h`` in
``0..n`` says "the first bad candidate is ``h``": ``h = 0`` means even the good end is
bad (boundary failed), ``h = n`` means none is bad (no regression).

:class:`Bisection` is a state machine shared by ``bisectbot.session`` and the simulator
(``benchmarks/bisect_sim.py``)::

    b = Bisection(len(candidates), false_positive=0.1, false_negative=0.1)
    while not b.done:
        for i in b.next_probes(k=1):
            b.feed(i, verdict, signature)
    res = b.result()

It keeps a posterior over the hypotheses (log domain) and updates it with each verdict
given the false-positive rate ``P(bad | good candidate)`` and the false-negative rate
``P(good | bad candidate)``. The next probe maximises the expected information gain
(mutual information between the verdict and the hypothesis, in bits) until one class
holds half the posterior; from there it confirms: Chernoff's rule picks the candidate
whose verdict best tells the leading class from the rest (:meth:`Bisection._confirmation_pick`,
Burnashev's two phases). With zero flake
rates the posterior is uniform over the hypotheses consistent with the verdicts, the
information gain picks the testable candidate nearest the midpoint (ties to the lower
index) and the search is exactly plain binary search with skip: at most
``ceil(log2(n - 1))`` search probes after the two boundary probes.

Skip: a candidate whose verdict is ``skip`` is never probed again. Hypotheses ``h`` and
``h + 1`` can only be told apart by probing candidate ``h``; when it is untestable they
form one *class*. When a class of several hypotheses wins, the result is a range (as
``git bisect`` says "only skipped commits left to test").

Stopping: when one class holds at least ``confidence`` of the posterior mass (always 1.0
in exact mode), the culprit (or range) is *verified*: the culprit is re-probed (expect
bad) and its predecessor too (expect good). In exact mode a contradiction makes the
result ``inconclusive``; in noisy mode the re-probes are evidence like any other and the
search goes on until the confidence holds again after a fresh verification, or the
probe budget is spent (then ``inconclusive`` with the best guess and its confidence).

Also here, as plain functions: the *failure signature* (:class:`Signature`), the
verdict rules per regress mode (:func:`judge_threshold`, :func:`judge_command`,
:func:`judge_patches` hook), plausibility flags of a culprit and the "may blame"
decision.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .models import Status, Verdict

__all__ = [
    "Bisection",
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
    "RUN_FALSE_POSITIVE",
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

_TIE = 1e-12  # information-gain ties (bits) go to the lower index
#: Largest factor between the first-garbage thresholds of two bad probes of one build that an
#: exact search accepts as the same measurement (:meth:`Bisection._threshold_moved`): a
#: deterministic reproducer finds the same interval again (issue 11: <= 3 % wide); 1.25
#: leaves room for a boundary that wobbles on real GPUs.
REPROBE_BAND = 1.25
#: Posterior mass of the leading class from which the search confirms instead of locating
#: (:meth:`Bisection._confirmation_pick`); Burnashev's scheme switches at 1/2.
CONFIRMATION_MASS = 0.5


# --------------------------------------------------------------------------- information theory


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


def budget_text(b: Bisection) -> str:
    """How the search is capped, for plans and progress lines."""
    if b.max_probes is not None:
        return f"budget {b.max_probes} probes (max_probes)"
    if b.budget is not None:
        bound = channel_bound(max(2, b.n - 1), b.fp, b.fn, 1 - b.confidence)
        return (f"budget {b.budget} good/bad verdicts (3 x information bound {bound:.1f} + 4, "
                f"flake fp {b.fp:.3g} fn {b.fn:.3g})")
    return "no budget needed (exact search)"


# --------------------------------------------------------------------------- repeats (one-sided)

#: Per-run false-positive rate assumed when the recipe gives no flake rates: garbage is
#: one-sided, a healthy build essentially never produces it (issue 12); not 0, so that one
#: stray classifier error can still be outweighed.
RUN_FALSE_POSITIVE = 0.001


def combine_repeats(bad_runs: Iterable[bool]) -> bool:
    """One-sided combination of the repeats of one probe: bad if **any** run was bad.

    Garbage is one-sided (a healthy build essentially never produces it): a majority vote
    over repeats would turn a bug that shows in 30 % of runs into an 84 % miss rate per
    probe at 5 repeats (issue 12); "any" turns it into ``0.7 ** 5 = 17 %``.
    """
    return any(bad_runs)


def per_probe_rates(hit_rate: float, repeats: int,
                    run_false_positive: float = RUN_FALSE_POSITIVE) -> tuple[float, float]:
    """``(false_positive, false_negative)`` of one probe of ``repeats`` runs, combined by
    :func:`combine_repeats`, given the per-run hit rate of the bug on a bad candidate
    (``P(garbage | bad)`` per run) and the per-run false-positive rate:
    ``fp = 1 - (1 - run_fp) ** repeats``, ``fn = (1 - hit_rate) ** repeats``.
    Raises ``ValueError`` when ``hit_rate`` is not in (0, 1] or ``repeats`` < 1."""
    if not 0 < hit_rate <= 1 or repeats < 1:
        raise ValueError(f"hit rate must be in (0, 1] and repeats >= 1, got {hit_rate}, {repeats}")
    return 1 - (1 - run_false_positive) ** repeats, (1 - hit_rate) ** repeats


def estimate_hit_rate(hits: int, runs: int) -> float:
    """Per-run hit rate of the bug from ``hits`` bad runs out of ``runs`` on a known-bad
    candidate (the bad end): ``hits / (runs + 2)``, shrunk towards 0 so that a few lucky
    runs do not make the search over-confident (5 of 5 -> 0.71, 1 of 5 -> 0.14).
    Raises ``ValueError`` unless ``0 < hits <= runs``."""
    if not 0 < hits <= runs:
        raise ValueError(f"need 0 < hits <= runs, got {hits} of {runs}")
    return hits / (runs + 2)


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


# --------------------------------------------------------------------------- search state machine


@dataclass
class Step:
    """One verdict fed to the search. ``verdict`` is what the probe said, ``effective``
    what the search used (a bad with a foreign signature becomes ``skip``)."""

    index: int
    verdict: Verdict
    effective: Verdict
    signature: str = ""
    phase: str = "search"
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "verdict": self.verdict.value, "effective": self.effective.value,
                "signature": self.signature, "phase": self.phase, "note": self.note}


@dataclass
class SearchResult:
    """How a search ended, in candidate indices.

    ``first_bad`` is the culprit (or, for a range, the first candidate *tested* bad);
    ``last_good`` its good neighbour; ``culprits`` the candidates that may be first-bad
    (one for a culprit, several for a range). ``confidence`` is the posterior mass (0..1)
    of that answer. ``verified`` is True when the verification re-probes agreed.
    """

    status: Status
    first_bad: int | None = None
    last_good: int | None = None
    culprits: list[int] = field(default_factory=list)
    confidence: float = 0.0
    verified: bool = False
    probes: int = 0
    message: str = ""


def _sig_str(sig: Signature | str | None) -> str:
    return "" if sig is None else str(sig)


def _check_rates(fp: float, fn: float) -> None:
    if not (0 <= fp < 1 and 0 <= fn < 1):
        raise ValueError(f"flake rates must be in [0, 1), got false_positive {fp}, false_negative {fn}")
    if fp + fn >= 1:
        raise ValueError(f"false_positive + false_negative = {fp + fn:g} >= 1: such a verdict carries no "
                         "information; repeat the reproducer (repeats) to lower the per-probe rates")


@dataclass
class Drift:
    """The first-garbage threshold moved inside the bad range: ``first_threshold`` tokens at
    candidate ``first_index`` (lowest-index bad verdict), ``last_threshold`` at ``last_index``."""

    first_index: int
    first_threshold: int
    last_index: int
    last_threshold: int

    @property
    def split(self) -> int:
        """Tokens between the two thresholds (geometric mean): the second search's cut."""
        return int(round(math.sqrt(self.first_threshold * self.last_threshold)))

    @property
    def lowered(self) -> bool:
        return self.last_threshold < self.first_threshold


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


class Bisection:
    """Bayesian bisection with skip, boundary checks and verification (see module doc).

    ``n`` >= 2 candidates. ``false_positive``/``false_negative`` are per probe (after the
    repeats of a probe are combined, :func:`combine_repeats`), each in [0, 1) with
    ``false_positive + false_negative < 1``: at or beyond 1 a verdict carries no
    information. ``confidence`` in (0.5, 1). ``max_probes`` counts every verdict fed
    (boundary, search, verification); None is unlimited. ``budget`` counts only good/bad
    verdicts (a skip is never repeated, so skips cannot run away; :func:`default_budget`).
    ``check_boundary`` probes both ends first (else they are trusted); ``verify`` re-probes
    culprit and predecessor at the end. ``signature_band``: factor between first-garbage
    thresholds of bad verdicts beyond which the threshold has *drifted* (:meth:`drift`).

    Failure-signature guard (both sides): the first bad verdict with a signature (the bad
    end's) is the bad reference, the first good verdict with one (the good end's "still
    broken" of a fix bisection) the good reference; a later verdict whose signature is not
    the same failure as its side's reference (:meth:`Signature.same_failure`) is used as
    ``skip``. A different threshold of the same failure is not foreign: it is drift.

    Raises ``ValueError`` on impossible arguments.
    """

    def __init__(self, n: int, *, false_positive: float = 0.0, false_negative: float = 0.0,
                 confidence: float = 0.99, max_probes: int | None = None, check_boundary: bool = True,
                 verify: bool = True, signature_band: float = 2.0, budget: int | None = None):
        if n < 2:
            raise ValueError(f"a bisection needs at least 2 candidates (good and bad end), got {n}")
        _check_rates(false_positive, false_negative)
        if not (0.5 < confidence < 1):
            raise ValueError("confidence must be in (0.5, 1)")
        self.n = n
        self.fp = float(false_positive)
        self.fn = float(false_negative)
        self.exact = self.fp == 0.0 and self.fn == 0.0
        self.confidence = confidence
        self.max_probes = max_probes
        self.budget = budget
        self.check_boundary = check_boundary
        self.verify = verify
        self.signature_band = signature_band
        self.history: list[Step] = []
        self.reference: Signature | None = None
        self.good_reference: Signature | None = None
        self.untestable = np.zeros(n, dtype=bool)  # skipped: never probed again
        self.informed = np.zeros(n, dtype=bool)  # had a good/bad verdict
        self._logp = np.zeros(n + 1)
        if not check_boundary:
            self._logp[0] = self._logp[n] = -np.inf
            self.informed[0] = self.informed[n - 1] = True
        self._logp -= np.logaddexp.reduce(self._logp)
        self._post: np.ndarray | None = None
        self._q: np.ndarray | None = None
        self._ig: np.ndarray | None = None
        self._ends_left = [n - 1, 0] if check_boundary else []
        self._verify_targets: list[int] = []
        self._verify_class: tuple[int, int] | None = None
        self._verified_class: tuple[int, int] | None = None
        self._result: SearchResult | None = None
        self._inconsistent = ""
        self._verify_skip = ""
        #: the per-run hit rate the current rates were derived from
        #: (:func:`bisectbot.session.honesty.adapt_rates`); None while the recipe's rates hold
        self.hit_rate: float | None = None
        #: ``{index: (hits, runs)}`` of the command runs seen per candidate, pooled over its probes
        self.runs_seen: dict[int, tuple[int, int]] = {}
        self._advance()

    # ------------------------------------------------------------------ posterior views
    @property
    def posterior(self) -> np.ndarray:
        """P(first bad = h) for h in 0..n (sums to 1; do not modify)."""
        if self._post is None:
            self._post = np.exp(self._logp)
        return self._post

    def _cdf(self) -> np.ndarray:
        """P(h <= j) for j in 0..n-1: the probability that candidate j is bad."""
        if self._q is None:
            self._q = np.clip(np.cumsum(self.posterior)[: self.n], 0.0, 1.0)
        return self._q

    def _class_ids(self) -> np.ndarray:
        """Class id of each hypothesis 0..n: h and h+1 merge when candidate h is uninformed and untestable."""
        if not self.untestable.any():
            return np.arange(self.n + 1)
        sep = ~(self.untestable & ~self.informed)  # separator after hypothesis h (h < n)
        ids = np.zeros(self.n + 1, dtype=np.int64)
        ids[1:] = np.cumsum(sep)
        return ids

    def _best_class(self) -> tuple[int, int, float]:
        """(first hypothesis, last hypothesis, mass) of the most probable class."""
        if not self.untestable.any():
            c = int(np.argmax(self.posterior))
            return c, c, float(self.posterior[c])
        ids = self._class_ids()
        mass = np.bincount(ids, weights=self.posterior)
        c = int(np.argmax(mass))
        members = np.flatnonzero(ids == c)
        return int(members[0]), int(members[-1]), float(mass[c])

    @property
    def probes(self) -> int:
        return len(self.history)

    @property
    def informative(self) -> int:
        """Verdicts the search used as good or bad (not skip)."""
        return sum(1 for st in self.history if st.effective is not Verdict.SKIP)

    @property
    def done(self) -> bool:
        return self._result is not None

    # ------------------------------------------------------------------ choosing probes
    def _info_gain(self) -> np.ndarray:
        if self._ig is not None:
            return self._ig
        q = self._cdf()
        pbad = q * (1 - self.fn) + (1 - q) * self.fp
        ig = _h_vec(pbad) - q * binary_entropy(self.fn) - (1 - q) * binary_entropy(self.fp)
        ig[self.untestable] = -1.0
        self._ig = ig
        return ig

    def _confirmation_pick(self) -> int | None:
        """The probe of the confirmation phase, or None while no class holds half the mass.

        Once one class (first-bad ``a..b``) holds at least :data:`CONFIRMATION_MASS` of the
        posterior, the search stops asking "where is the first bad?" (information gain) and
        asks "is it really this one?": it probes the testable candidate ``j`` whose verdict
        distribution under the leading class differs most from the mixture of the others,
        ``max_j D(P(. | class) || P(. | not class))`` in bits -- Chernoff's rule for the
        sequential design of experiments (Chernoff 1959), the confirmation phase of
        Burnashev's scheme (Burnashev 1976; Naghshvar & Javidi, Ann. Statist. 2013). On an
        asymmetric channel it weighs the predecessor's weak "good" evidence against the
        culprit's strong "bad" evidence instead of maximising bits about the location
        (``benchmarks/bisect_sim.py``: 1-3 % fewer probes at one-sided hit rates 0.2-0.5).
        Exact mode never needs it (None).
        """
        if self.exact:
            return None
        a, b, mass = self._best_class()
        if mass < CONFIRMATION_MASS or mass >= 1.0 - 1e-12:
            return None
        q = self._cdf()
        j = np.arange(self.n)
        own = np.where(j >= b, 1.0 - self.fn, self.fp)  # P(bad verdict | first bad in a..b)
        rest = np.clip((q - np.where(j >= b, mass, 0.0)) / (1.0 - mass), 0.0, 1.0)
        mix = rest * (1.0 - self.fn) + (1.0 - rest) * self.fp  # P(bad verdict | another class)
        d = _kl_vec(own, mix)
        d[self.untestable | ((j >= a) & (j < b))] = -1.0
        if not self.check_boundary:
            d[0] = d[self.n - 1] = -1.0
        best = float(d.max())
        if best <= _TIE:
            return None
        return int(np.flatnonzero(d >= best - _TIE)[0])

    def _quantile_picks(self, k: int, exclude: set[int]) -> list[int]:
        q = self._cdf()
        ok = ~self.untestable & (q > 1e-15) & (q < 1 - 1e-15)
        picks: list[int] = []
        for t in (i / (k + 1) for i in range(1, k + 1)):
            cand = np.flatnonzero(ok)
            cand = np.array([c for c in cand if c not in exclude and c not in picks], dtype=np.int64)
            if cand.size == 0:
                break
            picks.append(int(cand[np.argmin(np.abs(q[cand] - t))]))
        return sorted(picks)

    def next_probes(self, k: int = 1) -> list[int]:
        """Up to ``k`` candidate indices to probe now (a k-ary plan for k free runners).

        Pure: the state changes only through :meth:`feed`. Empty when the search is done.
        Order: boundary ends (bad end first: its failure signature becomes the reference),
        then verification targets (culprit, predecessor), then search probes.
        """
        if self._result is not None or k < 1:
            return []
        out: list[int] = [i for i in self._ends_left][:k]
        if self._verify_targets:
            out += [i for i in self._verify_targets if i not in out][: k - len(out)]
            return out
        if len(out) < k:
            if k - len(out) == 1 and not out:
                ig = self._info_gain()
                best = float(ig.max())
                if best > _TIE:
                    focus = self._confirmation_pick()
                    out.append(focus if focus is not None else int(np.flatnonzero(ig >= best - _TIE)[0]))
            else:
                out += self._quantile_picks(k - len(out), set(out))
        if self.verify and len(out) < k and out and not self._ends_left:
            out += self._folded_verification(out, k - len(out))
        return out

    def _outcomes(self, picks: list[int]) -> list[tuple[tuple[bool, ...], float]]:
        """Verdict combinations of ``picks`` (True = bad) with their predictive probability under
        the posterior. Exact mode: only the monotone ones (the others have probability 0)."""
        import itertools

        post = self.posterior
        h = np.arange(self.n + 1)
        if self.exact:
            combos = [tuple(j >= cut for j in range(len(picks))) for cut in range(len(picks) + 1)]
        else:
            combos = list(itertools.product((False, True), repeat=len(picks)))
        out = []
        for combo in combos:
            like = np.ones(self.n + 1)
            for i, bad in zip(picks, combo):
                pbad = np.where(h <= i, 1 - self.fn, self.fp)
                like *= pbad if bad else 1 - pbad
            out.append((combo, float((post * like).sum())))
        return out

    def _folded_verification(self, picks: list[int], free: int) -> list[int]:
        """Verification re-probes to run in the same round as the search probes ``picks``.

        The round's outcomes (verdict combinations of ``picks``, weighted by the posterior)
        are played on copies of the search; when the outcomes that end in verification hold
        at least ``confidence`` of the probability (every possible outcome in exact mode)
        and the union of their verification targets (culprit, predecessor) fits in ``free``
        slots and the probe budget, that union is returned (a candidate picked for search
        in this round then appears twice: two independent probes). Else ``[]``. Issue 16:
        "verification probes go into the same round as the last search probes wherever the
        posterior already allows it".
        """
        sorted_picks = sorted(picks)
        if self.exact:
            live = int(np.count_nonzero(np.bincount(self._class_ids(), weights=self.posterior) > 0))
            if live > len(picks) + 1:
                return []  # some outcome leaves more than one class: not the last search round
        elif len(picks) > 4:
            return []
        need = 1.0 - 1e-9 if self.exact else self.confidence
        covered = 0.0
        targets: list[int] = []
        for combo, prob in self._outcomes(sorted_picks):
            if prob <= 1e-15:
                continue
            c = self.copy()
            for i, bad in zip(sorted_picks, combo):
                if c.done:
                    break
                c.feed(i, Verdict.BAD if bad else Verdict.GOOD, self.reference if bad else None)
            if c.done or not c._verify_targets:
                continue
            covered += prob
            targets += [t for t in c._verify_targets if t not in targets]
        if covered < need or not targets or len(targets) > free:
            return []
        if self.max_probes is not None and self.probes + len(picks) + len(targets) > self.max_probes:
            return []
        return targets

    def lookahead(self, index: int) -> dict[Verdict, int | None]:
        """The probe that would come next after ``index`` turns out good or bad (for prefetch)."""
        out: dict[Verdict, int | None] = {}
        for v in (Verdict.GOOD, Verdict.BAD):
            c = self.copy()
            c.feed(index, v, self.reference)
            nxt = c.next_probes(1)
            out[v] = nxt[0] if nxt else None
        return out

    def copy(self) -> Bisection:
        c = Bisection.__new__(Bisection)
        c.__dict__.update(self.__dict__)
        c.history = list(self.history)
        c.untestable = self.untestable.copy()
        c.informed = self.informed.copy()
        c._logp = self._logp.copy()
        c._ends_left = list(self._ends_left)
        c._verify_targets = list(self._verify_targets)
        c.runs_seen = dict(self.runs_seen)
        return c

    # ------------------------------------------------------------------ feeding verdicts
    def feed(self, index: int, verdict: Verdict | str, signature: Signature | str | None = None,
             note: str = "") -> Verdict:
        """Record the verdict of a probe of candidate ``index``; returns the verdict the search used.

        A ``bad`` whose ``signature`` does not match the reference (the first bad's) is
        used as ``skip``. Raises ``ValueError`` for an index out of range or after the end.
        """
        if not 0 <= index < self.n:
            raise ValueError(f"candidate index {index} out of range 0..{self.n - 1}")
        if self._result is not None:
            raise ValueError("the search is over; no more verdicts")
        v = Verdict(verdict)
        eff = v
        sig = Signature.parse(signature) if isinstance(signature, str) else signature
        if v is not Verdict.SKIP and sig is not None and sig.kind:
            ref = self.reference if v is Verdict.BAD else self.good_reference
            if ref is None:
                if v is Verdict.BAD:
                    self.reference = sig
                else:
                    self.good_reference = sig
            elif not ref.same_failure(sig):
                eff = Verdict.SKIP
                side = "bad" if v is Verdict.BAD else "good (still broken)"
                note = (note + "; " if note else "") + (
                    f"{side} with a different failure signature ({sig}, expected {ref}): used as skip")
        self._post = self._q = self._ig = None
        phase = ("boundary" if index in self._ends_left else "verify" if index in self._verify_targets
                 else "search")
        self.history.append(Step(index, v, eff, _sig_str(sig), phase, note))
        if index in self._ends_left:
            self._ends_left.remove(index)
            if eff is Verdict.SKIP:
                end = "good" if index == 0 else "bad"
                self._finish(Status.BOUNDARY_FAILED, message=(
                    f"the {end} end is untestable (skip){': ' + note if note else ''}; "
                    f"choose another {end} end"))
                return eff
        if index in self._verify_targets:
            self._verify_targets.remove(index)
            if eff is Verdict.SKIP:
                self._verify_skip = f"the re-probe of candidate {index} was skip"
            elif self.exact and eff is Verdict.BAD:
                moved = self._threshold_moved(index, sig)
                if moved:
                    self._verify_skip = moved
        if eff is Verdict.SKIP:
            self.untestable[index] = True
        else:
            self._update(index, eff is Verdict.BAD)
        self._advance()
        return eff

    def _threshold_moved(self, index: int, sig: Signature | None) -> str:
        """Why the re-probe of ``index`` (a bad verdict with ``sig``) contradicts its first bad
        probe, or ``""``: an exact search assumes a deterministic reproducer, and a
        deterministic reproducer finds the same first-garbage threshold on the same build
        again. A threshold that moved by more than :data:`REPROBE_BAND` shows a flaky bug
        (its OK replies above the true threshold pushed one measurement up) whose "good"
        verdicts cannot be trusted either: the verification fails (issue 12's flaky kind
        with no repeats and no flake rates: 1 run in 25 named a later commit, verified)."""
        if sig is None or not sig.threshold:
            return ""
        for st in self.history[:-1]:
            if st.index != index or st.effective is not Verdict.BAD:
                continue
            first = Signature.parse(st.signature)
            if first is None or not first.threshold or not first.same_failure(sig):
                continue
            lo, hi = sorted((first.threshold, sig.threshold))
            if hi > lo * REPROBE_BAND:
                return (f"the re-probe of candidate {index} found garbage from {sig.threshold} tokens, its first "
                        f"probe from {first.threshold} tokens: the reproducer is not deterministic (a flaky bug); "
                        "set reproducer.repeats (runs per size, combined one-sidedly) or bisect.flake rates")
        return ""

    def set_rates(self, false_positive: float, false_negative: float, parallel: int = 1) -> None:
        """Change the per-probe flake rates (e.g. once the bad end's repeats gave the hit rate,
        :func:`per_probe_rates`) and recompute the posterior from every verdict so far; without
        ``max_probes`` the budget becomes :func:`default_budget` at the new rates (``parallel``
        probes per round).
        Raises ``ValueError`` on impossible rates (see the class doc)."""
        _check_rates(false_positive, false_negative)
        self.fp, self.fn = float(false_positive), float(false_negative)
        self.exact = self.fp == 0.0 and self.fn == 0.0
        if self.max_probes is None:  # a derived budget follows the rates
            self.budget = default_budget(self.n, self.fp, self.fn, self.confidence, parallel)
        self._logp = np.zeros(self.n + 1)
        if not self.check_boundary:
            self._logp[0] = self._logp[self.n] = -np.inf
        self._logp -= np.logaddexp.reduce(self._logp)
        self._post = self._q = self._ig = None
        self._inconsistent = ""
        for st in self.history:
            if st.effective is not Verdict.SKIP:
                self._update(st.index, st.effective is Verdict.BAD)
        self._advance()

    def drift(self) -> Drift | None:
        """Threshold drift among the bad verdicts, or None.

        Drift: the first-garbage threshold (tokens) of the lowest-index bad candidate and that
        of the highest-index one differ by more than ``signature_band``. The failure is the
        same (it counts as bad all along); where the threshold moved is a second question,
        answered by a second search with :func:`judge_drift`.
        """
        pts = sorted(((st.index, Signature.parse(st.signature)) for st in self.history
                      if st.effective is Verdict.BAD and st.signature), key=lambda p: p[0])
        pts = [(i, sg.threshold) for i, sg in pts if sg is not None and sg.threshold]
        if len(pts) < 2:
            return None
        (i0, t0), (i1, t1) = pts[0], pts[-1]
        if max(t0, t1) <= min(t0, t1) * self.signature_band:
            return None
        return Drift(i0, t0, i1, t1)

    def _update(self, j: int, bad: bool) -> None:
        self.informed[j] = True
        with np.errstate(divide="ignore"):
            if bad:  # h <= j: candidate j is truly bad
                lo, hi = math.log(1 - self.fn), (math.log(self.fp) if self.fp > 0 else -math.inf)
            else:
                lo, hi = (math.log(self.fn) if self.fn > 0 else -math.inf), math.log(1 - self.fp)
        self._logp[: j + 1] += lo
        self._logp[j + 1:] += hi
        top = float(self._logp.max())
        if not np.isfinite(top):
            self._inconsistent = (
                f"verdicts contradict each other (candidate {j} {'bad' if bad else 'good'}); "
                "the probe may be flaky: set bisect.flake rates")
            return
        p = np.exp(self._logp - top)
        total = float(p.sum())
        self._logp -= top + math.log(total)
        self._post = p / total

    def _finish(self, status: Status, first_bad: int | None = None, last_good: int | None = None,
                culprits: Sequence[int] = (), confidence: float = 0.0, verified: bool = False,
                message: str = "") -> None:
        self._result = SearchResult(status, first_bad, last_good, list(culprits), confidence, verified,
                                    self.probes, message)
        self._verify_targets = []

    def _advance(self) -> None:
        if self._result is not None:
            return
        if self._inconsistent:
            phase = "verification failed: " if self._verify_class is not None else ""
            self._finish(Status.INCONCLUSIVE, message=phase + self._inconsistent)
            return
        if self._ends_left:
            return
        if self._verify_targets:  # verification round still running
            return
        a, b, mass = self._best_class()
        met = mass >= self.confidence - 1e-12
        if self._verify_class is not None:  # a verification round just ended
            vc, self._verify_class = self._verify_class, None
            skip, self._verify_skip = self._verify_skip, ""
            if met and (a, b) == vc and not skip:
                self._verified_class = vc
            elif self.exact:
                self._finish(Status.INCONCLUSIVE, confidence=mass, message="verification failed: " + (
                    skip or "the re-probes of culprit and predecessor disagree"))
                return
        if met:
            if a == 0:
                self._finish(Status.BOUNDARY_FAILED, confidence=mass,
                             message="the good end is bad: the regression is older than the range")
                return
            if b == self.n:
                self._finish(Status.NO_REGRESSION, confidence=mass,
                             message="the bad end is not bad: nothing to bisect")
                return
            if self.verify and self._verified_class != (a, b):
                targets = [i for i in (b, a - 1) if not self.untestable[i]]
                if not targets:
                    self._finish(Status.INCONCLUSIVE, b, a - 1, range(a, b + 1), mass,
                                 message="cannot verify: culprit and predecessor are untestable now")
                    return
                if ((self.max_probes is None or self.probes < self.max_probes)
                        and (self.budget is None or self.informative < self.budget)):
                    self._verify_class = (a, b)
                    self._verify_targets = targets
                    return
            if not self.verify or self._verified_class == (a, b):
                status = Status.CULPRIT if a == b else Status.RANGE
                msg = "" if a == b else (
                    f"only skipped candidates left to test: the first bad is one of {b - a + 1} candidates")
                self._finish(status, b, a - 1, range(a, b + 1), mass, self.verify, msg)
                return
        spent = ""
        if self.max_probes is not None and self.probes >= self.max_probes:
            spent = f"probe budget ({self.max_probes} probes) spent; "
        elif self.budget is not None and self.informative >= self.budget:
            spent = (f"probe budget ({self.budget} good/bad verdicts, 3x the information bound + 4) spent "
                     f"after {self.probes} probes; ")
        if spent:
            self._finish(Status.INCONCLUSIVE, b if 0 < b < self.n else None, a - 1 if a > 0 else None,
                         range(a, b + 1) if 0 < a <= b < self.n else [], mass,
                         message=spent + (
                             "the culprit was not verified" if met else
                             f"the best guess holds {mass:.1%} < {self.confidence:.0%}"))
            return
        if float(self._info_gain().max()) <= _TIE:
            self._finish(Status.INCONCLUSIVE, confidence=mass,
                         message="no testable candidate left that could raise the confidence")

    # ------------------------------------------------------------------ reporting
    def result(self) -> SearchResult:
        """The outcome; while the search runs, the current best guess with status INCONCLUSIVE."""
        if self._result is not None:
            return self._result
        a, b, mass = self._best_class()
        return SearchResult(Status.INCONCLUSIVE, b if 0 < b < self.n else None, a - 1 if a > 0 else None,
                            list(range(a, b + 1)) if 0 < a <= b < self.n else [], mass, False,
                            self.probes, "search not finished")

    def steps_left(self) -> int:
        """Rough number of probes still needed (``~N probes left``), verification included."""
        if self._result is not None:
            return 0
        ids = self._class_ids()
        mass = np.bincount(ids, weights=self.posterior)
        extra = len(self._ends_left) + (2 if self.verify and not self._verify_targets else len(self._verify_targets))
        if self.exact:
            live = int(np.count_nonzero(mass > 0)) - len(self._ends_left)
            return extra + (math.ceil(math.log2(live)) if live > 1 else 0)
        m = mass[mass > 0]
        ent = float(-(m * np.log2(m)).sum())
        est = channel_bound(2, self.fp, self.fn, 1 - self.confidence) - 1 / channel_capacity(self.fp, self.fn)
        est += ent / channel_capacity(self.fp, self.fn)
        return extra + max(0, math.ceil(est - 1e-9))

    @classmethod
    def replay(cls, n: int, steps: Iterable[tuple[int, Verdict | str, str]], **kw: Any) -> Bisection:
        """Rebuild a search from ``(index, verdict, signature)`` triples (a session log)."""
        b = cls(n, **kw)
        for i, v, s in steps:
            if b.done:
                break
            b.feed(i, v, s or None)
        return b


# --------------------------------------------------------------------------- failure signature


@dataclass(frozen=True)
class Signature:
    """What a bad probe looked like; a later bad that does not match is ``skip``.

    ``kind``: ``garbage``, ``all-garbage``, ``error``, ``fixed`` (fix bisection), ``exit``
    (command), ``patch``. ``threshold``: first bad prompt size in **tokens** (None when
    not measured). ``detail``: exit code, patch state, reasons (for humans; compared only
    for ``exit`` and ``patch``).
    """

    kind: str
    threshold: int | None = None
    detail: str = ""

    def same_failure(self, other: Signature) -> bool:
        """Same kind and, for ``exit``/``patch``, the same exit code/state; thresholds are not
        compared (a moved threshold is drift of the same failure, issue 12).

        A threshold search of a command reproducer (kind ``garbage``/``all-garbage``) names
        how its runs failed in ``detail`` (``exit 1``, ``crash (SIGSEGV)``, ``timeout after
        2 s``; :func:`command_failures`): when both signatures name such failures and none is
        shared, they are different failures (an out-of-memory exit 3 or a segfault above 16K
        tokens on older commits is not the bad end's exit 1 above 8K; before, it was taken
        for the bug and named a wrong culprit, verified). Classifier reasons of a prefill
        reproducer are not compared (garbage varies in kind from reply to reply).
        """
        if self.kind != other.kind:
            return False
        if self.kind in ("exit", "patch"):
            return self.detail == other.detail
        mine, theirs = command_failures(self.detail), command_failures(other.detail)
        return not (mine and theirs and not mine & theirs)

    def matches(self, other: Signature, band: float = 2.0) -> bool:
        """:meth:`same_failure` and thresholds within a factor ``band`` of each other."""
        if not self.same_failure(other):
            return False
        if self.threshold and other.threshold:
            hi, lo = max(self.threshold, other.threshold), min(self.threshold, other.threshold)
            return hi <= lo * band
        return True

    def __str__(self) -> str:
        s = self.kind
        if self.threshold is not None:
            s += f"@{self.threshold}"
        if self.detail:
            s += f" ({self.detail})"
        return s

    _RE = re.compile(r"^(?P<kind>[\w-]+)(?:@(?P<thr>\d+))?(?: \((?P<detail>.*)\))?$")

    @classmethod
    def parse(cls, s: str) -> Signature | None:
        """Inverse of ``str()``; None for an empty string."""
        s = (s or "").strip()
        if not s:
            return None
        m = cls._RE.match(s)
        if not m:
            return cls(kind=s)
        thr = m.group("thr")
        return cls(m.group("kind"), int(thr) if thr else None, m.group("detail") or "")


_COMMAND_FAILURE = re.compile(r"\b(exit \d+\b|crash \([\w ]+\)|timeout\b)")


def command_failures(detail: str) -> frozenset[str]:
    """How the runs of a command reproducer failed, from a signature's ``detail`` (the reasons
    of :func:`bisectbot.reproduce.command.command_outcome`): ``{"exit 1"}``,
    ``{"crash (SIGSEGV)"}``, ``{"timeout"}`` (durations dropped). Empty for classifier reasons."""
    return frozenset(_COMMAND_FAILURE.findall(detail or ""))


# --------------------------------------------------------------------------- verdict rules per regress mode


@dataclass
class Judgement:
    """A verdict with its reason (one line) and failure signature: what the failure looked
    like, on a bad verdict, or on a good one of a fix bisection ("still broken"); else None."""

    verdict: Verdict
    reason: str
    signature: Signature | None = None


def _mode_arg(regress: Any) -> tuple[str, Any]:
    if isinstance(regress, str):
        mode, _, arg = regress.partition(":")
        return mode.strip(), (arg.strip() or None)
    return regress.mode, regress.arg


def judge_threshold(regress: Any, status: str, last_ok: int | None = None, first_garbage: int | None = None,
                    reasons: Sequence[str] = (), error: str | None = None) -> Judgement:
    """Verdict of a threshold search (``bisectbot.reproduce.threshold.ThresholdResult``).

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
    mode, arg = _mode_arg(regress)
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
    from .errors import BisectbotError

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
    from .errors import BadInput

    mode, _ = _mode_arg(regress)
    rule = _PATCH_RULES.get(mode)
    if rule is None:
        raise BadInput(f"regress mode '{mode}' is not supported by this bisectbot yet (patch modes: issue 8)")
    return rule(regress, states)


def is_patch_mode(regress: Any) -> bool:
    """True for the regress modes judged from patch states instead of a server."""
    return _mode_arg(regress)[0] in ("patch-upstream", "patch-conflict")


# --------------------------------------------------------------------------- plausibility and blame

FLAG_TEXT = {
    "merge": "the culprit is a merge commit",
    "docs-tests-only": "the change touches only docs/tests",
    "outside-runtime-paths": "the change is outside the component's runtime paths",
    "no-op-build": "the culprit builds the same as its predecessor (identical build)",
}

_DOCS_TESTS = ("docs/*", "doc/*", "*.md", "*.rst", "*.txt", "LICENSE*", ".github/*", "tests/*", "test/*",
               "*/tests/*", "*/test/*", "test_*.py", "*/test_*.py", "*_test.py", "conftest.py", "*/conftest.py")
#: Files that decide what is built and installed: they ship, whatever their extension
#: (a ``*.txt`` is documentation unless it is one of these; issue 12).
BUILD_FILES = ("CMakeLists.txt", "*/CMakeLists.txt", "*.cmake", "cmake/*", "setup.py", "setup.cfg",
               "pyproject.toml", "requirements*.txt", "requirements/*", "*/requirements*.txt", "MANIFEST.in",
               "Makefile", "*/Makefile", "*.mk", "Dockerfile*", "docker/*", "build.sh", "*.in",
               "use_existing_torch.py")


def _matches(path: str, patterns: Iterable[str]) -> bool:
    for pat in patterns:
        pat = pat.rstrip("/")
        if fnmatch.fnmatch(path, pat) or path == pat or path.startswith(pat + "/"):
            return True
    return False


def plausibility_flags(*, parents: int | None = None, changed_paths: Sequence[str] | None = None,
                       runtime_paths: Sequence[str] = (), same_build: bool | None = None) -> list[str]:
    """Flags (keys of :data:`FLAG_TEXT`) that make a culprit implausible.

    ``parents``: number of parents of the culprit commit (None for non-commits).
    ``changed_paths``: paths changed against its predecessor (None when unknown).
    ``runtime_paths``: path prefixes/globs that ship at runtime (from ``GitSource.runtime_paths``);
    empty = not checked. ``same_build``: the culprit's build key equals its predecessor's.

    Precedence, per changed path (issue 12): a path in ``runtime_paths`` ships, whatever
    the built-in rules say (``requirements/rocm.txt`` listed there is not documentation);
    then build files (:data:`BUILD_FILES`: ``CMakeLists.txt``, ``setup.py``,
    ``requirements*.txt``, ...) ship; then docs/tests patterns. A culprit is
    ``docs-tests-only`` when every path is docs/tests, ``outside-runtime-paths`` when
    ``runtime_paths`` is set and no path ships.
    """
    flags: list[str] = []
    if parents is not None and parents > 1:
        flags.append("merge")
    if changed_paths is not None and changed_paths:
        ships = [p for p in changed_paths if _matches(p, runtime_paths) or _matches(p, BUILD_FILES)]
        if not ships and all(_matches(p, _DOCS_TESTS) for p in changed_paths):
            flags.append("docs-tests-only")
        elif runtime_paths and not ships:
            flags.append("outside-runtime-paths")
    if same_build:
        flags.append("no-op-build")
    return flags


def confidence_text(confidence: float, percent: bool = False) -> str:
    """A posterior probability (0..1) as text, never rounded up to certainty: two decimals
    (``0.97``; ``percent``: one decimal of a percent, ``97.0%``), more where those would
    read 1.00 / 100.0% for a value below 1 (``0.998``, ``>0.9999``; ``99.96%``, ``>99.999%``).
    Only an exact search's 1.0 prints as ``1.00`` / ``100.0%``."""
    c = min(1.0, max(0.0, float(confidence)))
    scale, unit, digits = (100.0, "%", 1) if percent else (1.0, "", 2)
    if c >= 1.0:
        return f"{scale:.{digits}f}{unit}"
    for d in (digits, digits + 1, digits + 2):
        text = f"{c * scale:.{d}f}"
        if float(text) < scale:
            return text + unit
    return f">{scale - 10 ** -(digits + 2):.{digits + 2}f}{unit}"


def may_blame(status: Status | str, confidence: float, flags: Sequence[str],
              blame_confidence: float = 0.66) -> tuple[bool, str]:
    """Whether a result may blame a commit (GitHub step): ``(allowed, reason)``.

    Refuses anything but a single verified culprit, a flagged culprit, or a confidence below
    ``blame_confidence`` (``recipe.bisect.blame_confidence``, 0.66 by default, issue 6). The
    one blame rule: the report (:func:`bisectbot.report.render.blame_decision`) and the exit
    code of ``bisectbot run`` (3 when it will not blame, issue 12) follow it.
    """
    st = Status(status)
    if st is not Status.CULPRIT:
        return False, f"no single culprit (status {st.value}): report the range, blame no one"
    if flags:
        return False, "plausibility flags: " + "; ".join(FLAG_TEXT.get(f, f) for f in flags)
    if confidence < blame_confidence:
        return False, f"confidence {confidence_text(confidence)} is below {blame_confidence:.2f}"
    return True, f"culprit verified with confidence {confidence_text(confidence)}"


# --------------------------------------------------------------------------- non-linear history


def merge_descent(parents: Sequence[str], merge_base: str | None) -> tuple[str, str] | None:
    """Where to search when a first-parent bisection names a merge commit (issue 12).

    ``parents`` are the merge's parents (first = main line, already known good: it is the
    last good of the first-parent search); ``merge_base`` is the merge base of the first and
    second parent. Returns ``(good, bad)`` of the second search: over the second parent's
    first-parent chain from the merge base (exclusive good end) to the branch tip (bad
    end), so that the culprit's last good is always its parent. None when the culprit is
    not a merge or the branch brought no commits of its own (octopus merges descend into
    the second parent only).
    """
    if len(parents) < 2 or not merge_base or merge_base == parents[1]:
        return None
    return merge_base, parents[1]


# --------------------------------------------------------------------------- coupled components


@dataclass
class Attribution:
    """Which component to bisect after the mixed pairs, and where the others stay.

    ``component`` None: no decision (``reason`` says why). ``pin`` is ``old`` (the others
    at their last-good commits: the component's change alone is bad) or ``new`` (the others
    at their first-bad commits: the component's change is needed, e.g. it uses an API that
    only the new version of another component has).
    """

    component: str | None
    pin: str
    reason: str
    exact: bool = True


def attribute_components(changed: Sequence[str], alone: dict[str, Verdict],
                         without: dict[str, Verdict] | None = None) -> Attribution:
    """Decide the component stage from the mixed pairs (pure rule, issue 12).

    ``alone[x]``: verdict of "new ``x`` + old others"; ``without[x]``: verdict of "old ``x``
    + new others" (for two components it is ``alone`` of the other one and may be left out).
    Ends: all old is good, all new is bad.

    * exactly one ``x`` bad alone -> bisect ``x``, others pinned **old**;
    * several bad alone -> the first of them, pinned old (``exact`` False: each reproduces);
    * none bad alone, but some ``x`` whose removal is good (``without[x]`` good) and whose
      change alone could not be tested (``alone[x]`` skip: e.g. new vLLM needs an aiter API
      that old aiter lacks) -> bisect ``x`` with the others pinned **new** (its ends are then
      good and bad);
    * else no decision: the regression needs the changes together (each alone is good) or
      no bisectable pair exists; said plainly, no component is blamed.
    """
    bad_alone = [x for x in changed if alone.get(x) is Verdict.BAD]
    if len(bad_alone) == 1:
        return Attribution(bad_alone[0], "old", f"the regression comes with {bad_alone[0]} alone")
    if bad_alone:
        return Attribution(bad_alone[0], "old", f"each of {', '.join(bad_alone)} is bad alone; "
                                                 f"bisecting {bad_alone[0]} first", exact=False)
    if without is None:
        without = {}
        if len(changed) == 2:
            a, b = changed
            without = {a: alone.get(b, Verdict.SKIP), b: alone.get(a, Verdict.SKIP)}
    needed = [x for x in changed if without.get(x) is Verdict.GOOD and alone.get(x) is not Verdict.GOOD]
    if needed:
        x = needed[0]
        others = ", ".join(c for c in changed if c != x)
        how = {Verdict.SKIP: "untestable", Verdict.GOOD: "good"}.get(alone.get(x, Verdict.SKIP), "good")
        return Attribution(x, "new", f"new {x} + old {others} is {how} and old {x} + new {others} is good: "
                                     f"{x}'s change is needed; bisecting {x} with {others} at the bad end")
    return Attribution(None, "old", "no single component reproduces alone and none is needed alone: "
                                    "the regression needs the changes together")


# --------------------------------------------------------------------------- patch regress modes (issue 8)


def _patch_state(regress: Any, states: Sequence[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    from .errors import BadInput

    mode, pid = _mode_arg(regress)
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
