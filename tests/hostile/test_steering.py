"""Classes 2-4 of issue 13: nobody but the bot's own account steers deduplication, acknowledgements
or commands. Real HTTP against the contract-following fake GitHub."""

from __future__ import annotations

from pathlib import Path

import pytest

from bisectbot.errors import GitHubError
from bisectbot.recipe import GitHubTarget
from bisectbot.report import fingerprint, marker
from bisectbot.report.comment import render_comment, seen_marker
from bisectbot.report.fingerprint import find_fingerprints
from bisectbot.report.github import GitHubClient, acknowledge, file_or_update, parse_command, read_commands
from bisectbot.report.issue import render_issue
from tests.report.report_helpers import REPO, TOKEN, make_result


def _file(result, target, ledger, tmp_path, client):
    return file_or_update(result, target, TOKEN, ledger, False, tmp_path / "out", client=client)


# ----------------------------------------------------------------------------- class 2: fake markers

def test_marker_in_model_output_does_not_reach_the_issue_body() -> None:
    planted = marker("0123456789abcdef")
    result = make_result(reply=f"garbage garbage\n{planted}\n-->", n_probes=8)
    _, body = render_issue(result, None)
    assert find_fingerprints(body) == [fingerprint(result)]
    comment = render_comment("redetected", result, None, None, key="k", when="2026-11-30", include_report=True)
    assert find_fingerprints(comment) in ([], [fingerprint(result)])
    assert "0123456789abcdef" not in find_fingerprints(comment)


def test_marker_in_a_commit_subject_is_neutralised() -> None:
    # found here: commit subjects (written by anyone who lands a commit) are copied into the body too
    result = make_result(n_probes=8)
    planted = "feedfacefeedface"
    for st in result.stages:
        for c in st.candidates + st.culprits:
            c.meta["subject"] = f"fix <!-- bisectbot:fingerprint={planted} --> thing"
    _, body = render_issue(result, None)
    assert planted not in find_fingerprints(body)


def test_outsider_issue_with_the_predictable_marker_does_not_capture_filing(fake_github, target, ledger, client,
                                                                            tmp_path) -> None:
    result = make_result(n_probes=8)
    fake_github.add_issue(REPO, "I got here first", f"hi\n{marker(fingerprint(result))}\n", labels=["bisectbot"],
                          author="outsider")
    fake_github.index()
    out = _file(result, target, ledger, tmp_path, client)
    assert out.action == "created" and out.number == 2
    assert not fake_github.comments_of(REPO, 1)
    # the next night finds the bot's own issue, not the outsider's
    out2 = _file(result, target, ledger, tmp_path, client)
    assert out2.action == "commented" and out2.number == 2


def test_bot_login_is_required_to_talk_to_github(fake_github, monkeypatch) -> None:
    monkeypatch.delenv("BISECTBOT_BOT_LOGIN", raising=False)
    with pytest.raises(GitHubError, match="bot_login"):
        GitHubClient(GitHubTarget(repo=REPO, api_url=fake_github.base_url), TOKEN)
    monkeypatch.setenv("BISECTBOT_BOT_LOGIN", "github-actions[bot]")
    assert GitHubClient(GitHubTarget(repo=REPO, api_url=fake_github.base_url), TOKEN).login == "github-actions[bot]"


def test_keyed_marker_cannot_be_predicted(monkeypatch, fake_github, target, ledger, client, tmp_path) -> None:
    result = make_result(n_probes=8)
    plain = fingerprint(result)
    monkeypatch.setenv("BISECTBOT_MARKER_KEY", "repository-secret-key")
    keyed = fingerprint(result)
    assert keyed != plain and len(keyed) == 16
    monkeypatch.setenv("BISECTBOT_MARKER_KEY", "another-key")
    assert fingerprint(result) != keyed
    monkeypatch.setenv("BISECTBOT_MARKER_KEY", "repository-secret-key")
    out = _file(result, target, ledger, tmp_path, client)
    assert marker(keyed) in fake_github.issues(REPO)[0]["body"] and out.fingerprint == keyed


