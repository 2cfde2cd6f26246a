"""Verdicts from measured values (``regress: slower``, issue 39): samples judged against the two ends.

A probe draws samples of one number (:mod:`bisectbot.reproduce.measure`; ``reproducer.measure``
says which metric, which way is better, how many). The search's two ends are measured first,
the bad end then the good end (:class:`Baseline` keeps their first samples for the whole search);
every later candidate is judged by comparing its samples with each end's by a two-sided
Mann-Whitney rank test (``scipy.stats.mannwhitneyu``: no assumption on the noise's shape, as
Chromium's Pinpoint compares samples):

* **bad** -- told apart from the good end (p < alpha), on the worse side, and not from the bad end;
* **good** -- told apart from the bad end, on the better side, and not from the good end;
* otherwise -- told apart from neither end, from both (a value between them, or beyond one of
  them), or from one on its far side -- ``samples`` more are drawn, up to ``max_samples``, since one look's p-value below
  alpha may be chance; when the budget is spent it is a **skip** saying which of the three it was
  (between the ends: a second change, or a drift the ends did not show).

The ends themselves: the first end measured (the bad end) has no other end to be compared with
and keeps its nominal verdict; the second (the good end) is compared with it, and when the two
cannot be told apart within the budget it is judged bad ("nothing to bisect"): the boundary check
fails and no culprit is named. The two-sidedness is by construction: a candidate must move *away*
from one end and stay *with* the other, so noise in either direction can only cost samples or a
skip, never a verdict by itself.

Every verdict's reason says what was measured: the metric's medians, the relative shift, the
p-values and the sample counts; ``extra["measure"]`` keeps every sample.
"""

from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass
from typing import Any

from ..bisect.signatures import Signature
from ..models import ProbeResult, Verdict
from ..run.base import Prepared
from ..run.probe import ProbeContext, ProbeJob
from .honesty import UNMEASURABLE
from .rules import UNRUNNABLE, Judgement

__all__ = ["ALPHA", "Baseline", "Comparison", "compare", "decide", "judge_measured", "MEASURE_KEY", "measured_words"]

#: The default two-sided p-value below which two sets of samples differ
#: (``reproducer.measure.alpha``). A wrong verdict needs two errors at once: the candidate's samples
#: must look unlike those of the end it truly shares (probability alpha per look, at most
#: ``max_samples / samples`` looks) *and* look like the other end's, which the ends' own separation
#: (their comparison must reach p < alpha first) makes rare. 0.01 is the level Pinpoint's compare
#: calls "different"; lower costs samples on every candidate, higher costs skips, never culprits.
ALPHA = 0.01

#: Where a probe keeps its samples and comparisons (``ProbeResult.extra``).
MEASURE_KEY = "measure"
#: Characters of a command's stdout a runner keeps (the local runner's tail, ``bisectbot.run.local``):
#: a last line that fills them was cut.
TAIL_CHARS = 4000


@dataclass(frozen=True)
class Comparison:
    """Samples ``x`` against samples ``y``: the two-sided Mann-Whitney ``p``, the sample counts,
    the medians (the metric's unit) and ``shift_pct`` = 100 x (median x / median y - 1);
    ``worse``: x's median is on the worse side of y's (lower when higher is better)."""

    p: float
    n_x: int
    n_y: int
    median_x: float
    median_y: float
    shift_pct: float | None
    worse: bool

    def differs(self, alpha: float) -> bool:
        """True when ``p < alpha``."""
        return self.p < alpha

    def text(self) -> str:
        """``median 82.1 vs 100.3 (-18.1 %), p=0.00018, n=10/10``."""
        shift = f" ({self.shift_pct:+.1f} %)" if self.shift_pct is not None else ""
        return (f"median {self.median_x:.4g} vs {self.median_y:.4g}{shift}, p={self.p:.2g}, "
                f"n={self.n_x}/{self.n_y}")

    def to_dict(self) -> dict[str, Any]:
        """JSON form (in ``extra["measure"]``)."""
        return {"p": self.p, "n": [self.n_x, self.n_y], "median": [self.median_x, self.median_y],
                "shift_pct": self.shift_pct, "worse": self.worse}


def compare(x: list[float], y: list[float], better: str = "higher") -> Comparison:
    """``x`` against ``y`` (each at least one sample); ``better`` is ``higher`` or ``lower``.
    Identical samples on both sides (no rank information) give ``p = 1``."""
    from scipy.stats import mannwhitneyu

    mx, my = statistics.median(x), statistics.median(y)
    if len(set(x) | set(y)) <= 1:
        p = 1.0
    else:
        p = float(mannwhitneyu(x, y, alternative="two-sided", method="auto").pvalue)
    shift = 100.0 * (mx / my - 1.0) if my else None
    worse = mx < my if better == "higher" else mx > my
    return Comparison(p, len(x), len(y), mx, my, shift, worse)


