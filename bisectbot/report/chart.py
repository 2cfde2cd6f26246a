"""Threshold chart of a run or of the nightlies (matplotlib, Agg backend: no display needed).

What it shows (issue 25, input 5):

* **x** is a true axis: a nightly's date (``nightly_main_YYYYMMDD`` or the candidate's ``date``),
  so a missing night leaves a gap, or a commit's index in the searched range (commit distance,
  0 = the good end). Never one slot per probe.
* **y** is the threshold in prompt tokens: the measured interval ``[last OK, first garbage]`` is a
  bar from the last OK size up to a dot at the first garbage size (as on the dashboard); "no garbage up to N" is an *open* up-triangle at N (the threshold
  lies above, unmeasured); "garbage already at N, the smallest size" an *open* down-triangle at N.
  A linear axis from 0, or, when the thresholds span more than 20x, a log axis whose bottom is
  below the smallest value (no fake 0).
* **skips** (untestable candidates) sit in a row of their own under the plot, never on the y axis.
* the **first bad** (culprit) and the **last good** are vertical lines with the boundary between
  them shaded; the recipe's ``threshold-below`` bound is a dashed line; a legend names each.
* ``regress: diverges``: the y axis says "divergence threshold".

:func:`chart_data` computes what is drawn (plain data, tested without pixels); :func:`figure`
draws it and returns the matplotlib figure, whose artists carry ``gid``\\ s (``interval``,
``threshold``, ``ok-up-to``, ``bad-from``, ``skip``, ``first-bad``, ``last-good``, ``boundary``)
so a test can read the plotted points back; :func:`threshold_chart` writes PNG and SVG.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg", force=False)  # before pyplot; harmless when already Agg

from ..models import ProbeResult, Verdict  # noqa: E402
from .history import NightlyResult  # noqa: E402

_DATE_IN_TAG = re.compile(r"(20\d\d)-?(\d\d)-?(\d\d)")
LOG_SPAN = 20
"""Thresholds spanning more than this factor get a log y axis."""


def _short_label(label: str, n: int = 32) -> str:
    """A tick label of at most ``n`` characters (commit subjects are long)."""
    return label if len(label) <= n else label[: n - 1] + "…"


def _date(p: ProbeResult) -> dt.date | None:
    """A nightly's date: from its tag (``nightly_main_20260402``) or ``meta['date']`` (ISO)."""
    for text in (p.candidate.label, str(p.candidate.meta.get("tag") or "")):
        m = _DATE_IN_TAG.search(text or "")
        if m:
            try:
                return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
            except ValueError:
                pass
    raw = str(p.candidate.meta.get("date") or "")
    try:
        return dt.datetime.fromisoformat(raw.replace("Z", "+00:00")).date() if raw else None
    except ValueError:
        return None


@dataclass
class Point:
    """One probed candidate: ``x`` (a date ordinal for nightlies, a commit index otherwise),
    ``kind`` (``interval``, ``ok-up-to``, ``bad-from``, ``skip``, ``unknown``), the interval ends
    ``lo``/``hi`` in prompt tokens (``None`` where unmeasured) and the verdict."""

    x: float
    label: str
    kind: str
    verdict: str
    lo: int | None = None
    hi: int | None = None


@dataclass
class ChartData:
    """What :func:`figure` draws. ``x_kind`` is ``date`` or ``index``; ``first_bad_x`` /
    ``last_good_x`` the boundary (None when unknown); ``log`` whether the y axis is logarithmic."""

    title: str
    x_kind: str
    xlabel: str
    ylabel: str
    points: list[Point] = field(default_factory=list)
    first_bad_x: float | None = None
    last_good_x: float | None = None
    threshold_below: int | None = None
    log: bool = False
    top: int = 1

    def by_kind(self, kind: str) -> list[Point]:
        return [p for p in self.points if p.kind == kind]


