"""OpenAI-compatible chat client (``requests``) for the reproducer.

:class:`Client` talks to one server (vLLM, SGLang, the reference engine...):
``/health`` and ``/v1/models`` for readiness and the model name, ``/tokenize`` to
size prompts in tokens, ``/v1/chat/completions`` for the probe itself.

Server failures never raise out of :meth:`Client.chat`: they come back as a
:class:`Reply` with ``error`` set (an ``ERROR`` outcome, never ``GARBAGE``). So does
a 200 reply of unexpected shape (``message`` not an object, ``content`` a list or a
number, ``usage`` counts that are not non-negative integers...): ``error_kind``
``bad-response`` names the field (issue 11, input 4).

Transient failures are retried inside the request, bounded: connection errors
(refused, reset; ``retries``, default 2, 0.5 s apart, via tenacity) and HTTP 429,
500, 502, 503, 504 (``transient_retries``, default 2), waiting what ``Retry-After``
asks (seconds or an HTTP date, capped at ``max_retry_after_s``) or 1 s, 2 s...
Timeouts are not retried -- a timed-out 100K-token prefill is too expensive to send
twice. A reply that still failed transiently has :attr:`Reply.transient` set: callers
must never cache it as a verdict.

Every chat request pins its sampling (issue 37): besides ``temperature`` and ``seed`` it sends
:data:`PINNED_SAMPLING` (``top_p`` 1, ``top_k`` -1, ``min_p`` 0, ``repetition_penalty`` 1,
``frequency_penalty`` 0, ``presence_penalty`` 0); a server that rejects one of them is an ``ERROR``
naming the field.

Every chat request is a **cold prefill** (issue 22; issue 23, input 6): it carries its own
``cache_salt`` (:func:`cold_fields`; vLLM's per-request prefix-cache isolation, ignored by servers
that do not know it), and :meth:`Client.prefix_cache` reads the server's prefix-cache counters
(``vllm:prefix_cache_hits_total`` / ``vllm:prefix_cache_queries_total`` on ``GET /metrics``) so a
probe can check that its requests were not served from the cache; a reply's
``usage.prompt_tokens_details.cached_tokens`` lands in :attr:`Reply.cached_tokens`.

A chat request may be **streamed** (``stream=True``, issue 37: vLLM's incremental detokenization
and stop-string hold-back run only then, vllm#45636): it carries ``"stream": true`` and
``stream_options: {include_usage: true}`` (so ``usage.prompt_tokens`` still arrives, in the last
chunk), and :func:`parse_stream` reassembles the server-sent events (``data:`` chunks of
``choices[0].delta``: ``content`` and ``reasoning_content``/``reasoning``; ``finish_reason`` of the
last chunk that has one; the stream must end with ``data: [DONE]``). A streamed reply goes through
the same bounded layer: a stream that stalls past the timeout or passes the byte cap is an
``ERROR`` (``timeout`` / ``bad-response``), and so are a stream cut before ``[DONE]``, an error
event inside the stream and a single JSON body (a server that ignores ``stream``) -- never text
to judge.

Every request goes through :func:`bisectbot.bounded.request`: its timeout bounds the whole
exchange (a dribbling server is cut off at the deadline) and reply bodies are capped at
:data:`bisectbot.bounded.MAX_BODY_BYTES` (a larger reply is a ``bad-response`` error).
"""

from __future__ import annotations

import math
import re
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

import requests
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_fixed

from .. import bounded
from .. import jsonio as _jsonio

