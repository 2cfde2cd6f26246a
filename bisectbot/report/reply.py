"""Answer a maintainer's ``/bisectbot bisect good=… bad=…`` comment with the bisection's result.

``bisect.yml`` runs for such a comment (OWNER/MEMBER/COLLABORATOR only); when the bisection is
done, :func:`reply_with_result` posts the result as one reply on the same issue: the request
quoted, a link to it, the one-line verdict and the report in a collapsed block. The reply
carries ``<!-- bisectbot:ack=<comment id> -->``, the marker :func:`~.github.read_commands`
treats as "acknowledged", so a re-run of the workflow never answers twice.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import GitHubError
from ..models import RunResult
from ..recipe import GitHubTarget
from ..sanitize import GITHUB_BODY_LIMIT, github_length, sanitize
from ..sanitize import link as api_link
from .blame import DEFAULT_BLAME_CONFIDENCE, blame_decision
from .fingerprint import fingerprint
from .github import TRUSTED_ASSOCIATIONS, FilingOutcome, GitHubClient, _already_commented, parse_command
from .history import NightlyResult
from .markdown import render_markdown
from .views import heading


def ack_marker(comment_id: int) -> str:
    """The hidden marker of the bot's answer to comment ``comment_id``."""
    return f"<!-- bisectbot:ack={int(comment_id)} -->"


def comment_link(target: GitHubTarget, issue_number: int, comment_id: int) -> str:
    """The web address of comment ``comment_id`` on issue ``issue_number`` (what GitHub's
    ``html_url`` of a comment is: ``https://github.com/OWNER/REPO/issues/N#issuecomment-ID``),
    built from ``target.api_url`` (``https://api.github.com`` -> ``https://github.com``; GitHub
    Enterprise ``https://HOST/api/v3`` -> ``https://HOST``) for a reply written without asking
    GitHub (a dry run): never a bare ``#N``, which is a link to nothing (issue 25, input 8)."""
    api = str(target.api_url or "https://api.github.com").rstrip("/")
    web = "https://github.com" if api == "https://api.github.com" else api.removesuffix("/api/v3")
    return f"{web}/{target.repo}/issues/{int(issue_number)}#issuecomment-{int(comment_id)}"


def _code(text: str) -> str:
    """``text`` safe inside a Markdown code span: one line, printable, no backtick, bounded."""
    line = (text.splitlines() or [""])[0]
    return "".join(ch for ch in line if ch.isprintable() and ch != "`")[:300]


def _from(author: str | None) -> str:
    """`` from LOGIN`` (sanitised), or nothing when the author was not looked up (a dry run: the
    request's comment is not fetched, so who asked is not known -- "from (not looked up: dry run)"
    read as a login, issue 41 item 11)."""
    return f" from {sanitize(author, 60)}" if author else ""


def render_reply(result: RunResult, nightly: NightlyResult | None, *, comment_id: int, request: str,
                 author: str | None, link: str, blame_confidence: float = DEFAULT_BLAME_CONFIDENCE,
                 limit: int = GITHUB_BODY_LIMIT) -> str:
    """Body of the answer (at most ``limit`` characters as GitHub counts them): the marker, the
    request (first line, sanitised) quoted, who asked (``author``; None: not looked up), the
    verdict line and the report."""
    head = (f"{ack_marker(comment_id)}\n> `{_code(request)}`\n\n"
            f"Answer to [this request]({api_link(link)}){_from(author)}: "
            f"**{heading(result, blame_decision(result, blame_confidence))}**\n")
    room = limit - github_length(head) - 200
    if room < 2000:
        return head
    report = render_markdown(result, nightly, limit=room, for_github=True)
    return head + f"\n<details><summary>Report</summary>\n\n{report}\n\n</details>\n"


def failed_marker(comment_id: int) -> str:
    """The hidden marker of the bot's "the bisection failed" reply to comment ``comment_id`` (not an
    acknowledgement: a later successful run of the request still answers it)."""
    return f"<!-- bisectbot:failed={int(comment_id)} -->"


def render_failure(*, comment_id: int, request: str, author: str | None, link: str, run_url: str,
                   what: str = "bisection") -> str:
    """Body of the reply saying the requested ``what`` (a bisection, a try job) failed, with the job log's
    address (``author`` None: not looked up)."""
    return (f"{failed_marker(comment_id)}\n> `{_code(request)}`\n\n"
            f"The {what} asked for in [this request]({api_link(link)}){_from(author)} "
            f"failed before it had a result; the job log says why: {api_link(run_url)}\n")


