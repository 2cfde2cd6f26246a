"""Exception types, each turned into one clear line and an exit code by the CLI.

Exit codes (documented in the README and ``bisectbot --help``):

* 0 -- done / culprit found / no garbage
* 1 -- error (or, for ``probe``, garbage found)
* 2 -- usage or bad input (recipe, patch, arguments)
* 3 -- inconclusive (bisection could not name a culprit it trusts)
* 4 -- server error (``probe`` only: the server died or never answered)
* 5 -- upstream unreachable: a registry, the package index or GitHub could not be reached
  (name resolution failed, connection refused, retries of transient errors spent); the same
  code for ``run``, ``bisect plan`` and ``nightlies``. Try again later or check the network.
* 6 -- ``run --file-issue``: the report is written but filing it on GitHub failed after the
  retries (:data:`EXIT_FILING_FAILED`); ``report file`` files it later.
* 70 -- internal error: an unexpected exception (a bug in bisectbot; the traceback is on
  stderr). Never 1, which ``probe`` uses for "garbage found" (issue 25); 70 is ``EX_SOFTWARE``
  of BSD's ``sysexits.h``.
* 130 -- interrupted (Ctrl-C / SIGTERM); an interrupted ``run`` resumes from the ledger.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_GARBAGE = 1
"""``probe``: garbage found (the same number as :data:`EXIT_ERROR`, which ``probe`` never uses)."""
EXIT_BAD_INPUT = 2
EXIT_INCONCLUSIVE = 3
EXIT_SERVER_ERROR = 4
EXIT_UNREACHABLE = 5
EXIT_FILING_FAILED = 6
"""``run --file-issue``: the bisection finished and its report is written, but filing it on GitHub
failed after the retries (issue 13); ``bisectbot report file RESULT.json`` files it later."""
EXIT_INTERNAL = 70
"""An unexpected exception: a bug, not a verdict (``EX_SOFTWARE`` in ``sysexits.h``; issue 25)."""
EXIT_INTERRUPTED = 130


class BisectbotError(Exception):
    """Base class. ``str(err)`` is the one line shown to the user."""

    exit_code: int = EXIT_ERROR


class BadInput(BisectbotError):
    """Bad user input: a recipe, a patch file, a command-line value. Exit code 2."""

    exit_code = EXIT_BAD_INPUT


class RecipeError(BadInput):
    """A recipe failed to parse or validate.

    ``problems`` holds one ``FILE:LINE:COL: field.path: message`` line per error.
    """

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class PatchError(BadInput):
    """A patch of the stack does not apply; the message names the patch and the hunk."""


class MissingPin(BadInput):
    """A commit pins a ref (tag, branch, SHA, version) its component's repository lacks (issue 35,
    item 5). The message names the pinning file, the pin and the repository. At an end of the range
    it is bad input (exit 2); inside the range the candidate is a skip whose reason is :attr:`prefix`
    and this text."""

    prefix = "missing pin: "


class ServerError(BisectbotError):
    """The server under test died, timed out or never became healthy. Exit code 4."""

    exit_code = EXIT_SERVER_ERROR


class BuildError(BisectbotError):
    """A candidate could not be built (image build, overlay, patch at build time)."""


class RegistryError(BisectbotError):
    """The image registry or Docker Hub refused or failed a request."""


class UpstreamUnreachable(BisectbotError):
    """A registry, the package index or the GitHub API could not be reached: the name did not
    resolve, the connection was refused or timed out, or the retries of transient errors were
    spent. Exit code 5 (:data:`EXIT_UNREACHABLE`) wherever it happens."""

    exit_code = EXIT_UNREACHABLE


class HostFailure(BisectbotError):
    """This host cannot probe any candidate: the Docker daemon is unreachable, the disk is full, a
    directory the bot writes is read-only, a device the runner profile requires is missing
    (:mod:`bisectbot.run.host`). Never a verdict: the run stops before anything is recorded or
    filed. Exit code 1."""


class GitHubError(BisectbotError):
    """A GitHub API call failed. Never contains a token."""


class LedgerError(BisectbotError):
    """The SQLite ledger is unreadable or of a newer schema than this bisectbot."""
