"""Untrusted text (model output, server logs, commit subjects, reasons) made safe for the site's HTML.

The site is HTML, not Markdown, so :func:`bisectbot.report.sanitize.sanitize` (which
backslash-escapes Markdown punctuation) is not used for it; the same steps that matter in HTML
are reused from :mod:`bisectbot.report.sanitize` and run on every string before it reaches a
template:

* secrets redacted (:func:`~bisectbot.report.sanitize.redact`), bisectbot markers broken
  (:func:`~bisectbot.report.sanitize.neutralise_markers`), host paths shortened
  (:func:`~bisectbot.report.sanitize.shorten_paths`: the runner's layout is not published);
* control, bidi and zero-width characters shown as ``\\xNN`` / ``\\uNNNN``
  (:func:`~bisectbot.report.sanitize.visible`, Trojan Source);
* the length bounded (:func:`~bisectbot.report.sanitize.truncate_text`, characters);
* HTML escaping is left to Jinja2's autoescape (every template, no ``|safe`` on data): ``<script>``
  arrives as the text ``<script>``.

Links are kept only when they are plain ``http(s)`` URLs of safe characters
(:func:`safe_url`); anything else is shown as text, never put in an ``href``.
"""

from __future__ import annotations

import re

from ..report.sanitize import neutralise_markers, redact, shorten_paths, truncate_text, visible

INLINE_LIMIT = 300
"""Characters of an inline value (a reason, a label, a table cell) before it is cut."""

BLOCK_LIMIT = 20_000
"""Characters of a block (a session log) before it is cut (its head is kept: the log reads top down)."""

_URL = re.compile(r"https?://[A-Za-z0-9.-]+(?::\d+)?(?:/[A-Za-z0-9._~/%?=&+#:-]*)?")


def clean(text: object, limit: int = INLINE_LIMIT) -> str:
    """``text`` as one safe line of at most ``limit`` characters (before HTML escaping): secrets
    redacted, markers broken, host paths shortened, newlines and tabs as spaces, control and
    invisible characters escaped. ``None`` gives ``""``."""
    if text is None:
        return ""
    s = text if isinstance(text, str) else str(text)
    s = s[: limit * 4 + 64]  # escapes only grow the text: what is cut here cannot show
    s = visible(shorten_paths(neutralise_markers(redact(s))), keep_newlines=False, keep_tabs=False)
    return truncate_text(s, limit, keep="head").replace("\n", " ").strip() if len(s) > limit else s


def block(text: object, limit: int = BLOCK_LIMIT, keep: str = "head") -> str:
    """``text`` as a safe multi-line block (for ``<pre>``) of at most ``limit`` characters; newlines
    kept, everything else as :func:`clean`. ``keep`` (``head``/``tail``/``both``) chooses what
    survives a cut."""
    if text is None:
        return ""
    s = text if isinstance(text, str) else str(text)
    if len(s) > limit * 4 + 64:
        s = s[: limit * 4 + 64] if keep == "head" else s[-(limit * 4 + 64):]
    s = visible(shorten_paths(neutralise_markers(redact(s))), keep_newlines=True, keep_tabs=True)
    return truncate_text(s, limit, keep=keep)


def safe_url(url: object) -> str | None:
    """``url`` when it is a plain ``http``/``https`` URL of safe characters (no quotes, spaces,
    brackets, ``javascript:``), at most 500 characters, and carries no secret; else ``None``."""
    if not isinstance(url, str) or len(url) > 500 or not _URL.fullmatch(url):
        return None
    return url if redact(url) == url else None


__all__ = ["BLOCK_LIMIT", "INLINE_LIMIT", "block", "clean", "safe_url"]
