"""Image tags and digests from an OCI registry and from Docker Hub's tags API.

Two clients, one result type (:class:`TagInfo`):

* :class:`RegistryClient` speaks the OCI Distribution API: ``GET /v2/<name>/tags/list``
  with ``n``/``last`` and ``Link: <...>; rel="next"`` pagination (relative URLs resolved
  against the request URL; falls back to ``last`` when a full page came without
  ``Link``), the anonymous bearer-token flow from ``WWW-Authenticate`` (token cached per
  scope until ``expires_in``, default 60 s), and ``HEAD /v2/<name>/manifests/<ref>``
  with the OCI index / Docker manifest-list ``Accept`` types to read
  ``Docker-Content-Digest``. Tags come back lexically sorted and carry no dates.
* :class:`HubClient` speaks Docker Hub's web API
  (``/v2/repositories/<ns>/<repo>/tags?page_size=&ordering=last_updated``), following
  ``next`` until null; gives ``name``, top-level ``digest`` and ``last_updated``.

Errors: 429 and 5xx (and connection errors) are retried with exponential backoff
(tenacity), honouring ``Retry-After`` (seconds or HTTP date; registry) and
``X-Retry-After`` (unix time; Docker Hub), each wait capped at ``max_wait_s``. What
remains after the retries, 401 after a token, 403 and 404 become one-line
:class:`bisectbot.errors.RegistryError`. Tokens never appear in messages or logs.

Contract: ``/work/shared/contracts/registry-apis.md`` (OCI distribution-spec, distribution
token auth, Docker Hub ``latest.yaml``).
"""

from __future__ import annotations

import email.utils
import fnmatch
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import date, datetime, timezone
from typing import Any
from urllib.parse import urljoin

import requests
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from .. import bounded, net
from .. import jsonio as _jsonio
from ..errors import RegistryError, UpstreamUnreachable

log = logging.getLogger(__name__)

MANIFEST_ACCEPT = ", ".join([
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
])
DOCKER_HUB_REGISTRY = "registry-1.docker.io"
DOCKER_HUB_API = "https://hub.docker.com"
USER_AGENT = "bisectbot (+https://github.com/bisectbot)"
#: manifest HEADs in flight at once during discovery (issue 15: "concurrent, 8 at a time")
DEFAULT_HEAD_WORKERS = 8


@dataclass
class TagInfo:
    """One tag of an image repository as seen now.

    ``digest`` is the top-level manifest (index/list) digest; ``last_updated`` is an
    RFC 3339 UTC string from Docker Hub, or None when only the registry was asked.
    """

    repository: str
    tag: str
    digest: str | None = None
    last_updated: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class RegistryUnreachable(UpstreamUnreachable, RegistryError):
    """The registry's name did not resolve or it refused the connection (exit code 5); still a
    :class:`RegistryError`, so callers that fall back to the ledger do so."""


class _Retryable(Exception):
    """A response worth retrying (429, 5xx, connection error); ``wait_s`` from the server if any."""

    def __init__(self, message: str, wait_s: float | None = None):
        super().__init__(message)
        self.wait_s = wait_s


def _parse_retry_after(resp: requests.Response) -> float | None:
    """Seconds to wait from ``Retry-After`` (delta or HTTP date) or ``X-Retry-After`` (unix time)."""
    ra = resp.headers.get("Retry-After")
    if ra:
        ra = ra.strip()
        if ra.isdigit():
            return float(ra)
        try:
            dt = email.utils.parsedate_to_datetime(ra)
            return max(0.0, dt.timestamp() - time.time())
        except (TypeError, ValueError):
            pass
    xra = resp.headers.get("X-Retry-After")
    if xra and xra.strip().isdigit():
        return max(0.0, float(xra) - time.time())
    return None


