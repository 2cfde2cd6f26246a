"""Class 9 of issue 13: ``run --file-issue`` probes first, writes the report, then files with
retries; a filing failure keeps the report and exits with its own code (6)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
import yaml

from bisectbot.errors import EXIT_FILING_FAILED
from tests.bisect.conftest import make_engine_repo, run_cli, write_recipe
from tests.report.report_helpers import REPO, TOKEN

pytestmark = pytest.mark.slow


def _recipe(tmp_path: Path, api_url: str) -> tuple[Path, list[str]]:
    repo = make_engine_repo(tmp_path / "repo", n=6, k=3)
    path = write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out", mode="command")
    data = yaml.safe_load(path.read_text())
    data["report"]["github"] = {"repo": REPO, "labels": ["bisectbot"], "api_url": api_url, "bot_login": "bisectbot-app"}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, repo.shas


def _env() -> dict[str, str]:
    return {"ENGINE_STARTS": "/dev/null", "GITHUB_TOKEN": TOKEN, "BISECTBOT_GITHUB_TOKEN": "", "GH_TOKEN": ""}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: connections are refused


def test_unreachable_github_still_probes_writes_the_report_and_exits_6(tmp_path: Path) -> None:
    rec, shas = _recipe(tmp_path, f"http://127.0.0.1:{_closed_port()}")
    t0 = time.monotonic()
    p = run_cli("--state", str(tmp_path / "state"), "run", str(rec), "--file-issue", "--out", str(tmp_path / "o"),
                env=_env())
    assert p.returncode == EXIT_FILING_FAILED == 6, p.stdout + p.stderr
    assert "cannot read maintainer commands, bisecting without them" in p.stderr
    res = json.loads((tmp_path / "o" / "result.json").read_text())  # probed, bisected, reported
    assert res["status"] == "culprit" and res["stages"][-1]["first_bad"]["ref"] == shas[3]
    assert (tmp_path / "o" / "report.md").is_file()
    assert "filing failed after 3 attempts" in p.stderr and "retrying in" in p.stderr
    assert "bisectbot report file" in p.stderr  # how to file it later
    assert TOKEN not in p.stdout + p.stderr
    assert time.monotonic() - t0 < 240


def test_github_failing_the_create_keeps_the_report_and_exits_6(tmp_path: Path, fake_github) -> None:
    # GitHub is up but refuses to create the issue (500 on every POST; never retried inside the client)
    rec, _ = _recipe(tmp_path, fake_github.base_url)
    fake_github.fail("POST", r"/repos/octo-org/vllm/issues$", 500, {"message": "boom"}, times=10)
    p = run_cli("--state", str(tmp_path / "state"), "run", str(rec), "--file-issue", "--out", str(tmp_path / "o"),
                env=_env())
    assert p.returncode == 6, p.stdout + p.stderr
    assert (tmp_path / "o" / "result.json").is_file() and "HTTP 500" in p.stderr
    assert not fake_github.repos[REPO].issues


def test_a_transient_filing_failure_is_retried(tmp_path: Path, fake_github) -> None:
    rec, _ = _recipe(tmp_path, fake_github.base_url)
    fake_github.fail("POST", r"/repos/octo-org/vllm/issues$", 502, {"message": "bad gateway"}, times=1)
    p = run_cli("--state", str(tmp_path / "state"), "run", str(rec), "--file-issue", "--out", str(tmp_path / "o"),
                env=_env())
    assert p.returncode == 0, p.stdout + p.stderr
    assert "retrying in" in p.stderr and "github: created" in p.stdout
    assert len(fake_github.repos[REPO].issues) == 1