#: ``error_kind`` values of a failed :class:`Reply`.
ERROR_KINDS = ("connection", "timeout", "http", "over-limit", "bad-response")
#: HTTP statuses retried as transient (rate limit, server busy or restarting, gateway trouble).
TRANSIENT_STATUS = (429, 500, 502, 503, 504)
#: Largest prompt/completion token count accepted from a server (anything above is a bad reply).
MAX_TOKEN_COUNT = 10**9
#: Caps of the metadata requests (seconds, whole request): ``GET /v1/models`` and ``POST /tokenize``.
#: Each is also bounded by the client's ``timeout_s`` (the probe's ``--timeout``), so a server
#: that dribbles its metadata cannot hold a probe longer than its chat requests (issue 13, kind 5).
MODELS_TIMEOUT_S = 30.0
TOKENIZE_TIMEOUT_S = 120.0
#: Cap of ``GET /metrics`` (seconds, whole request; also bounded by ``timeout_s``) and of its body (bytes).
METRICS_TIMEOUT_S = 10.0
METRICS_MAX_BYTES = 4 * 1024 * 1024
#: vLLM's prefix-cache counters on ``/metrics`` (Prometheus text; tokens, summed over label sets).
PREFIX_CACHE_HITS = "vllm:prefix_cache_hits_total"
PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries_total"


#: Sampling fields every chat request carries besides ``temperature`` and ``seed`` (issue 37): each
#: at the value that switches it off, so a server's own defaults (vLLM fills omitted fields from the
#: model's ``generation_config.json``, vllm#12622; a ``repetition_penalty`` of 1.3 there read as
#: "GARBAGE at every size" on the CPU lane) cannot change what is measured. ``top_k`` -1: vLLM's
#: ``SamplingParams`` has accepted -1 as "disabled" in every version (older ones reject 0: "top_k must
#: be -1 (disable), or at least 1"; newer ones "quietly accept -1 as disabled, but prefer 0").
PINNED_SAMPLING: dict[str, float | int] = {"top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0,
                                           "frequency_penalty": 0.0, "presence_penalty": 0.0}


def sampling_fields(temperature: float, seed: int | None) -> dict[str, float | int]:
    """The sampling fields of one chat request: ``temperature``, ``seed`` (when given) and
    :data:`PINNED_SAMPLING`."""
    out: dict[str, float | int] = {"temperature": temperature}
    if seed is not None:
        out["seed"] = seed
    out.update(PINNED_SAMPLING)
    return out


def rejected_field(status: int, message: str) -> str | None:
    """The pinned sampling field an HTTP 400/422 rejection names (``min_p``, ``top_k``...), or ``None``."""
    if status not in (400, 422):
        return None
    for name in (*PINNED_SAMPLING, "seed"):
        if re.search(rf"(?<![A-Za-z_]){re.escape(name)}(?![A-Za-z_])", message):
            return name
    return None


def stream_fields() -> dict[str, Any]:
    """Request-body fields of a streamed chat request: ``stream`` and ``stream_options.include_usage``
    (OpenAI's and vLLM's way to get ``usage`` -- prompt tokens -- in the stream's last chunk)."""
    return {"stream": True, "stream_options": {"include_usage": True}}


def cold_fields() -> dict[str, str]:
    """Request-body fields that make one chat request a cold prefill: a fresh random
    ``cache_salt`` (32 hex characters). vLLM (V1) keys its prefix cache by the salt, so no
    earlier request's KV blocks can serve this one (``DOMAIN.md``: 0 hits with a new salt);
    servers without the field ignore it (the reference engine does)."""
    return {"cache_salt": uuid.uuid4().hex}


_METRIC_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfNa]+)(\s+\d+)?\s*$")