def _error_detail(resp: requests.Response) -> str:
    """Short text of an OCI ``{"errors": [...]}`` body, else the first 200 characters."""
    try:
        body = _jsonio.loads(resp.content)
    except ValueError:
        text = resp.text.strip().replace("\n", " ")
        return text[:200]
    if isinstance(body, dict) and isinstance(body.get("errors"), list):
        parts = []
        for e in body["errors"]:
            if isinstance(e, dict):
                parts.append(f"{e.get('code', '?')}: {e.get('message', '')}".strip().rstrip(":"))
        return "; ".join(parts)
    if isinstance(body, dict) and "message" in body:
        return str(body["message"])[:200]
    return str(body)[:200]


def parse_www_authenticate(header: str) -> tuple[str, dict[str, str]]:
    """Split ``Bearer realm="...",service="...",scope="..."`` into ``("bearer", {...})``."""
    scheme, _, rest = header.strip().partition(" ")
    params = dict(re.findall(r'(\w+)\s*=\s*"([^"]*)"', rest))
    for k, v in re.findall(r'(\w+)\s*=\s*([^",\s]+)', rest):
        params.setdefault(k, v)
    return scheme.lower(), params


def parse_link_next(header: str | None, base_url: str) -> str | None:
    """The ``rel="next"`` URL of an RFC 5988 ``Link`` header, resolved against ``base_url``."""
    if not header:
        return None
    for part in header.split(","):
        m = re.match(r'\s*<([^>]*)>\s*;(.*)', part)
        if m and re.search(r'rel\s*=\s*"?next"?', m.group(2)):
            return urljoin(base_url, m.group(1))
    return None


REPLY_DEADLINE_S = 120.0
"""A registry reply (manifest, config, tag page, token) must arrive whole within this (seconds):
the per-read ``timeout_s`` let a byte every few seconds hold a request for hours. The largest
reply (a tag list of thousands of tags, a few hundred KB) takes well under a second."""

MAX_REPLY_BYTES = 8 * 1024 * 1024
"""Largest registry reply read (bytes, after content decoding): manifests and configs are KBs,
Docker Hub's tag pages ~200 KB, a registry's whole tag list of 10,000 tags ~0.5 MB."""


class _HTTP:
    """Shared request loop: bounded retries with backoff honouring Retry-After."""

    def __init__(self, session: requests.Session | None, timeout_s: float, max_attempts: int,
                 max_wait_s: float, backoff_s: float, sleep: Callable[[float], None] = time.sleep):
        # every reply read whole within its time and byte bounds (a dribble or a gzip bomb from a
        # registry is an error, not hours or gigabytes; hostile pass of issue 41)
        self.session = bounded.limited_session(REPLY_DEADLINE_S, MAX_REPLY_BYTES, session or requests.Session())
        self.session.headers.setdefault("User-Agent", USER_AGENT)
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.max_wait_s = max_wait_s
        self.backoff_s = backoff_s
        self.sleep = sleep

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        server = getattr(exc, "wait_s", None)
        if server is not None:
            return min(self.max_wait_s, server)
        return min(self.max_wait_s, self.backoff_s * (2 ** (state.attempt_number - 1)))

    def request(self, method: str, url: str, what: str, **kw: Any) -> requests.Response:
        """One logical request. 429/5xx/connection errors are retried; others returned as is."""

        def once() -> requests.Response:
            try:
                resp = self.session.request(method, url, timeout=self.timeout_s, allow_redirects=True, **kw)
            except bounded.BodyTooLarge as e:  # not transient: never asked again
                raise RegistryError(f"{what}: {e}") from None
            except bounded.TotalTimeout as e:
                raise _Retryable(f"{what}: {e}") from None
            except requests.RequestException as e:
                if net.is_unreachable(e):  # DNS failure / refused: no retry (issue 14), exit code 5
                    raise RegistryUnreachable(str(net.unreachable(what, e))) from None
                raise _Retryable(f"{what}: {type(e).__name__}: {net.reason(e)}") from None
            if resp.status_code == 429 or resp.status_code >= 500:
                wait = _parse_retry_after(resp)
                log.info("%s: HTTP %s, retrying in %s s", what, resp.status_code,
                         f"{wait:.1f}" if wait is not None else "backoff")
                raise _Retryable(f"{what}: HTTP {resp.status_code} {_error_detail(resp)}".strip(), wait)
            return resp

        retrying = Retrying(
            stop=stop_after_attempt(self.max_attempts), wait=self._wait,
            retry=retry_if_exception_type(_Retryable), sleep=self.sleep, reraise=True,
            before_sleep=net.announce_retry(what, self.max_attempts),
        )
        try:
            return retrying(once)
        except _Retryable as e:
            raise RegistryError(f"{e} (gave up after {self.max_attempts} attempts)") from None


