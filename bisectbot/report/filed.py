"""``filed.json``: what ``bisectbot report file`` filed, carried to the ledger that did not file it.

In the workflows the filing job runs on a hosted runner whose ledger is thrown away with it, and
the dashboard renders on the ledger runner (``nightly.yml``'s ``pages`` job). ``report file`` writes
``filed.json`` beside its would-be Markdown (``--out``); the filing job uploads it as an artifact and
``bisectbot dashboard --filed PATH`` records it in the dashboard's ledger (its ``github`` table:
fingerprint -> repository, issue number, state), so the site links the issue. Shape
(schema ``bisectbot.filed/1``)::

    {"schema": "bisectbot.filed/1", "recipe": str, "repo": "OWNER/NAME", "action": str,
     "number": int | null, "url": str | null, "fingerprints": [16 hex, ...]}

``fingerprints`` holds the fingerprint the issue was filed under (keyed under
``$BISECTBOT_MARKER_KEY`` when set) and, when that differs, the unkeyed one a run without the key
(the bisecting job holds no secret) wrote into its ``report.json``: the dashboard finds the issue
by either.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from .. import jsonio as _jsonio
from ..errors import BadInput
from ..models import RunResult

SCHEMA = "bisectbot.filed/1"
FILE_NAME = "filed.json"
_FP = re.compile(r"[0-9a-f]{16}")
_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_STATES = {"closed": "closed", "already-fixed": None, "nothing-to-file": None, "no-issue": None, "dry-run": None}


def unkeyed_fingerprint(result: RunResult) -> str:
    """``result``'s fingerprint without ``$BISECTBOT_MARKER_KEY`` (plain SHA-256 of its identity)."""
    import hashlib

    from .fingerprint import identity

    return hashlib.sha256(identity(result).encode("utf-8")).hexdigest()[:16]


def write_filed(out_dir: Path, result: RunResult, repo: str, outcome: Any) -> Path:
    """Write ``out_dir/filed.json`` for ``outcome`` (a :class:`~bisectbot.report.github.FilingOutcome`
    of ``result`` on ``repo``); returns its path. Holds no token: numbers, URLs and fingerprints."""
    fps = [outcome.fingerprint] if _FP.fullmatch(str(outcome.fingerprint or "")) else []
    plain = unkeyed_fingerprint(result)
    if plain not in fps:
        fps.append(plain)
    doc = {"schema": SCHEMA, "recipe": result.recipe, "repo": repo, "action": outcome.action,
           "number": outcome.number, "url": outcome.url, "fingerprints": fps}
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / FILE_NAME
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(doc, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


MAX_ISSUE_NUMBER = 2**31 - 1
"""Largest issue number a filing may name: GitHub's GraphQL schema types an issue's ``number`` as
``Int`` (32-bit signed); a larger one is no GitHub issue and overflowed the ledger's and the
dashboard's handling (issue 41, item 14)."""


def filed_files(paths: list[Path]) -> list[Path]:
    """``filed.json`` files named by ``paths`` (a file as is, a directory searched recursively), sorted.
    Raises :class:`BadInput` for a path that does not exist."""
    out: list[Path] = []
    for p in paths:
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            out += p.rglob(FILE_NAME)
        else:
            raise BadInput(f"--filed {p}: no such file or directory")
    return sorted(set(out))


def recipe_targets(recipe: Any) -> set[str]:
    """The repositories ``recipe`` files into (``OWNER/NAME``, lower case): ``report.github`` and each
    component's ``github`` (an aiter culprit found through a vLLM pin bump goes to aiter's)."""
    out = set()
    if recipe.report.github is not None:
        out.add(recipe.report.github.repo.lower())
    for comp in recipe.bisect.components.values():
        if comp.github is not None:
            out.add(comp.github.repo.lower())
    return out


def record_filed(ledger: Any, paths: list[Path], targets: dict[str, set[str]] | None = None,
                 refused: list[str] | None = None) -> list[tuple[str, int]]:
    """Record every filing of ``paths`` (see :func:`filed_files`) that names an issue in ``ledger``'s
    ``github`` table (each fingerprint -> repo, number; state ``closed`` when the filing closed it,
    else ``open``). Returns ``(repo, number)`` per filing recorded; one without an issue number (dry
    run, nothing to file, filing failed) is skipped. Raises :class:`BadInput` naming the file for one
    that is not a ``bisectbot.filed/1`` document.

    ``targets``: recipe name -> the repositories it files into (:func:`recipe_targets`). Given, a filing
    whose recipe is not there, or whose repository is not one of its recipe's, is not recorded (the
    dashboard would link a forged ``filed.json``'s repository: issue 41, item 14); one line per such
    file goes to ``refused`` and the others are still recorded."""
    done = []
    for f in filed_files(paths):
        try:
            doc = _jsonio.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise BadInput(f"{f}: not a {SCHEMA} document: {e}") from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise BadInput(f"{f}: not a {SCHEMA} document (schema {str(doc.get('schema') if isinstance(doc, dict) else None)[:40]!r})")
        number, repo, fps = doc.get("number"), doc.get("repo"), doc.get("fingerprints")
        if not isinstance(repo, str) or not _REPO.fullmatch(repo) or not isinstance(fps, list) \
                or not all(isinstance(x, str) and _FP.fullmatch(x) for x in fps):
            raise BadInput(f"{f}: {SCHEMA}: repo must be OWNER/NAME and fingerprints 16 hex each")
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            continue
        if targets is not None:
            recipe = doc.get("recipe")
            allowed = targets.get(recipe) if isinstance(recipe, str) else None
            if allowed is None or repo.lower() not in allowed:
                why = (f"its recipe {str(recipe)[:60]!r} is not among --recipes" if allowed is None else
                       f"{repo} is not where recipe {recipe} files ({', '.join(sorted(allowed)) or 'nowhere'})")
                if refused is not None:
                    refused.append(f"{f}: not recorded: {why}")
                continue
        if number > MAX_ISSUE_NUMBER:
            raise BadInput(f"{f}: {SCHEMA}: issue number {str(number)[:24]} is out of range (1..{MAX_ISSUE_NUMBER})")
        for fp in fps:
            ledger.github_created(fp, repo, number)
            if _STATES.get(str(doc.get("action"))) == "closed":
                ledger.github_set_state(fp, "closed")
        done.append((repo, number))
    return done


__all__ = ["FILE_NAME", "MAX_ISSUE_NUMBER", "SCHEMA", "filed_files", "recipe_targets", "record_filed",
           "unkeyed_fingerprint", "write_filed"]
