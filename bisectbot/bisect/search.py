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

The verdicts it is fed come from :mod:`bisectbot.verdict`, its budget from :mod:`.bounds`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..models import Status, Verdict
from .bounds import _h_vec, _kl_vec, binary_entropy, channel_bound, channel_capacity, default_budget
from .drift import Drift
from .signatures import Signature

_TIE = 1e-12  # information-gain ties (bits) go to the lower index
#: Largest factor between the first-garbage thresholds of two bad probes of one build that an
#: exact search accepts as the same measurement (:meth:`Bisection._threshold_moved`): a
#: deterministic reproducer finds the same interval again (issue 11: <= 3 % wide); 1.25
#: leaves room for a boundary that wobbles on real GPUs.
REPROBE_BAND = 1.25
#: Posterior mass of the leading class from which the search confirms instead of locating
#: (:meth:`Bisection._confirmation_pick`); Burnashev's scheme switches at 1/2.
CONFIRMATION_MASS = 0.5
#: Per-run hit rates a bug shared by every bad candidate may have when the recipe gives no rates
#: (:meth:`Bisection.set_open_hit_rates`): the midpoints of 40 equal bins of (0, 1), the same
#: resolution as the false-positive grid of :mod:`bisectbot.verdict.honesty` (2.5 points of rate:
#: finer than a night's runs can tell apart; 3-30 runs a candidate give a binomial standard error
#: of 8-25 points at a 30 % rate); those at or below ``max(min_hit_rate, f)`` are left out.
SHARED_HIT_RATES = tuple((i + 0.5) / 40 for i in range(40))
#: How a flaky bug's rate may vary over its bad candidates when the recipe gives no rates
#: (:meth:`Bisection.set_open_hit_rates`), each description a quarter of the prior (the fourth is
#: the step, :data:`STEP_HIT_RATES`): 1, every bad candidate has the bug's one rate; 0, each its
#: own; 1/2, each has the bug's rate or its own, equally likely. No preference among the four, so
#: the runs decide; 1/2 is that same indifference for one candidate.
SHARE_PRIORS = (1.0, 0.5, 0.0)
#: Per-run hit rates of the **step** description (:meth:`Bisection.set_open_hit_rates`): one rate
#: ``a`` from the first bad up to a step, another ``b`` from the step to the bad end (a second
#: trigger entering later, or one leaving). Ten rates evenly spaced in ``arcsin(sqrt(rate))``, the
#: binomial's variance-stabilising angle: neighbours are the same number of standard errors apart
#: wherever they lie, so the grid is as fine near 0 and 1 (0.006, 0.055 ... 0.945, 0.994), where
#: many runs make the likelihood sharp, as in the middle (0.42, 0.58). An evenly spaced grid of
#: ten tops out at 0.95 and cost a deterministic second rate 0.95^90 = e^-4.6 over 90 runs: the
#: step lost to the noise explanation it exists to beat. No floor beyond the good side's rate.
STEP_HIT_RATES = tuple(math.sin((i + 0.5) / 10 * math.pi / 2) ** 2 for i in range(10))
#: ``_open_rho`` of a step row (not a share).
_STEP = -1.0
#: Runs of one candidate within which a step's rate must be tellable from the good side's rate
#: ``f`` (:meth:`Bisection.set_open_hit_rates`): the most a night gives one candidate (3-30 runs, as
#: above). Tellable: those runs' expected log-likelihood ratio, ``_STEP_RUNS * KL(rate || f)``, reaches
#: the search's odds ``log(1 / (1 - confidence))``. A rate closer to ``f`` is the good side's noise
#: to every probe the night can afford; allowed, it let "the bug entered earlier at a rate just
#: above the noise" hold a share no run could take away (two-sided noise, 40 simulated searches:
#: 3 right instead of 25, the rest inconclusive).
_STEP_RUNS = 30


