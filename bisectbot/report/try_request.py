"""``/bisectbot test <ref | pr=N | patch URL>`` on an issue the bot filed (issue 42): read, resolve, answer.

``try.yml`` runs three steps apart, and this module holds the two that talk to GitHub and never run
a candidate:

* :func:`resolve_request` (the ``resolve`` job: a hosted runner, the read token) reads the comment
  again through the API -- it must be on an issue the bot filed, by an OWNER, MEMBER or COLLABORATOR,
  a ``/bisectbot test`` command -- and turns it into a diff pinned by SHA: a **ref** is resolved to its
  commit SHA now (``GET /repos/{repo}/commits/{ref}``, ``application/vnd.github.sha``); a **pull
  request** to its head SHA now (``pull/N/head``), or to the ``sha=`` the maintainer named (the
  head they read: tested as named, whatever was pushed since); the diff is
  ``GET /repos/{repo}/compare/{default branch}...{sha}`` (``application/vnd.github.diff``: the
  commits of the head since it left the default branch), so a later push changes nothing. A **patch
  URL** is fetched with no credential (https, or http to a loopback host for tests), bounded in size
  and time. It writes ``change.diff`` and ``request.json`` (what was asked, by whom, the SHA, the
  diff's SHA-256) for the try job, which runs the candidate in its sandbox with no secret.
* :func:`reply_try` (the ``answer`` job) posts the try job's answer as one reply to the comment
  (``<!-- bisectbot:ack=<id> -->``: never twice), or says the try failed, linking the job log.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..errors import BadInput, GitHubError
from ..recipe import GitHubTarget, Recipe
from ..sanitize import link as api_link
from ..sanitize import sanitize
from .github import TRUSTED_ASSOCIATIONS, FilingOutcome, GitHubClient, _already_commented, _by, parse_command
from .reply import _code, _dry, _from, ack_marker, comment_link, failed_marker, render_failure
from .trial import render_try

__all__ = ["TestRequest", "component_repo", "reply_try", "resolve_request"]

#: The largest diff fetched (bytes): :data:`bisectbot.change.MAX_DIFF_BYTES`' reasoning.
MAX_PATCH_BYTES = 8 * 1024 * 1024
#: Seconds a patch download or a diff request may take as a whole (GitHub answers a compare within
#: its own 10 s limit; a patch host gets the same plus transfer time for the cap above).
FETCH_S = 60.0

_GITHUB_URL = re.compile(r"^https://github\.com/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?:\.git)?/?$")


@dataclass
class TestRequest:
    """A maintainer's ``/bisectbot test`` read from GitHub: ``issue``, ``comment`` (id), ``author``,
    ``line`` (the command line as written), ``args`` (:func:`bisectbot.report.github.test_target`),
    ``link`` (the comment's address), ``handle`` (the issue as the client read it)."""

    issue: int
    comment: int
    author: str
    line: str
    args: dict[str, str]
    link: str = ""
    handle: Any = None  # the issue as the client read it (the answer is posted on it)


def component_repo(recipe: Recipe, component: str | None = None) -> str | None:
    """``OWNER/NAME`` of the GitHub repository a ref or pull request of a try lives in: the recipe's
    ``bisect.components[component]`` (default vllm), or its git source, when it is a github.com URL."""
    srcs = []
    if component or recipe.source.kind != "git":
        src = recipe.bisect.components.get(component or "vllm")
        if src is not None:
            srcs.append(src.repo)
    else:
        srcs.append(getattr(recipe.source, "repo", ""))
    for s in srcs:
        m = _GITHUB_URL.match(str(s or ""))
        if m:
            return m.group(1)
    return None


def read_request(client: GitHubClient, issue_number: int, comment_id: int) -> TestRequest:
    """The ``/bisectbot test`` comment ``comment_id`` on issue ``issue_number``, checked: the issue was
    filed by the bot, the comment is a maintainer's (:data:`TRUSTED_ASSOCIATIONS`) well-formed test
    command. Raises :class:`GitHubError` (nothing is resolved or run) otherwise."""
    issue = client.get_issue(issue_number)
    if issue is None:
        raise GitHubError(f"issue #{issue_number} not found in {client.target.repo}")
    if not _by(issue, client.login):
        raise GitHubError(f"issue #{issue_number} was not filed by the bot ({client.login}): /bisectbot test is "
                          "answered on the bot's issues only")
    asked = next((c for c in client.comments(issue) if c.id == comment_id), None)
    if asked is None:
        raise GitHubError(f"comment {comment_id} not found on #{issue_number}")
    if _by(asked, client.login):
        raise GitHubError(f"comment {comment_id} on #{issue_number} is the bot's own: not a request")
    assoc = (asked.author_association or "NONE").upper()
    login = asked.user.login if asked.user is not None else "?"
    if assoc not in TRUSTED_ASSOCIATIONS:
        raise GitHubError(f"comment {comment_id} on #{issue_number} is by {login} ({assoc}), not a maintainer: "
                          "not running anything")
    parsed = parse_command(asked.body or "")
    if parsed is None or parsed[0] != "test" or parsed[3]:
        why = parsed[3] if parsed is not None and parsed[0] == "test" else "not a /bisectbot test request"
        raise GitHubError(f"comment {comment_id} on #{issue_number}: {why}")
    args = parsed[2]
    line = "/bisectbot test " + (f"pr={args['pr']}" + (f" sha={args['sha']}" if args.get("sha") else "")
                                 if "pr" in args else args.get("url") or args.get("ref", ""))
    return TestRequest(issue_number, comment_id, login, line, dict(args),
                       asked.html_url or comment_link(client.target, issue_number, comment_id), issue)


def _get(url: str, accept: str, token: str | None) -> bytes:
    """One bounded GET (:func:`bisectbot.bounded.request`): ``token`` is sent only to the GitHub API."""
    import requests

    from .. import bounded

    headers = {"Accept": accept, "User-Agent": "bisectbot"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    sess = bounded.session()
    sess.trust_env = False  # no ~/.netrc credential, no proxy settings of the host: the request is as written
    try:
        r = bounded.request(sess, "GET", url, total_s=FETCH_S, max_bytes=MAX_PATCH_BYTES, headers=headers,
                            allow_redirects=False)
    except (requests.RequestException, bounded.BodyTooLarge) as e:
        raise GitHubError(f"GET {url.split('?')[0]}: {type(e).__name__}: {str(e)[:200]}") from None
    if r.status_code != 200:
        raise GitHubError(f"GET {url.split('?')[0]}: HTTP {r.status_code}")
    return r.content


def _public_host(url: str) -> None:
    """Raise :class:`GitHubError` unless an https URL's host resolves only to public addresses (no
    loopback, private, link-local or reserved one: a name can point anywhere). The tests' http URLs name
    a loopback host, the only http the parser lets through."""
    import ipaddress
    import socket
    from urllib.parse import urlsplit

    if not url.startswith("https://"):
        return
    parts = urlsplit(url)
    try:
        infos = socket.getaddrinfo(parts.hostname or "", parts.port or 443, proto=socket.IPPROTO_TCP)
    except OSError as e:
        raise GitHubError(f"{parts.hostname}: cannot resolve the patch host: {e}") from None
    for info in infos:
        addr = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if not addr.is_global:
            raise GitHubError(f"{parts.hostname} resolves to {addr}, not a public address: not fetched")


def resolve_request(target: GitHubTarget, token: str, issue_number: int, comment_id: int, out_dir: Path, *,
                    repo: str | None, client: GitHubClient | None = None) -> dict[str, Any]:
    """Read the request (:func:`read_request`), resolve it to a diff pinned by SHA and write
    ``out_dir/change.diff`` and ``out_dir/request.json``; returns the request document. ``repo``:
    ``OWNER/NAME`` of the component (:func:`component_repo`; needed for a ref or a pull request).
    Raises :class:`GitHubError` (GitHub or the patch host failed, the request is not honoured) or
    :class:`BadInput` (a ref or pull request without a repository)."""
    client = client or GitHubClient(target, token)
    req = read_request(client, issue_number, comment_id)
    api = str(target.api_url).rstrip("/")
    doc: dict[str, Any] = {"issue": req.issue, "comment": req.comment, "author": req.author, "request": req.line,
                           "link": req.link}
    if "url" in req.args:
        _public_host(req.args["url"])
        diff = _get(req.args["url"], "text/x-diff, text/plain", None)  # a stranger's host: no credential
        doc.update({"kind": "url", "url": req.args["url"], "source": f"patch {req.args['url']}"})
    else:
        if not repo:
            raise BadInput("a ref or pull request needs the component's GitHub repository: a github.com URL in "
                           "bisect.components (or the git source) of the recipe")
        base = f"{api}/repos/{repo}"
        # one path segment, as the contract's {ref} is (a pull request's head as GitHub's docs write a branch,
        # heads/NAME: pull/N/head; slashes encoded)
        ref = f"pull/{req.args['pr']}/head" if "pr" in req.args else req.args["ref"]
        head = _get(f"{base}/commits/{quote(ref, safe='')}", "application/vnd.github.sha", token).decode().strip()
        if not re.fullmatch(r"[0-9a-f]{40}", head):
            raise GitHubError(f"{repo}: {ref} did not resolve to a commit SHA")
        if req.args.get("sha"):  # the head the maintainer read: test that one, never a later push
            head = req.args["sha"]
        default = (json.loads(_get(base, "application/vnd.github+json", token)) or {}).get("default_branch") or "main"
        diff = _get(f"{base}/compare/{quote(default, safe='')}...{head}", "application/vnd.github.diff", token)
        what = f"pull request #{req.args['pr']}" if "pr" in req.args else f"ref {req.args['ref']}"
        doc.update({"kind": "pr" if "pr" in req.args else "ref", "repo": repo, "sha": head, "base": default,
                    "source": f"{what} of {repo} at {head[:12]} (against {default})"})
    if not diff.strip():
        raise GitHubError(f"{doc['source']}: an empty diff: nothing to test")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "change.diff").write_bytes(diff)
    doc["sha256"] = hashlib.sha256(diff).hexdigest()
    (out / "request.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return doc


def render_try_reply(doc: dict[str, Any], *, comment_id: int, request: str, author: str | None, link: str,
                     probe_link: str = "") -> str:
    """The reply: the ack marker, the request quoted, who asked, the answer and the try job's report."""
    answer = sanitize(str(doc.get("answer") or "untested"), 40)
    return (f"{ack_marker(comment_id)}\n> `{_code(request)}`\n\n"
            f"Answer to [this request]({api_link(link)}){_from(author)}: **{answer}**\n\n"
            + render_try(doc, probe_link=probe_link))


def reply_try(target: GitHubTarget, token: str | None, issue_number: int, comment_id: int, out_dir: Path, *,
              doc: dict[str, Any] | None = None, run_url: str | None = None, dry_run: bool = False,
              probe_link: str = "", client: GitHubClient | None = None) -> FilingOutcome:
    """Answer the ``/bisectbot test`` comment with the try job's document ``doc`` (``try.json``), or with
    ``run_url`` say that it failed. Posted once per comment (its marker); the request is read and checked
    again as :func:`read_request` does. Without ``token`` or with ``dry_run``: written to ``out_dir``."""
    if (doc is None) == (run_url is None):
        raise BadInput("give the try job's try.json or --failed URL (one of them)")
    link = comment_link(target, issue_number, comment_id)

    def body(request: str, author: str | None, at: str) -> str:
        if doc is not None:
            return render_try_reply(doc, comment_id=comment_id, request=request, author=author, link=at,
                                    probe_link=probe_link)
        return render_failure(comment_id=comment_id, request=request, author=author, link=at, run_url=str(run_url),
                              what="try job")

    name = f"{'try' if doc is not None else 'try-failed'}-{int(comment_id)}.md"
    if not token or dry_run:
        return _dry(out_dir, name, body("/bisectbot test", None, link), "", issue_number, dry_run)
    client = client or GitHubClient(target, token)
    req = read_request(client, issue_number, comment_id)
    issue = req.handle
    marks = [ack_marker(comment_id)] + ([failed_marker(comment_id)] if doc is None else [])
    for mark in marks:
        if _already_commented(client, issue, mark):
            return FilingOutcome("unchanged", "", issue_number, issue.html_url,
                                 message=f"comment {comment_id} on #{issue_number} is answered already")
    c = client.comment(issue, body(req.line, req.author, req.link))
    return FilingOutcome("commented", "", issue_number, getattr(c, "html_url", issue.html_url),
                         message=f"answered comment {comment_id} on #{issue_number}")