class RegistryClient:
    """OCI Distribution API client for one registry.

    ``registry`` is ``host[:port]`` (``registry-1.docker.io``; ``127.0.0.1:5000``);
    ``insecure`` uses plain HTTP. ``timeout_s`` per request (seconds); ``max_attempts``
    per logical request; ``max_wait_s`` caps one backoff wait (seconds).
    """

    def __init__(self, registry: str = DOCKER_HUB_REGISTRY, insecure: bool = False,
                 session: requests.Session | None = None, timeout_s: float = 30.0,
                 max_attempts: int = 5, max_wait_s: float = 60.0, backoff_s: float = 1.0,
                 sleep: Callable[[float], None] = time.sleep):
        if registry in ("docker.io", "index.docker.io"):
            registry = DOCKER_HUB_REGISTRY
        self.registry = registry
        self.base = f"{'http' if insecure else 'https'}://{registry}"
        self._http = _HTTP(session, timeout_s, max_attempts, max_wait_s, backoff_s, sleep)
        self._tokens: dict[str, tuple[str, float]] = {}

    # ------------------------------------------------------------------ auth
    def _token(self, challenge: str, repository: str) -> str | None:
        scheme, params = parse_www_authenticate(challenge)
        if scheme != "bearer" or "realm" not in params:
            return None
        scope = params.get("scope") or f"repository:{repository}:pull"
        cached = self._tokens.get(scope)
        if cached and cached[1] > time.time() + 5:
            return cached[0]
        q = {"scope": scope}
        if params.get("service"):
            q["service"] = params["service"]
        resp = self._http.request("GET", params["realm"], f"token for {repository}", params=q)
        if resp.status_code != 200:
            raise RegistryError(
                f"token endpoint {params['realm']} refused anonymous pull of {repository}: "
                f"HTTP {resp.status_code} {_error_detail(resp)}".strip()
            )
        try:
            body = _jsonio.loads(resp.content)
        except ValueError:
            raise RegistryError(f"token endpoint {params['realm']} answered non-JSON") from None
        token = body.get("token") or body.get("access_token")
        if not token:
            raise RegistryError(f"token endpoint {params['realm']} answered without a token")
        expires = float(body.get("expires_in") or 60)
        self._tokens[scope] = (token, time.time() + expires)
        return token

    def _get(self, method: str, url: str, repository: str, what: str,
             headers: dict[str, str] | None = None) -> requests.Response:
        headers = dict(headers or {})
        scope = f"repository:{repository}:pull"
        if scope in self._tokens and self._tokens[scope][1] > time.time() + 5:
            headers["Authorization"] = f"Bearer {self._tokens[scope][0]}"
        resp = self._http.request(method, url, what, headers=headers)
        if resp.status_code == 401 and "Authorization" not in headers:
            challenge = resp.headers.get("WWW-Authenticate", "")
            token = self._token(challenge, repository) if challenge else None
            if token:
                headers["Authorization"] = f"Bearer {token}"
                resp = self._http.request(method, url, what, headers=headers)
        if resp.status_code == 401:
            raise RegistryError(f"{what}: HTTP 401 unauthorized on {self.registry} "
                                f"({_error_detail(resp) or 'no anonymous pull access'})")
        if resp.status_code == 404:
            raise RegistryError(f"{what}: not found on {self.registry} ({_error_detail(resp) or 'HTTP 404'})")
        if resp.status_code >= 400:
            raise RegistryError(f"{what}: HTTP {resp.status_code} from {self.registry}: {_error_detail(resp)}")
        return resp

    # ------------------------------------------------------------------ API
    def tags(self, repository: str, page_size: int | None = None) -> list[str]:
        """All tags of ``repository`` (lexical order as the registry returns them).

        ``page_size`` sets ``n`` per request (None: the registry's default).
        Raises :class:`RegistryError` (one line) on 401/403/404 or exhausted retries.
        """
        url: str | None = f"{self.base}/v2/{repository}/tags/list"
        if page_size:
            url += f"?n={page_size}"
        out: list[str] = []
        have: set[str] = set()
        seen_urls: set[str] = set()
        saw_link = False
        while url:
            if url in seen_urls:
                raise RegistryError(f"tags of {repository}: pagination loops at {url}")
            seen_urls.add(url)
            resp = self._get("GET", url, repository, f"tags of {repository}")
            try:
                body = _jsonio.loads(resp.content)
                page = list(body.get("tags") or [])
            except (ValueError, AttributeError):
                raise RegistryError(f"tags of {repository}: registry answered a non-JSON or malformed body") from None
            fresh = 0
            for t in page:
                if t not in have:
                    have.add(t)
                    out.append(t)
                    fresh += 1
            nxt = parse_link_next(resp.headers.get("Link"), url)
            saw_link = saw_link or nxt is not None
            if (nxt is None and not saw_link and fresh and page_size and len(page) == page_size):
                # Old registries never send Link: continue with ``last`` until a short page.
                # (A registry that sent Link before and not now has reached the end; one that
                # answers more than n tags ignores n, e.g. distribution 2.8: all tags at once.)
                nxt = f"{self.base}/v2/{repository}/tags/list?n={page_size}&last={max(page)}"
            url = nxt
        return out

    def digest(self, repository: str, reference: str) -> str:
        """``Docker-Content-Digest`` of ``repository:reference`` via ``HEAD`` (falls back to ``GET``
        and hashing the body when the header is missing). Raises :class:`RegistryError`."""
        url = f"{self.base}/v2/{repository}/manifests/{reference}"
        what = f"manifest {repository}:{reference}"
        resp = self._get("HEAD", url, repository, what, headers={"Accept": MANIFEST_ACCEPT})
        dig = resp.headers.get("Docker-Content-Digest")
        if dig:
            return dig
        import hashlib

        resp = self._get("GET", url, repository, what, headers={"Accept": MANIFEST_ACCEPT})
        return "sha256:" + hashlib.sha256(resp.content).hexdigest()

    def tag_infos(self, repository: str, pattern: str = "*", page_size: int | None = None) -> list[TagInfo]:
        """Tags matching ``pattern`` (fnmatch) with their digests (one ``HEAD`` each, 8 at a time)."""
        infos = [TagInfo(repository, t) for t in filter_tags(self.tags(repository, page_size), pattern)]
        fill_digests(infos, self)
        return infos


