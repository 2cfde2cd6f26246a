"""A build has its own time limit (issue 41, item 3), through the installed ``bisectbot run`` on a real
git history of the reference engine with the local runner.

Before: the local runner killed the build after ``server.health_timeout_s`` (a 75 s build under a 60 s
health timeout: "build failed (timed out)", every candidate a skip). Now ``server.build_timeout_s``
(default 4 hours) limits the build, and a build that outruns it is a skip whose reason names the
limit and the field.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

#: the history's own build.py, after a sleep (the check reads what it builds)
SLOW_BUILD = "import runpy, time\ntime.sleep({s})\nrunpy.run_path('build.py', run_name='__main__')\n"


def _run(kit, tmp_path: Path, name: str, server: dict) -> tuple[object, dict]:
    repo = kit.make_engine_repo(tmp_path / f"engine-{name}", 4, 2)
    out = tmp_path / f"out-{name}"
    r = kit.write_recipe(tmp_path / f"{name}.yaml", repo, out, mode="command", server=server)
    p = kit.run_cli("--state", str(tmp_path / f"s-{name}"), "run", str(r))
    res = json.loads((out / "result.json").read_text()) if (out / "result.json").exists() else {}
    return p, res


@pytest.mark.parametrize("health", [0.5, 60.0])
def test_a_build_longer_than_the_health_timeout_builds(tmp_path, kit, starts_file, health) -> None:
    script = tmp_path / "slow.py"
    script.write_text(SLOW_BUILD.format(s=2))
    p, res = _run(kit, tmp_path, "ok", {"build_command": [sys.executable, str(script)], "health_timeout_s": health})
    assert p.returncode == 0, p.stdout + p.stderr  # type: ignore[attr-defined]
    assert res["status"] == "culprit" and not any(x["verdict"] == "skip" for x in res["stages"][0]["probes"])


def test_a_build_past_build_timeout_s_is_a_skip_naming_the_limit(tmp_path, kit, starts_file) -> None:
    script = tmp_path / "slow.py"
    script.write_text(SLOW_BUILD.format(s=30))
    p, res = _run(kit, tmp_path, "slow", {"build_command": [sys.executable, str(script)], "build_timeout_s": 1.5,
                                          "health_timeout_s": 60})
    assert p.returncode != 0, p.stdout + p.stderr  # type: ignore[attr-defined]
    text = json.dumps(res) + p.stdout + p.stderr  # type: ignore[attr-defined]
    assert "build failed (timed out after 2 s, server.build_timeout_s)" in text, text[-3000:]
