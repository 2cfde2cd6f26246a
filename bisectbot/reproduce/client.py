"""OpenAI-compatible chat client (``requests``) for the reproducer.

:class:`Client` talks to one server (vLLM, SGLang, the reference engine...):
``/health`` and ``/v1/models`` for readiness and the model name, ``/tokenize`` to
size prompts in tokens, ``/v1/chat/completions`` for the probe itself.

Server failures never raise out of :meth:`Client.chat`: they come back as a
:class:`Reply` with ``error`` set (an ``ERROR`` outcome, never ``GARBAGE``).
Connection errors (refused, reset) are retried a bounded number of times
(``retries``, default 2, 0.5 s apart, via tenacity); HTTP errors and timeouts are
not retried -- a timed-out 100K-token prefill is too expensive to send twice.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass
from typing import Any

import requests
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_fixed

#: ``error_kind`` values of a failed :class:`Reply`.
ERROR_KINDS = ("connection", "timeout", "http", "over-limit", "bad-response")

_OVER_LIMIT = re.compile(r"maximum context length|context length|too long|exceeds? (the )?max", re.I)


@dataclass
class Reply:
    """One chat completion as the classifier sees it.

    ``content`` and ``reasoning`` (``reasoning_content`` or ``reasoning``) are text;
    ``prompt_tokens``/``completion_tokens`` come from ``usage`` (``None`` if absent);
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

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error_message(resp: requests.Response) -> str:
    try:
        data = resp.json()
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
    large model); ``connect_timeout_s`` the TCP connect. ``model`` ``None`` = the first
    model of ``/v1/models``. ``api_key`` (optional) is sent as a bearer token and never logged.
    """

    def __init__(self, base_url: str, model: str | None = None, timeout_s: float = 600.0,
                 connect_timeout_s: float = 10.0, retries: int = 2, retry_wait_s: float = 0.5,
                 api_key: str | None = None):
        base = base_url.rstrip("/")
        if base.endswith("/v1"):
            base = base[:-3]
        self.base_url = base
        self.model = model
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.retries = retries
        self.retry_wait_s = retry_wait_s
        self.session = requests.Session()
        if api_key:
            self.session.headers["Authorization"] = f"Bearer {api_key}"
        self._tokenize_missing = False
        self.max_model_len: int | None = None

    # ------------------------------------------------------------------ plumbing
    def _request(self, method: str, path: str, timeout: float, **kw: Any) -> requests.Response:
        """One HTTP request with bounded retries on connection errors only."""
        retrying = Retrying(stop=stop_after_attempt(self.retries + 1), wait=wait_fixed(self.retry_wait_s),
                            retry=retry_if_exception_type(requests.exceptions.ConnectionError),
                            reraise=True)
        for attempt in retrying:
            with attempt:
                return self.session.request(method, self.base_url + path,
                                            timeout=(self.connect_timeout_s, timeout), **kw)
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ readiness
    def health(self, timeout_s: float = 5.0) -> bool:
        """True when ``GET /health`` answers 200 (no retries)."""
        try:
            r = self.session.get(self.base_url + "/health", timeout=(self.connect_timeout_s, timeout_s))
        except requests.RequestException:
            return False
        return r.status_code == 200

    def models(self) -> list[str]:
        """Model ids of ``GET /v1/models``. Raises :class:`bisectbot.errors.ServerError`."""
        from ..errors import ServerError

        try:
            r = self._request("GET", "/v1/models", timeout=30)
        except requests.RequestException as e:
            raise ServerError(f"{self.base_url}/v1/models: {_one_line(str(e))}") from None
        if r.status_code != 200:
            raise ServerError(f"{self.base_url}/v1/models: HTTP {r.status_code}: {_error_message(r)}")
        try:
            data = r.json()["data"]
            ids = [m["id"] for m in data]
            for m in data:
                if isinstance(m.get("max_model_len"), int):
                    self.max_model_len = self.max_model_len or m["max_model_len"]
        except (ValueError, KeyError, TypeError):
            raise ServerError(f"{self.base_url}/v1/models: unexpected reply {_one_line(r.text, 120)}") from None
        return ids

    def model_name(self) -> str:
        """The model to ask for: ``model`` if given, else the first served model."""
        if self.model is None:
            ids = self.models()
            if not ids:
                from ..errors import ServerError

                raise ServerError(f"{self.base_url}/v1/models lists no model")
            self.model = ids[0]
        return self.model

    # ------------------------------------------------------------------ tokenize
    def tokenize(self, messages: list[dict[str, Any]]) -> int | None:
        """Prompt tokens of ``messages`` by ``POST /tokenize`` (vLLM's shape), or ``None``
        when the server has no such endpoint (404/405/501) or it fails. Sets ``max_model_len``."""
        if self._tokenize_missing:
            return None
        body: dict[str, Any] = {"messages": messages, "add_generation_prompt": True}
        if self.model:
            body["model"] = self.model
        try:
            r = self._request("POST", "/tokenize", timeout=120, json=body)
        except requests.RequestException:
            return None
        if r.status_code in (404, 405, 501):
            self._tokenize_missing = True
            return None
        if r.status_code != 200:
            return None
        try:
            data = r.json()
            count = int(data["count"])
        except (ValueError, KeyError, TypeError):
            self._tokenize_missing = True
            return None
        if isinstance(data.get("max_model_len"), int):
            self.max_model_len = data["max_model_len"]
        return count

    # ------------------------------------------------------------------ chat
    def chat(self, messages: list[dict[str, Any]], max_tokens: int, temperature: float = 0.0,
             seed: int | None = None) -> Reply:
        """``POST /v1/chat/completions``; never raises for server trouble (see :class:`Reply`)."""
        body: dict[str, Any] = {"model": self.model_name() if self.model is None else self.model,
                                "messages": messages, "max_tokens": max_tokens, "temperature": temperature}
        if seed is not None:
            body["seed"] = seed
        t0 = time.monotonic()
        try:
            r = self._request("POST", "/v1/chat/completions", timeout=self.timeout_s, json=body)
        except requests.exceptions.Timeout as e:
            return Reply(seconds=time.monotonic() - t0, error_kind="timeout",
                         error=f"timeout after {self.timeout_s:g} s: {_one_line(str(e), 160)}")
        except requests.RequestException as e:
            return Reply(seconds=time.monotonic() - t0, error_kind="connection",
                         error=f"connection failed: {_one_line(str(e), 200)}")
        dt = time.monotonic() - t0
        if r.status_code != 200:
            msg = _error_message(r)
            kind = "over-limit" if r.status_code in (400, 413, 422) and _OVER_LIMIT.search(msg) else "http"
            return Reply(seconds=dt, status_code=r.status_code, error_kind=kind,
                         error=f"HTTP {r.status_code}: {msg}")
        try:
            data = r.json()
            choice = data["choices"][0]
            msg = choice.get("message") or {}
            usage = data.get("usage") or {}
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return Reply(seconds=dt, status_code=r.status_code, error_kind="bad-response",
                         error=f"unexpected reply: {_one_line(r.text, 160)}")
        reasoning = msg.get("reasoning_content") or msg.get("reasoning") or ""
        return Reply(content=msg.get("content") or "", reasoning=reasoning if isinstance(reasoning, str) else "",
                     finish_reason=choice.get("finish_reason"), prompt_tokens=usage.get("prompt_tokens"),
                     completion_tokens=usage.get("completion_tokens"), seconds=dt, status_code=r.status_code)