class HubClient:
    """Docker Hub tags API client (``https://hub.docker.com`` or a server following it)."""

    def __init__(self, base_url: str = DOCKER_HUB_API, session: requests.Session | None = None,
                 timeout_s: float = 30.0, max_attempts: int = 5, max_wait_s: float = 60.0,
                 backoff_s: float = 1.0, sleep: Callable[[float], None] = time.sleep):
        self.base = base_url.rstrip("/")
        self._http = _HTTP(session, timeout_s, max_attempts, max_wait_s, backoff_s, sleep)

    def tags(self, repository: str, page_size: int = 100, name: str | None = None) -> list[TagInfo]:
        """All tags of ``namespace/repo`` newest first (``ordering=last_updated``), following ``next``.

        ``name`` filters by substring (server side). Raises :class:`RegistryError`.
        """
        if "/" not in repository:
            repository = f"library/{repository}"
        url: str | None = (f"{self.base}/v2/repositories/{repository}/tags"
                           f"?page_size={page_size}&ordering=last_updated")
        if name:
            url += f"&name={name}"
        out: list[TagInfo] = []
        pages = 0
        while url:
            pages += 1
            if pages > 1000:
                raise RegistryError(f"Docker Hub tags of {repository}: more than 1000 pages, giving up")
            what = f"Docker Hub tags of {repository}"
            resp = self._http.request("GET", url, what)
            if resp.status_code >= 400:
                raise RegistryError(f"{what}: HTTP {resp.status_code} {_error_detail(resp)}".strip())
            try:
                body = _jsonio.loads(resp.content)
                results = body["results"]
            except (ValueError, KeyError, TypeError):
                raise RegistryError(f"{what}: malformed body (expected count/next/results)") from None
            for r in results:
                out.append(TagInfo(repository, r["name"], r.get("digest"), r.get("last_updated")))
            nxt = body.get("next")
            url = urljoin(url, nxt) if nxt else None
        return out


