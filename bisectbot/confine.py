"""Confinement of paths the bot writes or hands out: nothing escapes the tree it belongs to.

Commits under test, patch stacks and recipes name paths; a crafted one must not make the bot write
outside its destination or hand the host to a container (issue 13):

* :func:`inside` / :func:`confined` -- a path resolved (symlinks followed) must stay under a root.
* :func:`safe_extract` -- tar extraction with the standard library's ``data`` filter (PEP 706:
  no absolute names, no ``..``, no links pointing out, no device files, no set-uid bits).
* :func:`copy_confined` -- copy a file into a tree, refusing destinations whose resolved parent
  leaves the tree and never writing through a symlink.
* :func:`check_mount` -- a recipe's ``HOST:CONTAINER[:ro]`` bind mount: both sides absolute, and
  the host side not ``/``, a system directory, the Docker socket or a home directory.
* :func:`open_nofollow` -- open a lock/state file refusing a planted symlink (``O_NOFOLLOW``).
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tarfile
from pathlib import Path
from typing import IO

DOCKER_SOCKETS = ("/var/run/docker.sock", "/run/docker.sock", "/var/run/docker", "/run/docker")
"""Host paths that give whoever mounts them control of the Docker daemon (root on the host)."""

SYSTEM_DIRS = ("/", "/etc", "/proc", "/sys", "/dev", "/boot", "/run", "/var/run", "/var/lib/docker", "/root",
               "/home", "/usr", "/bin", "/sbin", "/lib", "/var")
"""Host directories a recipe may not bind-mount as a whole (subdirectories of /var, /home are fine)."""


class ConfinementError(ValueError):
    """A path would escape the tree it must stay in (message names the path and the tree)."""


def inside(root: str | Path, path: str | Path) -> bool:
    """True when ``path`` (relative paths taken from ``root``), with symlinks resolved, is ``root`` or under it."""
    r = Path(root).resolve()
    p = (r / path).resolve()
    return p == r or r in p.parents


def confined(root: str | Path, rel: str | Path, what: str = "path") -> Path:
    """``root / rel`` resolved, or :class:`ConfinementError` when ``rel`` is absolute, has ``..``
    or resolves (through symlinks) outside ``root``."""
    rel_s = str(rel)
    if not rel_s or os.path.isabs(rel_s) or ".." in Path(rel_s).parts:
        raise ConfinementError(f"{what} {rel_s!r}: must be a relative path without '..'")
    if not inside(root, rel_s):
        raise ConfinementError(f"{what} {rel_s!r}: resolves outside {root} (symlink?)")
    return Path(root).resolve() / rel_s


def safe_extract(tar: tarfile.TarFile, dest: str | Path, members: list[tarfile.TarInfo] | None = None) -> None:
    """Extract ``members`` (default all) of ``tar`` into ``dest`` with the ``data`` filter.

    Raises :class:`ConfinementError` naming the member when one would land outside ``dest``, is a
    link pointing out, a device, or otherwise refused by the filter.
    """
    try:
        tar.extractall(dest, members=members, filter="data")
    except tarfile.FilterError as e:
        name = getattr(getattr(e, "tarinfo", None), "name", "?")
        raise ConfinementError(f"archive member {name!r} refused: {e}") from None


def copy_confined(src: str | Path, root: str | Path, rel: str | Path) -> Path:
    """Copy the regular file ``src`` to ``root/rel`` (parents created) without leaving ``root``.

    Refuses (``ConfinementError``) a destination outside ``root`` after resolving its parent and a
    ``src`` that is a symlink or not a regular file (its target would be copied: a candidate could
    point it at any file of the host). An existing destination symlink is replaced, never written
    through.
    """
    dst = confined(root, rel, "destination")
    s = Path(src)
    if s.is_symlink() or not s.is_file():
        raise ConfinementError(f"source {s}: not a regular file (symlinks are not followed)")
    dst.parent.mkdir(parents=True, exist_ok=True)
    if not inside(root, dst.parent.relative_to(Path(root).resolve())):
        raise ConfinementError(f"destination {rel!s}: parent resolves outside {root}")
    if dst.is_symlink():
        dst.unlink()
    shutil.copy2(s, dst, follow_symlinks=False)
    return dst


def check_mount(spec: str, home: str | None = None) -> str:
    """Validate one ``HOST:CONTAINER[:ro|rw]`` bind mount of a recipe; return it unchanged.

    A leading ``~/`` on the host side stands for the runner's home directory. Raises
    :class:`ConfinementError` (a ``ValueError``) when a side is not absolute, or the host
    side (normalised, and resolved through symlinks where it exists) is ``/``, a system directory
    (:data:`SYSTEM_DIRS`), the Docker socket (:data:`DOCKER_SOCKETS`), or a home directory
    (``$HOME`` or one above it).
    """
    parts = spec.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
        raise ConfinementError(f"mount {spec!r}: expected HOST:CONTAINER or HOST:CONTAINER:ro")
    host, container = parts[0], parts[1]
    if host == "~" or host.startswith("~/"):  # the runner's home directory: expanded where it runs
        host = (home or os.environ.get("HOME") or os.path.expanduser("~")) + host[1:]
    for side, p in (("host", host), ("container", container)):
        if not p.startswith("/"):
            raise ConfinementError(f"mount {spec!r}: the {side} path must be absolute")
    homes = {posixpath.normpath(h) for h in (home or os.environ.get("HOME") or "", os.path.expanduser("~")) if h}
    candidates = {posixpath.normpath(host)}
    try:
        candidates.add(str(Path(host).resolve()))
    except OSError:
        pass
    for c in candidates:
        if c in SYSTEM_DIRS:
            raise ConfinementError(f"mount {spec!r}: will not mount the host's {c}")
        if any(c == d or c.startswith(d + "/") for d in DOCKER_SOCKETS):
            raise ConfinementError(f"mount {spec!r}: will not mount the Docker socket (it is root on the host)")
        for h in homes:
            if h not in ("", "/") and (c == h or h.startswith(c.rstrip("/") + "/")):
                raise ConfinementError(f"mount {spec!r}: will not mount a home directory ({h}); mount a "
                                       "subdirectory such as ~/.cache/huggingface")
    return spec


def open_nofollow(path: str | Path, mode: str = "a+") -> IO[str]:
    """Open ``path`` for a lock or state file, refusing a symlink in its place (``O_NOFOLLOW``)
    and creating it with mode 0600. Raises ``OSError`` (``ELOOP``) for a planted symlink."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    if "a" in mode:
        flags |= os.O_APPEND
    fd = os.open(path, flags, 0o600)
    return os.fdopen(fd, mode)
