"""Untrusted text (model output, server logs, commit subjects, reasons) made safe for the site's HTML.

The site is HTML, not Markdown, so :func:`bisectbot.sanitize.sanitize` (which
backslash-escapes Markdown punctuation) is not used for it; the same steps that matter in HTML
are reused from :mod:`bisectbot.sanitize` and run on every string before it reaches a
template:

* secrets redacted (:func:`~bisectbot.sanitize.redact`), bisectbot markers broken
  (:func:`~bisectbot.sanitize.neutralise_markers`), host paths shortened
  (:func:`~bisectbot.sanitize.shorten_paths`: the runner's layout is not published);
* control, bidi and zero-width characters shown as ``\\xNN`` / ``\\uNNNN``
  (:func:`~bisectbot.sanitize.visible`, Trojan Source);
* the length bounded (:func:`~bisectbot.sanitize.truncate_text`, characters);
* HTML escaping is left to Jinja2's autoescape (every template, no ``|safe`` on data): ``<script>``
  arrives as the text ``<script>``.

Links are kept only when they are plain ``http(s)`` URLs of safe characters
(:func:`safe_url`); anything else is shown as text, never put in an ``href``.
"""

from __future__ import annotations

import re

from ..sanitize import neutralise_markers, redact, shorten_paths, truncate_text, visible
from ..secrets import known_secrets

INLINE_LIMIT = 300
"""Characters of an inline value (a reason, a label, a table cell) before it is cut."""

BLOCK_LIMIT = 20_000
"""Characters of a block (a session log) before it is cut (its head is kept: the log reads top down)."""

MAX_TABLE_ROWS = 40
"""Size-table rows kept per probe (a threshold search probes at most ~12 sizes)."""

_URL = re.compile(r"https?://[A-Za-z0-9.-]+(?::\d+)?(?:/[A-Za-z0-9._~/%?=&+#:-]*)?")


def _visible(s: str, block: bool) -> str:
    return visible(s, keep_newlines=block, keep_tabs=block)


_secrets: list[str] | None = None
_cache: dict[tuple[str, int], str] = {}
_CACHE_MAX = 200_000


def refresh_secrets() -> None:
    """Look the secrets to redact up again (:func:`bisectbot.secrets.known_secrets`) and forget
    cleaned strings; called at the start of each render. Between calls the secrets are looked up
    once, not once per string (a year of nights is ~100,000 strings)."""
    global _secrets
    _secrets = list(known_secrets())
    _cache.clear()


def _redact(s: str) -> str:
    if _secrets is None:
        refresh_secrets()
    return redact(s, _secrets)


def clean(text: object, limit: int = INLINE_LIMIT) -> str:
    """``text`` as one safe line of at most ``limit`` characters (before HTML escaping): secrets
    redacted, markers broken, host paths shortened, newlines and tabs as spaces, control and
    invisible characters escaped. ``None`` gives ``""``."""
    if text is None:
        return ""
    s = text if isinstance(text, str) else str(text)
    key = (s, limit)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    s = s[: limit * 4 + 64]  # escapes only grow the text: what is cut here cannot show
    s = _visible(shorten_paths(neutralise_markers(_redact(s))), block=False)
    out = truncate_text(s, limit, keep="head").replace("\n", " ").strip() if len(s) > limit else s
    if len(_cache) < _CACHE_MAX:
        _cache[key] = out
    return out


def block(text: object, limit: int = BLOCK_LIMIT, keep: str = "head") -> str:
    """``text`` as a safe multi-line block (for ``<pre>``) of at most ``limit`` characters; newlines
    kept, everything else as :func:`clean`. ``keep`` (``head``/``tail``/``both``) chooses what
    survives a cut."""
    if text is None:
        return ""
    s = text if isinstance(text, str) else str(text)
    if len(s) > limit * 4 + 64:
        s = s[: limit * 4 + 64] if keep == "head" else s[-(limit * 4 + 64):]
    s = _visible(shorten_paths(neutralise_markers(_redact(s.replace("\r\n", "\n")))), block=True)
    return truncate_text(s, limit, keep=keep)


def safe_url(url: object) -> str | None:
    """``url`` when it is a plain ``http``/``https`` URL of safe characters (no quotes, spaces,
    brackets, ``javascript:``), at most 500 characters, and carries no secret; else ``None``."""
    if not isinstance(url, str) or len(url) > 500 or not _URL.fullmatch(url):
        return None
    return url if _redact(url) == url else None


__all__ = ["BLOCK_LIMIT", "INLINE_LIMIT", "block", "clean", "refresh_secrets", "safe_url"]
