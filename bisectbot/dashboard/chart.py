"""Geometry of the threshold-over-time chart (plain numbers; the SVG itself is a template).

x is a true time axis (UTC; a nightly sits at its date, a run of a non-nightly recipe at the time
it ran), y is the garbage threshold in prompt **tokens** on a log10 scale (thresholds of one
recipe span 250 to 100,000 tokens). Each probed candidate is one mark:

* ``interval`` -- garbage first at ``hi``, none up to ``lo``: a bar from ``lo`` to ``hi`` and a dot
  at ``hi``;
* ``ceiling`` -- no garbage up to ``lo`` (the largest size probed): an open up-triangle at ``lo``,
  "no garbage up to N" (never a threshold of N);
* ``floor`` -- garbage already at ``hi``, the smallest size probed: a down-triangle at ``hi``;
* ``verdict`` -- a verdict without a threshold (command and patch modes): a square in the
  verdict row under the plot;
* ``skip`` -- untestable: a cross in the skips row, under the verdict row.

Every mark carries ``lo``/``hi`` and its pixel ``y`` values, so the SVG can be checked against the
ledger by reading ``data-*`` attributes and geometry back (tests/dashboard).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

WIDTH = 960
"""Chart width in CSS pixels."""
PLOT_TOP, PLOT_HEIGHT = 24, 260
LEFT, RIGHT = 70, 20
ROW_HEIGHT = 22
"""Height of the verdict row and of the skips row under the plot (pixels)."""
LABEL_PX = 11
"""Font size of the tick and band labels (``svg .tick``, ``svg .bandlabel`` in style.css), pixels."""
LABEL_GAP = 8
"""Least gap between two labels of one row (pixels)."""


def label_px(text: str) -> float:
    """An upper bound of ``text``'s width in pixels at :data:`LABEL_PX`: one em per ASCII character
    (no glyph of a Latin sans-serif face advances more than one em), two per other character (CJK
    glyphs advance one em, emoji about 1.04; the widest measured in Chromium on Debian's fonts,
    U+2031 PER TEN THOUSAND SIGN, 1.74 em, hostile pass of issue 41). Used to keep every label
    inside the SVG and apart from its neighbours whatever font the reader's browser picks."""
    return sum(1 if ord(ch) < 128 else 2 for ch in text) * LABEL_PX

@dataclass
class Mark:
    """One plotted candidate: ``shape`` (interval, ceiling, floor, verdict, skip), pixel ``x``/``y``
    (``y`` of ``hi`` for interval and floor, of ``lo`` for a ceiling, the row's centre otherwise),
    ``y_lo``/``y_hi`` (pixels, None when that end was not measured), ``css`` (good, bad, skip)."""

    shape: str
    x: float
    y: float
    y_lo: float | None
    y_hi: float | None
    css: str
    lo: int | None
    hi: int | None
    ref: str
    when: str
    verdict: str
    title: str
    href: str = ""


@dataclass
class Band:
    """A bisection's range on the time axis: from its last good to its first bad candidate."""

    x: float
    width: float
    title: str
    label: str
    href: str = ""
    label_x: float = 0.0
    """Where the label starts (pixels): over the band, moved left so it ends inside the SVG, right
    of the previous band's label; the label is cut (``…``) where it would still not fit."""


@dataclass
class Tick:
    pos: float
    label: str
    value: float


@dataclass
class Chart:
    """Everything the SVG template draws; ``height`` is the whole SVG's height in pixels."""

    width: int
    height: int
    plot_top: int
    plot_bottom: int
    left: int
    right: int
    verdict_row: float
    skip_row: float
    marks: list[Mark] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    xticks: list[Tick] = field(default_factory=list)
    yticks: list[Tick] = field(default_factory=list)
    below: Tick | None = None
    empty: bool = True