def parse_prefix_cache(text: str) -> tuple[int, int] | None:
    """``(hits, queries)`` in tokens from a Prometheus text exposition (``/metrics``): the sums of
    :data:`PREFIX_CACHE_HITS` and :data:`PREFIX_CACHE_QUERIES` over their label sets; ``None``
    when either counter is absent (a server without prefix-cache metrics)."""
    sums: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _METRIC_LINE.match(line.strip())
        if not m or m.group(1) not in (PREFIX_CACHE_HITS, PREFIX_CACHE_QUERIES):
            continue
        try:
            v = float(m.group(3))
        except ValueError:
            continue
        if v == v and v not in (float("inf"), float("-inf")):
            sums[m.group(1)] = sums.get(m.group(1), 0.0) + v
    if PREFIX_CACHE_HITS not in sums or PREFIX_CACHE_QUERIES not in sums:
        return None
    hits, queries = sums[PREFIX_CACHE_HITS], sums[PREFIX_CACHE_QUERIES]
    if not (math.isfinite(hits) and math.isfinite(queries)) or hits < 0 or queries < 0:
        # finite lines whose sum overflows, or a negative counter: no counter a server keeps; the
        # counters are unusable (as absent), never an error at every size (issue 41, item 15)
        return None
    return int(hits), int(queries)


class BadReply(ValueError):
    """A server reply of unexpected shape; the message names the field and what came."""


def _count(value: Any, field: str, optional: bool = True) -> int | None:
    """A token count from a reply: a non-negative integer (an integral float is accepted),
    ``None`` when absent and ``optional``. Raises :class:`BadReply` otherwise (NaN,
    Infinity, strings, booleans, negative or absurd values)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadReply(f"{field} is {type(value).__name__} {_one_line(repr(value), 40)}, expected an integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise BadReply(f"{field} is {value!r}, expected an integer")
        value = int(value)
    if not 0 <= value <= MAX_TOKEN_COUNT:
        raise BadReply(f"{field} is {value}, outside 0..{MAX_TOKEN_COUNT}")
    return value


def retry_after(resp: requests.Response) -> float | None:
    """Seconds the server asks to wait (``Retry-After``: delta seconds or an HTTP date), or
    ``None`` when absent or unparsable."""
    raw = (resp.headers.get("Retry-After") or "").strip()
    wait: float | None = None
    if raw:
        try:
            wait = float(raw)
        except ValueError:
            from email.utils import parsedate_to_datetime

            try:
                when = parsedate_to_datetime(raw)
                wait = when.timestamp() - time.time()
            except (TypeError, ValueError, IndexError, OverflowError):
                wait = None
    if wait is None or wait != wait or wait in (float("inf"), float("-inf")):  # absent, unparsable, NaN
        return None
    return max(0.0, wait)


_OVER_LIMIT = re.compile(r"maximum context length|context length|too long|exceeds? (the )?max", re.I)


@dataclass
class Reply:
    """One chat completion as the classifier sees it.

    ``content`` and ``reasoning`` (``reasoning_content`` or ``reasoning``) are text;
    ``prompt_tokens``/``completion_tokens`` come from ``usage`` (``None`` if absent);
    ``tool_calls`` counts the message's tool/function calls and ``refusal`` is its refusal
    text -- a reply routed to a tool or refused is not evidence of corruption (issue 11);
    ``seconds`` is wall time of the request. A failed request has ``error`` (one line)
    and ``error_kind`` (one of :data:`ERROR_KINDS`; ``over-limit`` = the server rejected
    the prompt as longer than its context) and ``status_code`` when HTTP answered.
    """

    content: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    seconds: float = 0.0
    error: str | None = None
    error_kind: str | None = None
    status_code: int | None = None
    attempts: int = 1
    retry_after_s: float | None = None
    #: Tool/function calls in the message (``tool_calls`` entries, or 1 for a legacy ``function_call``).
    tool_calls: int = 0
    #: The message's ``refusal`` text (OpenAI's field for a refused request), ``""`` when none.
    refusal: str = ""
    #: ``usage.prompt_tokens_details.cached_tokens``: prompt tokens the server took from its prefix
    #: cache (``None`` when the server does not say; vLLM only with ``--enable-prompt-tokens-details``).
    cached_tokens: int | None = None
    #: True for a reply reassembled from a stream (:func:`parse_stream`); ``chunks`` counts its ``data:`` events.
    streamed: bool = False
    chunks: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def transient(self) -> bool:
        """A failure that may pass on its own (connection, timeout, HTTP 429/5xx): it is an
        ``ERROR`` verdict for this request but must never be cached as the candidate's verdict."""
        return self.error is not None and (self.error_kind in ("connection", "timeout")
                                           or self.status_code in TRANSIENT_STATUS)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error_message(resp: requests.Response) -> str:
    try:
        data = _jsonio.loads(resp.content)
    except ValueError:
        return _one_line(resp.text or resp.reason or "")
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return _one_line(err["message"])
        if data.get("message"):
            return _one_line(data["message"])
        if isinstance(err, str):
            return _one_line(err)
    return _one_line(str(data))


