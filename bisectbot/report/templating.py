"""The Jinja2 environment of every Markdown rendering, and fitting a rendering into a size limit.

:func:`template` loads ``templates/NAME`` (autoescape off: Markdown; values reach the text through
the ``s``, ``h`` (inside an HTML block: ``<summary>``) and ``code`` filters, i.e.
:mod:`bisectbot.sanitize`); :func:`fit`
re-renders with smaller budgets (:data:`_SHRINK_STEPS`, least important first) until the text
fits ``limit`` characters, then cuts hard (:func:`_hard_cut`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jinja2

from ..sanitize import code_block, github_length, sanitize

TEMPLATES = Path(__file__).parent / "templates"


DEFAULT_BUDGET: dict[str, int] = {
    "excerpt_chars": 6000, "max_excerpts": 12, "reason_chars": 300, "max_rows": 400,
    "note_chars": 2000, "patch_rows": 100, "env_chars": 300,
}


# Least important first: each step lowers one budget, re-rendering after each.
_SHRINK_STEPS: list[tuple[str, int]] = [
    ("excerpt_chars", 3000), ("excerpt_chars", 1500), ("max_excerpts", 6), ("excerpt_chars", 800),
    ("max_excerpts", 3), ("excerpt_chars", 400), ("max_excerpts", 1), ("max_excerpts", 0),
    ("reason_chars", 120), ("max_rows", 100), ("reason_chars", 60), ("max_rows", 40), ("note_chars", 400),
    ("max_rows", 16), ("reason_chars", 30), ("note_chars", 100), ("patch_rows", 20), ("max_rows", 6),
    ("env_chars", 80), ("patch_rows", 5),
]


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=False,  # Markdown, not HTML: values are escaped by the `s`/`code` filters
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    @jinja2.pass_context
    def s_filter(ctx: Any, v: Any, limit: int = 200) -> str:
        return sanitize(v, int(limit), refs=bool(ctx.get("for_github", True)))

    @jinja2.pass_context
    def h_filter(ctx: Any, v: Any, limit: int = 200) -> str:  # inside an HTML block: no Markdown escapes
        return sanitize(v, int(limit), refs=bool(ctx.get("for_github", True)), html=True)

    env.filters["s"] = s_filter
    env.filters["h"] = h_filter
    env.filters["code"] = lambda v, limit=4000, keep="tail", lang="": code_block(str(v), int(limit), keep, lang)
    return env


_ENV: jinja2.Environment | None = None


def template(name: str) -> jinja2.Template:
    global _ENV
    if _ENV is None:
        _ENV = _env()
    return _ENV.get_template(name)


def fit(render: Any, limit: int) -> str:
    """Render with shrinking budgets until ``github_length`` is within ``limit``."""
    budget = dict(DEFAULT_BUDGET)
    text = render(budget)
    steps = iter(_SHRINK_STEPS)
    while github_length(text) > limit:
        step = next(steps, None)
        if step is None:
            return _hard_cut(text, limit)
        key, value = step
        if budget[key] > value:
            budget[key] = value
            text = render(budget)
    return text


def _hard_cut(text: str, limit: int) -> str:
    note = "\n\n… report cut to fit GitHub's 65,536-character limit; see the run's artifacts.\n"
    room = limit - len(note) - 16
    out = text
    while github_length(out) > room:
        out = out[: max(0, len(out) - (github_length(out) - room) - 1)]
        out = out[: out.rfind("\n")] if "\n" in out else out
    fences = [ln for ln in out.splitlines() if re.match(r"^`{3,}", ln)]
    if len(fences) % 2 == 1:
        out += "\n" + re.match(r"^`{3,}", fences[-1]).group(0)  # type: ignore[union-attr]
    return out + note
