"""Transient build failures (issue 35, item 2), through the installed ``bisectbot run`` on a real git
history of the reference engine and a command reproducer.

* A build whose output names a transient cause (``HTTP Error 429: Too Many Requests``) once, then
  builds: retried like a start, the culprit is named. On main it was a cached skip beside the culprit:
  "range: the first bad is one of 2 candidates", repeated from the cache by the next run.
* A skip cached inside a reported range: the message says it came from the cache and names
  ``--retry-errors`` (on main it did not).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

BUILD_429_ONCE = """\
import os, sys
marker = {marker!r}
if open("version.txt").read().strip() == {flaky!r} and not os.path.exists(marker):
    open(marker, "w").write("1")
    print("Downloading wheel ...")
    print("ERROR: HTTP error 429 while getting https://files.example/x.whl: 429 Client Error: Too Many Requests")
    sys.exit(1)
print("built")
"""


def result(out: Path) -> dict:
    return json.loads((out / "result.json").read_text())


def test_a_429_in_a_build_is_retried_and_the_culprit_named(tmp_path, kit, starts_file) -> None:
    repo = kit.make_engine_repo(tmp_path / "engine", 8, 5)
    script = tmp_path / "build429.py"
    script.write_text(BUILD_429_ONCE.format(marker=str(tmp_path / "hit-429"), flaky="engine-4"))
    out = tmp_path / "out"
    r = kit.write_recipe(tmp_path / "r.yaml", repo, out, mode="command",
                         server={"build_command": [sys.executable, str(script)]})
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert p.returncode == 0, p.stdout + p.stderr
    res = result(out)
    assert res["status"] == "culprit" and res["stages"][0]["first_bad"]["ref"] == repo.shas[5]
    assert (tmp_path / "hit-429").exists()  # the 429 really happened, on the last good
    lg = [x for x in res["stages"][0]["probes"] if x["candidate"]["ref"] == repo.shas[4]]
    assert lg and lg[0]["verdict"] == "good" and lg[0]["extra"].get("build_retries") == 1


def test_a_cached_skip_inside_a_range_names_retry_errors(tmp_path, kit, starts_file) -> None:
    repo = kit.make_engine_repo(tmp_path / "engine", 8, 5, unbuildable={4})
    out = tmp_path / "out"
    r = kit.write_recipe(tmp_path / "r.yaml", repo, out, mode="command")
    first = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert first.returncode == 3, first.stdout + first.stderr
    again = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert again.returncode == 3 and result(out)["status"] == "range"
    msg = result(out)["stages"][0]["message"]
    assert "from the ledger cache" in msg and "--retry-errors" in msg, msg
    assert "build failed" in msg and repo.shas[4][:10] in msg, msg
    assert "--retry-errors" in again.stdout
