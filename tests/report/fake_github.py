"""A local GitHub REST server for tests, following the OpenAPI subset in shared/contracts.

Runs a real werkzeug HTTP server in a thread on 127.0.0.1. Implements the operations the bot
uses (repos/get, issues list/create/get/update, comments list/create, labels list/create,
issue search, rate_limit) with GitHub's pagination (``per_page``/``page`` + ``Link``) and
rate-limit headers. Every request it receives and every response it sends is validated with
openapi-core against ``github-rest-subset.openapi.json``; problems are collected in
``server.problems`` (the fixture fails the test when any are left).

Spec adjustments (documented in contracts/README.md): ``servers`` points at this server, and
``nullable: true`` combined with ``enum`` also admits ``null`` (GitHub sends ``state_reason: null``).

Faults for tests: :meth:`FakeGitHub.fail` queues canned responses (rate limits, 404, 500) for the
next matching requests; :attr:`FakeGitHub.search_indexed` models search-index lag (new issues
are invisible to search until :meth:`FakeGitHub.index`).
"""

from __future__ import annotations

import copy
import json
import logging
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode

from openapi_core import Config, OpenAPI
from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest, WerkzeugOpenAPIResponse
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

CONTRACTS = Path(__file__).parent / "data"  # copies of shared/contracts (see data/README.md)
SPEC_PATH = CONTRACTS / "github-rest-subset.openapi.json"
RECORDED = CONTRACTS / "github-recorded"
HOP_HEADERS = {"content-encoding", "transfer-encoding", "content-length", "status", "connection"}


def load_recording(name: str) -> dict[str, Any]:
    return json.loads((RECORDED / name).read_text())


def _allow_nullable_enums(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("nullable") is True and isinstance(node.get("enum"), list) and None not in node["enum"]:
            node["enum"] = [*node["enum"], None]
        for v in node.values():
            _allow_nullable_enums(v)
    elif isinstance(node, list):
        for v in node:
            _allow_nullable_enums(v)


_SPEC_CACHE: dict[str, Any] = {}


def openapi_for(base_url: str) -> OpenAPI:
    spec = _SPEC_CACHE.get("raw")
    if spec is None:
        spec = json.loads(SPEC_PATH.read_text())
        _allow_nullable_enums(spec)
        _SPEC_CACHE["raw"] = spec
    spec = dict(spec)
    spec["servers"] = [{"url": base_url}]
    # GitHub's description uses format "timestamp" (epoch seconds) for X-RateLimit-Reset.
    fmt = {"extra_format_validators": {"timestamp": lambda v: str(v).isdigit()},
           "extra_format_unmarshallers": {"timestamp": int}}
    if not _SPEC_CACHE.get("validated"):  # validate the description once per session, then trust it
        api = OpenAPI.from_dict(spec, config=Config(**fmt))
        _SPEC_CACHE["validated"] = True
        return api
    return OpenAPI.from_dict(spec, config=Config(spec_validator_cls=None, **fmt))


def _now_iso(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t or time.time()))


@dataclass
class Fault:
    method: str
    path_re: str
    status: int
    body: Any
    headers: dict[str, str]
    times: int = 1


@dataclass
class RepoState:
    owner: str
    name: str
    id: int
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    labels: list[dict[str, Any]] = field(default_factory=list)


