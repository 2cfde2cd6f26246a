"""A GitHub API endpoint that dribbles or floods its reply (issue 41, item 15).

Kind: *a reply of a remote service the bot reads whole, bounded by nothing but the gap between
two bytes*. Parameters: which part dribbles (the status line, the headers, the body), whether the
size is announced (``Content-Length``) or streamed (chunked), the size (below, at and above
:data:`MAX_REPLY_BYTES`), the method (GET is retried, each attempt bounded again), and which
process reads it (the installed ``bisectbot report commands``, and the client in-process with a
short ``timeout_s`` so the retried path runs in seconds). Real servers on 127.0.0.1, PyGithub
unchanged under :mod:`bisectbot.report.github_transport`.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import pytest
from report_helpers import REPO, TOKEN

from bisectbot.errors import GitHubError
from bisectbot.recipe import GitHubTarget
from bisectbot.report.github import GitHubClient
from bisectbot.report.github_transport import MAX_REPLY_BYTES, request_deadline_s
from tests.hostile.rawserver import cli_with_rusage as raw_cli
from tests.hostile.rawserver import hostile

pytestmark = [pytest.mark.slow]


def dribble_body(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n[")
    for _ in range(100000):
        time.sleep(0.5)
        conn.sendall(b" ")


def dribble_status(conn: socket.socket) -> None:
    for ch in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n":
        time.sleep(0.4)
        conn.sendall(bytes([ch]))
    time.sleep(3600)


def flood(announce: bool, size: int) -> Callable[[socket.socket], None]:
    def reply(conn: socket.socket) -> None:
        head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        head += f"Content-Length: {size}\r\n\r\n" if announce else "Transfer-Encoding: chunked\r\n\r\n"
        conn.sendall(head.encode())
        block, sent = b"[" + b" " * (1 << 20), 0
        while sent < size:
            piece = block[: min(len(block), size - sent)]
            conn.sendall(piece if announce else b"%x\r\n%s\r\n" % (len(piece), piece))
            sent += len(piece)
        if not announce:
            conn.sendall(b"0\r\n\r\n")
    return reply


def cli_with_rusage(args: list[str], timeout: float) -> tuple[int, str, float, int]:
    """The installed CLI with the bot's GitHub settings (token, login): exit code, stderr, wall
    seconds, peak RSS in KiB."""
    return raw_cli(args, timeout, {"BISECTBOT_GITHUB_TOKEN": TOKEN, "BISECTBOT_BOT_LOGIN": "bisectbot-bot"})


def test_a_body_that_dribbles_ends_within_the_attempts_bound_through_the_cli() -> None:
    with hostile(dribble_body) as (url, arrivals):
        code, err, wall, _ = cli_with_rusage(["report", "commands", "--repo", REPO, "--api-url", url], timeout=240)
    assert code == 1 and "sent no usable reply: no complete reply within 30 s" in err, (code, err)
    assert wall < 30 + 30, wall  # one attempt (the body is read after urllib3's retries), not for ever
    assert TOKEN not in err


@pytest.mark.parametrize("announce", [True, False], ids=["content-length", "chunked"])
def test_a_reply_larger_than_any_github_sends_is_refused_without_being_held(announce: bool) -> None:
    size = MAX_REPLY_BYTES + (300 << 20 if announce else 64 << 20)
    with hostile(flood(announce, size)) as (url, _):
        code, err, _, rss_kib = cli_with_rusage(["report", "commands", "--repo", REPO, "--api-url", url], timeout=240)
    assert code == 1 and f"larger than the {MAX_REPLY_BYTES}-byte limit" in err, (code, err)
    # the body is read up to the cap at most once, never whole (a 400 MB reply took 1.3 GB)
    assert rss_kib * 1024 < 3 * MAX_REPLY_BYTES + (200 << 20), rss_kib


def test_each_retried_attempt_is_bounded_and_so_is_the_whole_request() -> None:
    with hostile(dribble_status) as (url, arrivals):
        target = GitHubTarget(repo=REPO, api_url=url, bot_login="bisectbot-bot")
        client = GitHubClient(target, TOKEN, retries=2, timeout_s=2.0, backoff_factor=0.1, max_wait_s=5,
                              seconds_between_requests=None, seconds_between_writes=None)
        t0 = time.monotonic()
        with pytest.raises(GitHubError) as e:
            _ = client.repo
        wall = time.monotonic() - t0
    assert "sent no usable reply" in str(e.value) or "gave up after retries" in str(e.value), str(e.value)
    assert len(arrivals) == 3, arrivals  # the first attempt and two retries, each cut at 2 s
    assert wall < 3 * 2.0 + 3, wall  # three attempts of 2 s and two short backoffs, not 3 x 20 s of dribble
    assert all(b - a >= 1.9 for a, b in zip(arrivals, arrivals[1:])), arrivals
    assert TOKEN not in str(e.value)


def test_the_whole_request_bound_counts_every_attempt_and_wait() -> None:
    from bisectbot.report.github import BotRetry

    retry = BotRetry(total=4, backoff_factor=1.0, max_rate_limit_wait=120.0, secondary_rate_wait=60.0)
    assert request_deadline_s(30.0, retry) == 5 * 30 + 4 * 120 + (1 + 2 + 4 + 8)


def silent(conn: socket.socket) -> None:
    time.sleep(3600)


@pytest.mark.parametrize("write", ["create issue", "comment", "edit issue"])
def test_a_write_whose_reply_never_comes_is_sent_once(write: str) -> None:
    """Hostile pass: a POST whose reply never came was sent again by urllib3's read retries: one
    hung create made five identical issues. Kind: *a write that may have reached the server is
    repeated*. Parameters: the write (create an issue, comment, edit: POST and PATCH), the failure
    after sending (no reply at all: the transport's per-attempt cut)."""
    with hostile(silent) as (url, arrivals):
        target = GitHubTarget(repo=REPO, api_url=url, bot_login="bisectbot-bot")
        client = GitHubClient(target, TOKEN, retries=4, timeout_s=1.5, backoff_factor=0.1, max_wait_s=5,
                              seconds_between_requests=None, seconds_between_writes=None)
        req = client.gh.requester
        verb, path = {"create issue": ("POST", f"/repos/{REPO}/issues"),
                      "comment": ("POST", f"/repos/{REPO}/issues/1/comments"),
                      "edit issue": ("PATCH", f"/repos/{REPO}/issues/1")}[write]
        with pytest.raises(GitHubError) as e:
            client.call(write, lambda: req.requestJsonAndCheck(verb, path, input={"title": "t", "body": "b"}))
        time.sleep(1.0)  # a retry would arrive within its backoff (0.1-0.8 s)
    assert len(arrivals) == 1, arrivals
    assert "no complete reply" in str(e.value) or "not sent again" in str(e.value), str(e.value)


def _answer(status: str, body: bytes = b"", headers: str = "") -> Callable[[socket.socket], None]:
    def reply(conn: socket.socket) -> None:
        conn.sendall(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                     f"{headers}Connection: close\r\n\r\n".encode() + body)
    return reply


def _redirect_loop(conn: socket.socket) -> None:
    host, port = conn.getsockname()[:2]
    where = f"http://{host}:{port}/repos/o/r{time.monotonic_ns()}"
    _answer("301 Moved Permanently", b"{}", f"Location: {where}\r\n")(conn)


@pytest.mark.parametrize("shape", ["million-elements", "redirect-loop", "redirect-elsewhere", "accepted-forever"])
def test_replies_no_github_sends_are_an_error_naming_them_not_a_crash_or_gigabytes(shape: str) -> None:
    """Hostile pass (issue 41). Kinds: *a reply that is small on the wire and huge in objects*
    (``[{},{},…]``: PyGithub builds an object per element, 1.77 GB for 3 MB) and *a reply PyGithub
    answers by asking again without end* (a redirect loop ended in RecursionError, exit 70; a
    redirect to another host in RuntimeError, exit 70; 202 Accepted forever). Each is a GitHubError
    of the installed CLI (exit 1) naming what was refused, within seconds and a bounded RSS."""
    reply = {"million-elements": _answer("200 OK", b"[" + b",".join([b"{}"] * 1_000_000) + b"]"),
             "redirect-loop": _redirect_loop,
             "redirect-elsewhere": _answer("301 Moved Permanently", b"{}", "Location: http://elsewhere.invalid/x\r\n"),
             "accepted-forever": _answer("202 Accepted", b"{}")}[shape]
    with hostile(reply) as (url, arrivals):
        code, err, wall, _ = cli_with_rusage(["report", "commands", "--repo", REPO, "--api-url", url], timeout=120)
    assert code == 1 and "internal error" not in err, (code, err[-2000:])
    want = {"million-elements": "more than 100 elements", "redirect-loop": "redirected 11 times",
            "redirect-elsewhere": "redirected", "accepted-forever": "202 Accepted 11 times"}[shape]
    assert want in err, err[-2000:]
    assert len(arrivals) <= 12, len(arrivals)
