"""Threshold-over-nightlies chart (matplotlib, Agg backend: no display needed).

Each nightly is one x position (oldest left). The measured interval ``[last_ok, first_garbage]``
(prompt tokens) is drawn as a vertical bar with its midpoint marked; a nightly that never turned
to garbage is drawn as an up-triangle at ``max_size``; one that was garbage at every size as a
down-triangle at 0; a skipped (untestable) nightly as a grey ``x``. The recipe's
``threshold-below`` bound is a dashed horizontal line.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg", force=False)  # before pyplot; harmless when already Agg

from ..models import Verdict  # noqa: E402
from .history import NightlyResult  # noqa: E402


def _short_label(label: str, n: int = 32) -> str:
    """A tick label of at most ``n`` characters (commit subjects are long)."""
    return label if len(label) <= n else label[: n - 1] + "…"


def threshold_chart(nightly: NightlyResult, out_dir: Path, stem: str = "threshold",
                    over: str = "nightlies") -> list[Path]:
    """Write ``<stem>.png`` and ``<stem>.svg`` into ``out_dir``; return their paths. ``over`` names
    the x axis in the title (``nightlies``; ``probed candidates`` for a single run's chart).

    Returns ``[]`` (and writes nothing) when no probe carries a threshold. Raises ``OSError``
    when ``out_dir`` cannot be written.
    """
    if not nightly.has_thresholds():
        return []
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    labels = [_short_label(p.candidate.label or p.candidate.ref[:12]) for p in nightly.probes]
    xs = list(range(len(labels)))
    top = nightly.max_size or max(
        (v for p in nightly.probes if p.threshold for v in p.threshold if v is not None), default=1
    )
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(xs) + 2), 4.0), dpi=100)
    try:
        for x, p in zip(xs, nightly.probes):
            lo, hi = p.threshold if p.threshold else (None, None)
            color = {"good": "tab:green", "bad": "tab:red"}.get(p.verdict.value, "grey")
            if p.verdict == Verdict.SKIP:
                ax.plot([x], [0], marker="x", color="grey", linestyle="none")
            elif lo is not None and hi is not None:
                ax.vlines(x, lo, hi, color=color, linewidth=4, alpha=0.6)
                ax.plot([x], [(lo + hi) / 2], marker="o", color=color)
            elif hi is not None:  # garbage at every size up to hi
                ax.plot([x], [0], marker="v", color=color, linestyle="none")
            elif lo is not None:  # never garbage up to lo
                ax.plot([x], [lo], marker="^", color=color, linestyle="none")
            else:
                ax.plot([x], [top], marker="^", color=color, linestyle="none")
        if nightly.threshold_below:
            ax.axhline(nightly.threshold_below, linestyle="--", color="black", linewidth=1,
                       label=f"threshold-below {nightly.threshold_below}")
            ax.legend(loc="lower left", fontsize=8)
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("garbage threshold (prompt tokens)")
        ax.set_ylim(bottom=0)
        lows = [v for p in nightly.probes if p.threshold for v in p.threshold if v]
        if lows and top / min(lows) > 20:  # thresholds of very different sizes: keep the low ones visible
            ax.set_yscale("symlog", linthresh=max(1, min(lows) // 2))
            ax.set_ylim(bottom=0)
        ax.set_title(f"{nightly.recipe}: threshold over {over}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.svg"]
        for path in paths:
            fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)
        return paths
    finally:
        plt.close(fig)