# ----------------------------------------------------------------------------- class 3: silenced comments

def test_outsider_seen_marker_does_not_silence_the_nightly_comment(fake_github, target, ledger, client,
                                                                   tmp_path) -> None:
    result = make_result(n_probes=8)
    result.session_id = "night-2026-11-30"  # the night key of the "already commented" marker
    assert _file(result, target, ledger, tmp_path, client).action == "created"
    # an outsider pre-posts tonight's hidden "already commented" marker
    fake_github.add_comment(REPO, 1, "nothing to see " + seen_marker("redetected", result.session_id),
                            author="outsider", association="NONE")
    out = _file(result, target, ledger, tmp_path, client)
    assert out.action == "commented"
    assert _file(result, target, ledger, tmp_path, client).action == "unchanged"  # the bot's own marker counts


def test_outsider_ack_marker_does_not_silence_a_command(fake_github, target, client) -> None:
    fake_github.add_issue(REPO, "bisectbot issue", marker("00000000000000aa"), labels=["bisectbot"],
                          author=fake_github.bot_login)
    cmd = fake_github.add_comment(REPO, 1, "/bisectbot retract", author="maint", association="MEMBER")
    fake_github.add_comment(REPO, 1, f"lol <!-- bisectbot:ack={cmd['id']} -->", author="troll", association="NONE")
    # even a member's copy of the marker is not an acknowledgement: only the bot's own comments count
    fake_github.add_comment(REPO, 1, f"<!-- bisectbot:ack={cmd['id']} -->", author="maint2", association="MEMBER")
    cmds = read_commands(target, TOKEN, [1], client=client)
    assert [(c.kind, c.acknowledged) for c in cmds] == [("retract", False)]
    out = acknowledge(cmds[0], target, TOKEN, "retracting", client=client)
    assert out.action == "commented"
    assert read_commands(target, TOKEN, [1], client=client) == []  # now the bot's own ack counts
    assert acknowledge(cmds[0], target, TOKEN, "again", client=client).action == "unchanged"


# ----------------------------------------------------------------------------- class 4: commands in code

NOT_COMMANDS = {
    "fenced": "Do not run this:\n```\n/bisectbot retract\n```\n",
    "fenced-tilde": "~~~sh\n/bisectbot retract\n~~~\n",
    "fenced-indented-fence": "  ```\n  /bisectbot retract\n  ```\n",
    "quoted": "> /bisectbot retract\n\nno, please don't",
    "quoted-nested": "> > /bisectbot bad abc1234\n",
    "quote-lazy-continuation": "> someone said\n/bisectbot retract\n",
    "indented-code": "example:\n\n    /bisectbot retract\n",
    "inline-code": "`/bisectbot retract` is how you'd retract",
    "html-comment": "<!--\n/bisectbot retract\n-->\n",
    "html-details": "<details>\n/bisectbot retract\n</details>\n",
    "mid-line": "you could say /bisectbot retract here",
    "unclosed-fence": "```\n/bisectbot retract\n",
    # the attacker's inputs (log.md 20:57): inline constructs that span lines
    "inline-code-multiline": "Example: `\n/bisectbot retract\n` would re-run.",
    "inline-html-comment": "LGTM <!--\n/bisectbot bad deadbeef\n-->",
    "link-title": '[x](http://y "\n/bisectbot retract\n")',
    "a-title": '<a title="\n/bisectbot retract\n">x</a>',
    "image-alt": "![\n/bisectbot retract\n](u)",
    # more of the kind
    "link-text": "[\n/bisectbot retract\n](http://y)",
    "reference-link-text": "[\n/bisectbot retract\n][r]\n\n[r]: http://y",
    "inline-span-tag": "ok <span hidden>\n/bisectbot retract\n</span>",
    "double-backtick-code": "see ``\n/bisectbot bad deadbeef\n`` above",
}


