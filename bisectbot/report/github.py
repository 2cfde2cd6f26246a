"""GitHub issues and comments without duplicates (PyGithub).

Identity and crash safety
    Each issue carries ``<!-- bisectbot:fingerprint=<fp> -->`` (:mod:`.fingerprint`). Before
    creating, :func:`file_or_update` looks for an open issue with that marker: the ledger's
    issue number, then the search API, then a listing of open issues with the bot's label, and
    -- when the ledger shows an unfinished create (``github_intent`` without a number, i.e. the
    process died between "create" and "record") -- every open issue updated since that intent.
    The ledger records the intent *before* the create call and the number *after* it, so a crash
    between the two never produces a second issue on retry. Comments carry a per-night marker
    (:func:`~.comment.seen_marker`), so a retried night never comments twice either.

Rate limits
    Responses' ``X-RateLimit-Remaining``/``X-RateLimit-Reset`` are honoured before each call
    (wait until the reset when the budget is spent); ``Retry-After`` and secondary-limit 403s
    (and 429) are retried with backoff by :class:`BotRetry`. Every wait is capped by
    ``max_wait_s`` (default 120 s) and the number of retries by ``retries`` (default 4): beyond
    that a :class:`~bisectbot.errors.GitHubError` says when to try again. POST/PATCH are never
    retried on 5xx, nor after a timeout or reset once sent (the server may have acted); the
    marker search makes the next run safe.

Trust (issue 13)
    Fingerprint markers in issue bodies, "seen" markers and acknowledgement markers in comments are
    honoured only when the body or comment was written by the bot's own account
    (:func:`bot_login`: ``report.github.bot_login``, else ``$BISECTBOT_BOT_LOGIN``; ``GET /user``
    does not work for ``GITHUB_TOKEN`` or app tokens, so it is configuration). An outsider's issue
    carrying a copied marker never captures filing, and an outsider's comment never silences an
    acknowledgement. Maintainer commands are read only from plain lines outside code blocks,
    inline code, quotes and HTML (:func:`command_lines`).

Secrets
    The token is registered with :func:`~.sanitize.redact`; every :class:`GitHubError` message is
    built from status and GitHub's ``message`` only, passed through ``redact``, and raised
    ``from None`` so no chained exception text carries request details.

Without a token, or with ``dry_run``, nothing is sent: the would-be issue or comment Markdown is
written into ``out_dir`` and :attr:`FilingOutcome.paths` says where.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

import requests
from github import Auth, Github, GithubException, GithubRetry
from github.GithubException import RateLimitExceededExceedsMaxWait
from urllib3.exceptions import MaxRetryError

from .. import bounded
from ..errors import GitHubError, UpstreamUnreachable
from ..ledger import Ledger
from ..models import ProbeResult, RunResult, Status
from ..net import is_unreachable, reason
from ..recipe import GitHubTarget, Recipe
from ..sanitize import GITHUB_BODY_LIMIT, redact, register_secret, sanitize
from ..sanitize import link as api_link
from . import github_transport
from .blame import DEFAULT_BLAME_CONFIDENCE
from .comment import render_comment, seen_marker
from .fingerprint import find_fingerprints, fingerprint
from .history import NightlyResult, problem_present
from .issue import render_issue
from .views import candidate_link

log = logging.getLogger(__name__)

TOKEN_ENV = ("BISECTBOT_GITHUB_TOKEN", "GITHUB_TOKEN", "GH_TOKEN")
"""Environment variables read for the GitHub token, in order (never a command-line option:
argv is visible to every user of the host)."""


BOT_LOGIN_ENV = "BISECTBOT_BOT_LOGIN"
"""Environment variable naming the bot's GitHub login when the recipe's ``report.github`` does not."""


def bot_login(target: GitHubTarget) -> str:
    """The login the bot posts as: ``target.bot_login``, else ``$BISECTBOT_BOT_LOGIN``.

    Raises :class:`GitHubError` when neither is set: without it the bot cannot tell its own markers
    from planted ones, and it refuses to file rather than be steered.
    """
    login = target.bot_login or os.environ.get(BOT_LOGIN_ENV, "").strip()
    if not login:
        raise GitHubError("the bot's GitHub login is unknown: set report.github.bot_login in the recipe or "
                          f"${BOT_LOGIN_ENV} (GitHub Actions' GITHUB_TOKEN posts as github-actions[bot]); "
                          "markers are trusted only from that account")
    return login


def _by(obj: Any, login: str) -> bool:
    """True when the issue or comment ``obj`` was written by ``login`` (case-insensitive)."""
    user = getattr(obj, "user", None)
    return user is not None and (getattr(user, "login", "") or "").lower() == login.lower()


def token_from_env() -> str | None:
    """The GitHub token from :data:`TOKEN_ENV` (first one set), or None for a dry run."""
    from ..secrets import secret_env

    for name in TOKEN_ENV:
        if secret_env(name):
            return secret_env(name)
    return None

T = TypeVar("T")

LABEL_COLOR = "b60205"
"""Colour of labels the bot creates (hex, no ``#``)."""

TRUSTED_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
"""``author_association`` values whose ``/bisectbot`` commands are honoured (GitHub REST docs)."""

_REF_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+~^-]{0,199}$")
_CMD_RE = re.compile(r"^\s*/bisectbot\s+(\S+)(.*)$", re.MULTILINE)
_ACK_RE = re.compile(r"<!-- bisectbot:ack=(\d+) -->")


