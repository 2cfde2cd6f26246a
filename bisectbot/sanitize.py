"""Make untrusted text (model output, server logs, commit subjects) safe to put in GitHub Markdown.

Everything that came from a model or a log passes through one of two functions:

* :func:`sanitize` -- *inline* text (table cells, summary lines): control characters are
  shown as ``\\xNN`` / ``\\uNNNN``, HTML is escaped (``<script>`` becomes ``&lt;script&gt;``),
  Markdown punctuation that could break the layout is backslash-escaped, ``@mentions`` and
  ``#123`` cross-references are neutralised with a zero-width space (``@&#8203;someone``,
  the technique Renovate and Dependabot use), and the result is capped at ``limit`` characters.
* Both break bisectbot's hidden markers (``<!-- bisectbot:fingerprint=… -->``) so text from a
  model or a stranger can never steer deduplication (:func:`neutralise_markers`).
* :func:`code_block` -- *block* text (log excerpts, full replies): the same control-character
  treatment, then a fenced code block whose fence is longer than any backtick run inside, so
  nothing inside is rendered (no HTML, no mentions, no references).

Lengths are counted in Python characters (code points). :func:`github_length` counts the way
GitHub's body limit does in the worst case (UTF-16 code units); :data:`GITHUB_BODY_LIMIT`
is the documented 65,536-character maximum of an issue or comment body (GitHub REST docs,
"Create an issue": body over the limit is rejected with 422).
"""

from __future__ import annotations

import re

from .terminal import escape_char as _escape_char
from .terminal import visible  # noqa: F401  (re-exported: one character table for terminal and Markdown)

GITHUB_BODY_LIMIT = 65_536
"""Maximum characters of an issue/comment body on GitHub (REST API, 422 beyond)."""

TRUNCATION_MARK = "… [{n} characters cut]"

_MD_ESCAPE = set("\\`*_[]|~")
_HTML_ESCAPE = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}
_ZWSP = "&#8203;"
_LINE_START_SPECIAL = set("#>-+=!")


_GITHUB_REF_URL = re.compile(
    r"(?i)github(?=\.com/[\w.-]+/[\w.-]+/(?:issues|pull|pulls|discussions)/\d)")
"""A full issue / pull-request / discussion URL (``https://github.com/o/r/issues/123``): GitHub
turns it into a cross-reference ("mentioned this") just like ``o/r#123`` (issue 13)."""


def _inline_tokens(text: str, refs: bool = True, html: bool = False) -> list[str]:
    """Split sanitized output into atomic tokens (an entity or escape is never cut in half).
    ``html``: the text goes inside an HTML block (``<summary>``), where GitHub renders no Markdown and
    shows a backslash escape literally: HTML entities only, no Markdown escapes."""
    text = text.replace("\r\n", "\n")
    tokens: list[str] = []
    # a zero-width space after "github" of a github.com issue/PR URL: no longer a link or a reference
    ref_urls = {m.end() - 1 for m in _GITHUB_REF_URL.finditer(text)} if refs else set()
    n = len(text)
    for i, ch in enumerate(text):
        nxt = text[i + 1] if i + 1 < n else ""
        prev = text[i - 1] if i > 0 else ""
        if ch in "\n\t":
            tokens.append(" ")
            continue
        esc = _escape_char(ch)
        if esc is not None:
            tokens.append(esc if html else esc.replace("\\", "\\\\"))  # shown literally as \xNN
            continue
        if ch == "@" and (nxt.isalnum() or nxt in "-_"):
            tokens.append("@" + _ZWSP)
        elif ch == "#" and nxt.isdigit() and refs:
            tokens.append(("#" if html else "\\#") + _ZWSP)
        elif refs and ch == "-" and prev.upper() == "H" and i >= 2 and text[i - 2].upper() == "G" and nxt.isdigit():
            tokens.append("-" + _ZWSP)  # GH-123 cross-reference
        elif ch in _HTML_ESCAPE:
            tokens.append(_HTML_ESCAPE[ch])
        elif ch in _MD_ESCAPE and not html:
            tokens.append("\\" + ch)
        elif ch in _LINE_START_SPECIAL and not tokens and not html:
            tokens.append("\\" + ch)  # would start a heading/quote/list/table rule
        elif i in ref_urls:
            tokens.append(ch + _ZWSP)
        elif ch == ":" and nxt == "/" and prev.isalpha():
            tokens.append(ch)  # keep URLs readable; autolinks are harmless
        else:
            tokens.append(ch)
    return tokens