# ---------------------------------------------------------------------- pure helpers

_HEX_RUN = re.compile(r"[0-9a-f]{7,}")
_DATE_IN_TAG = re.compile(r"(?<!\d)(20\d{2})(\d{2})(\d{2})(?!\d)")


def filter_tags(tags: Iterable[str], pattern: str) -> list[str]:
    """Tags matching an fnmatch ``pattern`` (case-sensitive); several patterns may be ``|``-separated."""
    pats = [p.strip() for p in pattern.split("|") if p.strip()] or ["*"]
    return [t for t in tags if any(fnmatch.fnmatchcase(t, p) for p in pats)]


def tag_date(tag: str) -> str | None:
    """``YYYY-MM-DD`` of a ``YYYYMMDD`` date inside a tag (``nightly_main_20260412``), else None."""
    m = _DATE_IN_TAG.search(tag)
    if not m:
        return None
    try:
        return datetime(int(m.group(1)), int(m.group(2)), int(m.group(3))).date().isoformat()
    except ValueError:
        return None


def order_tags(infos: Iterable[TagInfo]) -> list[TagInfo]:
    """Oldest first: by the date in the tag, else by ``last_updated``, else by name.

    A tag with a date in its name sorts at that date (time 00:00 UTC); ties (a moving tag
    such as ``nightly`` pointing at the newest dated one) are broken by ``last_updated``.
    """

    def key(t: TagInfo) -> tuple[str, str, str]:
        d = tag_date(t.tag)
        lu = t.last_updated or ""
        return (d or lu[:10] or "9999-99-99", lu, t.tag)

    return sorted(infos, key=key)


def merge_hub_dates(infos: list[TagInfo], hub: list[TagInfo]) -> list[TagInfo]:
    """Fill ``last_updated`` (and a missing digest) of registry tags from Docker Hub results."""
    by_name = {h.tag: h for h in hub}
    for t in infos:
        h = by_name.get(t.tag)
        if h:
            t.last_updated = t.last_updated or h.last_updated
            t.digest = t.digest or h.digest
    return infos


def is_moving(tag: str) -> bool:
    """True for a tag that names no date, version or commit (no digit and no run of 7+ hex letters in
    it: ``nightly``, ``latest``, ``base``): such a tag is re-pointed by its publisher, so a digest
    recorded earlier says nothing about it now. Tags with a digit (``nightly_main_20260412``,
    ``nightly-<sha>``, ``v0.11.2``) are treated as immutable once recorded (DOMAIN.md: "Dated tags
    remain for history")."""
    return not any(ch.isdigit() for ch in tag) and not _HEX_RUN.search(tag)


#: a dated tag this young (days, by the date in its name) may still be rebuilt by its publisher
RECENT_DAYS = 2


def trust_recorded(tag: str, today: date | None = None) -> bool:
    """Whether a digest the ledger recorded for ``tag`` can stand in for asking the registry: not for
    a moving tag (:func:`is_moving`), nor for a tag dated within :data:`RECENT_DAYS` of ``today``
    (UTC; a nightly can be rebuilt the day it is published)."""
    if is_moving(tag):
        return False
    d = tag_date(tag)
    if d is None:
        return True
    today = today or datetime.now(timezone.utc).date()
    return (today - date.fromisoformat(d)).days > RECENT_DAYS


