"""Every PyGithub exchange bounded in time and size (issue 41, item 15).

PyGithub reads a reply whole into memory and bounds it only by a per-read socket timeout: a
server that sends a byte every few seconds holds a request for ever, and a 400 MB reply costs
more than a gigabyte. :func:`install` replaces PyGithub's two connection classes (its public
``Requester.injectConnectionClasses``) with ones that send each request through
:func:`bisectbot.bounded.request`:

* each **attempt** (urllib3's retries after a 5xx, a reset, a ``Retry-After``) must deliver its
  whole reply -- status line, headers and body -- within the client's ``timeout`` (seconds;
  :class:`~bisectbot.report.github.GitHubClient`'s ``timeout_s``, 30 s by default: GitHub ends a
  request it takes more than 10 s to process, REST API docs, "Timeouts", which leaves 20 s to
  transfer the largest reply);
* the whole request, retries and their waits included, within :func:`request_deadline_s`;
* a reply body is read up to :data:`MAX_REPLY_BYTES` and no further; a list reply holds at most
  :data:`MAX_PAGE_ITEMS` elements, and one operation follows at most :data:`MAX_REDIRECTS`
  redirects and :data:`MAX_ACCEPTED` ``202`` replies (:class:`Refused`).

Past a bound the request fails with :class:`bisectbot.bounded.TotalTimeout` or
:class:`~bisectbot.bounded.BodyTooLarge`, which :meth:`GitHubClient.call` turns into a
:class:`~bisectbot.errors.GitHubError` that names the bound.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import requests
from github.Requester import Requester, RequestsResponse

from .. import bounded

__all__ = ["MAX_ACCEPTED", "MAX_PAGE_ITEMS", "MAX_REDIRECTS", "MAX_REPLY_BYTES", "Refused", "install",
           "request_deadline_s", "start_operation"]

MAX_REPLY_BYTES = 64 * 1024 * 1024
"""Largest GitHub reply body read (bytes). The largest reply the bot asks for is a page of
``per_page`` = 100 issues or comments whose bodies GitHub caps at 65,536 characters each; at
6 bytes a character once JSON-escaped (``\\uXXXX``) that is 39 MB with the metadata: 64 MiB is
above every real reply and far below what a hostile one could cost."""

_DEFAULT_TIMEOUT_S = 30.0

MAX_PAGE_ITEMS = 100
"""Most elements of a list reply: GitHub's largest ``per_page`` (REST docs, "Using pagination").
PyGithub builds an object per element, ~1.7 KB for a 3-byte ``{}``: a list of millions in a
few MB cost gigabytes (hostile pass of issue 41), whatever the byte cap."""

MAX_REDIRECTS = 10
"""Redirects followed within one operation (PyGithub follows them by recursion; a loop ended in
``RecursionError``). GitHub redirects a renamed repository once."""

MAX_ACCEPTED = 10
"""``202 Accepted`` replies within one operation (PyGithub asks again every 2 s for ever); the bot
asks for nothing GitHub computes in the background."""


class Refused(requests.RequestException):
    """A reply no GitHub sends: a page of more than :data:`MAX_PAGE_ITEMS` elements, more than
    :data:`MAX_REDIRECTS` redirects or :data:`MAX_ACCEPTED` ``202`` replies in one operation."""


_op = threading.local()


def start_operation() -> None:
    """Begin one client operation (:meth:`GitHubClient.call`): its redirect and 202 counts start at 0."""
    _op.redirects = 0
    _op.accepted = 0


def _count(name: str, limit: int, what: str) -> None:
    n = getattr(_op, name, 0) + 1
    setattr(_op, name, n)
    if n > limit:
        raise Refused(f"{what} {n} times in one operation (at most {limit}): not GitHub's behaviour")


def _page_items(body: bytes, limit: int) -> int | None:
    """How many elements a JSON list ``body`` holds, counting no further than ``limit + 1`` (each
    element decoded alone, so a list of millions costs one element's memory); None when the body
    is no list."""
    text = body.decode("utf-8", "replace")
    dec = json.JSONDecoder()
    i = len(text) - len(text.lstrip())
    if not text.startswith("[", i):
        return None
    i += 1
    n = 0
    while True:
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        if i >= len(text) or text[i] == "]":
            return n
        try:
            _, i = dec.raw_decode(text, i)
        except ValueError:
            return n  # not JSON: PyGithub reports it
        n += 1
        if n > limit:
            return n
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        if i < len(text) and text[i] == ",":
            i += 1


def request_deadline_s(timeout_s: float, retry: Any) -> float:
    """The bound of one request, retries included (seconds): ``retry.total + 1`` attempts of
    ``timeout_s``, plus before each retry the longest wait the retry allows (its
    ``max_rate_limit_wait``, PyGithub's ``Retry-After`` cap, else 0) and its backoff
    (``backoff_factor * 2**k``, capped by urllib3 at ``backoff_max``)."""
    retries = retry.total if isinstance(getattr(retry, "total", None), int) else 0
    wait = float(getattr(retry, "max_rate_limit_wait", None) or 0.0)
    factor = float(getattr(retry, "backoff_factor", 0.0) or 0.0)
    cap = float(getattr(retry, "backoff_max", 120.0) or 120.0)
    backoff = sum(min(cap, factor * 2 ** k) for k in range(retries))
    return (retries + 1) * timeout_s + retries * wait + backoff


class _Bounded:
    """PyGithub's connection interface (``request`` then ``getresponse``, ``close``) over a
    :func:`bisectbot.bounded.session` whose adapter carries PyGithub's retry object."""

    protocol = "https"
    default_port = 443

    def __init__(self, host: str, port: int | None = None, strict: bool = False, timeout: int | None = None,
                 retry: Any = None, pool_size: int | None = None, **kwargs: Any) -> None:
        self.host, self.port = host, port or self.default_port
        self.timeout = float(timeout) if timeout else _DEFAULT_TIMEOUT_S
        self.verify = kwargs.get("verify", True)
        self.retry = retry if retry is not None else requests.adapters.DEFAULT_RETRIES
        size = pool_size or requests.adapters.DEFAULT_POOLSIZE
        self.session = requests.Session()
        self.session.auth = Requester.noopAuth  # as PyGithub's: never fall back to ~/.netrc
        self.session.mount(f"{self.protocol}://", bounded.BoundedAdapter(
            max_retries=self.retry, pool_connections=size, pool_maxsize=size))
        self.verb, self.url, self.input, self.headers = "GET", "/", None, {}

    def request(self, verb: str, url: str, input: Any, headers: dict[str, str], stream: bool = False) -> None:
        self.verb, self.url, self.input, self.headers = verb, url, input, headers

    def getresponse(self) -> RequestsResponse:
        url = f"{self.protocol}://{self.host}:{self.port}{self.url}"
        r = bounded.request(self.session, self.verb, url, total_s=request_deadline_s(self.timeout, self.retry),
                            attempt_s=self.timeout, connect_s=min(10.0, self.timeout), max_bytes=MAX_REPLY_BYTES,
                            headers=self.headers, data=self.input, verify=self.verify, allow_redirects=False)
        if 300 <= r.status_code < 400:
            _count("redirects", MAX_REDIRECTS, "redirected")
        elif r.status_code == 202:
            _count("accepted", MAX_ACCEPTED, "answered 202 Accepted")
        items = _page_items(r.content, MAX_PAGE_ITEMS) if r.content[:1] in (b"[", b" ", b"\n") else None
        if items is not None and items > MAX_PAGE_ITEMS:
            raise Refused(f"a page of more than {MAX_PAGE_ITEMS} elements (GitHub's largest page): not read")
        return RequestsResponse(r)

    def close(self) -> None:
        self.session.close()


class BoundedHTTPSConnection(_Bounded):
    protocol, default_port = "https", 443


class BoundedHTTPConnection(_Bounded):
    protocol, default_port = "http", 80


def install() -> None:
    """Make every PyGithub client of this process use the bounded connections (idempotent)."""
    Requester.injectConnectionClasses(BoundedHTTPConnection, BoundedHTTPSConnection)  # type: ignore[arg-type]
