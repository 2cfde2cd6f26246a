"""The built-in load of a measured-value reproducer (``reproducer.kind: load``, issue 39).

One *sample* is one load run against a running OpenAI-compatible server: ``load.requests`` streamed
chat completions of about ``load.prompt_tokens`` prompt tokens (filler text, a different prompt per
request and per sample, each with its own ``cache_salt``: a prefix cache answering a repeated
prompt would measure the cache, not the build) and ``load.output_tokens`` generated tokens
(``max_tokens`` with vLLM's ``min_tokens`` and ``ignore_eos``, so every build generates the same
length), ``load.concurrency`` at a time. Measured, per sample:

* ``output_throughput`` -- generated tokens per second of the sample's wall time (tokens/s; the
  tokens the server's ``usage`` reports, else one per streamed content delta), higher is better;
* ``request_throughput`` -- requests per second, higher is better;
* ``ttft_p50`` / ``ttft_p90`` -- time to the first content delta (seconds), lower is better;
* ``itl_p50`` / ``itl_p90`` -- time between content deltas (seconds), lower is better;
* ``e2e_p50`` -- a request's whole time (seconds), lower is better.

A request that fails (HTTP error, a dead server, a timeout, an error event inside the stream, fewer
generated tokens than asked when the server's ``usage`` counts them) fails the sample with
:class:`LoadError`: the probe is a skip, never a measurement (a dead server is not a slow one, and a
reply cut short is not a fast one).
"""

from __future__ import annotations

import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LOAD_METRICS", "LoadError", "RequestTiming", "load_sample", "summarize"]

from ..recipe import LOAD_METRICS  # metric name -> which way is better; units in the module doc

#: Bytes of one streamed reply read at most: ``output_tokens`` deltas of a few hundred bytes each
#: are far below it; a server that streams without end is cut here (the request fails).
MAX_STREAM_BYTES = 16 * 1024 * 1024


class LoadError(Exception):
    """A request of the load failed: the sample measures nothing. ``transient``: the connection
    failed or timed out (the server or the host, not an answer of the candidate): never cached."""

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient


@dataclass
class RequestTiming:
    """One request: ``ttft_s`` (seconds to the first content delta), ``gaps_s`` (seconds between
    content deltas), ``e2e_s`` (seconds in all), ``tokens`` generated."""

    ttft_s: float
    e2e_s: float
    tokens: int
    gaps_s: list[float] = field(default_factory=list)


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    if len(xs) == 1:
        return xs[0]
    return statistics.quantiles(xs, n=100, method="inclusive")[max(0, min(98, round(q * 100) - 1))]


def summarize(timings: list[RequestTiming], wall_s: float) -> dict[str, float]:
    """The metrics of one sample (:data:`LOAD_METRICS`) from its requests and wall time (seconds)."""
    gaps = [g for t in timings for g in t.gaps_s]
    ttft = [t.ttft_s for t in timings]
    wall = max(wall_s, 1e-9)
    return {"output_throughput": sum(t.tokens for t in timings) / wall, "request_throughput": len(timings) / wall,
            "ttft_p50": _pct(ttft, 0.5), "ttft_p90": _pct(ttft, 0.9), "itl_p50": _pct(gaps, 0.5),
            "itl_p90": _pct(gaps, 0.9), "e2e_p50": _pct([t.e2e_s for t in timings], 0.5)}


#: Generated tokens a request's ``usage`` may report (larger: not a count, ignored).
MAX_TOKENS = 10_000_000

#: Bytes of one server-sent event line kept at most: an event of a chat delta is well under a KiB.
MAX_LINE_BYTES = 1024 * 1024


def _lines(r: Any, t0: float, timeout_s: float) -> Any:  # -> Iterator[bytes]
    """The lines of a streamed reply, bounded: :data:`MAX_STREAM_BYTES` in all, :data:`MAX_LINE_BYTES` a
    line, ``timeout_s`` seconds from ``t0`` (checked at every chunk; each read also has the request's
    read timeout). Raises :class:`LoadError` past a bound."""
    buf = b""
    read = 0
    raw = r.raw
    while True:
        # read1: what has arrived (up to 64 KiB), not a full buffer -- a dribbling server's events must
        # reach the time check; decoded (chunked transfer, compression) by urllib3
        chunk = raw.read1(65536, decode_content=True) if hasattr(raw, "read1") else raw.read(8192, decode_content=True)
        if not chunk:
            break
        read += len(chunk)
        if read > MAX_STREAM_BYTES:
            raise LoadError(f"the stream passed {MAX_STREAM_BYTES} bytes")
        if time.monotonic() - t0 > timeout_s:
            raise LoadError(f"no end after {timeout_s:.0f} s")
        buf += chunk
        # an event stream's lines end in \r\n, \n or a lone \r (the SSE grammar); a \r\n split between two
        # chunks only adds an empty line, which carries nothing here
        *lines, buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        if len(buf) > MAX_LINE_BYTES:
            raise LoadError(f"a line of the stream passed {MAX_LINE_BYTES} bytes")
        yield from lines
    if buf:
        yield buf