class Client:
    """Client of one OpenAI-compatible server at ``base_url`` (``http://host:port``, no ``/v1``).

    ``timeout_s`` bounds each chat request (seconds; default 600, a long prefill of a
    large model) and each metadata request too (``/v1/models`` at most
    :data:`MODELS_TIMEOUT_S`, ``/tokenize`` at most :data:`TOKENIZE_TIMEOUT_S`);
    ``connect_timeout_s`` the TCP connect. ``model`` ``None`` = the first
    model of ``/v1/models``. ``api_key`` (optional) is sent as a bearer token and never logged.
    """

    def __init__(self, base_url: str, model: str | None = None, timeout_s: float = 600.0,
                 connect_timeout_s: float = 10.0, retries: int = 2, retry_wait_s: float = 0.5,
                 api_key: str | None = None, transient_retries: int = 2, max_retry_after_s: float = 120.0):
        base = base_url.rstrip("/")
        if base.endswith("/v1"):
            base = base[:-3]
        self.base_url = base
        self.model = model
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.retries = retries
        self.retry_wait_s = retry_wait_s
        self.transient_retries = transient_retries
        self.max_retry_after_s = max_retry_after_s
        self.sleep = time.sleep  # seconds; replaceable to observe the waits
        self.session = bounded.session()
        if api_key:
            self.session.headers["Authorization"] = f"Bearer {api_key}"
        self._tokenize_missing = False
        self._metrics_missing = False
        #: Send :func:`cold_fields` with every chat request (a fresh ``cache_salt`` each).
        self.cold = True
        self.max_model_len: int | None = None
        self.tokenize_requests = 0
        #: Problems with the server's metadata (odd ``max_model_len``, bad ``/tokenize``), one line each.
        self.problems: list[str] = []

    # ------------------------------------------------------------------ plumbing
    def _request(self, method: str, path: str, timeout: float, **kw: Any) -> requests.Response:
        """One HTTP request with bounded retries on connection errors only."""
        retrying = Retrying(stop=stop_after_attempt(self.retries + 1), wait=wait_fixed(self.retry_wait_s),
                            retry=retry_if_exception_type(requests.exceptions.ConnectionError),
                            reraise=True)
        for attempt in retrying:
            with attempt:
                return bounded.request(self.session, method, self.base_url + path, total_s=timeout,
                                       connect_s=self.connect_timeout_s, **kw)
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ readiness
    def health(self, timeout_s: float = 5.0) -> bool:
        """True when ``GET /health`` answers 200 (no retries)."""
        try:
            r = bounded.request(self.session, "GET", self.base_url + "/health", total_s=timeout_s,
                                connect_s=self.connect_timeout_s, max_bytes=64 * 1024)
        except requests.RequestException:
            return False
        return r.status_code == 200

    def models(self) -> list[str]:
        """Model ids of ``GET /v1/models``. Raises :class:`bisectbot.errors.ServerError`."""
        from ..errors import ServerError

        try:
            r = self._request("GET", "/v1/models", timeout=min(MODELS_TIMEOUT_S, self.timeout_s))
        except requests.RequestException as e:
            raise ServerError(f"{self.base_url}/v1/models: {_one_line(str(e))}") from None
        if r.status_code != 200:
            raise ServerError(f"{self.base_url}/v1/models: HTTP {r.status_code}: {_error_message(r)}")
        try:
            data = _jsonio.loads(r.content)["data"]
            ids = [m["id"] for m in data]
            if not all(isinstance(i, str) and i for i in ids):
                raise TypeError("model id is not a string")
            for m in data:
                self._learn_max_model_len(m.get("max_model_len"), "/v1/models")
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ServerError(f"{self.base_url}/v1/models: unexpected reply {_one_line(r.text, 120)}") from None
        return ids

    def _learn_max_model_len(self, value: Any, where: str) -> None:
        """Accept a positive integer ``max_model_len``; note anything else in :attr:`problems`."""
        if value is None:
            return
        try:
            n = _count(value, f"{where} max_model_len")
        except BadReply as e:
            self.problems.append(f"{e}: ignored")
            return
        if not n:
            self.problems.append(f"{where} max_model_len is {n}: ignored")
            return
        if self.max_model_len is None or where == "/tokenize":
            self.max_model_len = n

    def model_name(self) -> str:
        """The model to ask for: ``model`` if given, else the first served model."""
        if self.model is None:
            ids = self.models()
            if not ids:
                from ..errors import ServerError

                raise ServerError(f"{self.base_url}/v1/models lists no model")
            self.model = ids[0]
        return self.model

    # ------------------------------------------------------------------ prefix cache
    def prefix_cache(self) -> tuple[int, int] | None:
        """The server's prefix-cache counters ``(hits, queries)`` in prompt tokens since it started
        (``GET /metrics``, :func:`parse_prefix_cache`), or ``None`` when it exposes none. A server
        without ``/metrics`` (404/405/501) or without the counters is not asked again, nor after a failed or
        timed-out request (at most ``min(METRICS_TIMEOUT_S, timeout_s)``; noted in :attr:`problems`)."""
        if self._metrics_missing:
            return None
        try:
            r = bounded.request(self.session, "GET", self.base_url + "/metrics",
                                total_s=min(METRICS_TIMEOUT_S, self.timeout_s), connect_s=self.connect_timeout_s,
                                max_bytes=METRICS_MAX_BYTES)
        except (requests.RequestException, bounded.BodyTooLarge) as e:
            # a stalled, dribbling or huge /metrics would cost the same at every size: off for the run
            self._metrics_missing = True
            self.problems.append(f"/metrics failed ({_one_line(str(e), 100)}): prefix cache not checked for the "
                                 "rest of the run")
            return None
        if r.status_code in (404, 405, 501):
            self._metrics_missing = True
            return None
        if r.status_code != 200:
            return None
        got = parse_prefix_cache(r.text)
        if got is None:
            self._metrics_missing = True
        return got

    # ------------------------------------------------------------------ tokenize
    def tokenize(self, messages: list[dict[str, Any]]) -> int | None:
        """Prompt tokens of ``messages`` by ``POST /tokenize`` (vLLM's shape), or ``None``
        when the server has no such endpoint (404/405/501) or it fails. Sets ``max_model_len``.
        The request is bounded by ``min(TOKENIZE_TIMEOUT_S, timeout_s)``; a timeout turns the
        endpoint off for this client (noted in :attr:`problems`): the next sizes do not pay it again.
        A count that is not a non-negative integer (``Infinity``, a string...) turns the
        endpoint off for this client and is noted in :attr:`problems`."""
        if self._tokenize_missing:
            return None
        body: dict[str, Any] = {"messages": messages, "add_generation_prompt": True}
        if self.model:
            body["model"] = self.model
        self.tokenize_requests += 1
        limit = min(TOKENIZE_TIMEOUT_S, self.timeout_s)
        try:
            r = self._request("POST", "/tokenize", timeout=limit, json=body)
        except requests.exceptions.Timeout:
            # a stalled or dribbling /tokenize would cost the same again at every size: off for the run
            self._tokenize_missing = True
            self.problems.append(f"/tokenize gave no complete reply within {limit:g} s: not used for the rest "
                                 "of the run (sizes from usage.prompt_tokens)")
            return None
        except requests.RequestException:
            return None
        if r.status_code in (404, 405, 501):
            self._tokenize_missing = True
            return None
        if r.status_code != 200:
            return None
        try:
            data = _jsonio.loads(r.content)
            count = _count(data["count"], "/tokenize count", optional=False)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            self._tokenize_missing = True
            self.problems.append(f"/tokenize answered {_one_line(str(e) or r.text, 120)}: not used")
            return None
        self._learn_max_model_len(data.get("max_model_len"), "/tokenize")
        return count

    # ------------------------------------------------------------------ chat
    def chat(self, messages: list[dict[str, Any]], max_tokens: int, temperature: float = 0.0,
             seed: int | None = None, stream: bool = False) -> Reply:
        """``POST /v1/chat/completions``; never raises for server trouble (see :class:`Reply`).
        ``stream``: ask for server-sent events and reassemble them (:func:`parse_stream`), within the
        same time (``timeout_s``, whole stream) and byte bounds as an unstreamed reply."""
        body: dict[str, Any] = {"model": self.model_name() if self.model is None else self.model,
                                "messages": messages, "max_tokens": max_tokens,
                                **sampling_fields(temperature, seed)}
        if stream:
            body.update(stream_fields())
        t0 = time.monotonic()
        attempt = 0
        while True:
            if self.cold:
                body.update(cold_fields())  # a fresh salt for every attempt: never a cached prefill
            reply = self._chat_once(body, t0)
            # connection errors were already retried by _request; here: HTTP 429/5xx
            if reply.status_code not in TRANSIENT_STATUS or attempt >= self.transient_retries:
                reply.attempts = attempt + 1
                return reply
            wait = self._wait_for(reply, attempt)
            attempt += 1
            self.sleep(wait)

    def _wait_for(self, reply: Reply, attempt: int) -> float:
        """Seconds before retry ``attempt + 1``: the server's Retry-After, else 1, 2, 4... (capped)."""
        wait = reply.retry_after_s if reply.retry_after_s is not None else float(2 ** attempt)
        return min(max(0.0, wait), self.max_retry_after_s)

    def _chat_once(self, body: dict[str, Any], t0: float) -> Reply:
        streamed = bool(body.get("stream"))
        try:
            r = self._request("POST", "/v1/chat/completions", timeout=self.timeout_s, json=body)
        except requests.exceptions.Timeout as e:
            what = "the stream stalled: no data: [DONE]" if streamed else "timeout"
            return Reply(seconds=time.monotonic() - t0, error_kind="timeout", streamed=streamed,
                         error=f"{what} after {self.timeout_s:g} s: {_one_line(str(e), 160)}")
        except bounded.BodyTooLarge as e:
            what = "the stream passed the byte limit: " if streamed else ""
            return Reply(seconds=time.monotonic() - t0, error_kind="bad-response", streamed=streamed,
                         error=what + _one_line(str(e), 200))
        except requests.RequestException as e:
            return Reply(seconds=time.monotonic() - t0, error_kind="connection",
                         error=f"connection failed: {_one_line(str(e), 200)}")
        dt = time.monotonic() - t0
        if r.status_code != 200:
            msg = _error_message(r)
            kind = "over-limit" if r.status_code in (400, 413, 422) and _OVER_LIMIT.search(msg) else "http"
            pinned = rejected_field(r.status_code, msg) if kind == "http" else None
            if pinned:
                return Reply(seconds=dt, status_code=r.status_code, error_kind="http",
                             error=f"the server rejects the pinned sampling field {pinned!r} "
                                   f"({pinned}={body.get(pinned)!r}; HTTP {r.status_code}: {msg}): the reproducer "
                                   "sends every sampling field it does not vary, so the server's defaults cannot "
                                   "change the replies; use a server that accepts it")
            return Reply(seconds=dt, status_code=r.status_code, error_kind=kind,
                         error=f"HTTP {r.status_code}: {msg}", retry_after_s=retry_after(r))
        try:
            if streamed:
                return parse_stream(r.content, dt, r.headers.get("Content-Type", ""))
            return parse_chat(_jsonio.loads(r.content), dt)
        except StreamError as e:
            return Reply(seconds=dt, status_code=e.status, error_kind="http", streamed=True,
                         error=f"error event in the stream: {e}")
        except BadReply as e:
            return Reply(seconds=dt, status_code=r.status_code, error_kind="bad-response",
                         error=f"unexpected reply: {e}")
        except ValueError:
            return Reply(seconds=dt, status_code=r.status_code, error_kind="bad-response",
                         error=f"unexpected reply (not JSON): {_one_line(r.text, 160)}")


