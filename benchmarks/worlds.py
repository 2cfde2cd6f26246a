"""Generated worlds (issue 35, item 7): ``bisectbot run`` over N histories whose truth is known.

Each world (:mod:`tests.worlds.generator`: pure, seed -> world, imports nothing from
``bisectbot``) is a git history whose commits set a failure shape -- a command reproducer
(``check.py``, exit 0/1/125, no server) or the reference engine behind ``serve.py`` -- plus the
recipe that asks the question and the truth: the culprit, or why none can be named (skips next
to it, a bad good end, a good bad end, several good -> bad transitions). :mod:`tests.worlds.build`
writes it (``git fast-import``) and runs the installed ``bisectbot --state S --json run RECIPE
--good X --bad Y --out O`` once per night (local runner, sandboxed candidates), then scores the
last night's ``result``:

* **confident wrong**: a culprit named at the recipe's ``bisect.confidence`` (0.99) or above that
  the truth does not allow (not the culprit; for a range or a nameless truth, any culprit);
* **right**: the identifiable culprit named (for several transitions: one of them);
* **ranges**: ``range`` results that hold the truth (``range-ok``) or miss it;
* **no culprit**: inconclusive, no-regression, boundary-failed; **errors**: no result.

Printed per shape: worlds, identifiable share, right of identifiable, confident wrong, other
outcomes, mean probes (fresh, not cached) against mean ``ceil(log2 N)`` of the range, and the
wall time; then every world that went against its truth (``--show``), with the bot's line.

Run: ``python benchmarks/worlds.py [--n 500] [--jobs 2] [--seed 0] [--shapes step,skips,...]
[--json FILE] [--keep DIR]``. Seeds are ``seed .. seed + n - 1``; the shape of a world is drawn
by its seed from ``--shapes`` (default: every shape).

Measured on main 2104dba's bot (branch ``worlds``), 2-core shared machine, 2026-12-03
(FIGURES below are filled in by hand from a run).

FIGURES
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.worlds.build import Outcome, run_world  # noqa: E402
from tests.worlds.generator import SHAPES, generate  # noqa: E402

BAD = ("confident-wrong", "range-wrong", "error")


def one(seed: int, shapes: list[str], base: str, keep: bool) -> Outcome:
    """Generate, run and score world ``seed`` in a directory of its own under ``base``."""
    world = generate(seed, shapes)
    root = Path(tempfile.mkdtemp(prefix=f"w{seed}-", dir=base))
    try:
        out = run_world(world, root)
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    return out


def table(outcomes: list[Outcome]) -> list[str]:
    """The per-shape table (and an "all" row) as Markdown lines."""
    by: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by[o.shape].append(o)
    rows = ["| shape | worlds | identifiable | right / identifiable | confident wrong | wrong < conf | "
            "range ok / wrong | no culprit | errors | probes | ceil(log2 N) | s / world |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, group in [*sorted(by.items()), ("all", outcomes)]:
        if not group:
            continue
        ident = [o for o in group if o.truth_kind == "culprit"]
        right = sum(o.category == "right" for o in ident)
        cnt = defaultdict(int)
        for o in group:
            cnt[o.category] += 1
        n = len(group)
        rows.append(
            f"| {name} | {n} | {len(ident)} ({100 * len(ident) / n:.0f} %) | "
            f"{right}/{len(ident)}" + (f" ({100 * right / len(ident):.1f} %)" if ident else "") + " | "
            f"**{cnt['confident-wrong']}** | {cnt['wrong-unconfident']} | {cnt['range-ok']} / {cnt['range-wrong']} | "
            f"{cnt['no-culprit']} | {cnt['error']} | {sum(o.probes for o in group) / n:.1f} | "
            f"{sum(o.log2n for o in group) / n:.1f} | {sum(o.wall_s for o in group) / n:.1f} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the worlds and print the table; exit 1 when a world named a confident wrong culprit."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=500, help="number of worlds (default 500)")
    ap.add_argument("--jobs", type=int, default=2, help="worlds run at once (processes)")
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    ap.add_argument("--shapes", default="", help=f"comma-separated subset of: {', '.join(SHAPES)}")
    ap.add_argument("--json", dest="json_out", help="write every outcome to this JSON file")
    ap.add_argument("--keep", help="keep each world's directory under this one")
    ap.add_argument("--show", type=int, default=40, help="list at most this many worlds against their truth")
    a = ap.parse_args(argv)
    shapes = [s for s in a.shapes.split(",") if s] or list(SHAPES)
    base = a.keep or tempfile.mkdtemp(prefix="bisectbot-worlds-")
    Path(base).mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    outcomes: list[Outcome] = []
    seeds = range(a.seed, a.seed + a.n)
    with ProcessPoolExecutor(max_workers=a.jobs) as ex:
        futs = {ex.submit(one, s, shapes, base, bool(a.keep)): s for s in seeds}
        for i, f in enumerate(as_completed(futs), 1):
            o = f.result()
            outcomes.append(o)
            if o.category in BAD or (o.truth_kind == "culprit" and o.category != "right"):
                print(f"[{i}/{a.n}] seed {o.seed} {o.shape}: truth {o.truth_kind} {o.truth} -> "
                      f"{o.category}: {o.line[:160]}", file=sys.stderr, flush=True)
    wall = time.monotonic() - t0
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)
    outcomes.sort(key=lambda o: o.seed)
    print(f"worlds: {a.n} (seeds {a.seed}..{a.seed + a.n - 1}), shapes: {', '.join(shapes)}; "
          f"jobs {a.jobs}; wall {wall:.0f} s ({wall / max(1, a.n):.1f} s a world)")
    print()
    print("\n".join(table(outcomes)))
    against = [o for o in outcomes if o.category in BAD or (o.truth_kind == "culprit" and o.category != "right")]
    if against:
        print()
        print(f"against their truth ({len(against)}):")
        for o in against[: a.show]:
            print(f"- seed {o.seed} {o.shape}: truth {o.truth_kind} {o.truth}; {o.category}: {o.line[:200]}")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps([o.to_dict() for o in outcomes], indent=1))
    cw = sum(o.category == "confident-wrong" for o in outcomes)
    print()
    print(f"confident wrong culprits: {cw} (target 0)")
    return 1 if cw else 0


if __name__ == "__main__":
    sys.exit(main())