def chart_data(nightly: NightlyResult, over: str = "nightlies", positions: dict[str, int] | None = None,
               first_bad: str | None = None, last_good: str | None = None) -> ChartData:
    """The chart of ``nightly.probes`` (oldest first). ``positions`` maps a candidate ref to its index
    in the searched range (commit distance); without it nightlies are placed by date, and anything
    else by its order. ``first_bad``/``last_good`` are candidate refs of the boundary."""
    dates = [_date(p) for p in nightly.probes]
    if positions is None and nightly.probes and all(d is not None for d in dates):
        x_kind, xs = "date", [float(d.toordinal()) for d in dates]  # type: ignore[union-attr]
        xlabel = "nightly (date)"
    else:
        x_kind = "index"
        xs = [float(positions.get(p.candidate.ref, i)) if positions else float(i) for i, p in enumerate(nightly.probes)]
        xlabel = "commit index in the searched range (0 = good end)" if positions else "candidate (in order)"
    top = nightly.max_size or max((v for p in nightly.probes if p.threshold for v in p.threshold if v is not None),
                                  default=1)
    points = []
    for x, p in zip(xs, nightly.probes):
        lo, hi = p.threshold if p.threshold else (None, None)
        if p.verdict is Verdict.SKIP:
            kind = "skip"
        elif lo is not None and hi is not None:
            kind = "interval"
        elif hi is not None:
            kind = "bad-from"
        elif lo is not None:
            kind = "ok-up-to"
        else:
            kind = "unknown"
        points.append(Point(x, _short_label(p.candidate.label or p.candidate.ref[:12]), kind, p.verdict.value, lo, hi))
    where = {p.candidate.ref: x for x, p in zip(xs, nightly.probes)}
    values = [v for pt in points for v in (pt.lo, pt.hi) if v]
    log = bool(values) and max(values) / max(1, min(values)) > LOG_SPAN
    diverges = "diverges" in str(nightly.regress)
    what = "divergence" if diverges and "garbage" not in str(nightly.regress) else \
        "garbage or divergence" if diverges else "garbage"
    return ChartData(title=f"{nightly.recipe}: threshold over {over}", x_kind=x_kind, xlabel=xlabel,
                     ylabel=f"{what} threshold (prompt tokens)", points=points,
                     first_bad_x=where.get(first_bad) if first_bad else None,
                     last_good_x=where.get(last_good) if last_good else None,
                     threshold_below=nightly.threshold_below, log=log, top=int(top))


_COLOR = {"good": "tab:green", "bad": "tab:red"}


