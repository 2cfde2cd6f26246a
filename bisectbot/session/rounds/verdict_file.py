"""Verdict files on disk: written redacted with their digest, read back bounded and checked.

A verdict file (``bisectbot round probe --out``) travels from a probe runner to the ledger
runner as an artifact, so it is untrusted input when it comes back (issue 24, input 3):

* :func:`write_verdict` redacts the *whole* document (:func:`bisectbot.secrets.redact_data`:
  the candidate's stdout/stderr tails in ``evidence.extra`` carried a passed-through
  ``HF_TOKEN``), writes it atomically and returns its SHA-256, which the probe job hands to
  ``reduce`` outside the artifact (the artifact's name, set from the step's output after every
  process of the probe has been killed), so a rewritten file no longer matches.
* :func:`read_verdict_bytes` opens a regular file only (never a FIFO, device, directory or
  symlink: a FIFO blocked ``round import`` forever while it held the writer lock) of at most
  :data:`MAX_VERDICT_BYTES`; each refusal is a :class:`BadInput` naming the file.
* :func:`load_digests` reads the ``sha256sum``-style list ``round import --digests`` takes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from ...errors import BadInput
from ...secrets import redact_data

#: Largest verdict file accepted (bytes). A probe's file is a few KiB (threshold table, log
#: tails of 4,000 characters each); 4 MiB leaves room for a long table and refuses a flood.
MAX_VERDICT_BYTES = 4 * 1024 * 1024


def sha256(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def render_verdict(doc: dict[str, Any]) -> bytes:
    """The bytes of a verdict file: ``doc`` redacted as a whole, JSON (sorted keys, indent 2)."""
    return (json.dumps(redact_data(doc), indent=2, sort_keys=True) + "\n").encode("utf-8")


def check_out(out: Path) -> None:
    """Refuse, before a probe spends its server start, an ``--out`` the verdict file cannot be written
    to as a new regular file: an existing path that is not a regular file (a character device, FIFO,
    directory or symlink: ``os.replace`` would put a file in its place), or a directory where no file
    can be created (``/proc``, read-only, missing permissions; tried with a scratch file, removed).
    Raises :class:`BadInput` naming the path (issue 41, items 12 and 13)."""
    try:
        st = os.lstat(out)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise BadInput(f"--out {out}: {e.strerror or e}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise BadInput(f"--out {out}: {_kind(st.st_mode)}, not a regular file: the verdict file would replace it; "
                       "give a file path")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        probe = out.with_name(f".{out.name}.{os.getpid()}.check")
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        os.unlink(probe)
    except OSError as e:
        raise BadInput(f"--out {out}: no file can be written in {out.parent}: {e.strerror or e}") from None


def write_verdict(doc: dict[str, Any], out: Path) -> tuple[bytes, str]:
    """Write ``doc`` (redacted) to ``out`` atomically, mode 0600; returns ``(bytes, sha256)``.
    Raises :class:`BadInput` (:func:`check_out`'s refusals, or the write's own error)."""
    data = render_verdict(doc)
    check_out(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, out)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise BadInput(f"--out {out}: cannot write the verdict file: {e.strerror or e}") from None
    return data, sha256(data)


def read_verdict_bytes(path: Path, max_bytes: int = MAX_VERDICT_BYTES) -> bytes:
    """The bytes of the regular file ``path`` (at most ``max_bytes``). Raises :class:`BadInput`
    naming the file when it is missing, not a regular file (FIFO, socket, device, directory,
    symlink: opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked again after opening) or too large."""
    try:
        st = os.lstat(path)
    except OSError as e:
        raise BadInput(f"{path}: cannot read verdict file: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise BadInput(f"{path}: not a regular file ({_kind(st.st_mode)}): refused")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise BadInput(f"{path}: cannot read verdict file: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):  # swapped between lstat and open
            raise BadInput(f"{path}: not a regular file ({_kind(st.st_mode)}): refused")
        if st.st_size > max_bytes:
            raise BadInput(f"{path}: {st.st_size} bytes, over the {max_bytes}-byte limit of a verdict file: refused")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise BadInput(f"{path}: over the {max_bytes}-byte limit of a verdict file: refused")
    return data


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISLNK, "a symlink"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def load_digests(path: Path) -> dict[str, str]:
    """``{file name: sha256}`` from ``SHA256  NAME`` lines (``sha256sum`` output; a name is a base
    name). Raises :class:`BadInput` on an unreadable file or a malformed line."""
    raw = read_verdict_bytes(path)
    out: dict[str, str] = {}
    for n, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(None, 1)
        digest = parts[0].lower()
        if len(parts) != 2 or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise BadInput(f"{path}:{n}: expected 'SHA256  NAME', got {line[:80]!r}")
        out[Path(parts[1].strip().lstrip("*")).name] = digest
    return out
