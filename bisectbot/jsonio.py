"""JSON from outside the process, parsed without a way to crash the bot (issue 41, item 12).

Every JSON document the bot reads -- verdict files, ``result.json``/``report.json``, ledger rows,
lock files, image labels, a model server's or GitHub's or a registry's replies -- comes through
:func:`loads`. Python's parser recurses per nesting level: 100,000 nested brackets raise
``RecursionError``, which no ``except ValueError`` at a call site catches (exit 70, and the genuine
files of the same ``round import`` were lost). :func:`loads` turns that into :class:`ValueError`,
and refuses a document nested deeper than :data:`MAX_DEPTH` before a later recursive walk of it
(redaction, rendering) could hit the same limit.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64
"""Deepest nesting (objects and arrays) accepted. None of the bot's formats nests deeper than about
ten levels (a probe row's ``table[i].evidence.reference`` is six below the file's top), GitHub's and the
registry's replies a few more; 64 leaves room for formats to grow and stays far below Python's
recursion limit (1,000 frames), which the recursive walks of a document share with their callers."""


def _depth_ok(doc: Any) -> bool:
    """Whether ``doc`` nests at most :data:`MAX_DEPTH` levels (iterative: no recursion of its own)."""
    stack = [(doc, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, dict):
            if d > MAX_DEPTH:
                return False
            stack.extend((v, d + 1) for v in node.values())
        elif isinstance(node, list):
            if d > MAX_DEPTH:
                return False
            stack.extend((v, d + 1) for v in node)
    return True


def loads(data: str | bytes | bytearray) -> Any:
    """``json.loads(data)``; raises :class:`ValueError` (``json.JSONDecodeError`` for syntax, a plain
    ``ValueError`` naming the depth otherwise) for anything that is not JSON of at most
    :data:`MAX_DEPTH` levels."""
    try:
        doc = json.loads(data)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than Python can parse (more than {MAX_DEPTH} levels "
                         "accepted)") from None
    if not _depth_ok(doc):
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
    return doc


__all__ = ["MAX_DEPTH", "loads"]
