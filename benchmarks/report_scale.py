"""What writing the report costs beside the search, at 10,000 commits (issue 25, input 7).

Before: at 10,000 commits writing the report took 1.67 s, 74 % of the run; ``result.json`` was
4.0 MB and ``report.json`` 4.3 MB (every candidate listed) and 384,356 strings passed the redactor.

It makes a ``git fast-import`` history of N commits (a command reproducer that exits 1 where the
file ``BUG`` exists, planted at 62 % of the range), runs ``bisectbot run`` on it in a child process
(the whole run's wall time, best of 3 on a fresh state), then, in this process, writes the run's
result again with every candidate of the range held in memory, as the run holds it (best of 5),
counting the redactor's passes.

Rows (targets from issue 25):

* report write / whole run (wall): target <= 0.25 (the report is a small part of the night);
* ``result.json`` and ``report.json`` bytes per probe: target <= 4,096;
* redactor passes per probe: target <= 400 (the probes' tables and texts; none per candidate).

Run: ``python benchmarks/report_scale.py [--commits 10000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.report.test_report_scale import fast_history  # noqa: E402  (the test's own history builder)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=10_000)
    a = ap.parse_args()
    import yaml

    import bisectbot.secrets as secrets
    from bisectbot.models import Candidate, CandidateKind
    from bisectbot.report.load import load_result
    from bisectbot.session.result import write_report

    n, culprit = a.commits, int(a.commits * 0.62)
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        t0 = time.perf_counter()
        shas = fast_history(tmp / "repo", n, culprit)
        made = time.perf_counter() - t0
        recipe = tmp / "scale.yaml"
        recipe.write_text(yaml.safe_dump({
            "name": "scale", "source": {"kind": "git", "repo": str(tmp / "repo")},
            "reproducer": {"kind": "command", "command": [sys.executable, "check.py"], "command_timeout_s": 60},
            "regress": "command", "bisect": {"good": shas[0], "bad": shas[-1]}, "report": {"dir": str(tmp / "out")}}))
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("GITHUB_STEP_SUMMARY", None)
        runs = []
        for i in range(3):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp / f"state-{i}"), "run", str(recipe)],
                           check=True, capture_output=True, env=env)
            runs.append(time.perf_counter() - t0)
        run_s = min(runs)
        result, _ = load_result(tmp / "out" / "result.json")
        final = result.final
        assert final is not None and final.first_bad is not None and final.first_bad.ref == shas[culprit]
        probes = len(final.probes)
        # the run's in-memory stage: every candidate of the range
        final.candidates = [Candidate(CandidateKind.COMMIT, s, f"{s[:10]} change {i}", "repo",
                                      {"subject": f"change {i}", "author": "t"}) for i, s in enumerate(shas)]
        final.count, final.positions = 0, []
        real = secrets.redact
        calls = [0]

        def counting(text: str, given: object = None) -> str:
            calls[0] += 1
            return real(text, given)  # type: ignore[arg-type]

        writes = []
        for i in range(5):
            calls[0] = 0
            secrets.redact = counting  # type: ignore[assignment]
            try:
                t0 = time.perf_counter()
                write_report(result, tmp / f"write-{i}")
                writes.append(time.perf_counter() - t0)
            finally:
                secrets.redact = real  # type: ignore[assignment]
        write_s = min(writes)
        sizes = {name: (tmp / "write-0" / name).stat().st_size for name in ("result.json", "report.json")}
        doc = json.loads((tmp / "write-0" / "result.json").read_text())
        assert doc["stages"][-1]["count"] == n
    rows = [
        ("report write / whole run (wall)", write_s / run_s, 0.25, f"{write_s:.3f} s of {run_s:.2f} s"),
        *((f"{name} bytes per probe", size / probes, 4096, f"{size:,} bytes, {probes} probes")
          for name, size in sizes.items()),
        ("redactor passes per probe", calls[0] / probes, 400, f"{calls[0]:,} passes"),
    ]
    print(f"{n:,} commits (fast-import {made:.1f} s), culprit at {culprit:,}")
    ok = True
    for name, value, target, note in rows:
        good = value <= target
        ok &= good
        print(f"{name:40s} {value:12,.3f}   target <= {target:<8,}  {'ok' if good else 'MISSED'}  ({note})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