def list_tags(source: Any, registry_client: RegistryClient | None = None, hub_client: HubClient | None = None,
              page_size: int | None = None) -> list[TagInfo]:
    """The matching tags of a recipe's :class:`bisectbot.recipe.RegistrySource`, oldest first, without
    per-tag requests: names from the registry's tag list (digests None), or, with ``hub_api``,
    names, digests and dates from Docker Hub's list. Raises :class:`RegistryError`."""
    if not source.hub_api:
        rc = registry_client or RegistryClient(source.registry, insecure=source.insecure)
        names = filter_tags(rc.tags(source.repository, page_size), source.tag_pattern)
        return order_tags(TagInfo(source.repository, t) for t in names)
    hc = hub_client or HubClient(source.hub_api)
    hub = hc.tags(source.repository, page_size=min(page_size or 100, 100))
    wanted = set(filter_tags([h.tag for h in hub], source.tag_pattern))
    return order_tags(TagInfo(source.repository, h.tag, h.digest, h.last_updated) for h in hub if h.tag in wanted)


def fill_digests(infos: list[TagInfo], client: RegistryClient, known: Mapping[str, str] | None = None,
                 workers: int = DEFAULT_HEAD_WORKERS) -> int:
    """Give every tag of ``infos`` its digest, in place; returns how many manifest ``HEAD`` requests it took.

    A tag that already carries a digest keeps it; a tag :func:`trust_recorded` accepts (immutable, not
    dated within the last days) found in ``known`` (tag -> digest, e.g. :meth:`bisectbot.ledger.Ledger.nightly_digests`) takes the recorded
    one; the rest are asked with one ``HEAD`` each, ``workers`` at a time (default 8). Raises
    :class:`RegistryError` (the first failure) when a ``HEAD`` fails.
    """
    todo: list[TagInfo] = []
    for t in infos:
        if t.digest:
            continue
        if known and known.get(t.tag) and trust_recorded(t.tag):
            t.digest = known[t.tag]
        else:
            todo.append(t)
    if not todo:
        return 0
    if workers <= 1 or len(todo) == 1:
        for t in todo:
            t.digest = client.digest(t.repository, t.tag)
        return len(todo)
    from concurrent.futures import ThreadPoolExecutor

    # the first request settles the bearer token, so the concurrent ones reuse it
    todo[0].digest = client.digest(todo[0].repository, todo[0].tag)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="manifest-head") as pool:
        for t, dig in zip(todo[1:], pool.map(lambda t: client.digest(t.repository, t.tag), todo[1:])):
            t.digest = dig
    return len(todo)


def discover(source: Any, registry_client: RegistryClient | None = None, hub_client: HubClient | None = None,
             page_size: int | None = None, known: Mapping[str, str] | None = None,
             workers: int = DEFAULT_HEAD_WORKERS) -> list[TagInfo]:
    """Tags of a recipe's :class:`bisectbot.recipe.RegistrySource` matching its ``tag_pattern``,
    with digests and, when ``hub_api`` is set, dates; oldest first. Raises :class:`RegistryError`.

    Without ``hub_api``: the registry's tag list, then one manifest ``HEAD`` per matching tag that
    ``known`` (tag -> digest recorded earlier) does not already answer, ``workers`` at a time (see
    :func:`fill_digests`). With it: Docker Hub's list (names, digests, ``last_updated``; no per-tag
    request), and a registry ``HEAD`` only for a tag whose Hub entry has no digest.
    """
    rc = registry_client or RegistryClient(source.registry, insecure=source.insecure)
    infos = list_tags(source, rc, hub_client, page_size)
    fill_digests(infos, rc, known if not source.hub_api else None, workers)
    return infos