def sanitize(text: object, limit: int, *, refs: bool = True, html: bool = False) -> str:
    """Return ``text`` as safe *inline* Markdown of at most ``limit`` characters.

    Shapes: any object (``str(text)``; ``None`` gives ``""``) in, one line out (newlines and
    tabs become spaces). ``limit`` counts characters of the *output*; when the text does not
    fit, it is cut at a token boundary and ends with ``… [N characters cut]`` (N counts input
    characters left out). Raises ``ValueError`` when ``limit`` < 1.

    What it does, in order: control characters (C0, DEL, C1) become ``\\xNN`` and invisible
    bidi/zero-width characters ``\\uNNNN`` (shown literally); ``& < > "`` become HTML entities;
    ``\\ ` * _ [ ] | ~`` are backslash-escaped; a leading ``# > - + = !`` is escaped;
    ``@name`` becomes ``@&#8203;name``, ``#123`` becomes ``\\#&#8203;123`` and a full
    ``https://github.com/o/r/issues/123`` (or ``pull``) URL gets a ``&#8203;`` after ``github``,
    so GitHub neither notifies nor cross-links. ``refs=False`` leaves ``#123`` as is (local files that GitHub never
    renders as issue content); mentions are always neutralised. ``html=True``: text inside an HTML block
    (a ``<details><summary>`` line), where GitHub renders no Markdown and would show ``\\[`` as typed:
    the same, less the backslash escapes (``#123`` becomes ``#&#8203;123``).
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    if text is None:
        return ""
    s = text if isinstance(text, str) else str(text)
    n_input = len(s)
    # Each input character gives at least one output character: more than limit+64 cannot show.
    s = neutralise_markers(redact(s[: limit + 64]))
    n_input += len(s) - min(n_input, limit + 64)  # redaction changes lengths
    tokens = _inline_tokens(s, refs, html)
    total = sum(len(t) for t in tokens)
    if total <= limit and n_input <= len(s):
        return "".join(tokens)
    out: list[str] = []
    used = 0
    short = limit < 40  # too small for "… [N characters cut]": a bare ellipsis
    for idx, tok in enumerate(tokens):
        mark = "…" if short else TRUNCATION_MARK.format(n=max(1, n_input - idx))
        if used + len(tok) + len(mark) > limit:
            return "".join(out) + mark
        out.append(tok)
        used += len(tok)
    mark = "…" if short else TRUNCATION_MARK.format(n=max(1, n_input - len(tokens)))
    return "".join(out) + mark


_API_LINK = re.compile(r"(?:https://[A-Za-z0-9.-]+(?::\d+)?/[A-Za-z0-9._~/%#?=&+-]*|#\d+)")


def link(url: object, limit: int = 300) -> str:
    """A link the bot got from GitHub's API (an issue, comment or run address) or ``#N``, kept
    as a working link when it is a plain ``https`` URL of safe characters (no spaces, quotes,
    brackets or markup); anything else goes through :func:`sanitize`. Never use it for text
    from model output or comments: those are :func:`sanitize` d, cross-reference URLs broken."""
    text = str(url)
    if len(text) <= limit and _API_LINK.fullmatch(text):
        return text
    return sanitize(text, limit)


def truncate_text(text: str, limit: int, keep: str = "tail") -> str:
    """Cut plain text to at most ``limit`` characters, keeping ``head``, ``tail`` or ``both`` ends.

    The cut is marked with ``… [N characters cut]`` on its own line. ``limit`` < 40 keeps
    only the mark's ellipsis. Raises ``ValueError`` for an unknown ``keep``.
    """
    if keep not in ("head", "tail", "both"):
        raise ValueError(f"keep must be head, tail or both, got {keep!r}")
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    mark = "\n" + TRUNCATION_MARK.format(n=cut + 40) + "\n"
    room = max(0, limit - len(mark))
    cut = len(text) - room
    mark = "\n" + TRUNCATION_MARK.format(n=cut) + "\n"
    room = max(0, limit - len(mark))
    if room == 0:
        return "…"[:limit]
    if keep == "head":
        return text[:room] + mark
    if keep == "tail":
        return mark + text[len(text) - room:]
    half = room // 2
    return text[:half] + mark + text[len(text) - (room - half):]


_BACKTICKS = re.compile(r"`+")


def code_block(text: str, limit: int, keep: str = "tail", lang: str = "") -> str:
    """Return ``text`` as a fenced Markdown code block of at most ``limit`` characters in total.

    Control and invisible characters are shown as ``\\xNN``/``\\uNNNN``; the fence is longer
    than the longest backtick run inside, so the text cannot close it. Nothing inside a code
    block is rendered by GitHub: no HTML, no @mentions, no #references. ``keep`` chooses what
    survives a cut (``tail`` for logs: the end is where the error is). ``lang`` must be a plain
    word (``sh``, ``json``) or empty. Raises ``ValueError`` for an invalid ``lang``.
    """
    if lang and not re.fullmatch(r"[A-Za-z0-9_+-]{1,20}", lang):
        raise ValueError(f"invalid code block language {lang!r}")
    if len(text) > limit + 64:  # escapes only grow the text: cut the input first (fast on huge logs)
        room = limit + 64
        text = text[:room] if keep == "head" else text[-room:] if keep == "tail" else (
            text[: room // 2] + text[-(room // 2):])
    body = visible(neutralise_markers(redact(text)))
    runs = [len(m.group(0)) for m in _BACKTICKS.finditer(body)]
    fence = "`" * max(3, (max(runs) + 1) if runs else 3)
    overhead = 2 * len(fence) + len(lang) + 3  # fences, lang, 3 newlines
    body = truncate_text(body, max(0, limit - overhead), keep=keep)
    # A cut can only remove backticks, so the fence is still long enough.
    return f"{fence}{lang}\n{body.rstrip(chr(10))}\n{fence}"


def github_length(text: str) -> int:
    """Length as GitHub's body limit counts it in the worst case: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


