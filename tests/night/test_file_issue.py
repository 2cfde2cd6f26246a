"""``bisectbot run --file-issue`` without Docker: a git history of the reference engine (command
reproducer), the contract-following fake GitHub in a real HTTP server, the CLI in a subprocess."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.bisect.conftest import make_engine_repo, run_cli, write_recipe
from tests.night.conftest import GH_REPO, TOKEN


def _recipe(tmp_path: Path, api_url: str | None) -> Path:
    repo = make_engine_repo(tmp_path / "repo", n=6, k=3)
    path = write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out", mode="command")
    if api_url:
        data = yaml.safe_load(path.read_text())
        data["report"]["github"] = {"repo": GH_REPO, "labels": ["bisectbot"], "api_url": api_url,
                                    "bot_login": "bisectbot-app"}
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _env(token: str | None) -> dict[str, str]:
    return {"ENGINE_STARTS": "/dev/null", "GITHUB_TOKEN": token or "", "BISECTBOT_GITHUB_TOKEN": "", "GH_TOKEN": ""}


def test_file_issue_needs_report_github(tmp_path) -> None:
    rec = _recipe(tmp_path, None)
    p = run_cli("--state", str(tmp_path / "state"), "run", str(rec), "--file-issue", env=_env(None))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "--file-issue needs report.github" in p.stderr


def test_file_issue_files_once_then_comments_and_dry_runs_without_token(tmp_path, fake_github) -> None:
    rec = _recipe(tmp_path, fake_github.base_url)
    state = str(tmp_path / "state")
    # without a token nothing is sent: the would-be issue lands in the report directory
    p = run_cli("--state", state, "run", str(rec), "--file-issue", "--out", str(tmp_path / "o0"), env=_env(None))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "github: dry-run: no GitHub token" in p.stdout
    assert len(list((tmp_path / "o0").glob("issue-*.md"))) == 1 and not fake_github.repos[GH_REPO].issues

    p = run_cli("--state", state, "run", str(rec), "--file-issue", "--out", str(tmp_path / "o1"), env=_env(TOKEN))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "github: created: filed #1" in p.stdout, p.stdout
    issues = fake_github.repos[GH_REPO].issues
    assert len(issues) == 1 and TOKEN not in p.stdout + p.stderr

    p = run_cli("--state", state, "run", str(rec), "--file-issue", "--out", str(tmp_path / "o2"), env=_env(TOKEN))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "github: commented: commented on #1" in p.stdout, p.stdout
    assert len(fake_github.repos[GH_REPO].issues) == 1
    assert len(fake_github.repos[GH_REPO].comments.get(1, [])) == 1