class NightlyTags:
    """The matching tags of one registry source during one run: listed once, digests asked lazily.

    ``tags()`` is the tag list (oldest first, digests only where Docker Hub gave them) and is
    fetched at most once per object; ``digests(lo, hi)`` fills the digests of the tags at
    positions ``lo..hi`` (inclusive) only: from ``known`` (tag -> digest recorded in the ledger)
    for immutable tags, else one ``HEAD`` each, ``workers`` at a time. ``heads`` counts the manifest
    requests sent so far. Raises :class:`RegistryError` like :func:`discover`.
    """

    def __init__(self, source: Any, registry_client: RegistryClient | None = None,
                 hub_client: HubClient | None = None, known: Mapping[str, str] | None = None,
                 page_size: int | None = None, workers: int = DEFAULT_HEAD_WORKERS):
        self.source = source
        self.client = registry_client or RegistryClient(source.registry, insecure=source.insecure)
        self.hub_client = hub_client
        self.known = dict(known or {})
        self.page_size = page_size
        self.workers = workers
        self.heads = 0
        self._tags: list[TagInfo] | None = None

    def tags(self) -> list[TagInfo]:
        """Every matching tag, oldest first (one listing per object)."""
        if self._tags is None:
            self._tags = list_tags(self.source, self.client, self.hub_client, self.page_size)
        return self._tags

    def digests(self, lo: int = 0, hi: int | None = None) -> list[TagInfo]:
        """The tags at positions ``lo..hi`` (inclusive; ``hi`` None: to the newest), digests filled."""
        tags = self.tags()
        part = tags[lo:(len(tags) if hi is None else hi + 1)]
        self.heads += fill_digests(part, self.client, None if self.source.hub_api else self.known, self.workers)
        return part

    def index(self, name: str) -> int | None:
        """Position of a tag named ``name``, or of the first tag whose digest is ``name`` (asking the
        registry for every digest only when ``name`` is a digest the listing and ledger lack)."""
        tags = self.tags()
        for i, t in enumerate(tags):
            if t.tag == name:
                return i
        if not name.startswith("sha256:"):
            return None
        for i, t in enumerate(tags):
            if (t.digest or (self.known.get(t.tag) if trust_recorded(t.tag) else None)) == name:
                return i
        for i, t in enumerate(self.digests()):
            if t.digest == name:
                return i
        return None


def record(ledger: Any, infos: Iterable[TagInfo], seen: str | None = None) -> int:
    """Record every tag -> digest in the ledger (first/last seen) in one transaction; returns how many
    were recorded. Tags without a digest are skipped."""
    seen = seen or datetime.now(timezone.utc).isoformat(timespec="seconds")
    rows = [(t.repository, t.tag, t.digest, t.last_updated) for t in infos if t.digest]
    if hasattr(ledger, "record_nightlies"):
        ledger.record_nightlies(rows, seen=seen)
    else:  # a ledger-like object with only the one-row method
        for repo, tag, dig, lu in rows:
            ledger.record_nightly(repo, tag, dig, last_updated=lu, seen=seen)
    return len(rows)


def image_ref(registry: str, repository: str, tag_or_digest: str) -> str:
    """A pullable reference: ``host/repo:tag`` or ``host/repo@sha256:...`` (Docker Hub host omitted)."""
    host = "" if registry in (DOCKER_HUB_REGISTRY, "docker.io") else f"{registry}/"
    sep = "@" if tag_or_digest.startswith("sha256:") else ":"
    return f"{host}{repository}{sep}{tag_or_digest}"


def split_image_ref(ref: str) -> tuple[str, str, str]:
    """``(registry, repository, tag-or-digest)`` of an image reference (Docker's defaulting rules)."""
    name, ref_part = ref, "latest"
    if "@" in ref:
        name, ref_part = ref.split("@", 1)
    else:
        last = ref.rsplit("/", 1)[-1]
        if ":" in last:
            name, ref_part = ref.rsplit(":", 1)
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, repo = first, rest
    else:
        registry, repo = DOCKER_HUB_REGISTRY, name
        if "/" not in repo:
            repo = f"library/{repo}"
    if registry == "docker.io":
        registry = DOCKER_HUB_REGISTRY
    return registry, repo, ref_part