def _kl(a: np.ndarray, f: float) -> np.ndarray:
    """Kullback-Leibler divergence (nats a run) of a per-run rate ``a`` from ``f``."""
    return a * np.log(a / f) + (1 - a) * np.log((1 - a) / (1 - f))


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
    #: ``(hits, runs)`` of the probe's repeats (:meth:`Bisection.attach_runs`), None when not counted
    runs: tuple[int, int] | None = None
    #: independent measurements this one verdict holds (:meth:`Bisection.feed`): 1 for a server
    #: start; with ``bisect.flake_unit: request`` the agreeing requests of the probe
    measurements: int = 1

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
        #: ``{index: verdict}`` measured of the same build before this search (:meth:`measured_before`)
        self._before: dict[int, Verdict] = {}
        #: the per-run hit rate the current rates were derived from
        #: (:func:`bisectbot.verdict.honesty.adapt_rates`); None while the recipe's rates hold
        self.hit_rate: float | None = None
        #: ``{index: (hits, runs)}`` of the command runs seen per candidate, pooled over its probes
        self.runs_seen: dict[int, tuple[int, int]] = {}
        #: per-probe ``(false_positive, false_negative)`` of each hit-rate hypothesis and their log
        #: prior weights (:meth:`set_hit_rate_prior`); None while the rates are known exactly
        self._grid: tuple[np.ndarray, np.ndarray] | None = None
        self._grid_logw: np.ndarray | None = None
        self._logp2: np.ndarray | None = None  # log P(hit-rate hypothesis g, first bad h), shape (G, n + 1)
        #: per-run ``(false_positive, hit_rate)`` of each hypothesis once the noise is two-sided
        #: (:meth:`set_run_mixture`): steps with counted runs are then weighed run by run
        self._run_grid: tuple[np.ndarray, np.ndarray] | None = None
        #: per-run false-positive rates of each hypothesis once the hit rate is per candidate
        #: (:meth:`set_open_hit_rates`), and the lowest per-run hit rate a bad candidate may have
        self._open_f: np.ndarray | None = None
        #: the shared per-run hit rate of each such hypothesis (NaN where every bad candidate has its
        #: own) and the share of bad candidates that have it (:data:`SHARE_PRIORS`)
        self._open_mu: np.ndarray | None = None
        self._open_rho: np.ndarray | None = None
        #: the step description's first rate per hypothesis (NaN off the step rows, where
        #: ``_open_rho`` is :data:`_STEP` and ``_open_mu`` holds the rate after the step)
        self._open_a: np.ndarray | None = None
        #: :meth:`_log_bad_runs` by ``(k, m)`` at the current open rates
        self._bad_cache: dict[tuple[int, int], np.ndarray] = {}
        self._h_min = 0.0
        self._repeats = 1
        #: True when a probe's verdict may carry two agreeing measurements itself (``bisect.flake_unit:
        #: request``, :meth:`feed`'s ``measurements``): verification re-probes are then not folded into
        #: the last search round ahead of the verdicts that may make them unneeded
        self.in_probe_verification = False
        #: verification re-probes :meth:`steps_left` expects (2: culprit and predecessor; fewer where the
        #: recipe's verdicts can verify a role inside its probe, :func:`bisectbot.verdict.agreement.expected_reprobes`)
        self.expected_reprobes = 2
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
        if self._open_f is not None and self._logp2 is not None:
            self._ig = self._open_info_gain()
            return self._ig
        q = self._cdf()
        pbad = q * (1 - self.fn) + (1 - q) * self.fp
        ig = _h_vec(pbad) - q * binary_entropy(self.fn) - (1 - q) * binary_entropy(self.fp)
        ig[self.untestable] = -1.0
        self._ig = ig
        return ig

    def _open_info_gain(self) -> np.ndarray:
        """Expected information (bits) about the first bad from the next probe of each candidate when
        each bad candidate's hit rate is its own (:meth:`set_open_hit_rates`): the mutual information
        between the first bad and the probe's count of failing runs (0..``repeats``), predicted under
        the joint posterior over the first bad and the good side's false-positive rate ``f``, with a
        bad candidate's next runs predicted from its own runs so far. A per-probe verdict at mean
        rates cannot see what separates "the bug from ``h`` at a low rate" from "the bug later, and
        the good side noisy": the good side's rate, which any candidate held good answers, the good
        end too (a candidate every hypothesis calls good still tells the hypotheses apart through
        ``f``). Untestable candidates get -1. No constant beyond the model's own."""
        assert self._open_f is not None and self._logp2 is not None
        f, r, n = self._open_f, self._repeats, self.n
        p2 = np.exp(self._logp2 - float(self._logp2.max()))
        p2 /= p2.sum()
        ph = p2.sum(axis=0)  # P(first bad = hyp), (n + 1,)
        cond = np.divide(p2, ph[None, :], out=np.zeros_like(p2), where=ph[None, :] > 0)  # P(f | hyp)
        i = np.arange(r + 1)
        log_choose = np.array([math.lgamma(r + 1) - math.lgamma(x + 1) - math.lgamma(r - x + 1) for x in i])

        def entropy_rows(p: np.ndarray) -> np.ndarray:
            with np.errstate(divide="ignore", invalid="ignore"):
                return -np.where(p > 0, p * np.log2(p), 0.0).sum(axis=1)

        good = np.exp(log_choose[None, :] + i[None, :] * np.log(f)[:, None] + (r - i)[None, :] * np.log1p(-f)[:, None])
        pg = cond.T @ good  # P(count | hyp) of a good candidate, (n + 1, r + 1)
        wg = ph[:, None] * pg
        cum_g, tot_g = np.cumsum(wg, axis=0), wg.sum(axis=0)
        hg = ph * entropy_rows(pg)
        cum_hg, tot_hg = np.cumsum(hg), hg.sum()
        pooled = self._pooled_runs()
        out = np.full(n, -1.0)
        by_runs: dict[tuple[int, int], list[int]] = {}
        for j in range(n):
            if not self.untestable[j]:
                by_runs.setdefault(pooled.get(j, (0, 0)), []).append(j)
        for (k, m), js in by_runs.items():
            base = self._log_bad_runs(k, m)
            bad = np.exp(log_choose[None, :] + np.stack([self._log_bad_runs(k + x, m + r) for x in i], axis=1)
                         - base[:, None])
            bad = np.nan_to_num(bad / np.maximum(bad.sum(axis=1, keepdims=True), 1e-300))
            pb = cond.T @ bad
            cum_b = np.cumsum(ph[:, None] * pb, axis=0)
            cum_hb = np.cumsum(ph * entropy_rows(pb))
            idx = np.asarray(js)
            outcome = cum_b[idx] + (tot_g[None, :] - cum_g[idx])  # P(count) at candidate j: bad iff hyp <= j
            within = cum_hb[idx] + (tot_hg - cum_hg[idx])
            out[idx] = entropy_rows(outcome) - within
        return out

    def _pooled_runs(self) -> dict[int, tuple[int, int]]:
        """``{index: (failing runs, runs)}`` of the counted probes the search used, pooled per candidate."""
        pooled: dict[int, tuple[int, int]] = {}
        for st in self.history:
            if st.effective is not Verdict.SKIP and st.runs is not None:
                k, m = pooled.get(st.index, (0, 0))
                pooled[st.index] = (k + st.runs[0], m + st.runs[1])
        return pooled

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
        if self.exact or self._open_f is not None:  # open rates: the joint information gain throughout
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
        if self.verify and len(out) < k and out and not self._ends_left and not self.in_probe_verification:
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
        c._logp2 = None if self._logp2 is None else self._logp2.copy()
        return c

    # ------------------------------------------------------------------ feeding verdicts
    def feed(self, index: int, verdict: Verdict | str, signature: Signature | str | None = None,
             note: str = "", runs: tuple[int, int] | None = None, measurements: int = 1) -> Verdict:
        """Record the verdict of a probe of candidate ``index``; returns the verdict the search used.

        A ``bad`` whose ``signature`` does not match the reference (the first bad's) is
        used as ``skip``. ``measurements``: how many independent measurements agree on this one
        verdict (1: one server start; more where the recipe's flake unit is the request and the
        probe's requests agree, :func:`bisectbot.verdict.agreement.agreeing`); verification counts
        them (:meth:`measurements_of`) and needs no re-probe of a role that already holds two. It
        does not enter the posterior (an exact search's verdicts are certain; a noisy search's
        per-probe rates already hold its requests). Raises ``ValueError`` for an index out of
        range, a count below 1, or after the end.
        """
        if measurements < 1:
            raise ValueError(f"a verdict holds at least one measurement, got {measurements}")
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
        ok = runs is not None and 0 <= runs[0] <= runs[1] and runs[1] >= 1
        self.history.append(Step(index, v, eff, _sig_str(sig), phase, note, runs if ok else None,
                                 int(measurements)))
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
        elif self._open_f is not None:  # a candidate's runs are weighed pooled: recompute
            self._replay()
            return eff
        else:
            self._update(index, eff is Verdict.BAD, self.history[-1].runs)
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
        self._grid = self._grid_logw = self._run_grid = self._open_f = None
        self._set_point_rates(false_positive, false_negative, parallel)
        self._replay()

    def set_rate_mixture(self, rates: Sequence[tuple[float, float]], weights: Sequence[float],
                         parallel: int = 1) -> None:
        """The per-probe flake rates are not known, only a distribution over them: ``rates`` are
        ``(false_positive, false_negative)`` pairs (each valid as in the class doc), ``weights`` their
        prior weights (>= 0, not all 0; normalised here), e.g. the per-probe rates of a grid of
        per-run hit rates weighted by their Beta posterior from the bad end's runs
        (:func:`bisectbot.bisect.hit_rate_prior`). The posterior over the first bad is then the
        mixture ``P(h | verdicts) = sum_g w_g P(verdicts | h, rates_g) / Z``, recomputed from every
        verdict so far, and the confidence is that mixture's: a hit rate guessed too high from few
        runs (2 of 3 runs: 0.4 where the truth is 0.3) no longer makes clean probes of a bad
        candidate read as "good" at the guess's strength (issue 23). Probes are chosen, and the
        budget set, at the weighted mean rates. Raises ``ValueError`` on impossible arguments."""
        w = np.asarray(weights, dtype=float)
        if len(rates) == 0 or w.shape != (len(rates),) or not np.all(w >= 0) or float(w.sum()) <= 0:
            raise ValueError("need one weight >= 0 per (false_positive, false_negative) pair, not all 0")
        for a, b in rates:
            _check_rates(a, b)
        w = w / w.sum()
        fp = np.array([a for a, _ in rates], dtype=float)
        fn = np.array([b for _, b in rates], dtype=float)
        self._set_point_rates(float((w * fp).sum()), float((w * fn).sum()), parallel)
        keep = w > 0
        self._grid = (fp[keep], fn[keep])
        self._grid_logw = np.log(w[keep])
        self._run_grid = self._open_f = None
        self._replay()

    @property
    def two_sided(self) -> bool:
        """True once :meth:`set_run_mixture` made the search weigh counted runs (two-sided noise)."""
        return self._run_grid is not None

    @property
    def open_rates(self) -> bool:
        """True once :meth:`set_open_hit_rates` made the rates open (learnt with the first bad)."""
        return self._open_f is not None

    def set_run_mixture(self, rates: Sequence[tuple[float, float]], weights: Sequence[float], repeats: int,
                        parallel: int = 1) -> None:
        """Two-sided noise (issue 35, input 4): neither per-run rate is known. ``rates`` are per-run
        ``(false_positive, hit_rate)`` pairs (``P(a run fails | good candidate)``, ``P(a run fails |
        bad candidate)``, ``false_positive < hit_rate``: a bad build fails more often than a good one,
        else there is nothing to bisect), ``weights`` their prior weights; a probe is ``repeats`` runs
        combined one-sidedly. From here a step whose runs were counted (:meth:`attach_runs`) weighs
        as its runs, binomially (``k`` failing runs of ``m``: ``f^k (1-f)^(m-k)`` if the candidate is
        good, ``h^k (1-h)^(m-k)`` if bad), other steps as one verdict at the pair's per-probe rates
        (:func:`per_probe_rates`); the posterior is the mixture over the pairs, so both rates are
        learnt jointly with the first bad from every probe, the ends included. "1 of 3 runs failed"
        and "3 of 3" are then different evidence: the first is what a good build of a noisy
        measurement does, and the good end failing a minority of its runs while the bad end fails
        every run no longer reads as "the regression is older than the range". Probes are chosen
        at the posterior-mean per-probe rates. Raises ``ValueError`` on impossible arguments."""
        w = np.asarray(weights, dtype=float)
        if len(rates) == 0 or w.shape != (len(rates),) or not np.all(w >= 0) or float(w.sum()) <= 0 or repeats < 1:
            raise ValueError("need one weight >= 0 per (false_positive, hit_rate) pair, not all 0, and repeats >= 1")
        f = np.array([a for a, _ in rates], dtype=float)
        h = np.array([b for _, b in rates], dtype=float)
        if not (np.all((f > 0) & (f < h) & (h < 1))):
            raise ValueError("need 0 < false_positive < hit_rate < 1 per run in every pair")
        keep = w > 0
        f, h, w = f[keep], h[keep], w[keep] / w.sum()
        self._repeats = repeats
        fp, fn = 1 - (1 - f) ** repeats, (1 - h) ** repeats
        self._grid = (fp, fn)
        self._grid_logw = np.log(w)
        self._run_grid = (f, h)
        self._open_f = None
        self._replay()
        self._set_point_rates(*self._mean_rates(), parallel)

    def set_open_hit_rates(self, false_positives: Sequence[float], weights: Sequence[float], repeats: int,
                           min_hit_rate: float, parallel: int = 1) -> None:
        """Noise whose rates are not given (issue 35). The good side is **one** per-run false-positive
        rate ``f`` (the measurement's: every good build is the same question), weighed over
        ``false_positives`` with prior ``weights``. The bad side's per-run hit rate is described four
        ways, a quarter of the prior each, and the runs decide between them (Bayes' factor, no rule):

        * **shared**: every bad candidate has the same rate ``mu`` (one bug, one trigger), ``mu``
          uniform over :data:`SHARED_HIT_RATES` above ``max(min_hit_rate, f)``;
        * **own**: each bad candidate has its own rate, any value above ``f`` equally likely (a
          bad build fails more often than a good one; the floor ``min_hit_rate`` is the shared
          rate's, a bug's typical rate, not every candidate's; a bug whose trigger grows more
          likely over the range shows far less often at its first bad than at the bad end: the bad
          end's rate says nothing of another candidate's);
        * **either**: each bad candidate has the bug's one rate or its own, equally likely;
        * **step**: one rate ``a`` from the first bad up to a step ``s``, another ``b != a`` from
          ``s`` on, both over :data:`STEP_HIT_RATES` above ``f`` and tellable from it within
          :data:`_STEP_RUNS` runs, ``s`` uniform over the candidates after the first bad and summed
          out, the first bad never the good end (:meth:`_step_tails`): a second trigger that lands
          later (or a fix of one of two). It pays for its two rates once, where "either" pays at
          every candidate: without it a bug in 8-15 % of runs until a later commit raised it to
          70-100 % had that later commit named at 0.99+ in 7 of 30 simulated searches (the good
          side's noise explained the rare failures more cheaply than a per-candidate own rate).

        The first two alone fail a kind: the shared rate alone reads the clean runs of a bug's
        first, rarer candidates as good (a later commit named at 0.99+ in 16-22 of 50 generated growing-rate
        worlds); the own rates alone make every bad candidate pay for its free rate, so "fewer bad
        candidates and a noisy good side" out-weighs the truth (a 30 %-of-runs bug at 3 repeats over
        64 candidates: ~270 probes, 35 % right). A candidate's counted runs, pooled over its probes
        (``k`` failing of ``m``), weigh ``f^k (1-f)^(m-k)`` if it is good and ``mu^k (1-mu)^(m-k)``
        (shared) or the mean of ``h^k (1-h)^(m-k)`` over the range (own) if it is bad; a step
        without counted runs weighs as one verdict at the per-probe rates those give for ``repeats``
        runs. The posterior is over the first bad and the rates jointly; probes are chosen by the
        joint information gain (:meth:`_open_info_gain`). Raises ``ValueError`` on impossible
        arguments."""
        f = np.asarray(false_positives, dtype=float)
        w = np.asarray(weights, dtype=float)
        if (f.ndim != 1 or len(f) == 0 or w.shape != f.shape or not np.all(w >= 0) or float(w.sum()) <= 0
                or not np.all((f > 0) & (f < 1)) or repeats < 1 or not 0 < min_hit_rate < 1):
            raise ValueError("need false-positive rates in (0, 1) with one weight >= 0 each (not all 0), "
                             "repeats >= 1 and a minimum hit rate in (0, 1)")
        keep = w > 0
        f, w = f[keep], w[keep] / w[keep].sum()
        mus = np.asarray(SHARED_HIT_RATES, dtype=float)
        steps = np.asarray(STEP_HIT_RATES, dtype=float)
        share = 1.0 / (len(SHARE_PRIORS) + 1)  # each description, the step one too
        gf, gmu, grho, gw = [f], [np.full(len(f), np.nan)], [np.zeros(len(f))], [share * w]  # own rates
        ga = [np.full(len(f), np.nan)]
        for rho in SHARE_PRIORS:
            if rho == 0.0:
                continue
            for fi, wi in zip(f, w):
                ok = mus[mus > max(min_hit_rate, fi)]
                if len(ok):
                    gf.append(np.full(len(ok), fi))
                    gmu.append(ok)
                    ga.append(np.full(len(ok), np.nan))
                    grho.append(np.full(len(ok), rho))
                    gw.append(np.full(len(ok), share * wi / len(ok)))
        odds = math.log(1 / (1 - self.confidence))
        for fi, wi in zip(f, w):  # the step: a from the first bad, b != a from the step on, both tellable from f
            above = steps[(steps > fi) & (_STEP_RUNS * _kl(steps, fi) >= odds)]
            a, b = (x.ravel() for x in np.meshgrid(above, above, indexing="ij"))
            a, b = a[a != b], b[a != b]
            if len(a):
                gf.append(np.full(len(a), fi))
                gmu.append(b)
                ga.append(a)
                grho.append(np.full(len(a), _STEP))
                gw.append(np.full(len(a), share * wi / len(a)))
        self._open_f = np.concatenate(gf)
        self._open_mu = np.concatenate(gmu)
        self._open_a = np.concatenate(ga)
        self._open_rho = np.concatenate(grho)
        self._bad_cache = {}
        self._h_min, self._repeats = float(min_hit_rate), int(repeats)
        weights_all = np.concatenate(gw)
        miss = np.exp(self._log_bad_runs(0, repeats))  # a probe of a bad candidate shows nothing
        self._grid = (1 - (1 - self._open_f) ** repeats, np.clip(miss, 1e-12, 1 - 1e-12))
        self._grid_logw = np.log(weights_all / weights_all.sum())
        self._run_grid = None
        self._replay()
        self._set_point_rates(*self._mean_rates(), parallel)

    #: Per-run hit rates over which a bad candidate's own rate is averaged (:meth:`set_open_hit_rates`).
    _H_GRID = (np.arange(400) + 0.5) / 400

    def _log_bad_runs(self, k: int, m: int) -> np.ndarray:
        """log-likelihood, per rate hypothesis of :meth:`set_open_hit_rates`, of a bad candidate's
        ``k`` failing runs of ``m``: ``mu^k (1-mu)^(m-k)`` at a shared rate, else the mean of
        ``h^k (1-h)^(m-k)`` over ``h`` in ``[max(h_min, f), 1]`` (its own rate). On a step row, where
        the rate depends on the candidate's side of the step, the mean of the two rates' likelihoods
        (the step's side of one candidate taken as a coin: what the probe choice predicts with; the
        posterior itself sums over the step, :meth:`_weigh_open`)."""
        assert self._open_f is not None and self._open_mu is not None and self._open_a is not None
        hit = self._bad_cache.get((k, m))
        if hit is not None:
            return hit
        g = self._H_GRID
        with np.errstate(divide="ignore"):
            vals = k * np.log(g) + (m - k) * np.log1p(-g)
        suffix = np.logaddexp.accumulate(vals[::-1])[::-1]
        idx = np.searchsorted(g, self._open_f, side="right")  # its own rate: above the good side's
        own = np.full(len(idx), -np.inf)
        ok = idx < len(g)
        own[ok] = suffix[idx[ok]] - np.log(len(g) - idx[ok])
        rho = self._open_rho
        mu = np.where(rho > 0, self._open_mu, 0.5)
        shared = k * np.log(mu) + (m - k) * np.log1p(-mu)
        with np.errstate(divide="ignore"):
            out = np.where(rho >= 1, shared, np.where(rho <= 0, own, np.logaddexp(
                np.log(np.where(rho > 0, rho, 1.0)) + shared, np.log1p(-np.where(rho < 1, rho, 0.0)) + own)))
            step = rho == _STEP
            if step.any():
                out[step] = np.logaddexp(self._log_runs_at(self._open_a[step], k, m),
                                         self._log_runs_at(self._open_mu[step], k, m)) - math.log(2)
        self._bad_cache[(k, m)] = out
        return out

    @staticmethod
    def _log_runs_at(rates: np.ndarray, k: int, m: int) -> np.ndarray:
        """log of ``rate^k (1-rate)^(m-k)``: ``k`` failing runs of ``m`` at each per-run rate."""
        with np.errstate(divide="ignore"):
            return k * np.log(rates) + (m - k) * np.log1p(-rates)

    def _mean_rates(self) -> tuple[float, float]:
        """Per-probe ``(false_positive, false_negative)`` averaged over the rate pairs' posterior."""
        assert self._grid is not None and self._logp2 is not None
        w = np.exp(self._logp2 - float(self._logp2.max())).sum(axis=1)
        w /= w.sum()
        return float((w * self._grid[0]).sum()), float((w * self._grid[1]).sum())

    def attach_runs(self, hits: int, runs: int) -> None:
        """The last step's probe counted ``hits`` failing runs of ``runs`` (pooled over the probes it
        stands for): kept with the step; weighed once the noise is two-sided (:meth:`set_run_mixture`)."""
        if not self.history or not 0 <= hits <= runs or runs < 1:
            return
        st = self.history[-1]
        if st.runs is not None:
            return
        self.history[-1] = dataclasses.replace(st, runs=(hits, runs))
        if self._open_f is not None and self._result is None and st.effective is not Verdict.SKIP:
            self._replay()  # pooled per candidate
            return
        if self._run_grid is None or self._result is not None or st.effective is Verdict.SKIP:
            return
        assert self._logp2 is not None and self._grid is not None
        # the step weighed as one verdict so far: take that out, put its runs in (no replay)
        bad, j = st.effective is Verdict.BAD, st.index
        fp, fn = self._grid
        f, h = self._run_grid
        with np.errstate(divide="ignore"):
            lo0, hi0 = (np.log(1 - fn), np.log(fp)) if bad else (np.log(fn), np.log(1 - fp))
        lo = hits * np.log(h) + (runs - hits) * np.log1p(-h) - lo0
        hi = hits * np.log(f) + (runs - hits) * np.log1p(-f) - hi0
        self._logp2[:, : j + 1] += lo[:, None]
        self._logp2[:, j + 1:] += hi[:, None]
        self._logp2 -= float(self._logp2.max())
        self._logp = np.logaddexp.reduce(self._logp2, axis=0)
        self._logp -= np.logaddexp.reduce(self._logp)
        self._post = self._q = self._ig = None
        self.fp, self.fn = self._mean_rates()
        self._advance()

    def _set_point_rates(self, false_positive: float, false_negative: float, parallel: int) -> None:
        self.fp, self.fn = float(false_positive), float(false_negative)
        self.exact = self.fp == 0.0 and self.fn == 0.0
        if self.max_probes is None:  # a derived budget follows the rates
            self.budget = default_budget(self.n, self.fp, self.fn, self.confidence, parallel)

    def _replay(self) -> None:
        """The posterior from the uniform prior and every verdict so far, at the current rates."""
        self._logp = np.zeros(self.n + 1)
        if not self.check_boundary:
            self._logp[0] = self._logp[self.n] = -np.inf
        self._logp -= np.logaddexp.reduce(self._logp)
        self._logp2 = None if self._grid_logw is None else self._grid_logw[:, None] + self._logp[None, :]
        self._post = self._q = self._ig = None
        self._inconsistent = ""
        if self._open_f is not None and self._logp2 is not None:
            self._weigh_open()
        else:
            for st in self.history:
                if st.effective is not Verdict.SKIP:
                    self._update(st.index, st.effective is Verdict.BAD, st.runs)
        if (self._run_grid is not None or self._open_f is not None) and self._logp2 is not None:
            self.fp, self.fn = self._mean_rates()
        self._advance()

    def _weigh_open(self) -> None:
        """Every verdict so far into the joint posterior of :meth:`set_open_hit_rates`, at once: a
        candidate's counted runs pooled over its probes (one likelihood per rate hypothesis if it
        is bad, one if it is good), a step without counted runs as one verdict at the per-probe
        rates. Candidate ``j`` is bad under the first-bad hypotheses ``0..j``, so hypothesis ``h``
        gathers the bad-side terms of the candidates ``j >= h`` and the good-side terms of the
        rest: a reversed cumulative sum, the same posterior as weighing step by step."""
        assert self._open_f is not None and self._logp2 is not None and self._grid is not None
        assert self._open_a is not None and self._open_mu is not None and self._open_rho is not None
        f, (fp, fn) = self._open_f, self._grid
        step = np.flatnonzero(self._open_rho == _STEP)
        sa, sb = self._open_a[step], self._open_mu[step]
        diff = np.zeros((len(f), self.n))  # per candidate: log P(runs | bad) - log P(runs | good)
        d_a, d_b = np.zeros((len(step), self.n)), np.zeros((len(step), self.n))  # the same, a step row's two sides
        miss_a, miss_b = (1 - sa) ** self._repeats, (1 - sb) ** self._repeats  # a probe of r runs shows nothing
        good_total = np.zeros(len(f))
        for st in self.history:
            if st.effective is Verdict.SKIP:
                continue
            self.informed[st.index] = True
            if st.runs is not None:  # weighed below, pooled per candidate
                continue
            bad = st.effective is Verdict.BAD
            lo, hi = (np.log(1 - fn), np.log(fp)) if bad else (np.log(fn), np.log(1 - fp))
            diff[:, st.index] += lo - hi
            good_total += hi
            with np.errstate(divide="ignore"):
                d_a[:, st.index] += (np.log1p(-miss_a) if bad else np.log(miss_a)) - hi[step]
                d_b[:, st.index] += (np.log1p(-miss_b) if bad else np.log(miss_b)) - hi[step]
        for j, (k, m) in self._pooled_runs().items():
            hi = self._log_runs_at(f, k, m)
            diff[:, j] += self._log_bad_runs(k, m) - hi
            good_total += hi
            d_a[:, j] += self._log_runs_at(sa, k, m) - hi[step]
            d_b[:, j] += self._log_runs_at(sb, k, m) - hi[step]
        tail = np.cumsum(diff[:, ::-1], axis=1)[:, ::-1]  # sum over candidates j >= h
        tail = np.concatenate([tail, np.zeros((len(f), 1))], axis=1)
        if len(step):
            tail[step] = self._step_tails(d_a, d_b)
        with np.errstate(invalid="ignore"):
            self._logp2 = self._logp2 + tail + good_total[:, None]
        self._logp2[np.isnan(self._logp2)] = -np.inf
        top2 = float(self._logp2.max())
        if not np.isfinite(top2):
            self._inconsistent = ("verdicts contradict each other; the probe may be flaky: set bisect.flake rates")
            return
        self._logp2 -= top2
        with np.errstate(divide="ignore"):
            self._logp = np.log(np.exp(self._logp2).sum(axis=0))  # the top is 0: no overflow
        self._logp -= np.logaddexp.reduce(self._logp)

    def _step_tails(self, d_a: np.ndarray, d_b: np.ndarray) -> np.ndarray:
        """The bad side's log-likelihood ratio of each step row for every first bad ``h`` in
        ``0..n``, shape ``(rows, n + 1)``: the candidates ``h..s-1`` at the row's first rate (``d_a``,
        per candidate: log P(runs | that rate) - log P(runs | good)), ``s..n-1`` at its second
        (``d_b``), the step ``s`` uniform over ``h+1..n-1`` (each side holds a candidate; the bad end
        is on the second) and summed out: ``-A[h] + log sum_{s>h} exp(A[s] + B[s]) - log(n-1-h)``
        with ``A`` the prefix sums of ``d_a`` and ``B`` the suffix sums of ``d_b``. A first bad at
        ``n-1`` or ``n`` leaves no room for a step: -inf. So is a first bad at 0, the good end: its
        first segment would be the good side itself, whose runs the good side's rate ``f``
        describes; a second free rate there is the good side's noise named a bug (two-sided noise
        over 40 simulated searches: 8 right instead of 38, the rest "the good end may be bad")."""
        rows, n = d_a.shape
        pre = np.concatenate([np.zeros((rows, 1)), np.cumsum(d_a, axis=1)], axis=1)  # A[0..n]
        suf = np.concatenate([np.cumsum(d_b[:, ::-1], axis=1)[:, ::-1], np.zeros((rows, 1))], axis=1)  # B[0..n]
        out = np.full((rows, n + 1), -np.inf)
        if n < 2:
            return out
        e = (pre + suf)[:, 1:n]  # s = 1..n-1
        with np.errstate(invalid="ignore"):
            lse = np.logaddexp.accumulate(e[:, ::-1], axis=1)[:, ::-1]  # log sum over s >= index + 1
        h = np.arange(n - 1)  # first bad 0..n-2: the step s in h+1..n-1
        out[:, : n - 1] = -pre[:, : n - 1] + lse[:, h] - np.log(n - 1 - h)[None, :]
        out[:, 0] = -np.inf
        return out

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

    def _update(self, j: int, bad: bool, runs: tuple[int, int] | None = None,
                weights: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Weigh one verdict of candidate ``j`` (``weights``: its log-likelihoods ``(if bad, if good)``
        per hypothesis, already computed: a candidate's pooled runs in open-hit-rate mode)."""
        self.informed[j] = True
        if self._logp2 is not None and self._grid is not None:  # a mixture over hit rates
            fp, fn = self._grid
            if weights is not None:
                lo, hi = weights
            elif self._run_grid is not None and runs is not None:
                f, h = self._run_grid  # two-sided: the counted runs, binomially
                k, m = runs
                lo, hi = k * np.log(h) + (m - k) * np.log1p(-h), k * np.log(f) + (m - k) * np.log1p(-f)
            else:
                with np.errstate(divide="ignore"):
                    lo, hi = (np.log(1 - fn), np.log(fp)) if bad else (np.log(fn), np.log(1 - fp))
            self._logp2[:, : j + 1] += lo[:, None]
            self._logp2[:, j + 1:] += hi[:, None]
            top2 = float(self._logp2.max())
            if np.isfinite(top2):
                self._logp2 -= top2
            self._logp = np.logaddexp.reduce(self._logp2, axis=0)
        else:
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

    def measured_before(self, index: int, verdict: Verdict) -> None:
        """Candidate ``index``'s build was measured ``verdict`` before this search, in the same run
        (the commit stage's good end that is the last-good nightly's build, an empty overlay on it:
        stage 1 probed that build). It is not fed to the posterior (the search probes its own ends);
        verification counts it as one measurement of that role: a culprit or predecessor whose
        search verdict agrees with it has been measured twice, from two server starts, and is not
        re-probed (issue 40: a verification start only where the evidence is not already two agreeing
        measurements)."""
        if not 0 <= index < self.n:
            raise ValueError(f"candidate index {index} outside 0..{self.n - 1}")
        self._before[index] = Verdict(verdict)

    def measurements_of(self, index: int, want: Verdict) -> int:
        """Independent measurements of candidate ``index`` that read ``want``: the one measured before
        this search (:meth:`measured_before`) and each of this search's verdicts with its
        ``measurements`` (:meth:`feed`); 0 while this search's own verdicts hold none (a role is
        verified by the search's evidence, never by an earlier stage's alone). A noisy search counts its own
        verdicts of a candidate as one however many it made (they are weighed in the posterior, and its
        verification re-probe is a fresh measurement, as before issue 40)."""
        own = sum(st.measurements for st in self.history
                  if st.index == index and st.effective is want and st.phase != "extra")
        if not self.exact:  # a noisy search weighs its repeated probes in the posterior; its verification stays fresh
            own = min(own, 1)
        return own + (1 if own and self._before.get(index) is want else 0)

    def single_measurements(self) -> None:
        """From now on every verdict counts as one measurement, those fed before included (the run saw
        its requests disagree where the flake unit says they are independent draws of one answer:
        :func:`bisectbot.verdict.agreement.mixed`); verification re-probes where that leaves a role
        with one."""
        self.in_probe_verification = False
        for st in self.history:
            st.measurements = 1

    def _measured_twice(self, index: int, want: Verdict) -> bool:
        """True when ``index`` holds two agreeing measurements of ``want`` (:meth:`measurements_of`):
        the standard of verification (issue 40: a re-probe is spent only where it would be the second)."""
        return self.measurements_of(index, want) >= 2

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
                targets = [i for i in targets if not self._measured_twice(i, Verdict.BAD if i >= a else Verdict.GOOD)]
                if not targets:  # each role already has two agreeing measurements: a re-probe would be a third
                    self._verified_class = (a, b)
                elif ((self.max_probes is None or self.probes < self.max_probes)
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

    @property
    def ends_pending(self) -> bool:
        """True while a boundary end is still to be probed (:meth:`next_probes` names them first)."""
        return bool(self._ends_left)

    def steps_left(self) -> int:
        """Rough number of probes still needed (``~N probes left``), verification included."""
        if self._result is not None:
            return 0
        ids = self._class_ids()
        mass = np.bincount(ids, weights=self.posterior)
        extra = len(self._ends_left) + (self.expected_reprobes if self.verify and not self._verify_targets
                                        else len(self._verify_targets))
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


def budget_text(b: Bisection) -> str:
    """How the search is capped, for plans and progress lines."""
    if b.max_probes is not None:
        return f"budget {b.max_probes} probes (max_probes)"
    if b.budget is not None:
        bound = channel_bound(max(2, b.n - 1), b.fp, b.fn, 1 - b.confidence)
        return (f"budget {b.budget} good/bad verdicts (3 x information bound {bound:.1f} + 4, "
                f"flake fp {b.fp:.3g} fn {b.fn:.3g})")
    return "no budget needed (exact search)"
