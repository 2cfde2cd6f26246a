"""Issue 25, input 6: ``bisect replay`` says what it did. The replayed report names the log and the
session it came from and never claims that the culprit and its predecessor were re-probed when
nothing was probed; an empty log is refused (it silently resumed the old session)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def bb(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BISECTBOT_", "GITHUB_", "GH_"))}
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_replayed_report_names_its_session_and_claims_no_probe(tmp_path) -> None:
    r = bb("demo", "--out", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    state, recipe = tmp_path / "out" / "work" / "state", tmp_path / "out" / "work" / "demo-engine-prefill.yaml"
    first = json.loads((tmp_path / "out" / "result.json").read_text())
    log = bb("--state", str(state), "bisect", "log", cwd=tmp_path)
    assert log.returncode == 0, log.stderr
    (tmp_path / "session.log").write_text(log.stdout)
    session = log.stdout.split("# bisectbot session ", 1)[1].split(":", 1)[0]

    r = bb("--state", str(state), "bisect", "replay", str(recipe), "session.log", "--out", "replayed", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    report = (tmp_path / "replayed" / "report.md").read_text()
    assert f"replayed from session.log of session {session}: its verdicts were taken as given; nothing was probed" \
        in report, report[-3000:]
    assert "were re-probed" not in report
    replayed = json.loads((tmp_path / "replayed" / "result.json").read_text())
    assert replayed["stages"][-1]["first_bad"]["ref"] == first["stages"][-1]["first_bad"]["ref"]

    # an empty log: refused, nothing resumed
    (tmp_path / "empty.log").write_text("# nothing here\n\n")
    r = bb("--state", str(state), "bisect", "replay", str(recipe), "empty.log", "--out", "again", cwd=tmp_path)
    assert r.returncode == 2 and "empty.log: no verdict lines" in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "again").exists()