def _request(client: GitHubClient, target: GitHubTarget, issue_number: int, comment_id: int):
    """``(issue, asked comment, login, request line)`` after the checks of :func:`reply_with_result`."""
    issue = client.get_issue(issue_number)
    if issue is None:
        raise GitHubError(f"issue #{issue_number} not found in {target.repo}")
    asked = next((c for c in client.comments(issue) if c.id == comment_id), None)
    if asked is None:
        raise GitHubError(f"comment {comment_id} not found on #{issue_number}")
    parsed = parse_command(asked.body or "")
    assoc = (asked.author_association or "NONE").upper()
    login = asked.user.login if asked.user is not None else "?"
    if parsed is None or parsed[0] != "bisect" or parsed[3]:
        raise GitHubError(f"comment {comment_id} on #{issue_number} is not a /bisectbot bisect request")
    if assoc not in TRUSTED_ASSOCIATIONS:
        raise GitHubError(f"comment {comment_id} on #{issue_number} is by {login} ({assoc}), not a maintainer: "
                          "not answering")
    args = parsed[2]  # refs already matched against the strict ref pattern
    request = "/bisectbot bisect" + "".join(f" {k}={args[k]}" for k in ("good", "bad") if k in args)
    return issue, asked, login, request


def _dry(out_dir: Path, name: str, body: str, fp: str, issue_number: int, dry_run: bool) -> FilingOutcome:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = (out / name).resolve()
    path.write_text(body, encoding="utf-8")
    why = "dry run" if dry_run else "no GitHub token"
    return FilingOutcome("dry-run", fp, issue_number, paths=[path], message=f"{why}: would-be reply written to {path}")


def reply_with_result(
    result: RunResult,
    target: GitHubTarget,
    token: str | None,
    issue_number: int,
    comment_id: int,
    out_dir: Path,
    *,
    nightly: NightlyResult | None = None,
    dry_run: bool = False,
    blame_confidence: float = DEFAULT_BLAME_CONFIDENCE,
    client: GitHubClient | None = None,
) -> FilingOutcome:
    """Post ``result`` on issue ``issue_number`` as the answer to comment ``comment_id``.

    The comment must exist on that issue, be a ``/bisectbot bisect`` command and come from an
    OWNER, MEMBER or COLLABORATOR (:data:`~.github.TRUSTED_ASSOCIATIONS`), else
    :class:`GitHubError` is raised and nothing is posted. When an answer (its ack marker) is
    there already in one of the bot's own comments, nothing is posted (action ``unchanged``).
    Without ``token`` or with ``dry_run`` the would-be reply is written to
    ``out_dir/reply-<comment id>.md`` (action ``dry-run``). Raises :class:`GitHubError`
    (token-free message) when GitHub fails.
    """
    fp = fingerprint(result)
    if not token or dry_run:
        body = render_reply(result, nightly, comment_id=comment_id, request="/bisectbot bisect",
                            author=None, link=comment_link(target, issue_number, comment_id),
                            blame_confidence=blame_confidence)
        return _dry(out_dir, f"reply-{int(comment_id)}.md", body, fp, issue_number, dry_run)
    client = client or GitHubClient(target, token)
    issue, asked, login, request = _request(client, target, issue_number, comment_id)
    if _already_commented(client, issue, ack_marker(comment_id)):  # only the bot's own comments count
        return FilingOutcome("unchanged", fp, issue_number, issue.html_url,
                             message=f"comment {comment_id} on #{issue_number} is answered already")
    body = render_reply(result, nightly, comment_id=comment_id, request=request, author=login,
                        link=asked.html_url or comment_link(target, issue_number, comment_id), blame_confidence=blame_confidence)
    c = client.comment(issue, body)
    return FilingOutcome("commented", fp, issue_number, getattr(c, "html_url", issue.html_url),
                         message=f"answered comment {comment_id} on #{issue_number}")


def reply_failure(
    target: GitHubTarget,
    token: str | None,
    issue_number: int,
    comment_id: int,
    run_url: str,
    out_dir: Path,
    *,
    dry_run: bool = False,
    client: GitHubClient | None = None,
) -> FilingOutcome:
    """Tell the maintainer who asked in comment ``comment_id`` that the bisection failed without a
    result, linking the job log ``run_url``. Same checks as :func:`reply_with_result`; posted once
    per comment (marker :func:`failed_marker`), and never when the request is answered already.
    Raises :class:`GitHubError`."""
    if not token or dry_run:
        body = render_failure(comment_id=comment_id, request="/bisectbot bisect", author=None,
                              link=comment_link(target, issue_number, comment_id), run_url=run_url)
        return _dry(out_dir, f"failed-{int(comment_id)}.md", body, "", issue_number, dry_run)
    client = client or GitHubClient(target, token)
    issue, asked, login, request = _request(client, target, issue_number, comment_id)
    for mark, why in ((ack_marker(comment_id), "is answered already"),
                      (failed_marker(comment_id), "was told of a failure already")):
        if _already_commented(client, issue, mark):
            return FilingOutcome("unchanged", "", issue_number, issue.html_url,
                                 message=f"comment {comment_id} on #{issue_number} {why}")
    c = client.comment(issue, render_failure(comment_id=comment_id, request=request, author=login,
                                             link=asked.html_url or comment_link(target, issue_number, comment_id), run_url=run_url))
    return FilingOutcome("commented", "", issue_number, getattr(c, "html_url", issue.html_url),
                         message=f"told comment {comment_id} on #{issue_number} that the bisection failed")