@pytest.mark.parametrize("name", sorted(NOT_COMMANDS))
def test_commands_inside_code_or_quotes_are_not_commands(name: str) -> None:
    assert parse_command(NOT_COMMANDS[name]) is None


def test_plain_line_commands_still_work() -> None:
    assert parse_command("Thanks!\n\n/bisectbot retract\n")[0] == "retract"
    assert parse_command("```\n/bisectbot retract\n```\n/bisectbot good abc1234\n")[:2] == ("good", "abc1234")
    assert parse_command("- /bisectbot bad abc1234")[:2] == ("bad", "abc1234")  # a list item is a plain line
    assert parse_command("LGTM `x` [a](b)\n/bisectbot retract")[0] == "retract"  # next plain line
    assert parse_command("**/bisectbot** retract")[0] == "retract"
    assert parse_command("/bisectbot bisect good=abc1234 bad=def5678")[2] == {"good": "abc1234", "bad": "def5678"}


def test_quoted_command_from_a_maintainer_is_not_read(fake_github, target, client) -> None:
    fake_github.add_issue(REPO, "bisectbot issue", marker("00000000000000bb"), labels=["bisectbot"],
                          author=fake_github.bot_login)
    fake_github.add_comment(REPO, 1, "Someone wrote:\n> /bisectbot retract\n\nI disagree.", author="maint",
                            association="MEMBER")
    fake_github.add_comment(REPO, 1, "```\n/bisectbot bad abc1234\n```", author="maint", association="OWNER")
    assert read_commands(target, TOKEN, [1], client=client) == []


def test_bot_own_comment_is_never_a_command(fake_github, target, client, tmp_path: Path) -> None:
    fake_github.add_issue(REPO, "bisectbot issue", marker("00000000000000cc"), labels=["bisectbot"],
                          author=fake_github.bot_login)
    fake_github.add_comment(REPO, 1, "/bisectbot retract", author=fake_github.bot_login, association="MEMBER")
    assert read_commands(target, TOKEN, [1], client=client) == []


# ----------------------------------------------------------------------------- cross-references by URL

@pytest.mark.parametrize("url", [
    "https://github.com/vllm-project/vllm/issues/123",  # the attacker's input (log.md 20:57)
    "https://github.com/ROCm/aiter/pull/45",
    "http://www.github.com/o/r/pull/7/files",
    "github.com/o/r.js/discussions/9",
    "HTTPS://GITHUB.COM/o/r/issues/1",
])
def test_full_issue_and_pull_urls_are_not_cross_references(url: str) -> None:
    from bisectbot.sanitize import sanitize

    out = sanitize(f"see {url} now", 300)
    low = out.lower()
    assert "github.com/" not in low  # neither an autolink nor a reference GitHub recognises
    assert "github&#8203;.com/" in low
    # other GitHub URLs stay readable
    assert "https://github.com/o/r/blob/main/x.py" in sanitize("at https://github.com/o/r/blob/main/x.py", 300)


def test_command_line_keeps_its_plain_start_before_inline_code() -> None:
    # found by the suite after the plain-lines rule: a maintainer's request with a code span after it
    from bisectbot.report.github import parse_command

    got = parse_command("please\n/bisectbot bisect good=nightly_a bad=nightly_b `rm -rf` <b>@here</b>")
    assert got is not None and got[0] == "bisect" and got[2] == {"good": "nightly_a", "bad": "nightly_b"}
    assert parse_command("`x` /bisectbot retract") is None  # the command must start the line


def test_bot_links_from_the_api_stay_working_links() -> None:
    from bisectbot.sanitize import link, sanitize

    url = "https://github.com/octo-org/vllm/issues/2"
    assert link(url) == url and sanitize(url, 300) != url  # model output is still broken
    assert link('https://x.y/a" onclick="b') != 'https://x.y/a" onclick="b'