@dataclass
class Decision:
    """A verdict with its reason, or ``verdict`` None: draw more samples (when the budget allows)."""

    verdict: Verdict | None
    reason: str


def decide(x: list[float], good: list[float], bad: list[float], better: str, alpha: float,
           final: bool) -> tuple[Decision, dict[str, Any]]:
    """The verdict of a candidate's samples ``x`` against the ends' (see the module doc):
    ``(decision, comparisons)``; ``final``: the budget is spent, so "undecided" becomes skip."""
    vs_good, vs_bad = compare(x, good, better), compare(x, bad, better)
    comps = {"vs_good": vs_good.to_dict(), "vs_bad": vs_bad.to_dict()}
    dg, db = vs_good.differs(alpha), vs_bad.differs(alpha)
    g, b = f"good end: {vs_good.text()}", f"bad end: {vs_bad.text()}"
    if dg and not db and vs_good.worse:
        return Decision(Verdict.BAD, f"slower than the good end ({g}), not told apart from the bad end "
                        f"({b})"), comps
    if db and not dg and not vs_bad.worse:
        return Decision(Verdict.GOOD, f"faster than the bad end ({b}), not told apart from the good end "
                        f"({g})"), comps
    if not final:  # anything else may be chance at this look: more samples decide it
        return Decision(None, ""), comps
    if dg and db and vs_good.worse and not vs_bad.worse:
        return Decision(Verdict.SKIP, f"told apart from both ends within {len(x)} samples (a value between "
                        f"them: a second change, or a drift the ends did not show): {g}; {b}"), comps
    if dg and db:  # outside the ends' range: on the far side of one of them
        side = "the good end" if not vs_good.worse else "the bad end"
        return Decision(Verdict.SKIP, f"told apart from both ends within {len(x)} samples, beyond {side} "
                        f"(not between them: the host's speed drifted since the ends were measured, or "
                        f"a change between them moved the metric the other way): {g}; {b}"), comps
    if dg or db:  # told apart from one end but on the far side of it
        return Decision(Verdict.SKIP, f"beyond the ends' range within {len(x)} samples: {g}; {b}"), comps
    return Decision(Verdict.SKIP, f"not told apart from either end within {len(x)} samples "
                    f"(p >= {alpha:g}): {g}; {b}"), comps


def decide_end(x: list[float], other: list[float], is_bad_end: bool, better: str, alpha: float,
               final: bool) -> tuple[Decision, dict[str, Any]]:
    """The verdict of the second end measured (``x``) against the first (``other``): the bad end
    must be told apart from the good end on the worse side, the good end from the bad end on the
    better side; when they cannot be within the budget, the end gets the other end's verdict and
    the boundary check says there is nothing to bisect."""
    c = compare(x, other, better)
    key = "vs_good" if is_bad_end else "vs_bad"
    comps = {key: c.to_dict()}
    other_name = "good" if is_bad_end else "bad"
    nominal, opposite = (Verdict.BAD, Verdict.GOOD) if is_bad_end else (Verdict.GOOD, Verdict.BAD)
    if c.differs(alpha):
        if c.worse == is_bad_end:
            side = "slower" if is_bad_end else "faster"
            return Decision(nominal, f"{side} than the {other_name} end: {c.text()}"), comps
        side = "faster" if is_bad_end else "slower"
        return Decision(opposite, f"{side} than the {other_name} end, the wrong way for this end: {c.text()}"), comps
    if final:
        return Decision(opposite, f"not told apart from the {other_name} end within {len(x)} samples "
                        f"(p >= {alpha:g}): {c.text()}; nothing to bisect between these ends"), comps
    return Decision(None, ""), comps