class LogScale:
    """tokens -> pixel y on a log10 scale, ``lo_v`` at ``bottom``, ``hi_v`` at ``top``."""

    def __init__(self, lo_v: float, hi_v: float, top: float, bottom: float):
        self.a, self.b = math.log10(lo_v), math.log10(hi_v)
        self.top, self.bottom = top, bottom

    def __call__(self, v: float) -> float:
        f = (math.log10(max(v, 1e-9)) - self.a) / (self.b - self.a)
        return round(self.bottom - f * (self.bottom - self.top), 2)


def _y_ticks(lo: float, hi: float) -> list[float]:
    out = []
    for k in range(int(math.floor(math.log10(lo))), int(math.ceil(math.log10(hi))) + 1):
        for m in (1, 2, 5):
            v = m * 10 ** k
            if lo <= v <= hi:
                out.append(float(v))
    return out


def _tokens(v: float) -> str:
    return f"{v / 1000:g}K" if v >= 1000 else f"{v:g}"


_STEPS = [(timedelta(hours=1), "%H:%M"), (timedelta(hours=6), "%d %b %H:%M"), (timedelta(days=1), "%d %b"),
          (timedelta(days=2), "%d %b"), (timedelta(days=7), "%d %b"), (timedelta(days=14), "%d %b"),
          (timedelta(days=30), "%b %Y"), (timedelta(days=91), "%b %Y")] + [
          (timedelta(days=365 * y), "%Y") for y in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)]
"""Tick steps, finest first, with their label formats; year steps up to 5,000 years, so any span of
``datetime`` finds one whose labels do not overlap (a span of a century labelled every year did)."""


def _x_ticks(t0: datetime, t1: datetime, plot_px: float) -> list[tuple[datetime, str]]:
    """Tick times and labels from ``t0`` to ``t1``: the finest step of :data:`_STEPS` whose ticks
    stand at least one label (:func:`label_px`) and :data:`LABEL_GAP` apart over ``plot_px``."""
    span = t1 - t0

    def fits(step: timedelta, fmt: str) -> bool:
        return step / span * plot_px >= label_px(t0.strftime(fmt)) + LABEL_GAP

    step, fmt = next(((s, f) for s, f in _STEPS if fits(s, f)), _STEPS[-1])
    if step >= timedelta(days=365):  # year starts, every ``years``
        years = round(step.days / 365)
        return [(t, t.strftime(fmt)) for y in range(t0.year, t1.year + 1) if y % years == 0
                for t in [datetime(y, 1, 1, tzinfo=timezone.utc)] if t0 <= t <= t1]
    if step >= timedelta(days=30):  # month starts (every 1 or 3 months)
        months = round(step.days / 30.4)
        y, m = t0.year, t0.month
        out = []
        while True:
            t = datetime(y, m, 1, tzinfo=timezone.utc)
            if t > t1:
                return out
            if t >= t0 and (m - 1) % months == 0:
                out.append((t, t.strftime(fmt)))
            m += 1
            if m > 12:
                y, m = y + 1, 1
    base = datetime(t0.year, t0.month, t0.day, tzinfo=timezone.utc)
    out = []
    t = base
    while t <= t1:
        if t >= t0:
            out.append((t, t.strftime(fmt)))
        t += step
    return out