class FakeGitHub:
    """Stateful fake of the GitHub REST API subset. Use as a context manager or call start/stop."""

    def __init__(self, token: str = "ghp_" + "T" * 36, *, validate: bool = True):
        self.token = token
        self.validate = validate
        self.repos: dict[str, RepoState] = {}
        self.problems: list[str] = []
        self.log: list[tuple[str, str, int]] = []  # (method, path?query, status)
        self.bodies: list[Any] = []  # JSON bodies the bot sent
        self.faults: list[Fault] = []
        self.dispatches: list[dict[str, Any]] = []  # workflow_dispatch events received
        self.search_indexed: set[int] | None = None  # None: search sees everything immediately
        self.search_enabled = True
        self.drop_labels_on_create = False  # GitHub silently drops labels without triage permission
        self.rate_remaining = 5000
        self.users: dict[str, str] = {}  # login -> author_association for comments posted by tests
        self._next_id = 1_000_000
        self._lock = threading.Lock()
        issue_tpl = load_recording("get-issue.json")["response_body"]
        self._issue_tpl = issue_tpl
        self._user_tpl = issue_tpl["user"]
        self._comment_tpl = load_recording("get-comment.json")["response_body"]
        self._label_tpl = load_recording("list-labels-paginated.json")["response_body"][0]
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.base_url = ""
        self.bot_login = "bisectbot-app"
        self.git_repos: dict[str, Path] = {}  # full name -> a local git repository (add_repo(git=...))

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> FakeGitHub:
        self._server = make_server("127.0.0.1", 0, self._wsgi, threaded=True)
        self.base_url = f"http://127.0.0.1:{self._server.server_port}"
        self.openapi = openapi_for(self.base_url)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ test helpers
    def add_repo(self, full_name: str, git: Path | None = None) -> RepoState:
        """A repository; ``git``: a local clone behind its commits and compare endpoints (issue 42:
        ``/bisectbot test`` resolves refs and takes diffs from them)."""
        owner, name = full_name.split("/")
        st = RepoState(owner, name, id=len(self.repos) + 4242)
        self.repos[full_name] = st
        if git is not None:
            self.git_repos[full_name] = Path(git)
        return st

    def _git(self, full_name: str, *args: str) -> tuple[int, str]:
        p = subprocess.run(["git", "-C", str(self.git_repos[full_name]), *args], capture_output=True, text=True)
        return p.returncode, p.stdout

    def fail(self, method: str, path_re: str, status: int, body: Any = None, headers: dict[str, str] | None = None,
             times: int = 1) -> None:
        self.faults.append(Fault(method, path_re, status, body if body is not None else {"message": "fault"},
                                 dict(headers or {}), times))

    def replay(self, rec: dict[str, Any], times: int = 1) -> None:
        """Serve a recorded exchange's response for its method and path (query ignored).

        Hop-by-hop/encoding headers of the recording are dropped (bodies are decoded JSON);
        ``Link`` URLs are pointed at this server so the client can follow them.
        """
        path = rec["path"].split("?")[0]
        headers = {}
        for k, v in rec["response_headers"].items():
            if k.lower() in HOP_HEADERS:
                continue
            headers[k] = v.replace("https://api.github.com", self.base_url) if k.lower() == "link" else v
        body = json.loads(json.dumps(rec["response_body"]).replace("https://api.github.com", self.base_url))
        self.faults.append(Fault(rec["method"], "^" + re.escape(path) + r"(\?|$)", rec["status"], body, headers, times))

    def index(self) -> None:
        """Let search see every issue that exists now."""
        self.search_indexed = {i["id"] for r in self.repos.values() for i in r.issues.values()}

    def issues(self, full_name: str) -> list[dict[str, Any]]:
        return list(self.repos[full_name].issues.values())

    def comments_of(self, full_name: str, number: int) -> list[dict[str, Any]]:
        return list(self.repos[full_name].comments.get(number, []))

    def requests(self, method: str | None = None, contains: str = "") -> list[tuple[str, str, int]]:
        return [x for x in self.log if (method is None or x[0] == method) and contains in x[1]]

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id

    def user(self, login: str) -> dict[str, Any]:
        u = copy.deepcopy(self._user_tpl)
        base = self.base_url
        u.update({"login": login, "id": abs(hash(login)) % 10_000_000, "url": f"{base}/users/{login}",
                  "html_url": f"https://github.com/{login}", "type": "User", "site_admin": False})
        for k in list(u):
            if k.endswith("_url") and k not in ("url", "html_url", "avatar_url"):
                u[k] = f"{base}/users/{login}/{k[:-4]}"
        return u

    def add_issue(self, full_name: str, title: str, body: str, labels: list[str] | None = None,
                  author: str = "someone", state: str = "open") -> dict[str, Any]:
        st = self.repos[full_name]
        number = max([0, *st.issues]) + 1
        base = f"{self.base_url}/repos/{full_name}"
        issue = copy.deepcopy(self._issue_tpl)
        for k in ("pull_request", "closed_by", "assignee", "type", "sub_issues_summary",
                  "issue_dependencies_summary", "pinned_comment", "issue_field_values"):
            issue.pop(k, None)
        issue.update({
            "id": self._id(), "node_id": f"I_fake{number}", "number": number, "title": title, "body": body,
            "url": f"{base}/issues/{number}", "repository_url": base,
            "labels_url": f"{base}/issues/{number}/labels{{/name}}", "comments_url": f"{base}/issues/{number}/comments",
            "events_url": f"{base}/issues/{number}/events", "html_url": f"https://github.com/{full_name}/issues/{number}",
            "user": self.user(author), "labels": [self._label(full_name, n) for n in labels or []],
            "state": state, "state_reason": None, "milestone": None, "assignee": None, "assignees": [], "comments": 0, "locked": False,
            "created_at": _now_iso(), "updated_at": _now_iso(), "closed_at": None, "author_association": "OWNER",
        })
        st.issues[number] = issue
        st.comments[number] = []
        return issue

    def add_comment(self, full_name: str, number: int, body: str, author: str = "someone",
                    association: str = "NONE") -> dict[str, Any]:
        st = self.repos[full_name]
        cid = self._id()
        c = copy.deepcopy(self._comment_tpl)
        c.pop("performed_via_github_app", None)
        c.update({"id": cid, "node_id": f"IC_fake{cid}", "body": body,
                  "url": f"{self.base_url}/repos/{full_name}/issues/comments/{cid}",
                  "html_url": f"https://github.com/{full_name}/issues/{number}#issuecomment-{cid}",
                  "issue_url": f"{self.base_url}/repos/{full_name}/issues/{number}",
                  "user": self.user(author), "author_association": association,
                  "created_at": _now_iso(), "updated_at": _now_iso()})
        st.comments[number].append(c)
        st.issues[number]["comments"] = len(st.comments[number])
        return c

    def _label(self, full_name: str, name: str) -> dict[str, Any]:
        st = self.repos[full_name]
        for lb in st.labels:
            if lb["name"] == name:
                return lb
        lb = copy.deepcopy(self._label_tpl)
        lb.update({"id": self._id(), "node_id": f"LA_fake{len(st.labels)}", "name": name, "color": "ededed",
                   "url": f"{self.base_url}/repos/{full_name}/labels/{name}", "default": False, "description": None})
        st.labels.append(lb)
        return lb

    # ------------------------------------------------------------------ HTTP
    def _wsgi(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        with self._lock:
            response = self._handle(request)
        return response(environ, start_response)

    def _headers(self) -> dict[str, str]:
        self.rate_remaining = max(0, self.rate_remaining - 1)
        return {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": str(self.rate_remaining),
                "X-RateLimit-Reset": str(int(time.time()) + 3600), "X-RateLimit-Used": str(5000 - self.rate_remaining),
                "X-RateLimit-Resource": "core", "X-GitHub-Media-Type": "github.v3; format=json",
                "x-github-api-version-selected": "2022-11-28"}

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
        h = self._headers()
        h.update(headers or {})
        data = "" if body is None else json.dumps(body)
        return Response(data, status=status, headers=h,
                        content_type="application/json; charset=utf-8" if body is not None else None)

    def _check(self, what: str, result: Any) -> None:
        for e in getattr(result, "errors", None) or []:
            detail = [f"{x.message[:200]} at {list(x.absolute_path)}"
                      for x in getattr(e.__cause__, "schema_errors", None) or []]
            self.problems.append(f"{what}: {type(e).__name__}: " + ("; ".join(detail) or str(e)[:500]))

    def _handle(self, request: Request) -> Response:
        path = request.path
        qs = request.query_string.decode()
        full = path + ("?" + qs if qs else "")
        body: Any = None
        if request.data:
            try:
                body = json.loads(request.data)
            except ValueError:
                return self._finish(request, full, self._json(400, {"message": "Problems parsing JSON"}))
            self.bodies.append(body)
        auth = request.headers.get("Authorization", "")
        if auth not in (f"token {self.token}", f"Bearer {self.token}"):
            return self._finish(request, full, self._json(401, {"message": "Bad credentials",
                                                                "documentation_url": "https://docs.github.com/rest"}))
        # The client must follow the URLs it is given: /repositories/{id}/... is /repos/{owner}/{repo}/...
        m = re.match(r"^/repositories/(\d+)(/.*)?$", path)
        if m:
            for full_name, st in self.repos.items():
                if st.id == int(m.group(1)):
                    path = f"/repos/{full_name}{m.group(2) or ''}"
        val_path = path
        if self.validate and not m:
            raw = (request.environ.get("RAW_URI") or request.environ.get("REQUEST_URI") or "").split("?")[0]
            checked = request
            if "%2F" in raw.upper():  # a path parameter with encoded slashes (a ref) is one segment, as sent
                checked = Request({**request.environ, "PATH_INFO": raw})
            self._check(f"request {request.method} {full}",
                        self.openapi.unmarshal_request(WerkzeugOpenAPIRequest(checked)))
        for f in self.faults:
            if f.times > 0 and f.method == request.method and re.search(f.path_re, full):
                f.times -= 1
                h = {k: v for k, v in f.headers.items() if k.lower() not in HOP_HEADERS}
                resp = Response(json.dumps(f.body), status=f.status, headers=h,
                                content_type="application/json; charset=utf-8")
                return self._finish(request, full, resp, validate=False)
        resp = self._route(request, path, body)
        return self._finish(request, full, resp, validate=self.validate and val_path == request.path)

    def _finish(self, request: Request, full: str, resp: Response, validate: bool = False) -> Response:
        self.log.append((request.method, full, resp.status_code))
        media = (resp.content_type or "").split(";")[0]
        if validate and media.startswith("application/vnd.github.") and not media.endswith("json"):
            # a text media type (a diff, a SHA): the contract says which media types the operation
            # answers with; openapi-core cannot read a text body as its "string" schema
            self._check(f"response {request.method} {full} {resp.status_code}", self._media_ok(request, resp, media))
            return resp
        if validate:
            self._check(f"response {request.method} {full} {resp.status_code}", self.openapi.unmarshal_response(
                WerkzeugOpenAPIRequest(request), WerkzeugOpenAPIResponse(resp)))
        return resp

    def _media_ok(self, request: Request, resp: Response, media: str) -> Any:
        """An object with ``errors`` (as openapi-core's results have): empty when the contract lists
        ``media`` for the operation of ``request`` and the response's status."""
        spec = json.loads(SPEC_PATH.read_text())
        raw = (request.environ.get("RAW_URI") or request.environ.get("REQUEST_URI") or "").split("?")[0]
        path = raw or request.path
        errors = []
        for template, ops in spec["paths"].items():
            rx = "^" + re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(template)) + "$"
            if re.match(rx, path) and request.method.lower() in ops:
                content = ops[request.method.lower()]["responses"].get(str(resp.status_code), {}).get("content", {})
                if media not in content:
                    errors.append(ValueError(f"{media} is not a media type of {template} {resp.status_code}"))
                break
        else:
            errors.append(ValueError(f"no operation for {request.method} {path}"))
        return type("Checked", (), {"errors": errors})()

    def _paginate(self, request: Request, path: str, items: list[Any], wrap: Any = None) -> Response:
        args = request.args
        per_page = min(100, int(args.get("per_page", 30)))
        page = max(1, int(args.get("page", 1)))
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page: page * per_page]
        links = []
        params = {k: v for k, v in parse_qs(request.query_string.decode()).items() if k != "page"}
        def url(p: int) -> str:
            q = urlencode({**{k: v[0] for k, v in params.items()}, "page": p})
            return f"<{self.base_url}{path}?{q}>"
        if page < last:
            links += [f'{url(page + 1)}; rel="next"', f'{url(last)}; rel="last"']
        if page > 1:
            links += [f'{url(1)}; rel="first"', f'{url(page - 1)}; rel="prev"']
        headers = {"Link": ", ".join(links)} if links else {}
        return self._json(200, wrap(chunk) if wrap else chunk, headers)

    def _not_found(self) -> Response:
        return self._json(404, {"message": "Not Found",
                                "documentation_url": "https://docs.github.com/rest", "status": "404"})

    def _route(self, request: Request, path: str, body: Any) -> Response:
        meth = request.method
        if path == "/rate_limit" and meth == "GET":
            return self._json(200, load_recording("rate-limit.json")["response_body"])
        if path == "/search/issues" and meth == "GET":
            return self._search(request)
        m = re.match(r"^/repos/([^/]+/[^/]+)(/.*)?$", path)
        if not m or m.group(1) not in self.repos:
            return self._not_found()
        full_name, rest = m.group(1), m.group(2) or ""
        st = self.repos[full_name]
        if rest == "" and meth == "GET":
            return self._json(200, self._repo_json(full_name))
        if rest == "/labels":
            if meth == "GET":
                return self._paginate(request, path, st.labels)
            if meth == "POST":
                if any(lb["name"].lower() == body["name"].lower() for lb in st.labels):
                    return self._json(422, {"message": "Validation Failed", "errors": [
                        {"resource": "Label", "code": "already_exists", "field": "name"}]})
                lb = self._label(full_name, body["name"])
                lb["color"] = body.get("color", "ededed")
                lb["description"] = body.get("description")
                return self._json(201, lb, {"Location": lb["url"]})
        if rest == "/issues":
            if meth == "GET":
                return self._paginate(request, path, self._filter_issues(st, request.args))
            if meth == "POST":
                labels = [] if self.drop_labels_on_create else body.get("labels") or []
                issue = self.add_issue(full_name, str(body["title"]), body.get("body") or "",
                                       labels=labels, author=self.bot_login)
                issue["assignees"] = [self.user(a) for a in body.get("assignees") or []]
                issue["assignee"] = issue["assignees"][0] if issue["assignees"] else None
                return self._json(201, issue, {"Location": issue["url"]})
        if full_name in self.git_repos and meth == "GET":  # GET a commit / compare, text media types only
            accept = request.headers.get("Accept", "")
            mc = re.match(r"^/commits/(.+)$", rest)
            if mc and "vnd.github.sha" in accept:
                rc, out = self._git(full_name, "rev-parse", "--verify", "-q", unquote(mc.group(1)) + "^{commit}")
                if rc != 0:
                    return self._json(422, {"message": f"No commit found for SHA: {mc.group(1)}",
                                            "documentation_url": "https://docs.github.com/rest", "status": "422"})
                return Response(out.strip(), status=200, content_type="application/vnd.github.sha")
            mcmp = re.match(r"^/compare/(.+)\.\.\.(.+)$", rest)
            if mcmp and "vnd.github.diff" in accept:
                rc, out = self._git(full_name, "diff", "--no-color", "--no-ext-diff", f"{unquote(mcmp.group(1))}...{unquote(mcmp.group(2))}")
                if rc != 0:
                    return self._not_found()
                return Response(out, status=200, content_type="application/vnd.github.diff")
        m3 = re.match(r"^/actions/workflows/([^/]+)/dispatches$", rest)
        if m3 and meth == "POST":
            self.dispatches.append({"workflow": m3.group(1), **body})
            return self._json(204, None)
        m2 = re.match(r"^/issues/(\d+)(/comments)?$", rest)
        if m2:
            number = int(m2.group(1))
            issue = st.issues.get(number)
            if issue is None:
                return self._not_found()
            if m2.group(2):
                if meth == "GET":
                    return self._paginate(request, path, st.comments[number])
                if meth == "POST":
                    c = self.add_comment(full_name, number, body["body"], author=self.bot_login,
                                         association="NONE")
                    return self._json(201, c, {"Location": c["url"]})
            elif meth == "GET":
                return self._json(200, issue)
            elif meth == "PATCH":
                for k in ("title", "body", "state", "state_reason"):
                    if k in body:
                        issue[k] = body[k]
                if body.get("state") == "closed":
                    issue["closed_at"] = _now_iso()
                issue["updated_at"] = _now_iso()
                return self._json(200, issue)
        return self._json(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})

    def _filter_issues(self, st: RepoState, args: Any) -> list[dict[str, Any]]:
        state = args.get("state", "open")
        labels = [x for x in args.get("labels", "").split(",") if x]
        since = args.get("since")
        out = []
        for issue in sorted(st.issues.values(), key=lambda i: -i["number"]):
            if state != "all" and issue["state"] != state:
                continue
            names = {lb["name"] for lb in issue["labels"]}
            if any(lb not in names for lb in labels):
                continue
            if since and issue["updated_at"] < since:
                continue
            out.append(issue)
        return out

    def _search(self, request: Request) -> Response:
        if not self.search_enabled:
            return self._json(422, {"message": "Validation Failed", "errors": [{"resource": "Search", "field": "q", "code": "invalid"}],
                                    "documentation_url": "https://docs.github.com/rest"})
        q = request.args.get("q", "")
        phrases = re.findall(r'"([^"]+)"', q)
        rest = re.sub(r'"[^"]*"', " ", q).split()
        repo = next((t[5:] for t in rest if t.startswith("repo:")), None)
        want_open = "is:open" in rest
        words = [t for t in rest if ":" not in t]
        items = []
        for full_name, st in self.repos.items():
            if repo and repo != full_name:
                continue
            for issue in st.issues.values():
                if self.search_indexed is not None and issue["id"] not in self.search_indexed:
                    continue
                if want_open and issue["state"] != "open":
                    continue
                text = (issue["title"] + "\n" + (issue["body"] or "")).lower()
                if all(p.lower() in text for p in phrases) and all(w.lower() in text for w in words):
                    item = copy.deepcopy(issue)
                    item["score"] = 1.0
                    items.append(item)
        return self._paginate(request, "/search/issues", items,
                              wrap=lambda chunk: {"total_count": len(items), "incomplete_results": False,
                                                  "items": chunk, "search_type": "lexical"})

    def _repo_json(self, full_name: str) -> dict[str, Any]:
        st = self.repos[full_name]
        base = f"{self.base_url}/repos/{full_name}"
        owner = self.user(st.owner)
        r: dict[str, Any] = {
            "id": st.id, "node_id": f"R_fake{st.id}", "name": st.name, "full_name": full_name, "owner": owner,
            "private": False, "html_url": f"https://github.com/{full_name}", "description": None, "fork": False,
            "url": base, "homepage": None, "language": "Python", "forks_count": 0, "stargazers_count": 0,
            "watchers_count": 0, "size": 1, "default_branch": "main", "open_issues_count": len(st.issues),
            "is_template": False, "topics": [], "has_issues": True, "has_projects": False, "has_wiki": False,
            "has_pages": False, "has_downloads": False, "has_discussions": False, "archived": False,
            "disabled": False, "visibility": "public", "pushed_at": _now_iso(), "created_at": _now_iso(),
            "updated_at": _now_iso(), "forks": 0, "open_issues": len(st.issues), "watchers": 0,
            "network_count": 0, "subscribers_count": 0, "mirror_url": None, "license": None,
            "git_url": f"git://github.com/{full_name}.git", "ssh_url": f"git@github.com:{full_name}.git",
            "clone_url": f"https://github.com/{full_name}.git", "svn_url": f"https://github.com/{full_name}",
        }
        for k in ("archive", "assignees", "blobs", "branches", "collaborators", "comments", "commits", "compare",
                  "contents", "contributors", "deployments", "downloads", "events", "forks", "git_commits",
                  "git_refs", "git_tags", "hooks", "issue_comment", "issue_events", "issues", "keys", "labels",
                  "languages", "merges", "milestones", "notifications", "pulls", "releases", "stargazers",
                  "statuses", "subscribers", "subscription", "tags", "teams", "trees"):
            r[f"{k}_url"] = f"{base}/{k}"
        return r


@contextmanager
def serving(token: str, repo: str) -> Iterator[FakeGitHub]:
    """A started :class:`FakeGitHub` accepting ``token``, with repository ``repo``; stopped on exit.

    The body of every area's ``fake_github`` fixture: after the test it raises ``AssertionError``
    listing every request or response that broke the OpenAPI description.
    """
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    fake = FakeGitHub(token=token)
    fake.start()
    fake.add_repo(repo)
    try:
        yield fake
    finally:
        fake.stop()
    assert fake.problems == [], "\n".join(fake.problems)