class Baseline:
    """The samples of one search's two ends (refs ``good`` and ``bad``), shared by its probes.

    Filled by :meth:`observe` from each end's first probe (fresh or from the ledger); read by
    :func:`judge_measured`. Thread-safe. Its :attr:`key` goes into every probe key of the search:
    a verdict judged against these ends is never reused against others.
    """

    def __init__(self, good: str, bad: str):
        self.good, self.bad = good, bad
        self._samples: dict[str, list[float]] = {}
        self._metric: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def key(self) -> str:
        """``|ends:<good>..<bad>`` (appended to the reproducer key)."""
        return f"|ends:{self.good}..{self.bad}"

    def samples(self, ref: str) -> list[float] | None:
        """The end ``ref``'s samples, or None when it is not measured (yet)."""
        with self._lock:
            s = self._samples.get(ref)
            return list(s) if s is not None else None

    def metric(self, ref: str) -> str | None:
        """The metric name the end ``ref``'s samples measured, or None."""
        with self._lock:
            return self._metric.get(ref)

    def observe(self, res: ProbeResult) -> None:
        """Keep ``res``'s samples when it is an end's first measurement (attempt 1) with samples."""
        ref = res.candidate.ref
        if ref not in (self.good, self.bad) or int(res.extra.get("attempt", 1) or 1) != 1:
            return
        m = res.extra.get(MEASURE_KEY)
        xs = m.get("samples") if isinstance(m, dict) else None
        if not isinstance(xs, list) or not xs or not all(isinstance(v, (int, float)) for v in xs):
            return
        with self._lock:
            if ref not in self._samples:
                self._samples[ref] = [float(v) for v in xs]
                if isinstance(m.get("metric"), str):
                    self._metric[ref] = m["metric"]


def judge_measured(ctx: ProbeContext, prepared: Prepared, job: ProbeJob) -> tuple[Judgement, dict[str, Any]]:
    """Draw samples of ``prepared`` and judge them (module doc): a command's runs, one fresh process
    per sample, or (``reproducer.kind: load``) load runs against one server start of the candidate --
    every sample of a probe, the extra ones too, in the same start.

    A sample that fails (a command's non-zero exit, a signal, a timeout or no number; a load request
    that fails) makes the candidate a skip with that reason: a build that cannot be measured says
    nothing about speed. ``ctx.baseline`` is the search's :class:`Baseline` (None: a skip).
    Raises :class:`bisectbot.errors.ServerError` when the server does not start (not a verdict).
    """
    r = ctx.recipe
    if r.reproducer.kind == "load":
        with ctx.runner.server(prepared, env=job.env, args=job.args) as srv:
            return _judge(ctx, job, _LoadDraw(ctx, srv.base_url))
    return _judge(ctx, job, _CommandDraw(ctx, prepared, job))


class _CommandDraw:
    """Samples from the recipe's command: one fresh process each (its last stdout line)."""

    def __init__(self, ctx: ProbeContext, prepared: Prepared, job: ProbeJob):
        self.ctx, self.prepared, self.job = ctx, prepared, job
        self.extra: dict[str, Any] = {}
        self.signature: Signature | None = None  # why no sample could be taken, when it is the recipe's

    def __call__(self, n: int, metric: str | None) -> tuple[float, str] | str:
        """Sample number ``n`` (from 1): ``(value, metric name)``, or why there is none."""
        from ..reproduce.command import command_outcome
        from ..reproduce.measure import MeasureError, parse_sample

        r = self.ctx.recipe
        argv = list(r.reproducer.command or []) + list(self.job.args or [])
        cr = self.ctx.runner.run_command(self.prepared, argv, r.reproducer.command_timeout_s,  # type: ignore[call-arg]
                                         env=self.job.env)
        self.extra["stdout_tail"], self.extra["stderr_tail"] = cr.stdout_tail[-2000:], cr.stderr_tail[-2000:]
        if cr.returncode != 0:
            if cr.returncode in (126, 127):  # not executable / not found: the recipe's, checked on the good end
                self.signature = Signature(UNRUNNABLE, None, str(cr.returncode))
            last = cr.stderr_tail.strip().splitlines()[-1][:200] if cr.stderr_tail.strip() else ""
            return f"sample {n}: command {command_outcome(cr)[1]}: no measurement" + (f": {last}" if last else "")
        try:
            return parse_sample(cr.stdout_tail, metric, tail_limit=TAIL_CHARS)
        except MeasureError as e:
            self.signature = Signature(UNMEASURABLE, None, "output")  # on both ends: the recipe's (honesty)
            return f"sample {n}: {e}"


class _LoadDraw:
    """Samples from the built-in load against one running server (:mod:`bisectbot.reproduce.load`)."""

    def __init__(self, ctx: ProbeContext, base_url: str):
        self.ctx, self.base_url = ctx, base_url
        self.extra: dict[str, Any] = {"load_samples": []}
        self.signature: Signature | None = None

    def __call__(self, n: int, metric: str | None) -> tuple[float, str] | str:
        from ..reproduce.load import LoadError, load_sample

        r = self.ctx.recipe
        spec = r.reproducer.load
        assert spec is not None and metric is not None  # the recipe's validation sets both for kind load
        try:
            metrics, _ = load_sample(self.base_url, r.model or None, requests_n=spec.requests,
                                     prompt_tokens=spec.prompt_tokens, output_tokens=spec.output_tokens,
                                     concurrency=spec.concurrency, sample=n, timeout_s=r.server.request_timeout_s)
        except LoadError as e:
            if e.transient:  # the connection, not the candidate's answer: a later run measures it again
                self.extra["transient"] = True
            return f"sample {n}: a request of the load failed, no measurement: {e}"
        self.extra["load_samples"].append({k: round(v, 6) for k, v in metrics.items()})
        return metrics[metric], metric