def _place_band_labels(bands: list[Band]) -> None:
    """Set each band's ``label_x`` and cut its ``label``: left to right, a label starts over its
    band, or further left so it ends inside the SVG, never before the previous label's end plus
    :data:`LABEL_GAP`; what still does not fit is cut to ``…`` (the band's title keeps it whole)."""
    end = -LABEL_GAP
    for b in sorted(bands, key=lambda b: b.x):
        start = max(end + LABEL_GAP, min(b.x + 2, WIDTH - 2 - label_px(b.label)), 2.0)
        room = int((WIDTH - 2 - start) // LABEL_PX)
        if len(b.label) > room:
            b.label = b.label[: room - 1] + "…" if room >= 2 else ""
        b.label_x = start
        end = start + label_px(b.label)


def build_chart(points: list[dict], bands: list[dict], threshold_below: int | None = None,
                max_size: int | None = None) -> Chart:
    """The chart of ``points`` (dicts: ``when`` datetime (UTC), ``lo``/``hi`` tokens or None,
    ``verdict``, ``css``, ``ref``, ``title``, ``href``) and ``bands`` (``start``/``end`` datetime,
    ``title``, ``label``, ``href``); ``threshold_below`` (tokens) is drawn as a dashed line."""
    plot_bottom = PLOT_TOP + PLOT_HEIGHT
    verdict_row = plot_bottom + 34
    skip_row = verdict_row + ROW_HEIGHT
    chart = Chart(WIDTH, int(skip_row + 40), PLOT_TOP, plot_bottom, LEFT, RIGHT, verdict_row, skip_row)
    if not points:
        return chart
    chart.empty = False
    times = [p["when"] for p in points] + [b[k] for b in bands for k in ("start", "end") if b.get(k)]
    t0, t1 = min(times), max(times)
    pad = max(timedelta(hours=12), (t1 - t0) * 0.03)
    t0, t1 = t0 - pad, t1 + pad
    span = (t1 - t0).total_seconds()

    def x(t: datetime) -> float:
        return round(LEFT + (t - t0).total_seconds() / span * (WIDTH - LEFT - RIGHT), 2)

    values = [v for p in points for v in (p.get("lo"), p.get("hi")) if v] + ([threshold_below] if threshold_below else [])
    lo_v = min(values) / 1.6 if values else 100.0
    hi_v = max(values) * 1.6 if values else float(max_size or 100_000)
    lo_v = max(lo_v, 1.0)
    if hi_v / lo_v < 10:  # at least a decade, so the axis has several ticks to read values by
        mid = math.sqrt(hi_v * lo_v)
        lo_v, hi_v = max(1.0, mid / math.sqrt(10)), mid * math.sqrt(10)
    y = LogScale(lo_v, hi_v, PLOT_TOP, plot_bottom)
    chart.yticks = [Tick(y(v), _tokens(v), v) for v in _y_ticks(lo_v, hi_v)]
    chart.xticks = [Tick(x(t), label, t.timestamp()) for t, label in _x_ticks(t0, t1, WIDTH - LEFT - RIGHT)
                    if label_px(label) / 2 <= x(t) <= WIDTH - label_px(label) / 2]  # centred, inside the SVG
    if threshold_below:
        chart.below = Tick(y(threshold_below), f"threshold-below {threshold_below}", threshold_below)
    for b in bands:
        x0, x1 = x(b["start"]), x(b["end"])
        chart.bands.append(Band(x0, max(3.0, x1 - x0), b["title"], b["label"], b.get("href", "")))
    _place_band_labels(chart.bands)
    for p in points:
        lo, hi, verdict = p.get("lo"), p.get("hi"), p["verdict"]
        common = dict(x=x(p["when"]), css=p["css"], lo=lo, hi=hi, ref=p["ref"], when=p["when"].isoformat(),
                      verdict=verdict, title=p["title"], href=p.get("href", ""))
        if verdict == "skip":
            chart.marks.append(Mark("skip", y=skip_row, y_lo=None, y_hi=None, **common))
        elif lo and hi:
            chart.marks.append(Mark("interval", y=y(hi), y_lo=y(lo), y_hi=y(hi), **common))
        elif lo:
            chart.marks.append(Mark("ceiling", y=y(lo), y_lo=y(lo), y_hi=None, **common))
        elif hi:
            chart.marks.append(Mark("floor", y=y(hi), y_lo=None, y_hi=y(hi), **common))
        else:
            chart.marks.append(Mark("verdict", y=verdict_row, y_lo=None, y_hi=None, **common))
    return chart


__all__ = ["Band", "Chart", "LogScale", "Mark", "Tick", "WIDTH", "build_chart"]
