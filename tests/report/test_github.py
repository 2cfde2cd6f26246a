"""Filing issues on the contract-following fake GitHub with the real PyGithub client."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest
from fake_github import FakeGitHub, load_recording
from report_helpers import REPO, TOKEN, make_result, nightly

from bisectbot.errors import GitHubError
from bisectbot.ledger import Ledger
from bisectbot.models import Verdict
from bisectbot.recipe import GitHubTarget
from bisectbot.report import NightlyResult, fingerprint, marker
from bisectbot.report.github import (
    GitHubClient,
    acknowledge,
    dispatch_bisection,
    file_or_update,
    parse_command,
    read_commands,
    report_not_reproduced,
)

ROOT = Path(__file__).resolve().parents[2]


def _file(result, target, ledger, tmp_path, client, **kw):
    return file_or_update(result, target, TOKEN, ledger, False, tmp_path / "out", client=client, **kw)


def test_first_detection_creates_one_issue(fake_github, target, ledger, client, tmp_path):
    result = make_result(n_probes=8)
    out = _file(result, target, ledger, tmp_path, client)
    assert out.action == "created" and out.number == 1
    issues = fake_github.issues(REPO)
    assert len(issues) == 1
    issue = issues[0]
    fp = fingerprint(result)
    assert marker(fp) in issue["body"]
    assert issue["title"].startswith("[bisectbot] glm51-prefill: Regression in vllm")
    assert {lb["name"] for lb in issue["labels"]} == {"bisectbot", "rocm"}
    assert [a["login"] for a in issue["assignees"]] == ["alice"]
    assert "cc @bob @amd/rocm-team" in issue["body"]
    # labels were missing and got created first, then the issue
    assert [m for m, p, s in fake_github.log if m == "POST"] == ["POST", "POST", "POST"]
    assert fake_github.requests("POST", "/labels")[0][2] == 201
    rec = ledger.github_issue(fp)
    assert rec["number"] == 1 and rec["state"] == "open"


def test_second_night_adds_one_comment_and_a_retry_adds_none(fake_github, target, ledger, client, tmp_path):
    hist = NightlyResult("glm51-prefill", [nightly(i, Verdict.GOOD if i < 3 else Verdict.BAD,
                                                   (32000, None) if i < 3 else (20480, 20992)) for i in range(1, 6)])
    result = make_result(n_probes=8)
    assert _file(result, target, ledger, tmp_path, client, nightly=hist, newest=hist.newest).action == "created"
    hist.probes.append(nightly(6, Verdict.BAD, (20000, 20500)))
    second = _file(result, target, ledger, tmp_path, client, nightly=hist, newest=hist.newest)
    assert second.action == "commented" and second.number == 1
    again = _file(result, target, ledger, tmp_path, client, nightly=hist, newest=hist.newest)
    assert again.action == "unchanged"
    assert len(fake_github.issues(REPO)) == 1
    comments = fake_github.comments_of(REPO, 1)
    assert len(comments) == 1
    body = comments[0]["body"]
    assert "Still reproduces" in body and "nightly\\_main\\_20260406" in body
    assert "| 4 | 1 |" in body  # streak of 4 nightlies, one pass->fail flip


def test_found_by_marker_through_search_with_an_empty_ledger(fake_github, target, client, tmp_path):
    result = make_result(n_probes=8)
    fp = fingerprint(result)
    fake_github.add_issue(REPO, "older report", f"text\n{marker(fp)}\n", labels=["other"], author=fake_github.bot_login)
    fake_github.index()
    with Ledger(tmp_path / "fresh") as led:
        out = _file(result, target, led, tmp_path, client)
        assert out.action == "commented" and out.number == 1
        assert led.github_issue(fp)["number"] == 1
    assert fake_github.requests("GET", "/search/issues")
    assert not fake_github.requests("POST", "/issues?") and len(fake_github.issues(REPO)) == 1


def test_fallback_listing_follows_pagination(fake_github, target, ledger, tmp_path):
    client = GitHubClient(target, TOKEN, seconds_between_requests=0, seconds_between_writes=0, per_page=10)
    result = make_result(n_probes=8)
    fp = fingerprint(result)
    fake_github.add_issue(REPO, "the tracked one", marker(fp), labels=["bisectbot"], author=fake_github.bot_login)
    for i in range(23):
        fake_github.add_issue(REPO, f"other {i}", marker(f"{i:016x}"), labels=["bisectbot"], author=fake_github.bot_login)
    fake_github.search_enabled = False  # e.g. search unavailable: fall back to the label listing
    out = _file(result, target, ledger, tmp_path, client)
    assert out.action == "commented" and out.number == 1
    pages = [p for m, p, s in fake_github.requests("GET", "/issues?")]
    assert any("page=3" in p for p in pages), pages
    assert len(fake_github.issues(REPO)) == 24


def test_ledger_number_that_is_gone_404_then_new_issue(fake_github, target, ledger, client, tmp_path):
    result = make_result(n_probes=8)
    ledger.github_created(fingerprint(result), REPO, 99)
    out = _file(result, target, ledger, tmp_path, client)
    assert out.action == "created" and out.number == 1
    assert ("GET", "/repos/octo-org/vllm/issues/99", 404) in fake_github.log
    assert ledger.github_issue(fingerprint(result))["number"] == 1


CRASH_SCRIPT = r"""
import os, sys
from pathlib import Path
from bisectbot.ledger import Ledger
from bisectbot.recipe import GitHubTarget
from bisectbot.report.github import GitHubClient, file_or_update
from bisectbot.report.load import load_result