def _one(session: Any, url: str, body: dict[str, Any], timeout_s: float) -> RequestTiming:
    import requests
    import urllib3

    t0 = time.monotonic()
    first: float | None = None
    last = t0
    gaps: list[float] = []
    deltas = 0
    usage_tokens: int | None = None
    try:
        with session.post(url, json=body, stream=True, timeout=(10, timeout_s)) as r:
            if r.status_code != 200:
                raise LoadError(f"HTTP {r.status_code}: {r.raw.read(200, decode_content=True)!r}")
            for line in _lines(r, t0, timeout_s):
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                try:
                    ev = json.loads(data)
                except ValueError:
                    raise LoadError(f"not an event: {data[:120]!r}") from None
                if not isinstance(ev, dict):
                    raise LoadError(f"not an event object: {data[:120]!r}")
                if ev.get("error") is not None:  # vLLM reports a failure inside a 200 stream
                    raise LoadError(f"the stream reported an error: {json.dumps(ev.get('error'))[:200]}")
                usage = ev.get("usage")
                if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int) \
                        and 0 <= usage["completion_tokens"] <= MAX_TOKENS:
                    usage_tokens = usage["completion_tokens"]
                choices = ev.get("choices")
                for ch in choices if isinstance(choices, list) else []:
                    d = ch.get("delta") if isinstance(ch, dict) else None
                    if isinstance(d, dict) and (d.get("content") or d.get("reasoning_content") or d.get("reasoning")):
                        now = time.monotonic()
                        if first is None:
                            first = now
                        else:
                            gaps.append(now - last)
                        last = now
                        deltas += 1
    except (requests.RequestException, urllib3.exceptions.ProtocolError, urllib3.exceptions.ReadTimeoutError,
            ConnectionError, TimeoutError) as e:  # read1 reads below requests: urllib3's own errors come through
        raise LoadError(f"{type(e).__name__}: {str(e)[:200]}", transient=True) from None
    except urllib3.exceptions.HTTPError as e:  # a body that does not decode (Content-Encoding): the server's answer
        raise LoadError(f"{type(e).__name__}: {str(e)[:200]}") from None
    end = time.monotonic()
    if first is None:
        raise LoadError("the reply streamed no content")
    want = int(body.get("max_tokens") or 0)
    if usage_tokens is not None and usage_tokens < want:
        # asked with min_tokens = max_tokens and ignore_eos: a build that stops early is not a faster one
        raise LoadError(f"the reply generated {usage_tokens} of the {want} tokens asked (min_tokens, ignore_eos): "
                        "the server stopped early")
    return RequestTiming(first - t0, end - t0, usage_tokens if usage_tokens is not None else deltas, gaps)


def load_sample(base_url: str, model: str | None, *, requests_n: int, prompt_tokens: int, output_tokens: int,
                concurrency: int, sample: int, timeout_s: float) -> tuple[dict[str, float], list[RequestTiming]]:
    """Run one sample (module doc) against ``base_url``; ``sample`` numbers it (its prompts and
    salts differ from every other sample's). Returns the metrics and the per-request timings.
    Raises :class:`LoadError` when a request fails."""
    import requests

    from .prompts import filler_sentence

    url = base_url.rstrip("/") + "/v1/chat/completions"
    # ~0.75 words per token for English filler (the prompt builder's calibration is per-candidate; a load
    # needs the same text on every build, not an exact size)
    words = max(1, int(prompt_tokens * 0.75))
    bodies = []
    for i in range(requests_n):
        seed, got, k = sample * 100_003 + i, [], 0
        while len(got) < words:
            got += filler_sentence(seed, k).split()
            k += 1
        text = " ".join(got[:words])
        body: dict[str, Any] = {"messages": [{"role": "user", "content": text + "\n\nContinue the text."}],
                                "max_tokens": output_tokens, "min_tokens": output_tokens, "ignore_eos": True,
                                "temperature": 0.0, "stream": True, "stream_options": {"include_usage": True},
                                "cache_salt": f"bisectbot-load-{sample}-{i}-{time.time_ns()}"}
        if model:
            body["model"] = model
        bodies.append(body)
    session = requests.Session()
    session.trust_env = False  # the server is local to the runner: no proxy
    pool = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=max(1, concurrency))
    session.mount("http://", pool)
    session.mount("https://", pool)
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        futs = [pool.submit(_one, session, url, b, timeout_s) for b in bodies]
        timings = [f.result() for f in futs]
    wall = time.monotonic() - t0
    return summarize(timings, wall), timings
