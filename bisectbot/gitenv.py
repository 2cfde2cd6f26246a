"""The bot's own git never runs code a repository chose (issue 36, input 2).

A candidate under test can write its repository's configuration and hooks (the user's own
repository for a local ``source.repo``, the repository cache for a URL), unless the sandbox
(:mod:`bisectbot.sandbox`) stops it. Every git the bot starts -- GitPython's commands and its
long-lived ``cat-file`` processes, plain ``subprocess`` git, clones and fetches -- therefore runs
with *command-line level* configuration (``GIT_CONFIG_COUNT`` / ``GIT_CONFIG_KEY_<n>`` /
``GIT_CONFIG_VALUE_<n>``, git >= 2.31), which wins over every configuration file:

* :data:`SAFE_GIT_CONFIG`, always: hooks off (``core.hooksPath=/dev/null``: no hook file can
  exist below it), ``core.fsmonitor=false``, no external diff, ``protocol.ext.allow=never``
  (``ext::`` URLs run commands), ``core.pager=cat``.
* for each key of a repository's *own* configuration (scopes ``local`` and ``worktree``,
  included files too) that names a command (:data:`COMMAND_KEY`: filter/diff/merge drivers,
  credential helpers, ``core.sshCommand``, ``core.askPass``, editors, ``gpg.program``...), the
  same key set to the empty value (git then runs nothing: checked with git 2.39 for
  ``filter.<d>.smudge``/``process``). :func:`neutralise_repo` scans a repository; the local
  runner calls it before each checkout.

The user's global and system configuration stay in force (``user.*``, a global git-lfs filter,
a global credential helper): a candidate cannot write them once it runs in the sandbox.

The overrides live in ``os.environ`` (:func:`install`), so every child inherits them with no
per-call code; candidates never see them (their environment is an allow-list,
:func:`bisectbot.secrets.candidate_env`).
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections.abc import MutableMapping
from pathlib import Path

SAFE_GIT_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("diff.external", ""),
    ("protocol.ext.allow", "never"),
    ("core.pager", "cat"),
)
"""Configuration every git of the bot runs with (key, value), whatever the repository says."""

COMMAND_KEY = re.compile(
    r"^(?:filter\..+\.(?:clean|smudge|process)|diff\..+\.(?:command|textconv)|merge\..+\.driver"
    r"|credential\.(?:.+\.)?helper"
    r"|core\.(?:sshcommand|gitproxy|askpass|editor|pager|hookspath|fsmonitor|alternaterefscommand)"
    r"|remote\..+\.(?:uploadpack|receivepack)"
    r"|sequence\.editor|gpg\.(?:.+\.)?program|uploadpack\.packobjectshook|receive\.procreceiverefs)$",
    re.IGNORECASE)
"""Configuration keys whose value git runs as a command (lower-case as git prints them)."""

_extra: dict[str, str] = {}  # keys found in repositories' own configuration -> ""
_lock = threading.Lock()
_OWN = "BISECTBOT_GIT_CONFIG_BASE"  # the user's own GIT_CONFIG_COUNT, remembered at the first install


def overrides() -> list[tuple[str, str]]:
    """Every (key, value) the bot's git runs with: :data:`SAFE_GIT_CONFIG` plus the neutralised
    keys of the repositories scanned so far (:func:`neutralise_repo`)."""
    with _lock:
        return list(SAFE_GIT_CONFIG) + sorted(_extra.items())


def install(environ: MutableMapping[str, str] | None = None) -> None:
    """Write :func:`overrides` into ``environ`` (default ``os.environ``) as ``GIT_CONFIG_COUNT`` /
    ``GIT_CONFIG_KEY_<n>`` / ``GIT_CONFIG_VALUE_<n>``, after any the user set (kept, in order).
    Idempotent; call again after :func:`neutralise_repo` found new keys."""
    env = os.environ if environ is None else environ
    if _OWN not in env:
        try:
            env[_OWN] = str(max(0, int(env.get("GIT_CONFIG_COUNT", "0") or 0)))
        except ValueError:
            env[_OWN] = "0"
    base = int(env[_OWN])
    items = overrides()
    for i, (k, v) in enumerate(items):
        env[f"GIT_CONFIG_KEY_{base + i}"] = k
        env[f"GIT_CONFIG_VALUE_{base + i}"] = v
    env["GIT_CONFIG_COUNT"] = str(base + len(items))


def neutralise_repo(path: str | Path) -> list[str]:
    """Scan the configuration of the repository at ``path`` (its own files: scopes ``local`` and
    ``worktree``, includes followed) for keys that name a command (:data:`COMMAND_KEY`), override
    each with the empty value from now on (:func:`install`) and return the keys newly neutralised.
    A path git cannot read as a repository returns ``[]``."""
    try:
        p = subprocess.run(["git", "-C", str(path), "config", "--show-scope", "--includes", "--list", "-z"],
                           capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = []
    parts = p.stdout.split(b"\0")  # with -z: SCOPE NUL KEY LF VALUE NUL ...
    for scope, kv in zip(parts[0::2], parts[1::2]):
        if scope not in (b"local", b"worktree"):
            continue
        key = kv.split(b"\n", 1)[0].decode("utf-8", "replace")
        if COMMAND_KEY.match(key):
            found.append(key)
    new = []
    with _lock:
        for k in found:
            if k not in _extra and k.lower() not in ("core.hookspath", "core.fsmonitor", "core.pager"):
                _extra[k] = ""
                new.append(k)
    if new:
        install()
    return new
