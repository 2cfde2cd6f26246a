"""Issue 37, input 8: streaming is asked. A server whose streamed deltas lose characters above a size
while its unstreamed replies stay healthy (``bisectbot.demo.engine``'s ``stream_corrupt``, as a fault
in vLLM's delta emission or stop-string hold-back, vllm#45636) reads OK unstreamed; ``--stream on``
judges the reassembled stream, ``--stream both`` finds the divergence between the two replies. A
stream that stalls or floods is an ERROR, never GARBAGE. Real engine processes, through
``bisectbot probe``. On main (8153601) ``--stream`` does not exist and the probe reads OK (the first
test shows that reading: it is what main does at every mode)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from bisectbot.demo.engine import corrupt_pieces, start_engine, stream_pieces
from bisectbot.reproduce.client import BadReply, parse_stream

PROBE = [sys.executable, "-m", "bisectbot", "--json", "probe"]
ARGS = ["--min-size", "1000", "--max-size", "8000", "--needles", "2"]


def _probe(url: str, *args: str) -> tuple[int, dict]:
    p = subprocess.run(PROBE + ["--endpoint", url, *args], capture_output=True, text=True, timeout=240)
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, json.loads(p.stdout)


def test_unstreamed_probe_cannot_see_a_corrupted_stream():
    """The shape is real: unstreamed the probe reads OK (main's reading), streamed the reply is damaged."""
    with start_engine(threshold=3000, stream_corrupt=True) as e:
        rc, res = _probe(e.url, *ARGS)
    assert rc == 0 and res["status"] == "ok", res["status"]


def test_stream_on_judges_the_reassembled_stream():
    with start_engine(threshold=3000, stream_corrupt=True) as e:
        rc, res = _probe(e.url, *ARGS, "--stream", "on")
    assert rc == 1 and res["status"] == "garbage", (res["status"], res["table"])
    assert res["last_ok"] < 3000 <= res["first_garbage"], (res["last_ok"], res["first_garbage"])
    assert all(r["evidence"]["stream"]["streamed_requests"] == r["requests"] for r in res["table"]), res["table"]
    # usage arrived in the stream (stream_options.include_usage): sizes are the server's own counts
    assert all(isinstance(r["prompt_tokens"], int) for r in res["table"])
    assert any(n.startswith("stream on:") for n in res["notes"]), res["notes"]


def test_stream_both_names_the_divergence_even_when_each_text_reads_fine():
    # without needles the damaged stream ("2 + 2 equals  so the answ is 4. T access...") passes the text checks
    args = ["--min-size", "1000", "--max-size", "8000", "--needles", "0"]
    with start_engine(threshold=3000, stream_corrupt=True) as e:
        rc_on, on = _probe(e.url, *args, "--stream", "on")
        rc, res = _probe(e.url, *args, "--stream", "both")
    assert rc_on == 0 and on["status"] == "ok", on["status"]  # what the text checks alone can say
    assert rc == 1 and res["status"] == "garbage", (res["status"], res["table"])
    assert res["last_ok"] < 3000 <= res["first_garbage"], (res["last_ok"], res["first_garbage"])
    assert res["reasons"][0].startswith("streamed reply differs from the unstreamed one: content differs from "
                                        "character"), res["reasons"]
    bad = [r for r in res["table"] if r["outcome"] == "GARBAGE"]
    assert bad and all(r["evidence"]["stream"]["diverged"] for r in bad)
    ok = [r for r in res["table"] if r["outcome"] == "OK"]
    assert ok and all(r["requests"] == 2 and r["evidence"]["stream"]["streamed_requests"] == 1 for r in ok), ok


def test_stream_both_on_a_healthy_server_is_ok():
    with start_engine(threshold=None) as e:
        rc, res = _probe(e.url, *ARGS, "--stream", "both")
    assert rc == 0 and res["status"] == "ok", (res["status"], res["table"])


@pytest.mark.parametrize("mode", ["on", "both"])
@pytest.mark.parametrize("fault", ["stall", "flood"])
def test_a_stalled_or_flooding_stream_is_an_error_never_garbage(mode, fault):
    with start_engine(threshold=None, stream_fault=fault, stream_stall_s=20) as e:
        rc, res = _probe(e.url, *ARGS, "--stream", mode, "--timeout", "3")
    assert rc == 4 and res["status"] == "error", (res["status"], res["table"])
    assert not any(r["outcome"] == "GARBAGE" for r in res["table"])
    want = "the stream stalled" if fault == "stall" else "the stream passed the byte limit"
    assert want in res["error"], res["error"]


def test_corrupt_pieces_shape():
    pieces = stream_pieces("The access codes are KESTREL-4417.")
    assert "".join(pieces) == "The access codes are KESTREL-4417."
    assert "".join(corrupt_pieces(pieces)) != "The access codes are KESTREL-4417."


def _sse(*chunks: object, done: bool = True) -> bytes:
    out = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return out + (b"data: [DONE]\n\n" if done else b"")


def test_parse_stream_reassembles_deltas_finish_and_usage():
    body = _sse({"choices": [{"delta": {"role": "assistant", "content": ""}}]},
                {"choices": [{"delta": {"reasoning_content": "think "}}]},
                {"choices": [{"delta": {"content": "2 + 2"}}]},
                {"choices": [{"delta": {"content": " = 4."}, "finish_reason": "stop"}]},
                {"choices": [], "usage": {"prompt_tokens": 812, "completion_tokens": 9,
                                          "prompt_tokens_details": {"cached_tokens": 0}}})
    r = parse_stream(body, 0.1, "text/event-stream")
    assert (r.content, r.reasoning, r.finish_reason, r.prompt_tokens, r.cached_tokens, r.streamed) == \
        ("2 + 2 = 4.", "think ", "stop", 812, 0, True)


@pytest.mark.parametrize("body, why", [
    (_sse({"choices": [{"delta": {"content": "2 + 2"}}]}, done=False), "without data: [DONE]"),
    (b'{"choices": [{"message": {"content": "4"}}]}', "one JSON body"),
    (b"data: {not json\n\ndata: [DONE]\n\n", "not JSON"),
    (_sse({"choices": [{"delta": {"content": 4}}]}), "delta.content is int"),
])
def test_parse_stream_rejects_odd_streams(body, why):
    with pytest.raises(BadReply, match=re.escape(why)):
        parse_stream(body, 0.0, "")