def _judge(ctx: ProbeContext, job: ProbeJob, draw: Any) -> tuple[Judgement, dict[str, Any]]:
    r = ctx.recipe
    m = r.reproducer.measure
    assert m is not None  # the recipe's validation sets it under regress: slower
    better = m.direction()
    base: Baseline | None = getattr(ctx, "baseline", None)
    xs: list[float] = []
    name = m.metric or "value"
    extra: dict[str, Any] = draw.extra

    def measure_info(comps: dict[str, Any] | None = None) -> dict[str, Any]:
        info: dict[str, Any] = {"metric": name, "better": better, "samples": list(xs), "alpha": m.alpha}
        if xs:
            info["median"] = statistics.median(xs)
            if len(xs) >= 2:
                q = statistics.quantiles(xs, n=4)
                info["quartiles"] = [q[0], q[2]]
        if comps:
            info.update(comps)
        return info

    def take(k: int) -> str | None:
        nonlocal name
        for _ in range(k):
            got = draw(len(xs) + 1, m.metric)
            if isinstance(got, str):
                return got
            v, got_name = got
            if xs and got_name != name:  # the only key of the output changed between runs: not one metric
                return f"sample {len(xs) + 1} measured {got_name!r}, the samples before it {name!r}: not one metric"
            name = got_name
            xs.append(v)
        return None

    if base is None:
        return Judgement(Verdict.SKIP, "no ends measured for this search: a measured value is judged only "
                         "against the ends' samples"), {**extra, MEASURE_KEY: measure_info()}
    ref = job.candidate.ref
    end_role = None
    if job.attempt == 1 and ref in (base.good, base.bad) and base.samples(ref) is None:
        end_role = "bad" if ref == base.bad else "good"
    while True:
        why = take(min(m.samples, m.max_samples - len(xs)))
        if why is None:
            other = next((e for e in (base.metric(base.good), base.metric(base.bad)) if e and e != name), None)
            if other is not None:  # the output's only key differs from the ends': their samples are another metric
                why = f"measured {name!r}, the ends {other!r}: not one metric (name it in reproducer.measure.metric)"
        if why is not None:
            extra[MEASURE_KEY] = measure_info()
            return Judgement(Verdict.SKIP, why, draw.signature), extra
        final = len(xs) >= m.max_samples
        good, bad = base.samples(base.good), base.samples(base.bad)
        if end_role is not None:
            other = good if end_role == "bad" else bad
            if other is None:  # the first end measured: its nominal verdict (the module doc)
                verdict = Verdict.BAD if end_role == "bad" else Verdict.GOOD
                med = statistics.median(xs)
                extra[MEASURE_KEY] = measure_info()
                return Judgement(verdict, f"the {end_role} end measured first: {name} median {med:.4g} over "
                                 f"{len(xs)} samples; the other end is judged against them"), extra
            d, comps = decide_end(xs, other, end_role == "bad", better, m.alpha, final)
        elif good is None or bad is None:
            missing = " and ".join(e for e, s in (("good", good), ("bad", bad)) if s is None)
            extra[MEASURE_KEY] = measure_info()
            return Judgement(Verdict.SKIP, f"the {missing} end's samples are unknown (a verdict given, not "
                             "measured): nothing to judge this candidate's samples against"), extra
        else:
            d, comps = decide(xs, good, bad, better, m.alpha, final)
        if d.verdict is not None:
            extra[MEASURE_KEY] = measure_info(comps)
            return Judgement(d.verdict, f"{name}: {d.reason}"), extra


def measured_words(recipe: Any) -> str:
    """``; measured: 10-30 samples of output_throughput per probe (...)`` under ``regress: slower``
    (issue 39: a probe's cost is its samples, the ends measured one after the other), else ``""``."""
    m = recipe.reproducer.measure
    if recipe.regress.mode != "slower" or m is None:
        return ""
    what = m.metric or "the command's number"
    per = "load runs in one server start" if recipe.reproducer.kind == "load" else "command runs"
    return (f"; measured: {m.samples}-{m.max_samples} samples ({per}) of {what} per probe, judged against "
            "both ends' samples (the bad end, then the good end, are measured first)")