# One redactor for the whole bot (bisectbot.secrets); re-exported here for the report code.

_ANY_MARKER_RE = re.compile(r"<!--\s*bisectbot:", re.IGNORECASE)
_MARKER_WORD_RE = re.compile(r"bisectbot:(?=\s*(?:fingerprint|ack|redetected|not-reproduced|seen|[a-z-]+)\s*=)",
                             re.IGNORECASE)


def neutralise_markers(text: str) -> str:
    """``text`` (untrusted: model output, logs, commit subjects) with every bisectbot marker broken:
    ``bisectbot:name=`` becomes ``bisectbot\u200b:name=`` (shown, never matched by a marker search)."""
    if "bisectbot" not in text.lower():
        return text
    text = _ANY_MARKER_RE.sub(lambda m: m.group(0)[:-1] + "\u200b:", text)
    return _MARKER_WORD_RE.sub(lambda m: m.group(0)[:-1] + "\u200b:", text)

from .secrets import redact, register_secret  # noqa: E402,F401  (re-exported)

_HOST_PATH_RE = re.compile(r"(?<![\w/:.~-])/(?:[\w.+@-]+/)+([\w.+@-]+)")


def shorten_paths(text: str) -> str:
    """Replace absolute host paths (``/var/lib/runner/state/logs/x.log``) by ``…/x.log``.

    For text that leaves the machine (GitHub issues and comments): the runner's directory
    layout is noise there and should not be published. URLs are left alone (a path right
    after ``:``, ``/`` or a word character is not a host path).
    """
    return _HOST_PATH_RE.sub(lambda m: "…/" + m.group(1), text)