def _text_field(msg: dict[str, Any], key: str) -> str:
    v = msg.get(key)
    if v is None:
        return ""
    if not isinstance(v, str):
        raise BadReply(f"message.{key} is {type(v).__name__} {_one_line(repr(v), 60)}, expected a string")
    return v


def _object_field(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """``parent[key]`` as an object (absent or null: ``{}``); :class:`BadReply` for anything else."""
    v = parent.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise BadReply(f"{key} is {type(v).__name__} {_one_line(repr(v), 60)}, expected an object")
    return v


def parse_chat(data: Any, seconds: float = 0.0) -> Reply:
    """The :class:`Reply` of a decoded 200 chat-completion body. Raises :class:`BadReply`
    naming the field for any unexpected shape (no choices, ``message`` not an object,
    ``content``/``reasoning_content`` not a string or null, odd ``finish_reason`` or
    ``usage``)."""
    if not isinstance(data, dict):
        raise BadReply(f"body is {type(data).__name__}, expected an object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise BadReply(f"choices is {_one_line(repr(choices), 60)}, expected a non-empty list")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise BadReply(f"choices[0] is {type(choice).__name__}, expected an object")
    msg = _object_field(choice, "message")
    content = _text_field(msg, "content")
    reasoning = _text_field(msg, "reasoning_content") or _text_field(msg, "reasoning")
    finish = choice.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise BadReply(f"finish_reason is {type(finish).__name__} {_one_line(repr(finish), 40)}")
    calls = msg.get("tool_calls")
    ncalls = len(calls) if isinstance(calls, list) else 0
    if not ncalls and isinstance(msg.get("function_call"), dict):
        ncalls = 1
    refusal = msg.get("refusal")
    refusal = refusal if isinstance(refusal, str) else ""
    usage = _object_field(data, "usage")
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens"), "usage.prompt_tokens_details.cached_tokens") \
        if isinstance(details, dict) else None
    return Reply(cached_tokens=cached, content=content, reasoning=reasoning, finish_reason=finish,
                 prompt_tokens=_count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
                 completion_tokens=_count(usage.get("completion_tokens"), "usage.completion_tokens"),
                 seconds=seconds, status_code=200, tool_calls=ncalls, refusal=refusal)


class StreamError(ValueError):
    """An error event inside a stream (``data: {"error": ...}``, as vLLM sends when generation fails
    after the headers went out); ``status`` is its code when it names one."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def _delta_text(delta: dict[str, Any], key: str) -> str:
    v = delta.get(key)
    if v is None:
        return ""
    if not isinstance(v, str):
        raise BadReply(f"delta.{key} is {type(v).__name__} {_one_line(repr(v), 60)}, expected a string")
    return v


def sse_data(text: str) -> list[str]:
    """The ``data`` payloads of server-sent events, in order: ``data:`` lines (one space after the
    colon dropped) of one event joined by newlines; comments (``:``) and other fields ignored."""
    out: list[str] = []
    cur: list[str] = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line:
            if cur:
                out.append("\n".join(cur))
                cur = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            cur.append(value[1:] if value.startswith(" ") else value)
    if cur:
        out.append("\n".join(cur))
    return out


def parse_stream(body: bytes, seconds: float = 0.0, content_type: str = "") -> Reply:
    """The :class:`Reply` reassembled from a streamed chat completion's body (server-sent events).

    Concatenates ``choices[0].delta.content`` and ``reasoning_content`` (or ``reasoning``) over the
    chunks; ``finish_reason`` is the last one given; ``usage`` (and its ``cached_tokens``) from the
    chunk that carries it (``stream_options.include_usage``). Raises :class:`BadReply` for a body
    that is not UTF-8, a single JSON object (the server ignored ``stream``), a chunk of unexpected
    shape, or a stream without ``data: [DONE]`` (cut short); :class:`StreamError` for an error event."""

    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadReply(f"the stream is not UTF-8 ({e})") from None
    if "text/event-stream" not in content_type.lower() and text.lstrip().startswith("{"):
        raise BadReply("the server answered stream: true with one JSON body, not server-sent events: its streaming "
                       "path is not tested (use reproducer.stream off, or a server that streams)")
    content: list[str] = []
    reasoning: list[str] = []
    finish: str | None = None
    usage: dict[str, Any] = {}
    calls: set[Any] = set()
    refusal: list[str] = []
    done = False
    chunks = 0
    for data in sse_data(text):
        if data.strip() == "[DONE]":
            done = True
            break
        chunks += 1
        try:
            chunk = _jsonio.loads(data)
        except ValueError:
            raise BadReply(f"stream chunk {chunks} is not JSON: {_one_line(data, 80)}") from None
        if not isinstance(chunk, dict):
            raise BadReply(f"stream chunk {chunks} is {type(chunk).__name__}, expected an object")
        if chunk.get("error") is not None:
            err = chunk["error"]
            msg = err.get("message") if isinstance(err, dict) else err
            code = err.get("code") if isinstance(err, dict) else None
            raise StreamError(_one_line(str(msg), 200), code if isinstance(code, int) and 100 <= code < 600 else None)
        choices = chunk.get("choices")
        if choices is None:
            choices = []
        if not isinstance(choices, list):
            raise BadReply(f"stream chunk {chunks}: choices is {_one_line(repr(choices), 60)}, expected a list")
        if choices:
            choice = choices[0]
            if not isinstance(choice, dict):
                raise BadReply(f"stream chunk {chunks}: choices[0] is {type(choice).__name__}, expected an object")
            delta = _object_field(choice, "delta")
            content.append(_delta_text(delta, "content"))
            reasoning.append(_delta_text(delta, "reasoning_content") or _delta_text(delta, "reasoning"))
            if isinstance(delta.get("refusal"), str):
                refusal.append(delta["refusal"])
            tool_calls = delta.get("tool_calls")
            for k, call in enumerate(tool_calls if isinstance(tool_calls, list) else []):
                calls.add(call.get("index", k) if isinstance(call, dict) else k)  # one call spans many chunks
            f = choice.get("finish_reason")
            if f is not None and not isinstance(f, str):
                raise BadReply(f"stream chunk {chunks}: finish_reason is {type(f).__name__} "
                               f"{_one_line(repr(f), 40)}")
            if f:
                finish = f
        if chunk.get("usage") is not None:
            usage = _object_field(chunk, "usage")
    if not done:
        raise BadReply(f"the stream ended after {chunks} chunk(s) without data: [DONE]: cut short")
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens"), "usage.prompt_tokens_details.cached_tokens") \
        if isinstance(details, dict) else None
    return Reply(content="".join(content), reasoning="".join(reasoning), finish_reason=finish,
                 prompt_tokens=_count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
                 completion_tokens=_count(usage.get("completion_tokens"), "usage.completion_tokens"),
                 seconds=seconds, status_code=200, tool_calls=len(calls), refusal="".join(refusal),
                 cached_tokens=cached, streamed=True, chunks=chunks)
