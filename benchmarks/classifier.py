"""Precision and recall of the garbage classifier on the labelled corpus.

Usage: ``python benchmarks/classifier.py [--corpus DIR] [--json] [-v]``

The corpus has two parts: the **tuning** part ``tests/data/outputs`` (thresholds were
fitted on it) and the **held-out** part ``tests/data/heldout`` (never used to fit
anything; committed before the classifier changes of issue 11). Both are measured and
printed separately; ``--corpus DIR`` measures one directory only.

Prints, side by side, the combined verdict of :func:`bisectbot.reproduce.classify.classify`
and the classic unique-word-ratio-only rule (:func:`classic_unique_ratio`: OK iff
ratio > 0.15 and >= 10 completion tokens), then every case where either is wrong.
"Positive" = garbage. An ``INCONCLUSIVE`` verdict counts as "not garbage"; cases with an
expected ``outcome`` must match it exactly for the combined verdict.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bisectbot.models import Outcome  # noqa: E402
from bisectbot.recipe import ClassifierSettings, ReproducerSpec  # noqa: E402
from bisectbot.reproduce.classify import classic_unique_ratio, classify  # noqa: E402
from bisectbot.reproduce.client import Reply  # noqa: E402

DEFAULT_CORPUS = ROOT / "tests" / "data" / "outputs"
HELDOUT_CORPUS = ROOT / "tests" / "data" / "heldout"
#: The parts measured by default: name -> directory.
PARTS = {"tuning": DEFAULT_CORPUS, "held-out": HELDOUT_CORPUS}


def load_corpus(path: Path = DEFAULT_CORPUS) -> list[dict[str, Any]]:
    """All cases (``*.json``) of the corpus directory, sorted by id."""
    cases = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(Path(path).glob("*.json"))]
    return sorted(cases, key=lambda c: c["id"])


def case_inputs(case: dict[str, Any]) -> tuple[Reply, ReproducerSpec, list[str]]:
    """The reply, the reproducer settings it was asked under, and the needles of one case."""
    asked = case["asked"]
    reply = Reply(content=case.get("content") or "", reasoning=case.get("reasoning", ""),
                  finish_reason=case.get("finish_reason"), completion_tokens=case.get("completion_tokens"))
    spec = ReproducerSpec(question=asked["question"], expected_answer=asked.get("expected_answer"),
                          needles=len(asked.get("needles") or []), max_tokens=asked.get("max_tokens", 1000),
                          classifier=ClassifierSettings(min_reply_tokens=asked.get("min_reply_tokens", 3)))
    return reply, spec, list(asked.get("needles") or [])


def evaluate(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Confusion counts, precision and recall for both checks, and the wrong cases."""
    res: dict[str, Any] = {}
    for name in ("combined", "unique_ratio_only"):
        res[name] = {"tp": 0, "fp": 0, "tn": 0, "fn": 0, "wrong": []}
    for c in cases:
        reply, spec, needles = case_inputs(c)
        truth = c["label"] == "garbage"
        cl = classify(reply, spec, needles)
        naive = classic_unique_ratio(reply)
        for name, outcome, why in (("combined", cl.outcome, cl.reasons), ("unique_ratio_only", naive, [])):
            pred = outcome == Outcome.GARBAGE
            key = ("tp" if pred else "fn") if truth else ("fp" if pred else "tn")
            res[name][key] += 1
            exact = c.get("outcome")
            if pred != truth or (name == "combined" and exact and outcome.value != exact):
                res[name]["wrong"].append({"id": c["id"], "label": c["label"], "kind": c["kind"],
                                           "got": outcome.value, "reasons": why})
    for r in res.values():
        r["precision"] = r["tp"] / (r["tp"] + r["fp"]) if r["tp"] + r["fp"] else 1.0
        r["recall"] = r["tp"] / (r["tp"] + r["fn"]) if r["tp"] + r["fn"] else 1.0
    res["cases"] = len(cases)
    res["garbage"] = sum(c["label"] == "garbage" for c in cases)
    return res


def _print_part(name: str, path: Path, res: dict[str, Any], verbose: bool) -> None:
    comb, naive = res["combined"], res["unique_ratio_only"]
    print(f"== {name} part: {res['cases']} labelled outputs ({res['garbage']} garbage) in {path}")
    print(f"{'':12}{'combined':>12}{'unique-ratio only':>20}")
    for k in ("precision", "recall"):
        print(f"{k:12}{comb[k]:>12.3f}{naive[k]:>20.3f}")
    for k in ("tp", "fp", "tn", "fn"):
        print(f"{k:12}{comb[k]:>12d}{naive[k]:>20d}")
    for label, r in (("combined", comb), ("unique-ratio only", naive)):
        if r["wrong"] and (label == "combined" or verbose):
            print(f"{label} is wrong on {len(r['wrong'])} case(s):")
            for w in r["wrong"]:
                why = f"  ({'; '.join(w['reasons'])[:100]})" if w["reasons"] and verbose else ""
                print(f"  {w['id']:40} label={w['label']:8} got={w['got']}{why}")
    print()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=None, help="measure this directory only")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true", help="reasons of wrong cases; baseline's wrong cases")
    a = ap.parse_args(argv)
    parts = {"corpus": a.corpus} if a.corpus else dict(PARTS)
    results: dict[str, Any] = {}
    for name, path in parts.items():
        cases = load_corpus(path)
        if not cases:
            print(f"no cases in {path}", file=sys.stderr)
            return 2
        results[name] = evaluate(cases)
    if a.json:
        print(json.dumps(results if len(results) > 1 else next(iter(results.values())), indent=2))
        return 0
    for name, path in parts.items():
        _print_part(name, path, results[name], a.verbose)
    return 0


if __name__ == "__main__":
    sys.exit(main())
