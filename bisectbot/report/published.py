"""Where the dashboard publishes a run's threshold chart, so an issue can embed it (issue 25, input 5).

GitHub's REST API takes no image uploads (``shared/contracts``: no upload endpoint), so an issue
can show a chart only from an address on the web. The dashboard (``bisectbot dashboard --report``,
the nightly workflow's Pages job) copies each archived report's ``threshold.png`` to
``<site>/charts/<recipe>/<sha256 of the PNG, 16 hex>.png``; the issue, rendered before that deploy,
embeds the same address under the recipe's ``report.pages_url``. The name is the PNG's content
hash, so both sides compute it from the bytes alone and a later night never overwrites it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

CHARTS_DIR = "charts"
"""The charts' folder at the root of the published site."""

MAX_CHART_BYTES = 4 * 1024 * 1024
"""A chart larger than this (bytes) is not published (one of ours is 30-80 KB)."""

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

_SLUG = re.compile(r"[^a-z0-9._-]+")


def chart_path(recipe: str, png: bytes) -> str:
    """``charts/<recipe slug>/<16 hex of SHA-256(png)>.png``, relative to the site's root."""
    slug = _SLUG.sub("-", recipe.lower()).strip("-.")[:100] or "recipe"
    return f"{CHARTS_DIR}/{slug}/{hashlib.sha256(png).hexdigest()[:16]}.png"


def chart_url(pages_url: str, recipe: str, png: bytes) -> str:
    """The published address of chart ``png`` of ``recipe`` under ``pages_url`` (the site's root)."""
    return f"{pages_url.rstrip('/')}/{chart_path(recipe, png)}"


def publishable(path: Path) -> bytes | None:
    """The bytes of ``path`` when it is a regular PNG file of at most :data:`MAX_CHART_BYTES`, else
    None (an artifact is not trusted to be what its name says)."""
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_CHART_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    return data if data.startswith(PNG_MAGIC) else None


__all__ = ["CHARTS_DIR", "MAX_CHART_BYTES", "chart_path", "chart_url", "publishable"]