# --------------------------------------------------------------------------- retry / client


class _WriteNotRepeated(Exception):
    """A POST/PATCH whose reply never came: not sent again (:meth:`BotRetry.increment`)."""


class BotRetry(GithubRetry):
    """PyGithub's :class:`GithubRetry` with bounded waits and no POST/PATCH retry on 5xx.

    ``Retry-After`` longer than ``max_rate_limit_wait`` raises instead of sleeping (urllib3 would
    otherwise sleep for any value the server sends). 429 is retried like a secondary limit.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("status_forcelist", [429, *range(500, 600)])
        kwargs.setdefault("allowed_methods", frozenset({"GET", "POST", "PATCH", "PUT", "DELETE"}))
        kwargs.setdefault("raise_on_status", False)
        super().__init__(**kwargs)

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        if method.upper() in ("POST", "PATCH") and status_code >= 500:
            return False  # the server may have acted: let the marker search decide on the next run
        return super().is_retry(method, status_code, has_retry_after)

    def increment(self, method: str | None = None, url: str | None = None, response: Any = None,
                  error: Exception | None = None, _pool: Any = None, _stacktrace: Any = None) -> Any:
        """A name that does not resolve or a refused connection fails at once (issue 14: exit code 5,
        no silent retries); any other retry is announced on stderr as ``retrying N/M in S s``."""
        if error is not None and is_unreachable(error):
            raise MaxRetryError(_pool, url or "", error)
        if error is not None and (method or "").upper() in ("POST", "PATCH") and not self._is_connection_error(error):
            # the write was sent and its reply never came (a timeout, a reset, a dribble cut by the
            # transport): the server may have acted, so it is never sent again (one hung create made
            # five identical issues); the next run's marker search finds what it made
            raise MaxRetryError(_pool, url or "", _WriteNotRepeated(f"{type(error).__name__}: no reply to the write"))
        new = super().increment(method, url, response, error, _pool, _stacktrace)
        left = new.total if isinstance(new.total, int) else 0  # urllib3 counts down what is left
        why = f"HTTP {response.status}" if response is not None else type(error).__name__ if error else "retry"
        attempt = len(new.history) + 1
        log.warning("GitHub %s %s: %s; retrying %d/%d in %.0f s", method or "", (url or "").split("?")[0], why,
                    attempt, len(new.history) + left + 1, new.get_backoff_time())
        return new

    def get_retry_after(self, response: Any) -> float | None:
        value = super().get_retry_after(response)
        if value is not None and self.max_rate_limit_wait is not None and value > self.max_rate_limit_wait:
            raise RateLimitExceededExceedsMaxWait(response.status, {"message": "Retry-After too long"},
                                                  dict(response.headers), wait=value)
        return value


@dataclass
class _Settings:
    retries: int = 4
    max_wait_s: float = 120.0
    backoff_factor: float = 1.0
    timeout_s: float = 30.0
    per_page: int = 100
    seconds_between_requests: float | None = 0.25
    seconds_between_writes: float | None = 1.0


class GitHubClient:
    """Thin wrapper of a PyGithub :class:`Github` for one repository (``target.repo``).

    ``retries`` bounds retries per request; ``max_wait_s`` bounds any single rate-limit wait
    (seconds); ``seconds_between_requests``/``seconds_between_writes`` are PyGithub's throttles
    (GitHub's guidance: writes at least 1 s apart); ``timeout_s`` bounds each attempt's whole
    exchange, not one read (:mod:`.github_transport`: a dribbling or oversized reply is an error).
    All failures raise :class:`GitHubError`.
    """

    def __init__(self, target: GitHubTarget, token: str, *, retries: int = 4, max_wait_s: float = 120.0,
                 backoff_factor: float = 1.0, timeout_s: float = 30.0, per_page: int = 100,
                 seconds_between_requests: float | None = 0.25, seconds_between_writes: float | None = 1.0,
                 sleep: Callable[[float], None] = time.sleep):
        if not token:
            raise GitHubError("no GitHub token given")
        register_secret(token)
        self.target = target
        self.login = bot_login(target)
        self.max_wait_s = max_wait_s
        self._sleep = sleep
        github_transport.install()  # every exchange bounded in time and size
        retry = BotRetry(total=retries, backoff_factor=backoff_factor, max_rate_limit_wait=max_wait_s,
                         secondary_rate_wait=min(60.0, max_wait_s))
        self.gh = Github(auth=Auth.Token(token), base_url=target.api_url.rstrip("/"), retry=retry,
                         timeout=int(timeout_s), per_page=per_page,
                         seconds_between_requests=seconds_between_requests,
                         seconds_between_writes=seconds_between_writes)
        self._repo: Any = None

    # ------------------------------------------------------------------ plumbing
    def _throttle(self) -> None:
        """Wait for the rate-limit reset when the last response said no requests remain."""
        # PyGithub objects may carry their own copy of the requester: look at all of them.
        reqs = [self.gh.requester] + ([self._repo.requester] if self._repo is not None else [])
        req = min(reqs, key=lambda r: (r.rate_limiting[1] <= 0, r.rate_limiting[0]))
        remaining, limit = req.rate_limiting
        if limit > 0 and remaining == 0:
            wait = req.rate_limiting_resettime - time.time() + 1
            if wait > self.max_wait_s:
                reset = datetime.fromtimestamp(req.rate_limiting_resettime, timezone.utc).isoformat(timespec="seconds")
                raise GitHubError(f"GitHub rate limit spent until {reset} ({wait:.0f} s > {self.max_wait_s:.0f} s "
                                  "allowed): try again after the reset")
            if wait > 0:
                log.warning("GitHub rate limit spent: waiting %.0f s for the reset", wait)
                self._sleep(wait)

    def call(self, what: str, fn: Callable[[], T]) -> T:
        """Run one PyGithub operation, turning every failure into a token-free :class:`GitHubError`."""
        self._throttle()
        github_transport.start_operation()
        try:
            return fn()
        except RateLimitExceededExceedsMaxWait as e:
            msg = f"GitHub {what}: rate limited; would have to wait {e.wait:.0f} s (> {self.max_wait_s:.0f} s)"
        except GithubException as e:
            message = e.data.get("message") if isinstance(e.data, dict) else None
            msg = f"GitHub {what} failed: HTTP {e.status}" + (f": {message}" if message else "")
        except MaxRetryError as e:
            msg = f"GitHub {what}: gave up after retries ({type(e.reason).__name__ if e.reason else 'error'})"
            if isinstance(e.reason, _WriteNotRepeated):
                msg = (f"GitHub {what}: {e.reason}; not sent again (GitHub may have acted on it: the next run "
                       "finds what it made by its marker)")
            if is_unreachable(e):
                raise UpstreamUnreachable(redact(f"GitHub {what}: {self.target.api_url} unreachable ({reason(e)})")
                                          ) from None
        except RuntimeError as e:  # PyGithub's own refusals (a redirect to another host)
            msg = f"GitHub {what}: {str(e)[:300]}"
        except (bounded.TotalTimeout, bounded.BodyTooLarge, github_transport.Refused) as e:
            msg = f"GitHub {what}: {self.target.api_url} sent no usable reply: {e}"
        except requests.RequestException as e:
            # not unreachable (a refused connection or an unknown name is, below): the connection was made and
            # the request may have been sent -- a reset, a cut or a protocol error before the reply was whole.
            # Retries are spent (a write never retries once sent), so this operation is not sent again.
            msg = (f"GitHub {what}: no complete reply from {self.target.api_url} ({type(e).__name__}); not sent "
                   "again (a write may have been acted on: the next run finds what it made by its marker)")
            if is_unreachable(e):
                raise UpstreamUnreachable(redact(f"GitHub {what}: {self.target.api_url} unreachable ({reason(e)})")
                                          ) from None
        raise GitHubError(redact(msg)) from None

    @property
    def repo(self) -> Any:
        if self._repo is None:
            self._repo = self.call(f"get repository {self.target.repo}", lambda: self.gh.get_repo(self.target.repo))
        return self._repo

    # ------------------------------------------------------------------ lookups
    def get_issue(self, number: int) -> Any | None:
        """The issue, or ``None`` on 404 (deleted, transferred)."""
        try:
            return self.call(f"get issue #{number}", lambda: self.repo.get_issue(number))
        except GitHubError as e:
            if "HTTP 404" in str(e) or "HTTP 410" in str(e):
                return None
            raise

    def search_marker(self, fp: str) -> Any | None:
        """Open issue whose body carries fingerprint ``fp``, via the search API (None if none).

        A failing search (422, disabled on a GitHub Enterprise host) logs a warning and returns None.
        """
        q = f'"bisectbot:fingerprint={fp}" repo:{self.target.repo} is:issue is:open in:body'
        try:
            return self.call("search issues", lambda: next(
                (i for i in self.gh.search_issues(q) if self.carries(i, fp)), None))
        except GitHubError as e:
            log.warning("search failed, falling back to listing issues: %s", e)
            return None

    def list_marker(self, fp: str, *, labels: list[str] | None = None, since: datetime | None = None) -> Any | None:
        """Open issue carrying ``fp`` among open issues with ``labels`` / updated ``since`` (paginated)."""
        kwargs: dict[str, Any] = {"state": "open"}
        if labels:
            kwargs["labels"] = labels
        if since is not None:
            kwargs["since"] = since

        def scan() -> Any | None:
            for issue in self.repo.get_issues(**kwargs):
                if issue.pull_request is None and self.carries(issue, fp):
                    return issue
            return None

        return self.call("list issues", scan)

    def carries(self, issue: Any, fp: str) -> bool:
        """True when ``issue`` was opened by the bot and its body carries fingerprint ``fp``."""
        if fp not in find_fingerprints(issue.body):
            return False
        if not _by(issue, self.login):
            log.warning("ignoring fingerprint marker in #%s: not written by %s", issue.number, self.login)
            return False
        return True

    def ensure_labels(self, names: Iterable[str]) -> None:
        """Create each label that the repository does not have yet (colour :data:`LABEL_COLOR`)."""
        wanted = [n for n in dict.fromkeys(names) if n]
        if not wanted:
            return
        have = self.call("list labels", lambda: {lb.name.lower() for lb in self.repo.get_labels()})
        for name in wanted:
            if name.lower() not in have:
                try:
                    self.call(f"create label {name!r}", lambda name=name: self.repo.create_label(
                        name, LABEL_COLOR, "filed by bisectbot"))
                except GitHubError as e:
                    if "HTTP 422" not in str(e):  # 422 already_exists: another run created it meanwhile
                        raise

    def comments(self, issue: Any) -> list[Any]:
        return self.call(f"list comments of #{issue.number}", lambda: list(issue.get_comments()))

    def comment(self, issue: Any, body: str) -> Any:
        return self.call(f"comment on #{issue.number}", lambda: issue.create_comment(body))


# --------------------------------------------------------------------------- outcomes


@dataclass
class FilingOutcome:
    """What :func:`file_or_update` (or :func:`report_not_reproduced`) did.

    ``action``: ``created`` (new issue), ``commented`` (tonight's result on the existing issue),
    ``unchanged`` (this night was already commented, e.g. a retry), ``already-fixed`` (newest
    nightly does not reproduce: nothing filed), ``not-reproduced`` (comment posted), ``closed``
    (comment posted and issue closed), ``no-issue`` (nothing tracked to comment on),
    ``nothing-to-file`` (the result has status ``no-regression``), ``dry-run``
    (nothing sent; ``paths`` holds the would-be Markdown). ``message`` is one line for the user.
    """

    action: str
    fingerprint: str
    number: int | None = None
    url: str | None = None
    paths: list[Path] = field(default_factory=list)
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "fingerprint": self.fingerprint, "number": self.number, "url": self.url,
                "paths": [str(p) for p in self.paths], "message": self.message}


def _night_key(result: RunResult | None, newest: ProbeResult | None) -> str:
    if newest is not None:
        return newest.candidate.ref
    if result is not None and result.session_id:
        return result.session_id
    return datetime.now(timezone.utc).strftime("%Y-%m-%d")


def _write(out_dir: Path, name: str, text: str) -> Path:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = (out_dir / name).resolve()
    path.write_text(text, encoding="utf-8")
    return path


def _find_tracked(client: GitHubClient, fp: str, ledger: Ledger, labels: list[str]) -> Any | None:
    rec = ledger.github_issue(fp)
    if rec and rec.get("number"):
        issue = client.get_issue(int(rec["number"]))
        if issue is not None and issue.state == "open" and client.carries(issue, fp):
            return issue
    issue = client.search_marker(fp)
    if issue is None and labels:
        issue = client.list_marker(fp, labels=labels[:1])
    if issue is None and rec and rec.get("state") == "creating":
        # A create may have happened without being recorded (crash); labels may have been dropped
        # (no triage permission), so scan everything updated since the intent.
        since = datetime.fromisoformat(rec["updated"]) - timedelta(minutes=10)
        issue = client.list_marker(fp, since=since)
    return issue


def _already_commented(client: GitHubClient, issue: Any, mark: str) -> bool:
    """True when one of the *bot's own* comments on ``issue`` carries ``mark`` (others' copies don't count)."""
    return any(mark in (c.body or "") and _by(c, client.login) for c in client.comments(issue))


def culprit_target(recipe: Recipe, result: RunResult) -> GitHubTarget | None:
    """Where ``result`` is filed: the ``github`` target of the final stage's component in
    ``recipe.bisect.components`` (an aiter culprit found through a vLLM pin bump goes to aiter's
    repository, issue 26), else ``recipe.report.github``."""
    final = result.final
    src = recipe.bisect.components.get(final.component) if final is not None else None
    return src.github if src is not None and src.github is not None else recipe.report.github


def file_or_update(
    result: RunResult,
    target: GitHubTarget,
    token: str | None,
    ledger: Ledger,
    dry_run: bool,
    out_dir: Path,
    *,
    nightly: NightlyResult | None = None,
    newest: ProbeResult | None = None,
    blame_confidence: float = DEFAULT_BLAME_CONFIDENCE,
    client: GitHubClient | None = None,
    chart_png: Path | None = None,
) -> FilingOutcome:
    """File ``result`` as an issue, or comment tonight's result on the open issue carrying its fingerprint.
    ``chart_png``: the run's threshold chart, embedded from the dashboard or named as an artifact
    (:func:`bisectbot.report.issue.issue_chart`).

    ``newest`` is the re-test of the problem on the newest nightly, done by the session before
    filing: when it does not reproduce there, nothing is filed (action ``already-fixed``) and,
    if an issue is already tracked, the "not reproduced since" comment is posted instead (see
    :func:`report_not_reproduced`). Labels of ``target`` are created if missing; assignees and
    ``cc`` mentions come only from ``target``. Without ``token`` or with ``dry_run`` nothing is
    sent: ``issue-<fp>.md`` (or ``comment-<fp>.md`` when the ledger knows the issue) is written
    into ``out_dir``. ``client`` overrides the PyGithub client settings (tests, GHES).
    Raises :class:`GitHubError` (token-free message) when GitHub fails beyond the bounded retries.
    """
    fp = fingerprint(result)
    if result.status == Status.NO_REGRESSION:
        return FilingOutcome("nothing-to-file", fp, message=f"{result.recipe}: no regression, nothing to file")
    if newest is not None and problem_present(newest, result.kind) is False:
        label = newest.candidate.label or newest.candidate.ref
        if token and not dry_run:
            out = report_not_reproduced(fp, newest, target, token, ledger, dry_run, out_dir, result=result,
                                        nightly=nightly, client=client)
            if out.action in ("not-reproduced", "closed", "unchanged"):
                return out
        path = _write(out_dir, f"already-fixed-{fp}.md",
                      f"Not filing: already fixed in {sanitize(label, 200)} (verdict {newest.verdict.value}, "
                      f"threshold {newest.threshold}).\n")
        return FilingOutcome("already-fixed", fp, paths=[path], message=f"already fixed in {label}: not filing")

    title, body = render_issue(result, nightly, mentions=target.mentions, blame_confidence=blame_confidence,
                               chart_png=chart_png)
    key = _night_key(result, newest)
    comment_body = render_comment("redetected", result, newest, nightly, key=key,
                                  when=datetime.now(timezone.utc).strftime("%Y-%m-%d"), include_report=True,
                                  chart_png=chart_png)
    if not token or dry_run:
        rec = ledger.github_issue(fp)
        if rec and rec.get("number"):
            path = _write(out_dir, f"comment-{fp}.md", f"<!-- would comment on {target.repo}#{rec['number']} -->\n"
                          + comment_body)
            return FilingOutcome("dry-run", fp, number=int(rec["number"]), paths=[path],
                                 message=f"dry run: would-be comment on #{rec['number']} written to {path}")
        path = _write(out_dir, f"issue-{fp}.md", f"# {title}\n\n{body}")
        why = "dry run" if dry_run else "no GitHub token"
        return FilingOutcome("dry-run", fp, paths=[path], message=f"{why}: would-be issue written to {path}")

    client = client or GitHubClient(target, token)
    issue = _find_tracked(client, fp, ledger, target.labels)
    if issue is not None:
        ledger.github_created(fp, target.repo, issue.number)
        mark = seen_marker("redetected", key)
        if _already_commented(client, issue, mark):
            return FilingOutcome("unchanged", fp, issue.number, issue.html_url,
                                 message=f"#{issue.number} already has tonight's comment")
        c = client.comment(issue, comment_body)
        return FilingOutcome("commented", fp, issue.number, getattr(c, "html_url", issue.html_url),
                             message=f"commented on #{issue.number} (same fingerprint {fp})")

    client.ensure_labels(target.labels)
    ledger.github_intent(fp, target.repo)
    created = client.call("create issue", lambda: client.repo.create_issue(
        title=title, body=body, labels=list(target.labels), assignees=list(target.assignees)))
    ledger.github_created(fp, target.repo, created.number)
    return FilingOutcome("created", fp, created.number, created.html_url,
                         message=f"filed #{created.number}: {created.html_url}")


def report_not_reproduced(
    fp_or_result: str | RunResult,
    newest: ProbeResult,
    target: GitHubTarget,
    token: str | None,
    ledger: Ledger,
    dry_run: bool,
    out_dir: Path,
    *,
    result: RunResult | None = None,
    nightly: NightlyResult | None = None,
    client: GitHubClient | None = None,
) -> FilingOutcome:
    """Comment "not reproduced since <nightly>" with the evidence on the tracked issue.

    The session calls this when the newest nightly (``newest``) no longer shows a tracked
    regression (it may then start a fix bisection). The issue is closed (``state_reason``
    ``completed``) only when ``target.close_when_fixed``. One comment per nightly: a retry finds
    the marker and returns ``unchanged``. Returns ``no-issue`` when no open issue carries the
    fingerprint, ``dry-run`` (with the would-be comment in ``out_dir``) without token or with
    ``dry_run``. Raises ``ValueError`` when ``newest`` still shows the problem.
    """
    fp = fp_or_result if isinstance(fp_or_result, str) else fingerprint(fp_or_result)
    result = result if result is not None else (fp_or_result if isinstance(fp_or_result, RunResult) else None)
    kind = result.kind if result is not None else "regression"
    if problem_present(newest, kind):
        raise ValueError(f"{newest.candidate.label or newest.candidate.ref} still shows the problem")
    label = newest.candidate.label or newest.candidate.ref
    body = render_comment("not-reproduced", result, newest, nightly, key=newest.candidate.ref,
                          when=datetime.now(timezone.utc).strftime("%Y-%m-%d"), closing=target.close_when_fixed)
    if not token or dry_run:
        path = _write(out_dir, f"not-reproduced-{fp}.md", body)
        return FilingOutcome("dry-run", fp, paths=[path], message=f"would-be comment written to {path}")
    client = client or GitHubClient(target, token)
    issue = _find_tracked(client, fp, ledger, target.labels)
    if issue is None:
        return FilingOutcome("no-issue", fp, message=f"no open issue carries fingerprint {fp}")
    mark = seen_marker("not-reproduced", newest.candidate.ref)
    if _already_commented(client, issue, mark):
        return FilingOutcome("unchanged", fp, issue.number, issue.html_url,
                             message=f"#{issue.number} already says not reproduced since {label}")
    client.comment(issue, body)
    if target.close_when_fixed:
        client.call(f"close #{issue.number}", lambda: issue.edit(state="closed", state_reason="completed"))
        ledger.github_set_state(fp, "closed")
        return FilingOutcome("closed", fp, issue.number, issue.html_url,
                             message=f"#{issue.number}: not reproduced since {label}; closed")
    return FilingOutcome("not-reproduced", fp, issue.number, issue.html_url,
                         message=f"#{issue.number}: not reproduced since {label}")


def dispatch_bisection(
    target: GitHubTarget,
    token: str,
    recipe: str,
    good: str,
    bad: str,
    *,
    workflow: str = "bisect.yml",
    ref: str = "main",
    client: GitHubClient | None = None,
) -> None:
    """Start a bisection in GitHub Actions (``POST .../actions/workflows/{workflow}/dispatches``).

    Used after "not reproduced since" to run a fix bisection (``recipe`` names a recipe whose
    regress mode is ``success``) between the last bad and the first good nightly; ``workflow``
    must accept the ``recipe``/``good``/``bad`` inputs (``.github/workflows/bisect.yml`` does).
    Raises ``ValueError`` for refs outside ``[A-Za-z0-9._:/@+~^-]`` and :class:`GitHubError`.
    """
    for what, value in (("recipe", recipe), ("good", good), ("bad", bad), ("ref", ref)):
        if not _REF_RE.match(value):
            raise ValueError(f"invalid {what} {value!r}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+\.ya?ml|\d+", workflow):
        raise ValueError(f"invalid workflow {workflow!r}")
    client = client or GitHubClient(target, token)
    repo = client.repo
    client.call(f"dispatch {workflow}", lambda: repo.requester.requestJsonAndCheck(
        "POST", f"{repo.url}/actions/workflows/{workflow}/dispatches",
        input={"ref": ref, "inputs": {"recipe": recipe, "good": good, "bad": bad}}))


# --------------------------------------------------------------------------- maintainer commands


@dataclass
class Command:
    """One ``/bisectbot`` command from an issue comment by a trusted maintainer.

    ``kind``: ``retract`` (the culprit is wrong: exclude it and search again), ``good``/``bad``
    (a human verdict on ``ref``), ``bisect`` (``args`` has ``good``/``bad`` refs). ``error`` is
    set when the command was not understood (the session acknowledges it with that error).
    """

    kind: str
    issue: int
    comment_id: int
    author: str
    association: str
    created_at: str = ""
    ref: str | None = None
    args: dict[str, str] = field(default_factory=dict)
    error: str = ""
    acknowledged: bool = False
    #: for ``retract`` on an issue the bot opened: the first-bad refs its body names
    #: (``<!-- bisectbot:named=REF -->``), so a job without the marker key knows what is retracted
    culprits: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Command:
        """The inverse of :meth:`to_dict` (``report commands --json`` output). Raises ``TypeError``/``KeyError``."""
        names = set(cls.__dataclass_fields__)
        c = cls(**{k: v for k, v in d.items() if k in names})
        if not isinstance(c.kind, str) or not isinstance(c.issue, int) or not isinstance(c.culprits, list):
            raise TypeError("kind, issue or culprits of the wrong type")
        return c


def command_lines(text: str) -> list[str]:
    """Lines of a comment that may carry a command: plain paragraph lines (CommonMark, via
    markdown-it-py) outside fenced or indented code, block quotes and HTML blocks or comments.

    Each paragraph's inline children are walked: a line keeps only its plain ``text`` start
    (emphasis allowed) up to the first code span, inline HTML, link or image, so the inside of a
    code span, an inline HTML comment or tag, a link (text or title) or an image's alt text is
    never a command line, even when it spans lines (issue 13 class 4); ``/bisectbot bisect
    good=A bad=B `note``` still reads ``good=A bad=B``. After inline HTML, the rest of the
    paragraph is dropped (a tag may hide what follows). :data:`_CMD_RE` then only matches ``/bisectbot`` at the
    start of a kept line.
    """
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark")
    lines: list[str] = []
    quote = 0
    plain = {"text", "em_open", "em_close", "strong_open", "strong_close"}
    for tok in md.parse(text or ""):
        if tok.type == "blockquote_open":
            quote += 1
        elif tok.type == "blockquote_close":
            quote -= 1
        elif tok.type == "inline" and quote == 0:
            line: list[str] = []
            ok, link = True, 0
            for child in tok.children or []:
                link += child.type == "link_open"
                link -= child.type == "link_close"
                if child.type in ("softbreak", "hardbreak"):
                    if ok and line:
                        lines.append("".join(line))
                    line, ok = [], True
                elif child.type == "html_inline":
                    if ok and line:  # the visible plain text before the tag still counts
                        lines.append("".join(line))
                    ok, line = False, []
                    break
                elif child.type in plain and not link:
                    if ok:
                        line.append(child.content)
                else:  # code_inline, link_open/close (and the link's text), image, ...
                    if ok and line:  # a line that starts plain keeps its plain start
                        lines.append("".join(line))
                    ok, line = False, []
            if ok and line:
                lines.append("".join(line))
    return lines


def parse_command(text: str) -> tuple[str, str | None, dict[str, str], str] | None:
    """Parse the first ``/bisectbot ...`` plain line of a comment (:func:`command_lines`):
    ``(kind, ref, args, error)`` or None."""
    m = next((m for m in (_CMD_RE.match(ln) for ln in command_lines(text)) if m), None)
    if not m:
        return None
    kind = m.group(1).lower()
    rest = m.group(2).split()
    if kind == "retract":
        return ("retract", None, {}, "" if not rest else "retract takes no argument")
    if kind == "cancel":  # stop a running bisection chain (bisect-fanout.yml)
        return ("cancel", None, {}, "" if not rest else "cancel takes no argument")
    if kind in ("good", "bad"):
        if len(rest) != 1 or not _REF_RE.match(rest[0]):
            return (kind, None, {}, f"usage: /bisectbot {kind} <ref>")
        return (kind, rest[0], {}, "")
    if kind == "bisect":
        args = dict(part.split("=", 1) for part in rest if "=" in part)
        if set(args) != {"good", "bad"} or not all(_REF_RE.match(v) for v in args.values()):
            return ("bisect", None, {}, "usage: /bisectbot bisect good=<ref> bad=<ref>")
        return ("bisect", None, args, "")
    if kind == "test":  # a try job (issue 42): a ref, a pull request, a patch URL
        args = test_target(rest)
        if args is None:
            return ("test", None, {}, "usage: /bisectbot test <ref> | pr=<number> [sha=<40 hex>] | "
                                      "<https URL of a .diff or .patch>")
        return ("test", args.get("ref") or args.get("url") or f"pr={args.get('pr')}", args, "")
    return (kind, None, {}, f"unknown command {kind!r}: use retract, good <ref>, bad <ref>, bisect good= bad=, "
                            "test <ref|pr=N|patch URL>, cancel")


#: A patch URL of ``/bisectbot test``: https to a named host with a dot (no IP literal, no ``localhost``: the
#: resolve job must not be steered at internal addresses), or http only to a loopback host (the tests'
#: servers); a path ending in .diff or .patch; no query, no user info, no quotes.
PATCH_URL_RE = re.compile(r"^(?:https://[A-Za-z0-9.-]+(?::[0-9]{1,5})?|http://(?:127\.0\.0\.1|localhost)(?::[0-9]{1,5})?)"
                          r"/[A-Za-z0-9._~%/+-]{1,300}\.(?:diff|patch)$")
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
#: Top-level names of no public host (RFC 6761 and 6762, RFC 8375, ICANN's name collision list, cloud and
#: cluster conventions): a patch URL naming one would steer the resolve job at an internal service.
SPECIAL_USE_TLDS = frozenset({"localhost", "local", "internal", "invalid", "test", "example", "onion", "arpa",
                              "home", "lan", "corp", "intranet", "private", "localdomain", "svc", "cluster"})


def test_target(words: list[str]) -> dict[str, str] | None:
    """The argument of ``/bisectbot test``: ``{"url": U}``, ``{"pr": N[, "sha": S]}`` (``pr=N`` or ``#N``,
    ``sha=`` pinning the head the maintainer read) or ``{"ref": R}``; None when it is none of them."""
    if not words or len(words) > 2:
        return None
    first = words[0]
    m = re.fullmatch(r"(?:pr=|#)([1-9][0-9]{0,8})", first)
    if m:
        out = {"pr": m.group(1)}
        if len(words) == 2:
            sha = words[1].removeprefix("sha=")
            if not words[1].startswith("sha=") or not _SHA_RE.fullmatch(sha):
                return None
            out["sha"] = sha
        return out
    if len(words) != 1:
        return None
    if first.lower().startswith(("http://", "https://")):
        if not PATCH_URL_RE.fullmatch(first):
            return None
        host = re.sub(r"^https?://", "", first).split("/", 1)[0].rsplit(":", 1)[0].lower()
        tld = host.rsplit(".", 1)[-1]
        if first.startswith("https://") and ("." not in host or not re.fullmatch(r"[a-z]{2,63}", tld)
                                             or tld in SPECIAL_USE_TLDS):
            return None  # a named public host only: no IP literal (any base), no internal name
        return {"url": first}
    return {"ref": first} if _REF_RE.match(first) and ".." not in first else None


def read_commands(
    target: GitHubTarget,
    token: str,
    issues: Iterable[int] | None = None,
    *,
    include_acknowledged: bool = False,
    client: GitHubClient | None = None,
) -> list[Command]:
    """Maintainer commands from the comments of ``issues`` (default: open issues with the bot's label).

    Only comments whose ``author_association`` is OWNER, MEMBER or COLLABORATOR count; others
    are logged and ignored. A command is *acknowledged* once a bot comment carries
    ``<!-- bisectbot:ack=<comment id> -->`` (see :func:`acknowledge`); those are left out unless
    ``include_acknowledged``. Oldest first. Raises :class:`GitHubError`.
    """
    client = client or GitHubClient(target, token)
    if issues is None:
        label = target.labels[:1]
        numbers = client.call("list issues", lambda: [
            i.number for i in client.repo.get_issues(state="open", **({"labels": label} if label else {}))
            if i.pull_request is None])
    else:
        numbers = list(issues)
    out: list[Command] = []
    for number in numbers:
        issue = client.get_issue(number)
        if issue is None:
            continue
        comments = client.comments(issue)
        acked = {int(x) for c in comments if _by(c, client.login) for x in _ACK_RE.findall(c.body or "")}
        for c in comments:
            if _by(c, client.login):
                continue  # the bot's own acknowledgements quote the command
            parsed = parse_command(c.body or "")
            if parsed is None:
                continue
            assoc = (c.author_association or "NONE").upper()
            login = c.user.login if c.user is not None else "?"
            if assoc not in TRUSTED_ASSOCIATIONS:
                log.info("ignoring /bisectbot command on #%s from %s (association %s)", number, login, assoc)
                continue
            kind, ref, args, error = parsed
            cmd = Command(kind=kind, issue=number, comment_id=c.id, author=login, association=assoc,
                          created_at=c.created_at.isoformat() if c.created_at else "", ref=ref, args=args,
                          error=error, acknowledged=c.id in acked)
            if kind == "retract" and _by(issue, client.login):  # only the bot's own issue body names culprits
                from .views import culprits_in

                cmd.culprits = culprits_in(issue.body or "")
            if include_acknowledged or not cmd.acknowledged:
                out.append(cmd)
    return out


def acknowledge(command: Command, target: GitHubTarget, token: str, message: str, *,
                client: GitHubClient | None = None, filed_url: str | None = None) -> FilingOutcome:
    """Reply to ``command`` on its issue with ``message`` (sanitised) and the ack marker;
    ``filed_url`` (the bot's own new issue, from GitHub's API reply) is appended as
    "(filed as URL)" unsanitised, so it stays a working link.

    Idempotent: when the ack marker for this comment exists already, nothing is posted
    (action ``unchanged``). Raises :class:`GitHubError`.
    """
    client = client or GitHubClient(target, token)
    issue = client.get_issue(command.issue)
    if issue is None:
        raise GitHubError(f"issue #{command.issue} not found in {target.repo}")
    mark = f"<!-- bisectbot:ack={command.comment_id} -->"
    if _already_commented(client, issue, mark):
        return FilingOutcome("unchanged", "", command.issue, issue.html_url, message="already acknowledged")
    what = command.kind + (f" {command.ref}" if command.ref else "") + "".join(
        f" {k}={v}" for k, v in sorted(command.args.items()))
    body = (f"{mark}\n> /bisectbot {sanitize(what, 300)}\n\n"
            f"{'Not understood' if command.error else 'Acknowledged'} (from {sanitize(command.author, 60)}): "
            f"{sanitize(command.error or message, 2000)}"
            f"{f' (filed as {api_link(filed_url)})' if filed_url and not command.error else ''}\n")
    c = client.comment(issue, body[:GITHUB_BODY_LIMIT])
    return FilingOutcome("commented", "", command.issue, getattr(c, "html_url", None),
                         message=f"acknowledged command {command.comment_id} on #{command.issue}")


__all__ = [
    "BotRetry", "Command", "FilingOutcome", "GitHubClient", "TRUSTED_ASSOCIATIONS", "acknowledge", "dispatch_bisection",
    "candidate_link", "file_or_update", "parse_command", "read_commands", "report_not_reproduced",
]
