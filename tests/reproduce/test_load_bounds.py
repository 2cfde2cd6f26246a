"""Issue 39: the built-in load against servers that misbehave -- each request bounded in bytes, line
length and time, and a failure never a measurement (a dead or hostile server is not a slow build).

Kind: *a streamed reply the load reads until the server stops*. Members: a stream without end, one
line without a line break, a dribble, an HTTP error, a connection refused, an event that is not an
object, a reply with no content.
"""

from __future__ import annotations

import socket
import time

import pytest

from bisectbot.reproduce import load
from bisectbot.reproduce.load import LoadError, load_sample
from tests.hostile.rawserver import hostile

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


def _sample(url: str, timeout_s: float = 5.0):
    return load_sample(url, "m", requests_n=1, prompt_tokens=8, output_tokens=4, concurrency=1, sample=1,
                       timeout_s=timeout_s)


def _forever(conn: socket.socket) -> None:
    conn.sendall(HEAD)
    ev = b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n'
    while True:
        conn.sendall(ev * 200)


def _one_line(conn: socket.socket) -> None:
    conn.sendall(HEAD + b"data: ")
    while True:
        conn.sendall(b"a" * 65536)


def _dribble(conn: socket.socket) -> None:
    conn.sendall(HEAD)
    while True:
        conn.sendall(b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n')
        time.sleep(0.5)


@pytest.mark.parametrize("reply, says, within_s", [
    (_forever, "passed", 20), (_one_line, "a line of the stream passed", 20), (_dribble, "no end after", 10)])
def test_a_stream_is_bounded(monkeypatch, reply, says, within_s) -> None:
    monkeypatch.setattr(load, "MAX_STREAM_BYTES", 4 * 1024 * 1024)
    with hostile(reply) as (url, _):
        t0 = time.monotonic()
        with pytest.raises(LoadError, match=says) as e:
            _sample(url, timeout_s=3.0)
        assert time.monotonic() - t0 < within_s and not e.value.transient


@pytest.mark.parametrize("body, says", [
    (b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\nConnection: close\r\n\r\noops!", "HTTP 500"),
    (HEAD + b"data: [1, 2]\n\ndata: [DONE]\n\n", "not an event object"),
    (HEAD + b'data: {"choices": [{"delta": {"content": ""}}]}\n\ndata: [DONE]\n\n', "no content"),
])
def test_an_answer_that_measures_nothing_is_a_failure_of_the_candidate(body, says) -> None:
    with hostile(lambda c: c.sendall(body)) as (url, _):
        with pytest.raises(LoadError, match=says) as e:
            _sample(url)
        assert not e.value.transient


def test_a_refused_connection_is_transient() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(LoadError) as e:
        _sample(f"http://127.0.0.1:{port}")
    assert e.value.transient


def test_a_healthy_stream_is_measured() -> None:
    ev = b"".join(b'data: {"choices": [{"delta": {"content": "w "}}]}\n\n' for _ in range(4))
    usage = b'data: {"choices": [], "usage": {"completion_tokens": 4}}\n\ndata: [DONE]\n\n'
    with hostile(lambda c: c.sendall(HEAD + ev + usage)) as (url, _):
        metrics, timings = _sample(url)
    assert timings[0].tokens == 4 and len(timings[0].gaps_s) == 3
    assert metrics["output_throughput"] > 0 and metrics["ttft_p50"] >= 0


@pytest.mark.parametrize("events, says", [
    (b'data: {"choices": [{"delta": {"content": "w"}}]}\n\ndata: {"error": {"message": "engine died"}}\n\n'
     b"data: [DONE]\n\n", "reported an error"),
    (b'data: {"choices": [{"delta": {"content": "w"}}]}\n\n'
     b'data: {"choices": [], "usage": {"completion_tokens": 1}}\n\ndata: [DONE]\n\n', "generated 1 of the 4 tokens"),
    (b'data: {"choices": 7}\n\ndata: {"choices": [5, {"delta": "x"}]}\n\ndata: [DONE]\n\n', "no content"),
])
def test_a_reply_that_failed_or_stopped_early_is_no_sample(events, says) -> None:
    with hostile(lambda c: c.sendall(HEAD + events)) as (url, _):
        with pytest.raises(LoadError, match=says):
            _sample(url)


def test_a_usage_count_that_is_no_count_is_ignored() -> None:
    ev = b"".join(b'data: {"choices": [{"delta": {"content": "w "}}]}\n\n' for _ in range(4))
    usage = b'data: {"choices": [], "usage": {"completion_tokens": ' + b"9" * 400 + b'}}\n\ndata: [DONE]\n\n'
    with hostile(lambda c: c.sendall(HEAD + ev + usage)) as (url, _):
        metrics, timings = _sample(url)
    assert timings[0].tokens == 4 and metrics["output_throughput"] < 1e12


@pytest.mark.parametrize("body, transient", [
    # a chunked stream cut inside a chunk (a server that crashed mid-reply)
    (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"40\r\ndata: {\"choices\": [{\"delta\": {\"content\": \"w\"}}]}\n\n", True),
    # a Content-Length longer than the body
    (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 5000\r\n\r\n"
     b"data: {\"choices\": [{\"delta\": {\"content\": \"w\"}}]}\n\n", True),
    # a body that does not decode as the encoding it names
    (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\nConnection: close\r\n\r\n"
     b"this is not gzip at all", False),
])
def test_a_broken_transfer_is_a_load_error_never_a_crash(body, transient) -> None:
    """Second hostile pass: read1 reads below requests, so urllib3's own errors came through (exit 70)."""
    with hostile(lambda c: c.sendall(body)) as (url, _):
        with pytest.raises(LoadError) as e:
            _sample(url)
    assert e.value.transient is transient


def test_lines_ending_in_a_lone_cr_are_events() -> None:
    ev = b"".join(b'data: {"choices": [{"delta": {"content": "w "}}]}\r\r' for _ in range(4))
    with hostile(lambda c: c.sendall(HEAD + ev + b"data: [DONE]\r\r")) as (url, _):
        _metrics, timings = _sample(url)
    assert timings[0].tokens == 4