def figure(data: ChartData) -> Any:
    """The matplotlib figure of ``data`` (the caller closes it: ``matplotlib.pyplot.close(fig)``)."""
    import matplotlib.pyplot as plt

    span = (max(p.x for p in data.points) - min(p.x for p in data.points)) if data.points else 1
    fig, (ax, skip_ax) = plt.subplots(2, 1, sharex=True, figsize=(max(8.0, min(16.0, 0.4 * len(data.points) + 5)), 4.4),
                                      dpi=100, gridspec_kw={"height_ratios": [6, 1], "hspace": 0.05})
    done: set[str] = set()

    def label(key: str, text: str) -> str:
        if key in done:
            return "_nolegend_"
        done.add(key)
        return text

    for kind in ("interval",):
        pts = data.by_kind(kind)
        for color in ("tab:green", "tab:red", "grey"):
            sel = [p for p in pts if _COLOR.get(p.verdict, "grey") == color]
            if not sel:
                continue
            ax.vlines([p.x for p in sel], [p.lo for p in sel], [p.hi for p in sel], color=color, linewidth=4,
                      alpha=0.5, gid="interval")
            ax.plot([p.x for p in sel], [p.hi for p in sel], marker="o", color=color,
                    linestyle="none", gid="threshold",
                    label=label(f"thr-{color}", "bar: last OK → first garbage (dot)" + (
                        " (bad)" if color == "tab:red" else " (good)" if color == "tab:green" else "")))
    ok = data.by_kind("ok-up-to")
    if ok:
        ax.plot([p.x for p in ok], [p.lo for p in ok], marker="^", markersize=9, linestyle="none",
                markerfacecolor="none", markeredgecolor="tab:green", markeredgewidth=1.5, gid="ok-up-to",
                label="no garbage up to N (threshold above N)")
    bad = data.by_kind("bad-from")
    if bad:
        ax.plot([p.x for p in bad], [p.hi for p in bad], marker="v", markersize=9, linestyle="none",
                markerfacecolor="none", markeredgecolor="tab:red", markeredgewidth=1.5, gid="bad-from",
                label="garbage already at N, the smallest size probed")
    if data.threshold_below:
        ax.axhline(data.threshold_below, linestyle="--", color="black", linewidth=1, gid="threshold-below",
                   label=f"threshold-below {data.threshold_below}")
    if data.last_good_x is not None and data.first_bad_x is not None:
        ax.axvspan(min(data.last_good_x, data.first_bad_x), max(data.last_good_x, data.first_bad_x),
                   color="tab:orange", alpha=0.12, gid="boundary", label="boundary: last good → first bad")
    if data.last_good_x is not None:
        ax.axvline(data.last_good_x, color="tab:green", linestyle=":", linewidth=1.2, gid="last-good",
                   label="last good")
    if data.first_bad_x is not None:
        ax.axvline(data.first_bad_x, color="tab:red", linestyle="-.", linewidth=1.2, gid="first-bad",
                   label="first bad (culprit)")
    skips = data.by_kind("skip")
    skip_ax.plot([p.x for p in skips], [0] * len(skips), marker="x", color="grey", linestyle="none", gid="skip",
                 label="skip (untestable)")
    skip_ax.set_yticks([0])
    skip_ax.set_yticklabels(["skip"], fontsize=8)
    skip_ax.set_ylim(-1, 1)
    skip_ax.grid(axis="x", alpha=0.2)
    if data.log:
        vals = [v for p in data.points for v in (p.lo, p.hi) if v]
        ax.set_yscale("log")
        ax.set_ylim(min(vals) / 1.6, max(vals) * 1.6)
    else:
        ax.set_ylim(0, max(1, data.top) * 1.12)
    ax.set_ylabel(data.ylabel, fontsize=9)
    ax.set_title(data.title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    pad = max(1.0, 0.04 * span)
    if data.points:
        skip_ax.set_xlim(min(p.x for p in data.points) - pad, max(p.x for p in data.points) + pad)
    for x, word, color in ((data.first_bad_x, "first bad", "tab:red"), (data.last_good_x, "last good", "tab:green")):
        name = next((p.label for p in data.points if p.x == x), "") if x is not None else ""
        if name:  # the boundary's names beside its lines (the axis carries only positions)
            ax.annotate(f"{word}: {name}", (x, 1.0), xycoords=("data", "axes fraction"), rotation=90, fontsize=6,
                        color=color, ha="right" if word == "last good" else "left", va="top",
                        xytext=(-2 if word == "last good" else 2, -3), textcoords="offset points")
    skip_ax.set_xlabel(data.xlabel, fontsize=8)
    handles, labels = ax.get_legend_handles_labels()
    h2, l2 = skip_ax.get_legend_handles_labels()
    if skips:
        handles, labels = handles + h2, labels + l2
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    fig.subplots_adjust(left=0.09, right=0.66, bottom=0.2, top=0.92)
    _fit(fig)
    if data.points:
        _x_ticks(fig, skip_ax, data)
        _fit(fig)
    return fig


def _fit(fig: Any, pad_in: float = 0.04) -> None:
    """Move the subplots' margins until everything drawn -- the legend outside the plot on the
    right, the axis labels, tick labels and the boundary's annotations -- lies inside the figure,
    ``pad_in`` inches from its edges, as the Agg renderer measures it (the PNG is what an issue
    embeds; a fixed margin cut the legend's longest entry and the y label)."""
    w, h = fig.get_size_inches()
    for _ in range(4):
        fig.canvas.draw()
        tb = fig.get_tightbbox(fig.canvas.get_renderer())
        over = (max(0.0, pad_in - tb.x0), max(0.0, tb.x1 - (w - pad_in)),
                max(0.0, pad_in - tb.y0), max(0.0, tb.y1 - (h - pad_in)))
        if not any(over):
            return
        sp = fig.subplotpars
        fig.subplots_adjust(left=sp.left + over[0] / w, right=sp.right - over[1] / w,
                            bottom=sp.bottom + over[2] / h, top=sp.top - over[3] / h)


def _overlap(fig: Any, ax: Any) -> bool:
    """Whether two of ``ax``'s x tick labels overlap as drawn (measured by the Agg renderer)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = sorted((t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_visible() and t.get_text()),
                   key=lambda b: b.x0)
    return any(a.x1 > b.x0 for a, b in zip(boxes, boxes[1:]))


def _x_ticks(fig: Any, ax: Any, data: ChartData) -> None:
    """The x axis' ticks: one per probed position (a nightly's date, a commit's index) while their
    labels, as drawn, do not overlap; else matplotlib's locator for the axis (``AutoDateLocator``
    with ``ConciseDateFormatter``, ``MaxNLocator(integer=True)``), which spaces them by the axis'
    length and the labels' size. The marks and the boundary's annotations still place each probe."""
    import matplotlib.dates as mdates
    from matplotlib.ticker import MaxNLocator

    xs = sorted({p.x for p in data.points})
    if data.x_kind == "date":
        ax.set_xticks(xs)
        ax.set_xticklabels([dt.date.fromordinal(int(d)).isoformat() for d in xs], rotation=45, ha="right", fontsize=7)
        if _overlap(fig, ax):
            loc = mdates.AutoDateLocator()
            ax.xaxis.set_major_locator(loc)
            ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc))
            ax.tick_params(axis="x", labelsize=7, labelrotation=0)
        return
    ax.set_xticks(xs)
    ax.set_xticklabels([str(int(x)) for x in xs], fontsize=7)
    if _overlap(fig, ax):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.xaxis.set_major_formatter("{x:.0f}")
        ax.tick_params(axis="x", labelsize=7)


def threshold_chart(nightly: NightlyResult, out_dir: Path, stem: str = "threshold", over: str = "nightlies",
                    positions: dict[str, int] | None = None, first_bad: str | None = None,
                    last_good: str | None = None) -> list[Path]:
    """Write ``<stem>.png`` and ``<stem>.svg`` into ``out_dir``; return their paths. ``over`` names
    the x axis in the title (``nightlies``; ``probed candidates`` for a single run's chart);
    ``positions``/``first_bad``/``last_good`` as in :func:`chart_data`.

    Returns ``[]`` (and writes nothing) when no probe carries a threshold. Raises ``OSError``
    when ``out_dir`` cannot be written.
    """
    if not nightly.has_thresholds():
        return []
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    fig = figure(chart_data(nightly, over, positions, first_bad, last_good))
    try:
        paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.svg"]
        for path in paths:
            fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)
        return paths
    finally:
        plt.close(fig)


__all__ = ["ChartData", "Point", "chart_data", "figure", "threshold_chart"]
