"""Render time of ``bisectbot dashboard`` for a year of nights of 10 recipes (issue 29).

A synthetic ledger written through :class:`bisectbot.ledger.Ledger`'s own API, shaped like a
real one: per recipe 365 nightlies (``nightly_main_YYYYMMDD``, one digest each, vLLM/aiter
versions), one stage-1 session per night probing that night's nightly (a 6-size threshold table
per probe, the reproducer's evidence excerpts), and every 30 nights a regression whose night
bisects the last 30 nightlies (6 more probes, a culprit) -- 3,650 sessions, ~5,800 probes,
~4,000 pages. Printed: the time to fill the ledger, a cold render (every page), a render with
nothing changed (every page skipped by its input hash) and the render after one more night of
one recipe (the pages that changed), with pages rendered and the ratio to the cold render.

Target: the cold render of a year of 10 recipes in seconds (<= 30 s CPU), a night's render a few
pages. CPU seconds are the figure (wall time on the loaded shared 2-core machine mostly measures
the neighbours); both are printed. Run: ``python benchmarks/dashboard.py [--recipes 10 --nights 365]``.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

from bisectbot.dashboard import build_dashboard
from bisectbot.ledger import Ledger
from bisectbot.models import Candidate, CandidateKind, ProbeResult, Verdict

EXCERPT = "2 + 2 equals 4, so the answer is 4. The access codes written in the document are, in order, code 1: "


def _digest(*parts: object) -> str:
    return "sha256:" + hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


def _probe(ref: str, tag: str, bad: bool, key: str) -> ProbeResult:
    thr = (2983, 3038) if bad else (16007, None)
    table = [{"requested": s, "prompt_tokens": s + 3, "outcome": "GARBAGE" if bad and s > 3000 else "OK",
              "excerpt": EXCERPT + ("9 9 9 9 9 9" if bad and s > 3000 else "DUNLIN-3389."), "reasons":
              ["repeat-run: flood of '9'"] if bad and s > 3000 else [], "requests": 1}
             for s in (1000, 2000, 3000, 4000, 8000, 16000)]
    return ProbeResult(Candidate(CandidateKind.NIGHTLY, ref, tag, "image"), Verdict.BAD if bad else Verdict.GOOD,
                       reason="garbage (last ok 2983, first garbage 3038 tokens)" if bad else
                       "no garbage up to 16007 tokens", threshold=thr, table=table, cache_key=key,
                       patches=[{"id": "aiter-chunkq-clamp", "state": "applies", "label": "applies"}])


def _session(led: Ledger, sid: str, recipe: str, cands: list[tuple[str, str]], probes: list[tuple[int, bool]],
             culprit: int | None) -> None:
    state = {"stage": "stage 1", "component": "image", "n": len(cands), "candidates": [r for r, _ in cands]}
    led.save_session(sid, recipe, "h" * 16, cands[0][0], cands[-1][0], "running", state)
    led.log_event(sid, "start", {"stage": "stage 1", "n": len(cands), "good": cands[0][0], "bad": cands[-1][0]})
    for i, bad in probes:
        ref, tag = cands[i]
        led.log_event(sid, "probe", {"index": i, "ref": ref, "label": tag, "attempt": 1, "verdict": "bad" if bad else
                                     "good", "effective": "bad" if bad else "good", "reason": "", "signature": "",
                                     "threshold": [2983, 3038] if bad else [16007, None], "duration_s": 900.0,
                                     "origin": "probe", "phase": "search"})
    status = "culprit" if culprit is not None else "boundary-failed"
    state["culprits"] = [cands[culprit][0]] if culprit is not None else []
    led.log_event(sid, "result", {"stage": "stage 1", "status": status, "culprits": state["culprits"],
                                  "confidence": 0.999 if culprit is not None else 0.0, "message": ""})
    led.save_session(sid, recipe, "h" * 16, cands[0][0], cands[-1][0], status, state)


def fill(state: Path, recipes: int, nights: int) -> int:
    """Write the synthetic ledger; returns the number of probes."""
    start = date(2026, 1, 1)
    n_probes = 0
    with Ledger(state) as led:
        for r in range(recipes):
            name = f"recipe-{r:02d}"
            repo = f"rocm/vllm-dev-{r}"
            tags = [(f"nightly_main_{(start + timedelta(days=d)).strftime('%Y%m%d')}", d) for d in range(nights)]
            nights_c = [(_digest(repo, t), t) for t, _ in tags]
            for (dig, t), (_, d) in zip(nights_c, tags):
                led.record_nightly(repo, t, dig, components={"vllm": f"0.19.1rc1.dev{d}+g{dig[7:16]}",
                                                             "aiter": f"0.1.10.post3.dev{d}"})
            bad = [((d // 30) % 2 == 1) for d in range(nights)]  # 30 good nights, 30 bad, ...
            probes = []
            for d in range(nights):
                probes.append(_probe(nights_c[d][0], nights_c[d][1], bad[d], f"{name}-{d}"))
                lo = max(0, d - 29)
                cands = nights_c[lo:d + 1]
                if bad[d] and (d == 0 or not bad[d - 1]):  # the first bad night: bisect the 30 before it
                    visited = sorted({0, len(cands) - 1, len(cands) // 2, len(cands) * 3 // 4, len(cands) - 2})
                    for i in visited[1:-1]:
                        probes.append(_probe(cands[i][0], cands[i][1], False, f"{name}-{d}-{i}"))
                    _session(led, f"{name}-{d:03d}", name, cands, [(i, i == len(cands) - 1) for i in visited],
                             len(cands) - 1)
                else:
                    _session(led, f"{name}-{d:03d}", name, [nights_c[max(0, d - 1)], nights_c[d]], [(1, bad[d])],
                             None)
            n_probes += led.put_probes(probes)
    return n_probes


def _timed(state: Path, site: Path):
    """One ``build_dashboard``: its stats, CPU seconds (this process) and wall seconds."""
    c0, w0 = time.process_time(), time.perf_counter()
    stats = build_dashboard(state, site)
    return stats, time.process_time() - c0, time.perf_counter() - w0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipes", type=int, default=10)
    ap.add_argument("--nights", type=int, default=365)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bisectbot-dash-bench-") as tmp:
        state, site = Path(tmp) / "state", Path(tmp) / "site"
        t0 = time.perf_counter()
        n = fill(state, args.recipes, args.nights)
        t_fill = time.perf_counter() - t0
        print(f"ledger: {args.recipes} recipes x {args.nights} nights, {n:,} probes, "
              f"{args.recipes * args.nights:,} sessions, filled in {t_fill:.1f} s")
        cold, t_cold, w_cold = _timed(state, site)
        print(f"cold render:          {cold.rendered:5,} pages in {t_cold:6.2f} s CPU ({w_cold:.2f} s wall)")
        same, t_same, w_same = _timed(state, site)
        print(f"nothing changed:      {same.rendered:5,} pages in {t_same:6.2f} s CPU ({w_same:.2f} s wall; "
              f"{same.unchanged:,} skipped by hash; {t_same / t_cold:.2f} x cold)")
        with Ledger(state) as led:  # one more night of recipe-00
            d = args.nights
            tag = f"nightly_main_{(date(2026, 1, 1) + timedelta(days=d)).strftime('%Y%m%d')}"
            dig = _digest("rocm/vllm-dev-0", tag)
            prev = led.nightlies("rocm/vllm-dev-0")[-1]
            led.record_nightly("rocm/vllm-dev-0", tag, dig)
            led.put_probe(_probe(dig, tag, False, "recipe-00-extra"))
            _session(led, "recipe-00-extra", "recipe-00", [(prev["digest"], prev["tag"]), (dig, tag)], [(1, False)], None)
        night, t_night, w_night = _timed(state, site)
        print(f"one more night:       {night.rendered:5,} pages in {t_night:6.2f} s CPU ({w_night:.2f} s wall; "
              f"{', '.join(sorted(night.written)[:4])}; {t_night / t_cold:.2f} x cold)")
        ok = t_cold <= 30 and night.rendered <= 3
        print(f"target (cold <= 30 s CPU, a night re-renders <= 3 pages): {'met' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
