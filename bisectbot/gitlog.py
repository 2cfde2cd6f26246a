"""Reading ``git log`` output without holding it whole: fields parsed a few MB at a time, each
cut at :data:`MAX_FIELD_BYTES`, subjects at :data:`MAX_SUBJECT_CHARS` (issue 41, items 15 and 16).
A low-layer utility: :mod:`bisectbot.sources.git`, pin ranges and :mod:`bisectbot.components`
read repositories' text through it."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

from .errors import BadInput

MAX_SUBJECT_CHARS = 256
"""Longest commit subject (and author name) kept, in characters; the rest becomes ``…``. A title is what
GitHub shows unfolded (72 characters) and git's convention asks 50; 256 keeps every such title whole with
room to spare, while a subject of megabytes (a message pasted into one line, issue 41 item 16) is neither
held per candidate nor printed whole on the terminal, in reports or in the ledger."""

MAX_FIELD_BYTES = 64 * 1024
"""Longest field of ``git log`` output read into memory (bytes); the rest of a longer one is read and
dropped. Above a subject or author of :data:`MAX_SUBJECT_CHARS` characters (4 bytes each at most in
UTF-8) and the parents of an octopus merge of 1,500 parents (41 bytes each; the Linux kernel's
largest has 66), so only a field that is cut for display anyway is cut here."""

_READ_BYTES = 8 * 1024 * 1024
"""``git log`` output is parsed this many bytes at a time (a 50,000-commit range is ~8 MB)."""


def _log_fields(f: Any, keep: int = MAX_FIELD_BYTES, size: int = _READ_BYTES) -> Any:
    """The NUL-separated fields of the binary file ``f`` as lists of ``str`` (UTF-8, errors
    replaced), read :data:`_READ_BYTES` at a time; each field cut at ``keep`` bytes. Memory is
    bounded by one read and one cut field, whatever the file holds (a subject of 200 MB)."""
    pending, skipping = b"", False
    while True:
        chunk = f.read(size)
        if not chunk:
            break
        cut = chunk.rfind(b"\x00")
        if cut < 0:  # the field in progress goes on
            if not skipping:
                pending += chunk[: keep + 1 - len(pending)]
                skipping = len(pending) > keep
            continue
        parts = chunk[:cut].split(b"\x00")
        parts[0] = pending + (parts[0][: keep + 1] if not skipping else b"")
        rest = chunk[cut + 1:]
        pending, skipping = rest[: keep + 1], len(rest) > keep
        if max(map(len, parts)) > keep:
            parts = [x[:keep] for x in parts]
        yield b"\x00".join(parts).decode("utf-8", "replace").split("\x00")
        del parts
    if pending:
        yield [pending[:keep].decode("utf-8", "replace")]


def log_records(f: Any, width: int) -> Any:
    """The fields of :func:`_log_fields` in whole records of ``width`` fields: lists whose length is
    a multiple of ``width``, a record split across two reads carried to the next list."""
    carry: list[str] = []
    for fields in _log_fields(f):
        fields = carry + fields if carry else fields
        whole = len(fields) - len(fields) % width
        carry = fields[whole:]
        yield fields[:whole]


def log_subjects(path: str | Path, *args: str) -> list[tuple[str, str]]:
    """``(sha, subject)`` of each commit ``git -C path log ARGS`` lists, in git's order, each
    subject cut at :data:`MAX_SUBJECT_CHARS` (``…``); git's output is parsed
    :data:`_READ_BYTES` at a time with each field cut at :data:`MAX_FIELD_BYTES`, never held whole
    (a 100 MB subject cost every reader of a pin range or a nightly diff 300 MB; hostile pass of
    issue 41). Raises :class:`BadInput` naming git's error."""
    out: list[tuple[str, str]] = []
    with tempfile.TemporaryFile() as raw, tempfile.TemporaryFile() as err:
        p = subprocess.run(["git", "-C", str(path), "log", "-z", "--no-color", "--format=%H%x00%s", *args],
                           stdout=raw, stderr=err)
        if p.returncode != 0:
            err.seek(0)
            msg = err.read(64 * 1024).decode("utf-8", "replace").strip().splitlines()
            raise BadInput(f"{path}: git log {' '.join(args)} failed: {msg[-1] if msg else p.returncode}")
        raw.seek(0)
        for fields in log_records(raw, 2):
            for sha, subject in zip(fields[0::2], fields[1::2]):
                out.append((sha, subject if len(subject) <= MAX_SUBJECT_CHARS else subject[:MAX_SUBJECT_CHARS] + "…"))
    return out
