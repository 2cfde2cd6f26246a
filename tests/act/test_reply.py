"""``bisectbot report reply``: the answer to a ``/bisectbot bisect`` comment, against the
contract-validated fake GitHub in a real HTTP server (the act test runs it through bisect.yml;
these are the refusals and the idempotence, cheaply)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.night.conftest import GH_REPO, TOKEN, fake_github  # noqa: F401
from tests.report.report_helpers import make_result


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN", "BISECTBOT_GITHUB_TOKEN")}
    e.update(env)
    return subprocess.run([sys.executable, "-m", "bisectbot", "--json", "report", "reply", *args],
                          capture_output=True, text=True, env=e, timeout=120)


def test_reply_once_only_to_a_maintainer_request(fake_github, tmp_path) -> None:  # noqa: F811
    result = tmp_path / "result.json"
    result.write_text(json.dumps(make_result().to_dict()))
    issue = fake_github.add_issue(GH_REPO, "[bisectbot] glm51-prefill: Regression", "body", labels=["bisectbot"])
    n = issue["number"]
    asked = fake_github.add_comment(GH_REPO, n, "please\n/bisectbot bisect good=nightly_main_20260401 "
                                    "bad=nightly_main_20260402 `rm -rf` <b>@here</b>", author="maint",
                                    association="COLLABORATOR")
    stranger = fake_github.add_comment(GH_REPO, n, "/bisectbot bisect good=a bad=b", author="x", association="NONE")
    chat = fake_github.add_comment(GH_REPO, n, "thanks!", author="maint", association="MEMBER")
    common = ["--repo", GH_REPO, "--api-url", fake_github.base_url, "--issue", str(n)]
    env = {"BISECTBOT_GITHUB_TOKEN": TOKEN, "BISECTBOT_BOT_LOGIN": fake_github.bot_login}

    p = _cli(str(result), *common, "--comment", str(asked["id"]), env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["action"] == "commented"
    replies = [c["body"] for c in fake_github.comments_of(GH_REPO, n) if "bisectbot:ack=" in c["body"]]
    assert len(replies) == 1
    body = replies[0]
    assert f"<!-- bisectbot:ack={asked['id']} -->" in body and asked["html_url"] in body
    assert "> `/bisectbot bisect good=nightly_main_20260401 bad=nightly_main_20260402`" in body
    assert "rm -rf" not in body and "@here" not in body and TOKEN not in body

    again = _cli(str(result), *common, "--comment", str(asked["id"]), env=env)  # a re-run of the workflow
    assert again.returncode == 0 and json.loads(again.stdout)["action"] == "unchanged", again.stderr
    for cid, why in ((stranger["id"], "not a maintainer"), (chat["id"], "not a /bisectbot bisect request"),
                     (99999999, "not found")):
        bad = _cli(str(result), *common, "--comment", str(cid), env=env)
        assert bad.returncode != 0 and why in bad.stdout + bad.stderr, bad.stdout + bad.stderr
    assert len(fake_github.comments_of(GH_REPO, n)) == 4  # three comments + the one reply

    dry = _cli(str(result), *common, "--comment", str(asked["id"]), "--out", str(tmp_path / "o"), env={})
    assert dry.returncode == 0 and json.loads(dry.stdout)["action"] == "dry-run", dry.stderr
    written = (tmp_path / "o" / f"reply-{asked['id']}.md").read_text()
    # the comment's address, never a bare `#12` (issue 25, input 8): the web host of --api-url
    web = fake_github.base_url.rstrip("/").removesuffix("/api/v3")
    assert f"[this request]({web}/{GH_REPO}/issues/{n}#issuecomment-{asked['id']})" in written, written[:400]
    assert f"](#{n})" not in written and "](#" not in written.split("<details>")[0]


def test_failure_reply_once_and_never_after_an_answer(fake_github, tmp_path) -> None:  # noqa: F811
    result = tmp_path / "result.json"
    result.write_text(json.dumps(make_result().to_dict()))
    n = fake_github.add_issue(GH_REPO, "[bisectbot] glm51-prefill: Regression", "body", labels=["bisectbot"])["number"]
    asked = fake_github.add_comment(GH_REPO, n, "/bisectbot bisect good=a1 bad=b2", author="maint",
                                    association="OWNER")
    common = ["--repo", GH_REPO, "--api-url", fake_github.base_url, "--issue", str(n), "--comment", str(asked["id"])]
    env = {"BISECTBOT_GITHUB_TOKEN": TOKEN, "BISECTBOT_BOT_LOGIN": fake_github.bot_login}
    run_url = "https://github.com/octo-org/vllm/actions/runs/42"

    both = _cli(str(result), *common, "--failed", run_url, env=env)
    assert both.returncode == 2 and "one of them" in both.stdout + both.stderr
    for _ in range(2):  # a re-run of the failed job says it once
        p = _cli(*common, "--failed", run_url, env=env)
        assert p.returncode == 0, p.stderr
    failed = [c["body"] for c in fake_github.comments_of(GH_REPO, n) if "bisectbot:failed=" in c["body"]]
    assert len(failed) == 1 and run_url in failed[0] and "> `/bisectbot bisect good=a1 bad=b2`" in failed[0]

    # a later successful run still answers (the failure note is no acknowledgement) ...
    p = _cli(str(result), *common, env=env)
    assert p.returncode == 0 and json.loads(p.stdout)["action"] == "commented", p.stderr
    # ... and after the answer no failure note is posted any more
    p = _cli(*common, "--failed", run_url, env=env)
    assert p.returncode == 0 and json.loads(p.stdout)["action"] == "unchanged", p.stderr
    assert len(fake_github.comments_of(GH_REPO, n)) == 3

