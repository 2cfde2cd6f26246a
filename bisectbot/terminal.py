"""Make untrusted text inert on a terminal: the one place where escaping for the console lives.

Untrusted text is everything the bot did not write itself: model output, server messages and
logs, commit subjects and author names, tag names, file names, GitHub comments. On a terminal
such text can *act*: an ANSI/CSI sequence moves the cursor or clears the screen, an OSC
sequence sets the window title or plants a hyperlink (``ESC ] 8 ;;``), a carriage return
overwrites the line it is on ("culprit: X" printed over "culprit: Y"), bidi controls reorder
what is read (Trojan Source, CVE-2021-42574), and Rich reads ``[bold]``/``[link=…]``/``[/INST]``
as markup (a ``MarkupError`` crash, or styles and links the model chose).

* :func:`inert` -- every C0 control except newline and tab (one line by default: newlines too),
  DEL, every C1 control, bidi and zero-width characters, line/paragraph separators and lone
  surrogates become visible ``\\xNN`` / ``\\uNNNN`` text. ``ESC [ 2 J`` is printed as the six
  characters ``\\x1b[2J``: readable, never executed.
* :func:`markup` -- :func:`inert` plus :func:`rich.markup.escape`, for text put inside a Rich
  markup string; :func:`text` gives a :class:`rich.text.Text` (never parsed as markup).
* :func:`echo` -- ``click.echo`` of :func:`inert` text (newlines and tabs kept): what the CLI
  prints line by line.
* :func:`guard` -- the safety net under all of it: :class:`bisectbot.secrets.RedactingStream`
  (the process's stdout and stderr) passes every write through it, so a string that reached a
  print without :func:`inert` still cannot drive the terminal. Only SGR colour sequences
  (``ESC [ … m``, what Rich emits for styles) survive, and only when the stream is a terminal.

:mod:`bisectbot.sanitize` uses the same character table for GitHub Markdown.
"""

from __future__ import annotations

import re
from typing import Any

INVISIBLE: frozenset[int] = frozenset(
    {0x061C, 0x180E, 0xFEFF}  # Arabic letter mark (bidi), Mongolian vowel separator, BOM / zero-width no-break
    | set(range(0x200B, 0x2010))  # zero-width space/non-joiner/joiner, LRM, RLM
    | set(range(0x2028, 0x202F))  # line and paragraph separators, LRE RLE PDF LRO RLO
    | set(range(0x2060, 0x2065))  # word joiner, invisible operators
    | set(range(0x2066, 0x206A))  # LRI RLI FSI PDI
)
"""Code points that reorder or hide text (Unicode bidi controls, zero-width characters, line and
paragraph separators, BOM); shown as ``\\uNNNN``."""

_UNSAFE_CLASS = ("\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u180e\ufeff\u200b-\u200f\u2028-\u202e"
                 "\u2060-\u2064\u2066-\u2069\ud800-\udfff")
_UNSAFE = re.compile(f"[{_UNSAFE_CLASS}]")
_UNSAFE_OR_NL = re.compile(f"[{_UNSAFE_CLASS}\n\t]")
_UNSAFE_OR_TAB = re.compile(f"[{_UNSAFE_CLASS}\t]")
_UNSAFE_OR_NEWLINE = re.compile(f"[{_UNSAFE_CLASS}\n]")
_SGR = re.compile(r"\x1b\[[0-9;:]{0,64}m")


def escape_char(ch: str) -> str | None:
    """``\\xNN`` for a C0/DEL/C1 control, ``\\uNNNN`` for an invisible or bidi character or a lone
    surrogate, else None (newline and tab included: the caller decides about those)."""
    cp = ord(ch)
    if cp < 0x20 or 0x7F <= cp <= 0x9F:
        return f"\\x{cp:02x}"
    if cp in INVISIBLE or 0xD800 <= cp <= 0xDFFF:
        return f"\\u{cp:04x}"
    return None


def _sub(m: re.Match[str]) -> str:
    return escape_char(m.group(0)) or m.group(0)


def visible(text: str, *, keep_newlines: bool = True, keep_tabs: bool = True) -> str:
    """``text`` with control, bidi and other invisible characters as ``\\xNN``/``\\uNNNN``.

    ``\\r\\n`` becomes ``\\n``; newlines and tabs are kept unless told otherwise. No length cap;
    linear in ``len(text)``.
    """
    text = text.replace("\r\n", "\n")
    pattern = {(True, True): _UNSAFE, (True, False): _UNSAFE_OR_TAB, (False, True): _UNSAFE_OR_NEWLINE,
               (False, False): _UNSAFE_OR_NL}[(keep_newlines, keep_tabs)]
    return pattern.sub(_sub, text)


def inert(value: object, *, multiline: bool = False) -> str:
    """``str(value)`` safe to print on a terminal (``None`` gives ``""``).

    One line by default: newlines and tabs become ``\\x0a``/``\\x09`` too, so a commit subject
    or a model reply cannot forge a line of its own ("culprit: …"). ``multiline`` keeps
    newlines and tabs (log excerpts, several lines the bot composed).
    """
    if value is None:
        return ""
    s = value if isinstance(value, str) else str(value)
    if not multiline:
        s = s.replace("\r\n", "\n")
        return _UNSAFE_OR_NL.sub(_sub, s)
    return visible(s)


def markup(value: object, *, multiline: bool = False) -> str:
    """:func:`inert` text escaped for Rich markup (``[bold]`` shown as ``[bold]``, not applied)."""
    from rich.markup import escape

    return escape(inert(value, multiline=multiline))


def text(value: object, style: str = "", *, multiline: bool = False) -> Any:
    """A :class:`rich.text.Text` of :func:`inert` ``value`` with ``style``: a table cell that Rich
    never parses as markup."""
    from rich.text import Text

    return Text(inert(value, multiline=multiline), style=style)


def echo(message: object = "", *, err: bool = False, nl: bool = True) -> None:
    """``click.echo`` of :func:`inert` ``message`` (newlines and tabs kept)."""
    import click

    click.echo(inert(message, multiline=True), err=err, nl=nl)


def guard(s: str, *, keep_sgr: bool = False) -> str:
    """The stream-level safety net: :func:`visible` of ``s`` (newlines, tabs kept), except that
    with ``keep_sgr`` a complete SGR sequence (``ESC [ digits ; … m``: colours and bold only,
    no cursor movement, titles or links) is left as is. Returns ``s`` itself when nothing in
    it is unsafe (the common case costs one regex search)."""
    if not _UNSAFE.search(s):
        return s
    if not keep_sgr or "\x1b" not in s:
        return visible(s)
    out: list[str] = []
    pos = 0
    for m in _SGR.finditer(s):
        out.append(visible(s[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(visible(s[pos:]))
    return "".join(out)


__all__ = ["INVISIBLE", "echo", "escape_char", "guard", "inert", "markup", "text", "visible"]
