"""`bisectbot report render|file|commands` through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from report_helpers import REPO, TOKEN, make_result

from bisectbot.report import fingerprint

ROOT = Path(__file__).resolve().parents[2]


def _run(args, env_extra=None, tmp_path=None):
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("BISECTBOT_GITHUB_TOKEN", "GITHUB_TOKEN", "GH_TOKEN",
                                                            "GITHUB_STEP_SUMMARY")}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_render_writes_report_files(tmp_path):
    rf = tmp_path / "result.json"
    rf.write_text(json.dumps(make_result(n_probes=8).to_dict()))
    p = _run(["report", "render", str(rf), "--out", str(tmp_path / "out")])
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / "report.md").exists() and (tmp_path / "out" / "issue.md").exists()
    assert "wrote" in p.stdout


def test_bad_result_file_exits_2_with_one_line(tmp_path):
    rf = tmp_path / "result.json"
    rf.write_text("[1, 2")
    p = _run(["report", "render", str(rf)])
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "result.json" in p.stderr


def test_file_without_token_is_a_dry_run(tmp_path):
    rf = tmp_path / "result.json"
    rf.write_text(json.dumps(make_result(n_probes=8).to_dict()))
    p = _run(["--state", str(tmp_path / "st"), "report", "file", str(rf), "--repo", REPO])
    assert p.returncode == 0, p.stderr
    assert "no GitHub token: would-be issue written to" in p.stdout
    assert (tmp_path / f"issue-{fingerprint(make_result(n_probes=8))}.md").exists()


def test_file_and_commands_against_fake_github(fake_github, tmp_path):
    rf = tmp_path / "result.json"
    rf.write_text(json.dumps(make_result(n_probes=8).to_dict()))
    env = {"BISECTBOT_GITHUB_TOKEN": TOKEN, "BISECTBOT_BOT_LOGIN": fake_github.bot_login}
    args = ["--state", str(tmp_path / "st"), "--json", "report", "file", str(rf), "--repo", REPO,
            "--api-url", fake_github.base_url]
    p = _run(args, env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["action"] == "created"
    fake_github.add_comment(REPO, 1, "/bisectbot bad abc123", author="maint", association="MEMBER")
    p = _run(["report", "commands", "--repo", REPO, "--api-url", fake_github.base_url], env)
    assert p.returncode == 0, p.stderr
    assert "#1 bad abc123 by maint (MEMBER)" in p.stdout
    assert TOKEN not in p.stdout + p.stderr
    p = _run(["report", "commands", "--repo", REPO])
    assert p.returncode == 2 and "token" in p.stderr


def _run_in(cwd: Path, args, env_extra=None):
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("BISECTBOT_GITHUB_TOKEN", "GITHUB_TOKEN", "GH_TOKEN",
                                                            "GITHUB_STEP_SUMMARY", "BISECTBOT_RECIPES")}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], capture_output=True, text=True, env=env,
                          timeout=120, cwd=cwd)


def test_file_refuses_a_result_of_another_recipe_and_takes_shipped_names(tmp_path):
    """newuser defect 10: a demo result filed with --recipe glm51… would land in vllm-project/vllm.
    From an empty directory, --recipe takes a shipped recipe's name (defect 7)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    rf = tmp_path / "result.json"
    rf.write_text(json.dumps(make_result(n_probes=4, recipe="demo-engine-prefill").to_dict()))
    for extra in ([], ["--dry-run"]):
        p = _run_in(empty, ["--state", str(tmp_path / "st"), "report", "file", str(rf),
                            "--recipe", "glm51-fp8-sparse-mla-prefill", *extra])
        assert p.returncode == 2, p.stdout + p.stderr
        assert "demo-engine-prefill" in p.stderr and "glm51-fp8-sparse-mla-prefill" in p.stderr, p.stderr
        assert p.stderr.strip().count("\n") == 0 and "Traceback" not in p.stderr
        assert not list(tmp_path.glob("issue-*.md")) and not list(empty.iterdir())
    # the same recipe, by its shipped name, from the empty directory: a dry run into its repository
    rf.write_text(json.dumps(make_result(n_probes=4, recipe="glm51-fp8-sparse-mla-prefill").to_dict()))
    p = _run_in(empty, ["--state", str(tmp_path / "st"), "report", "file", str(rf),
                        "--recipe", "glm51-fp8-sparse-mla-prefill", "--dry-run"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert "would-be issue written to" in p.stdout, p.stdout
    # an unknown name is a clear bad-input error naming the shipped ones
    p = _run_in(empty, ["report", "file", str(rf), "--recipe", "no-such-recipe", "--dry-run"])
    assert p.returncode == 2 and "no-such-recipe" in p.stderr and "demo-command" in p.stderr, p.stderr


def test_probe_takes_a_shipped_recipe_name(tmp_path):
    """``probe --recipe NAME`` resolves shipped recipes as run does (defect 7): against a closed port
    it gets as far as the server (exit 4, an error verdict), not a recipe-not-found exit 2."""
    p = _run_in(tmp_path, ["--json", "probe", "--endpoint", "http://127.0.0.1:1", "--recipe",
                           "glm51-fp8-sparse-mla-prefill", "--sizes", "1000"])
    assert p.returncode == 4, p.stdout + p.stderr
    assert "cannot read" not in p.stderr
