"""Links of the final range (issue 25, input 4), as mozregression links the pushlog of its range:
the GitHub compare view of the last good and first bad commits, the culprit commit and, when its
subject names a pull request (``… (#1234)``, GitHub's squash-merge subject), that pull request;
for nightlies, what changed between the last good and first bad image (the ``nightlies diff``
result: versions and commits of vLLM, aiter, torch, ROCm) with compare links of the components
whose repository is known.

Pure functions on plain data. Only repositories on ``github.com`` get links (``https://github.com/
OWNER/REPO``, from a clone URL such as ``https://github.com/vllm-project/vllm.git`` or
``git@github.com:ROCm/aiter.git``); anything else gets the bare SHAs.
"""

from __future__ import annotations

import re
from typing import Any

_GITHUB = re.compile(r"^(?:https?://github\.com/|git@github\.com:|ssh://git@github\.com/)"
                     r"(?P<repo>[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9_.-]{1,100}?)(?:\.git)?/?$")
_SHA = re.compile(r"^[0-9a-f]{7,40}$")
_PR = re.compile(r"\(#(\d{1,7})\)\s*$")

KNOWN_REPOS = {"vllm": "https://github.com/vllm-project/vllm", "aiter": "https://github.com/ROCm/aiter",
               "torch": "https://github.com/ROCm/pytorch"}
"""Where a nightly's components come from when the recipe does not say (DOMAIN.md: the vLLM
project's repository; ``AITER_REPO``/``PYTORCH_REPO`` of ``/app/versions.txt`` in ROCm images)."""


def github_repo(url: object) -> str | None:
    """``OWNER/REPO`` of a GitHub clone or web URL, else None."""
    m = _GITHUB.match(str(url or "").strip())
    return m.group("repo") if m else None


def compare_url(repo_url: object, old: str, new: str) -> str | None:
    """``https://github.com/OWNER/REPO/compare/OLD...NEW`` (the commits in NEW that OLD lacks), None
    when the repository is not on GitHub or an end is not a commit SHA."""
    repo = github_repo(repo_url)
    if repo is None or not _SHA.match(old) or not _SHA.match(new):
        return None
    return f"https://github.com/{repo}/compare/{old}...{new}"


def commit_url(repo_url: object, sha: str) -> str | None:
    """``https://github.com/OWNER/REPO/commit/SHA``, None off GitHub."""
    repo = github_repo(repo_url)
    return f"https://github.com/{repo}/commit/{sha}" if repo and _SHA.match(sha) else None


def pull_request(subject: str) -> int | None:
    """The pull request a squash-merge subject ends with: ``[ROCm] fix the indexer (#31415)`` -> 31415."""
    m = _PR.search(subject or "")
    return int(m.group(1)) if m else None


def pull_url(repo_url: object, subject: str) -> str | None:
    """``https://github.com/OWNER/REPO/pull/N`` of the subject's ``(#N)``, None otherwise."""
    repo, n = github_repo(repo_url), pull_request(subject)
    return f"https://github.com/{repo}/pull/{n}" if repo and n else None


def component_rows(diff: dict[str, Any], repos: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Rows of the nightlies' component diff (:func:`bisectbot.components.diff_images` as dicts:
    ``component``, ``old``, ``new``, ``changed``, ``range``): the component, both versions, whether it
    changed, the commit range and its compare link (``repos``: component -> repository URL,
    falling back to :data:`KNOWN_REPOS`)."""
    rows = []
    for c in diff.get("components") or []:
        name = str(c.get("component") or "")
        rng = c.get("range") or None
        url = None
        if rng and len(rng) == 2:
            url = compare_url((repos or {}).get(name) or KNOWN_REPOS.get(name), str(rng[0]), str(rng[1]))
        rows.append({"component": name, "old": str(c.get("old") or "—"), "new": str(c.get("new") or "—"),
                     "changed": bool(c.get("changed")), "range": f"{rng[0]}..{rng[1]}" if rng else "",
                     "url": url or "", "note": str(c.get("note") or "")})
    return rows


__all__ = ["KNOWN_REPOS", "commit_url", "compare_url", "component_rows", "github_repo", "pull_request", "pull_url"]
