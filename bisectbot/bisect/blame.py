"""Blame rules: plausibility flags of a culprit, the one "may blame" decision, how a
confidence is printed, and where to descend when the culprit is a merge."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence

from ..models import Status

FLAG_TEXT = {
    "merge": "the culprit is a merge commit",
    "docs-tests-only": "the change touches only docs/tests",
    "outside-runtime-paths": "the change is outside the component's runtime paths",
    "no-op-build": "the culprit builds the same as its predecessor (identical build)",
    "pin-bump": "the culprit only moves a dependency pin that cannot be bisected here (issue 26): the "
                "regression is in the pinned component, not in this change's code",
    "mixed-builds": "the culprit and its predecessor were built two ways (a prebuilt wheel and a source build): "
                    "build both the same way before blaming the change (run the stage without source.wheels, "
                    "or when both commits have wheels)",
}

#: Documentation by location and name only (issue 23, input 5): a ``merges.txt`` of a tokenizer,
#: a ``*.txt`` vocabulary or word list, is runtime data (llama.cpp#3743), never "docs".
DOCS = ("docs/*", "doc/*", "*/docs/*", "*/doc/*", "*.md", "*.rst", "README*", "*/README*", "CHANGELOG*",
        "*/CHANGELOG*", "LICENSE*", "*/LICENSE*", "LICENCE*", "*/LICENCE*", "COPYING*", "*/COPYING*", "NOTICE*",
        "*/NOTICE*")
_DOCS_TESTS = (*DOCS, ".github/*", "tests/*", "test/*", "*/tests/*", "*/test/*", "test_*.py", "*/test_*.py",
               "*_test.py", "conftest.py", "*/conftest.py")
#: Files that decide what is built and installed: they ship, whatever their name (a
#: ``README``-named build file is still a build file; issue 12).
BUILD_FILES = ("CMakeLists.txt", "*/CMakeLists.txt", "*.cmake", "cmake/*", "setup.py", "setup.cfg",
               "pyproject.toml", "requirements*.txt", "requirements/*", "*/requirements*.txt", "MANIFEST.in",
               "Makefile", "*/Makefile", "*.mk", "Dockerfile*", "docker/*", "build.sh", "*.in",
               "use_existing_torch.py")


def _matches(path: str, patterns: Iterable[str]) -> bool:
    for pat in patterns:
        pat = pat.rstrip("/")
        if fnmatch.fnmatch(path, pat) or path == pat or path.startswith(pat + "/"):
            return True
    return False


def plausibility_flags(*, parents: int | None = None, changed_paths: Sequence[str] | None = None,
                       runtime_paths: Sequence[str] = (), same_build: bool | None = None) -> list[str]:
    """Flags (keys of :data:`FLAG_TEXT`) that make a culprit implausible.

    ``parents``: number of parents of the culprit commit (None for non-commits).
    ``changed_paths``: paths changed against its predecessor (None when unknown).
    ``runtime_paths``: path prefixes/globs that ship at runtime (from ``GitSource.runtime_paths``);
    empty = not checked. ``same_build``: the culprit's build key equals its predecessor's.

    Precedence, per changed path (issue 12): a path in ``runtime_paths`` ships, whatever
    the built-in rules say (``requirements/rocm.txt`` listed there is not documentation);
    then build files (:data:`BUILD_FILES`: ``CMakeLists.txt``, ``setup.py``,
    ``requirements*.txt``, ...) ship; then docs/tests patterns. A culprit is
    ``docs-tests-only`` when every path is docs/tests, ``outside-runtime-paths`` when
    ``runtime_paths`` is set and no path ships.
    """
    flags: list[str] = []
    if parents is not None and parents > 1:
        flags.append("merge")
    if changed_paths is not None and changed_paths:
        ships = [p for p in changed_paths if _matches(p, runtime_paths) or _matches(p, BUILD_FILES)]
        if not ships and all(_matches(p, _DOCS_TESTS) for p in changed_paths):
            flags.append("docs-tests-only")
        elif runtime_paths and not ships:
            flags.append("outside-runtime-paths")
    if same_build:
        flags.append("no-op-build")
    return flags


def confidence_text(confidence: float, percent: bool = False) -> str:
    """A posterior probability (0..1) as text, never rounded up to certainty: two decimals
    (``0.97``; ``percent``: one decimal of a percent, ``97.0%``), more where those would
    read 1.00 / 100.0% for a value below 1 (``0.998``, ``>0.9999``; ``99.96%``, ``>99.999%``).
    Only an exact search's 1.0 prints as ``1.00`` / ``100.0%``."""
    c = min(1.0, max(0.0, float(confidence)))
    scale, unit, digits = (100.0, "%", 1) if percent else (1.0, "", 2)
    if c >= 1.0:
        return f"{scale:.{digits}f}{unit}"
    for d in (digits, digits + 1, digits + 2):
        text = f"{c * scale:.{d}f}"
        if float(text) < scale:
            return text + unit
    return f">{scale - 10 ** -(digits + 2):.{digits + 2}f}{unit}"


def may_blame(status: Status | str, confidence: float, flags: Sequence[str],
              blame_confidence: float = 0.66) -> tuple[bool, str]:
    """Whether a result may blame a commit (GitHub step): ``(allowed, reason)``.

    Refuses anything but a single verified culprit, a flagged culprit, or a confidence below
    ``blame_confidence`` (``recipe.bisect.blame_confidence``, 0.66 by default, issue 6). The
    one blame rule: the report (:func:`bisectbot.report.blame.blame_decision`) and the exit
    code of ``bisectbot run`` (3 when it will not blame, issue 12) follow it.
    """
    st = Status(status)
    if st is not Status.CULPRIT:
        return False, f"no single culprit (status {st.value}): report the range, blame no one"
    if flags:
        return False, "plausibility flags: " + "; ".join(FLAG_TEXT.get(f, f) for f in flags)
    if confidence < blame_confidence:
        return False, f"confidence {confidence_text(confidence)} is below {blame_confidence:.2f}"
    return True, f"culprit verified with confidence {confidence_text(confidence)}"


# --------------------------------------------------------------------------- non-linear history


def merge_descent(parents: Sequence[str], merge_base: str | None) -> tuple[str, str] | None:
    """Where to search when a first-parent bisection names a merge commit (issue 12).

    ``parents`` are the merge's parents (first = main line, already known good: it is the
    last good of the first-parent search); ``merge_base`` is the merge base of the first and
    second parent. Returns ``(good, bad)`` of the second search: over the second parent's
    first-parent chain from the merge base (exclusive good end) to the branch tip (bad
    end), so that the culprit's last good is always its parent. None when the culprit is
    not a merge or the branch brought no commits of its own (octopus merges descend into
    the second parent only).
    """
    if len(parents) < 2 or not merge_base or merge_base == parents[1]:
        return None
    return merge_base, parents[1]