def crash(self, *a, **k):
    os._exit(137)  # killed between "issue created" and "recorded in the ledger"
if sys.argv[1] == "crash":
    Ledger.github_created = crash
result, nightly = load_result(Path(sys.argv[2]))
target = GitHubTarget(repo=sys.argv[3], api_url=sys.argv[4], labels=["bisectbot"], bot_login="bisectbot-app")
token = os.environ["BISECTBOT_GITHUB_TOKEN"]
client = GitHubClient(target, token, seconds_between_requests=0, seconds_between_writes=0, max_wait_s=5)
out = file_or_update(result, target, token, Ledger(sys.argv[5]), False, Path(sys.argv[6]), client=client)
print(out.action, out.number)
"""


@pytest.mark.parametrize("labels_dropped", [False, True], ids=["labels-kept", "labels-dropped"])
def test_crash_after_create_then_retry_leaves_one_issue(fake_github, tmp_path, labels_dropped):
    result = make_result(n_probes=8)
    rfile = tmp_path / "result.json"
    rfile.write_text(json.dumps(result.to_dict()))
    fake_github.search_indexed = set()  # the search index lags: the new issue is not searchable yet
    fake_github.drop_labels_on_create = labels_dropped  # no triage permission: labels silently dropped
    env = {**os.environ, "BISECTBOT_GITHUB_TOKEN": TOKEN, "BISECTBOT_BOT_LOGIN": "bisectbot-app"}
    args = [str(rfile), REPO, fake_github.base_url, str(tmp_path / "state"), str(tmp_path / "out")]
    first = subprocess.run([sys.executable, "-c", CRASH_SCRIPT, "crash", *args], env=env, capture_output=True,
                           text=True, timeout=60)
    assert first.returncode == 137, first.stderr
    assert len(fake_github.issues(REPO)) == 1
    with Ledger(tmp_path / "state") as led:
        rec = led.github_issue(fingerprint(result))
        assert rec["state"] == "creating" and rec["number"] is None
    second = subprocess.run([sys.executable, "-c", CRASH_SCRIPT, "retry", *args], env=env, capture_output=True,
                            text=True, timeout=60)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["commented", "1"]
    assert len(fake_github.issues(REPO)) == 1
    assert TOKEN not in first.stdout + first.stderr + second.stdout + second.stderr


def _secondary_403(retry_after: str) -> dict:
    rec = load_recording("error-403-secondary-rate-limit.json")
    headers = dict(rec["response_headers"])
    headers["Retry-After"] = retry_after
    return {"status": rec["status"], "body": rec["response_body"], "headers": headers}


def test_secondary_rate_limit_then_success(fake_github, target, ledger, client, tmp_path):
    r = _secondary_403("1")  # the recorded 403 + Retry-After, shortened to 1 s
    fake_github.fail("POST", r"/issues$", r["status"], r["body"], r["headers"])
    t0 = time.monotonic()
    out = _file(make_result(n_probes=8), target, ledger, tmp_path, client)
    assert out.action == "created"
    assert time.monotonic() - t0 >= 0.9  # Retry-After honoured
    posts = [s for m, p, s in fake_github.log if m == "POST" and p.endswith("/issues")]
    assert posts == [403, 201]
    assert len(fake_github.issues(REPO)) == 1


def test_primary_rate_limit_403_waits_for_reset_then_success(fake_github, target, ledger, client, tmp_path):
    rec = load_recording("error-403-primary-rate-limit.json")
    headers = {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 1)}
    fake_github.fail("GET", r"/repos/octo-org/vllm$", 403, {"message": "API rate limit exceeded for user ID 1."}, headers)
    out = _file(make_result(n_probes=8), target, ledger, tmp_path, client)
    assert out.action == "created"
    assert [s for m, p, s in fake_github.log if p == "/repos/octo-org/vllm"] == [403, 200]
    assert rec["status"] == 403


def test_429_with_retry_after_then_success(fake_github, target, ledger, client, tmp_path):
    fake_github.fail("GET", r"/labels", 429, {"message": "You have exceeded a secondary rate limit."},
                     {"Retry-After": "1"})
    assert _file(make_result(n_probes=8), target, ledger, tmp_path, client).action == "created"
    assert [s for m, p, s in fake_github.log if "/labels" in p and m == "GET"] == [429, 200]


def test_rate_limit_waits_are_bounded(fake_github, target, ledger, client, tmp_path):
    r = _secondary_403("60")  # as recorded: 60 s is more than this client may wait (5 s)
    fake_github.fail("GET", r"/repos/octo-org/vllm$", r["status"], r["body"], r["headers"], times=100)
    t0 = time.monotonic()
    with pytest.raises(GitHubError, match="rate limited"):
        _file(make_result(n_probes=8), target, ledger, tmp_path, client)
    assert time.monotonic() - t0 < 5
    # a primary limit whose reset is an hour away: refuse at once, say when to retry
    fake_github.faults.clear()
    fake_github.fail("GET", r"/repos/octo-org/vllm$", 403, {"message": "API rate limit exceeded for user ID 1."},
                     {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 3600),
                      "X-RateLimit-Limit": "5000"}, times=100)
    with pytest.raises(GitHubError, match="rate limited"):
        _file(make_result(n_probes=8), target, ledger, tmp_path, client)
    assert len([1 for m, p, s in fake_github.log if s == 403]) <= 8  # bounded, never a loop
    assert fake_github.issues(REPO) == []


def test_remaining_zero_waits_for_reset_before_next_call(fake_github, target, ledger, tmp_path):
    slept = []
    client = GitHubClient(target, TOKEN, seconds_between_requests=0, seconds_between_writes=0, max_wait_s=30,
                          sleep=slept.append)
    # the label listing says: no requests left until the reset in 10 s
    fake_github.fail("GET", r"/labels", 200, [],
                     {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0",
                      "X-RateLimit-Reset": str(int(time.time()) + 10)})
    assert _file(make_result(n_probes=8), target, ledger, tmp_path, client).action == "created"
    assert len(slept) == 1 and 5 < slept[0] <= 12
    # too far away: refuse with the reset time instead of waiting
    client2 = GitHubClient(target, TOKEN, seconds_between_requests=0, seconds_between_writes=0, max_wait_s=30,
                           sleep=slept.append)
    fake_github.fail("GET", r"/labels", 200, [],
                     {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0",
                      "X-RateLimit-Reset": str(int(time.time()) + 3600)})
    with pytest.raises(GitHubError, match="rate limit spent until"):
        _file(make_result(n_probes=8, recipe="other"), target, ledger, tmp_path, client2)


def test_token_never_in_exceptions_or_logs(fake_github, target, ledger, tmp_path, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    client = GitHubClient(target, TOKEN, seconds_between_requests=0, seconds_between_writes=0, max_wait_s=5,
                          backoff_factor=0.01, retries=2)
    fake_github.fail("GET", r"/repos/octo-org/vllm$", 500, {"message": f"boom {TOKEN}"}, times=10)
    with pytest.raises(GitHubError) as ei:
        _file(make_result(n_probes=8), target, ledger, tmp_path, client)
    texts = [str(ei.value), repr(ei.value), "".join(traceback.format_exception(ei.value))]
    # a wrong token: 401 from the server, the message must not echo either token
    bad = GitHubTarget(repo=REPO, api_url=fake_github.base_url, bot_login=fake_github.bot_login)
    wrong = "ghp_WRONGtoken000000000000000000000000000"
    with pytest.raises(GitHubError) as ei2:
        file_or_update(make_result(), bad, wrong, ledger, False, tmp_path / "o",
                       client=GitHubClient(bad, wrong, seconds_between_requests=0, seconds_between_writes=0))
    assert "HTTP 401" in str(ei2.value)
    texts += [str(ei2.value), "".join(traceback.format_exception(ei2.value))]
    out, err = capfd.readouterr()
    texts += [caplog.text, out, err]
    assert caplog.text  # PyGithub did log the requests at DEBUG
    for t in texts:
        assert TOKEN not in t and wrong not in t
    assert "HTTP 500" in str(ei.value) or "gave up" in str(ei.value)


def test_dry_run_and_no_token_write_would_be_markdown(fake_github, target, ledger, tmp_path):
    result = make_result(n_probes=8)
    out = file_or_update(result, target, None, ledger, False, tmp_path / "out")
    assert out.action == "dry-run" and "no GitHub token" in out.message
    text = out.paths[0].read_text()
    assert out.paths[0].name == f"issue-{fingerprint(result)}.md" and marker(fingerprint(result)) in text
    out2 = file_or_update(result, target, TOKEN, ledger, True, tmp_path / "out")
    assert out2.action == "dry-run" and str(out2.paths[0]) in out2.message
    ledger.github_created(fingerprint(result), REPO, 7)
    out3 = file_or_update(result, target, TOKEN, ledger, True, tmp_path / "out")
    assert out3.paths[0].name.startswith("comment-") and "#7" in out3.message
    assert fake_github.log == []


def test_already_fixed_on_newest_nightly_files_nothing(fake_github, target, ledger, client, tmp_path):
    result = make_result(n_probes=8)
    newest = nightly(9, Verdict.GOOD, (32000, None))
    out = _file(result, target, ledger, tmp_path, client, newest=newest)
    assert out.action == "already-fixed" and "nightly_main_20260409" in out.message
    assert fake_github.issues(REPO) == []


def test_not_reproduced_since_comment_then_close_when_recipe_says(fake_github, target, ledger, client, tmp_path):
    result = make_result(n_probes=8)
    assert _file(result, target, ledger, tmp_path, client).action == "created"
    newest = nightly(9, Verdict.GOOD, (32000, None))
    out = report_not_reproduced(fingerprint(result), newest, target, TOKEN, ledger, False, tmp_path, client=client)
    assert out.action == "not-reproduced"
    assert fake_github.issues(REPO)[0]["state"] == "open"
    body = fake_github.comments_of(REPO, 1)[0]["body"]
    assert "Not reproduced since nightly\\_main\\_20260409" in body and "OK up to 32000" in body
    again = report_not_reproduced(fingerprint(result), newest, target, TOKEN, ledger, False, tmp_path, client=client)
    assert again.action == "unchanged"
    closing = target.model_copy(update={"close_when_fixed": True})
    newer = nightly(10, Verdict.GOOD, (32000, None))
    out = report_not_reproduced(result, newer, closing, TOKEN, ledger, False, tmp_path, client=client)
    assert out.action == "closed"
    issue = fake_github.issues(REPO)[0]
    assert issue["state"] == "closed" and issue["state_reason"] == "completed"
    assert ledger.github_issue(fingerprint(result))["state"] == "closed"
    with pytest.raises(ValueError):
        report_not_reproduced(result, nightly(11, Verdict.BAD, (1, 2)), target, TOKEN, ledger, False, tmp_path)


def test_maintainer_commands_only_from_trusted_and_acknowledged(fake_github, target, ledger, client, tmp_path):
    _file(make_result(n_probes=8), target, ledger, tmp_path, client)
    fake_github.add_comment(REPO, 1, "/bisectbot good abc1234", author="maint", association="OWNER")
    fake_github.add_comment(REPO, 1, "/bisectbot bad abc1234", author="drive-by", association="CONTRIBUTOR")
    fake_github.add_comment(REPO, 1, "I think\n/bisectbot retract\nthanks", author="member", association="MEMBER")
    fake_github.add_comment(REPO, 1, "/bisectbot bad $(rm -rf /)", author="collab", association="COLLABORATOR")
    fake_github.add_comment(REPO, 1, "/bisectbot bisect good=v0.19.1 bad=v0.20.0", author="maint",
                            association="OWNER")
    cmds = read_commands(target, TOKEN, [1], client=client)
    assert [(c.kind, c.ref, c.author, bool(c.error)) for c in cmds] == [
        ("good", "abc1234", "maint", False), ("retract", None, "member", False), ("bad", None, "collab", True),
        ("bisect", None, "maint", False)]
    assert cmds[3].args == {"good": "v0.19.1", "bad": "v0.20.0"}
    ack = acknowledge(cmds[0], target, TOKEN, "added a human verdict: abc1234 is good", client=client)
    assert ack.action == "commented"
    assert acknowledge(cmds[0], target, TOKEN, "again", client=client).action == "unchanged"
    acknowledge(cmds[2], target, TOKEN, "", client=client)
    reply = fake_github.comments_of(REPO, 1)[-1]["body"]
    assert "Not understood" in reply and "$(rm -rf /)" not in reply or "usage" in reply
    left = read_commands(target, TOKEN, None, client=client)  # default: open issues with the bot's label
    assert [c.kind for c in left] == ["retract", "bisect"]
    assert len(read_commands(target, TOKEN, [1], include_acknowledged=True, client=client)) == 4


def test_parse_command_grammar():
    assert parse_command("no command") is None
    assert parse_command("/bisectbot good nightly_main_20260401")[:2] == ("good", "nightly_main_20260401")
    assert parse_command("/bisectbot retract now")[3]
    assert parse_command("/bisectbot frobnicate")[3].startswith("unknown command")
    assert parse_command("/bisectbot bisect good=a bad=b")[2] == {"good": "a", "bad": "b"}


def test_client_works_against_fake_with_secondary_wait_bounded_by_settings(fake_github: FakeGitHub, target):
    c = GitHubClient(target, TOKEN, seconds_between_requests=0, seconds_between_writes=0, max_wait_s=5)
    assert c.repo.full_name == REPO
    assert c.get_issue(12345) is None


def test_no_regression_files_nothing_and_label_race_is_tolerated(fake_github, target, ledger, client, tmp_path):
    from bisectbot.models import RunResult, Status

    out = _file(RunResult(recipe="demo", kind="regression", status=Status.NO_REGRESSION), target, ledger, tmp_path,
                client)
    assert out.action == "nothing-to-file" and fake_github.log == []
    # another run created the label between our listing and our create: 422 already_exists is fine
    fake_github.fail("POST", r"/labels$", 422, {"message": "Validation Failed", "errors": [
        {"resource": "Label", "code": "already_exists", "field": "name"}]}, times=2)
    assert _file(make_result(n_probes=8), target, ledger, tmp_path, client).action == "created"


def test_fix_bisection_is_dispatched_as_a_workflow(fake_github, target, client):
    dispatch_bisection(target, TOKEN, "glm51-fix", "nightly_main_20260409", "nightly_main_20260410", client=client)
    assert fake_github.dispatches == [{"workflow": "bisect.yml", "ref": "main", "inputs": {
        "recipe": "glm51-fix", "good": "nightly_main_20260409", "bad": "nightly_main_20260410"}}]
    with pytest.raises(ValueError):
        dispatch_bisection(target, TOKEN, "x", "$(id)", "y", client=client)
