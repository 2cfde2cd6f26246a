"""A local HTTP server following the registry contract (``/work/shared/contracts/registry-apis.md``)
for the failure cases the real ``docker-registry`` cannot produce without a token service:

* distribution token auth: every ``/v2/...`` call without ``Authorization: Bearer <token>``
  gets 401 + ``WWW-Authenticate: Bearer realm=...,service=...,scope=...`` and an OCI error
  body; ``GET /token?service=&scope=`` issues a token (``expires_in`` seconds);
* ``/v2/<name>/tags/list`` with ``n``/``last``, lexical order, relative ``Link`` header
  (or none, ``link=False``, like old registries); ``default_n`` pages a request without ``n``
  (Docker Hub's registry and GHCR cap a page at 100 and send ``Link``);
* ``HEAD /v2/<name>/manifests/<tag>``: ``Docker-Content-Digest`` of the index only when the
  ``Accept`` header lists the OCI index / manifest-list types (else the platform manifest);
* Docker Hub tags API ``/v2/repositories/<ns>/<repo>/tags`` serving the contract's paged
  sample (``next`` rewritten to this server);
* ``latency_s``: every request waits that long before answering (a far registry); ``max_inflight``
  records the most requests served at once;
* injected failures: the first ``fail_429`` requests to a path get 429 with ``Retry-After``
  (registry) or ``X-Retry-After`` (Hub, unix time); ``fail_500`` gives 500s.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlparse

CONTRACTS = Path(__file__).parent / "data"  # copies of /work/shared/contracts samples
INDEX_TYPES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")


class FakeRegistry:
    def __init__(self, tags: dict[str, list[str]], digests: dict[str, str] | None = None, link: bool = True,
                 fail_429: int = 0, retry_after: str = "1", fail_500: int = 0, hub_pages: list[dict] | None = None,
                 expires_in: int = 300, latency_s: float = 0.0, default_n: int | None = None):
        self.tags = tags
        self.default_n = default_n
        self.latency_s = latency_s
        self.inflight = 0
        self.max_inflight = 0
        self._lock = threading.Lock()
        self.digests = digests or {}
        self.link = link
        self.fail_429 = fail_429
        self.retry_after = retry_after
        self.fail_500 = fail_500
        self.hub_pages = hub_pages
        self.expires_in = expires_in
        self.log: list[tuple[str, str, dict[str, str]]] = []
        self.tokens_issued: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeRegistry:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real registries do (every answer has Content-Length)

            def log_message(self, *a: object) -> None:
                pass

            def _json(self, code: int, obj: object, headers: dict[str, str] | None = None, body: bool = True) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def do_HEAD(self) -> None:
                self._timed(body=False)

            def do_GET(self) -> None:
                self._timed(body=True)

            def _timed(self, body: bool) -> None:
                with fake._lock:
                    fake.inflight += 1
                    fake.max_inflight = max(fake.max_inflight, fake.inflight)
                try:
                    if fake.latency_s:
                        time.sleep(fake.latency_s)
                    self._route(body)
                finally:
                    with fake._lock:
                        fake.inflight -= 1

            def _route(self, body: bool) -> None:
                u = urlparse(self.path)
                q = {k: v[0] for k, v in parse_qs(u.query).items()}
                fake.log.append((self.command, self.path, dict(self.headers)))
                if fake.fail_500 > 0 and u.path != "/token":
                    fake.fail_500 -= 1
                    return self._json(500, {"errors": [{"code": "UNKNOWN", "message": "boom"}]}, body=body)
                if u.path == "/token":
                    tok = f"tok-{len(fake.tokens_issued) + 1}"
                    fake.tokens_issued.append(q.get("scope", ""))
                    return self._json(200, {"token": tok, "access_token": tok, "expires_in": fake.expires_in,
                                            "issued_at": "2026-04-12T07:00:00Z"})
                if u.path.startswith("/v2/repositories/"):
                    return self._hub(u, q)
                if fake.fail_429 > 0:
                    fake.fail_429 -= 1
                    return self._json(429, {"errors": [{"code": "TOOMANYREQUESTS", "message": "too many requests"}]},
                                      {"Retry-After": fake.retry_after}, body=body)
                name, _, rest = u.path[len("/v2/"):].partition("/tags/list") if "/tags/list" in u.path else ("", "", "")
                auth = self.headers.get("Authorization", "")
                repo = name or u.path[len("/v2/"):].split("/manifests/")[0]
                if not auth.startswith("Bearer tok-"):
                    return self._json(401, {"errors": [{"code": "UNAUTHORIZED", "message": "authentication required",
                                                        "detail": [{"Type": "repository", "Name": repo,
                                                                    "Action": "pull"}]}]},
                                      {"WWW-Authenticate": f'Bearer realm="{fake.url}/token",service="fake.registry",'
                                                           f'scope="repository:{repo}:pull"'}, body=body)
                if name:
                    if name not in fake.tags:
                        return self._json(404, {"errors": [{"code": "NAME_UNKNOWN",
                                                            "message": "repository name not known to registry"}]})
                    tags = sorted(fake.tags[name])
                    if "last" in q:
                        tags = [t for t in tags if t > q["last"]]
                    headers = {}
                    if "n" in q or fake.default_n:
                        n = int(q.get("n") or fake.default_n)
                        more = len(tags) > n
                        tags = tags[:n]
                        if more and fake.link:
                            headers["Link"] = f'</v2/{name}/tags/list?{urlencode({"last": tags[-1], "n": n})}>; rel="next"'
                    return self._json(200, {"name": name, "tags": tags}, headers)
                if "/manifests/" in u.path:
                    repo, _, ref = u.path[len("/v2/"):].partition("/manifests/")
                    key = f"{repo}:{ref}"
                    if key not in fake.digests:
                        return self._json(404, {"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown",
                                                            "detail": {"Tag": ref}}]}, body=body)
                    accept = self.headers.get("Accept", "")
                    index = all(t in accept for t in INDEX_TYPES)
                    dig = fake.digests[key] if index else "sha256:" + "0" * 64
                    ctype = INDEX_TYPES[0] if index else "application/vnd.docker.distribution.manifest.v2+json"
                    self.send_response(200)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", "529")
                    self.send_header("Docker-Content-Digest", dig)
                    self.end_headers()
                    if body:  # a GET gets the 529 bytes the header announced (stand-in content)
                        self.wfile.write(b" " * 529)
                    return None
                return self._json(404, {"errors": [{"code": "NAME_UNKNOWN", "message": "unknown"}]}, body=body)

            def _hub(self, u, q) -> None:
                if fake.fail_429 > 0:
                    fake.fail_429 -= 1
                    return self._json(429, {"message": "rate limited"},
                                      {"X-Retry-After": str(int(time.time()) + 1)})
                page = int(q.get("page", "1"))
                pages = fake.hub_pages or []
                if not 1 <= page <= len(pages):
                    return self._json(404, {"message": "page not found"})
                body = json.loads(json.dumps(pages[page - 1]))
                for k in ("next", "previous"):
                    if body.get(k):
                        nu = urlparse(body[k])
                        body[k] = f"{fake.url}{nu.path}?{nu.query}"
                return self._json(200, body)

        return H


def hub_sample_pages() -> list[dict]:
    """The three page bodies of ``dockerhub-tags-sample-paged.json``."""
    data = json.loads((CONTRACTS / "dockerhub-tags-sample-paged.json").read_text())
    return [p["body"] for p in data["pages"]]
