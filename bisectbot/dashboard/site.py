"""Write the static site, re-rendering only the pages whose inputs changed.

Layout (relative links only, so the site works from ``file://`` and from GitHub Pages under any
path): ``index.html``, ``r/<recipe>.html`` per recipe, ``b/<key>.html`` per bisection. No
JavaScript; each page inlines its stylesheet and carries a Content-Security-Policy that allows
that stylesheet (by hash) and nothing else -- no script runs even if escaping failed.

Incremental: a page's *input hash* is SHA-256 over its inputs, the templates and the bisectbot
version: for the index and a recipe page their context (the cleaned data they show, see
:mod:`.views`); for a bisection page a cheap key of the ledger rows it shows (each session's
update time, status and event count, the archived report's key, the issue's state:
:meth:`.data.Bisection.inputs`), so an unchanged bisection costs neither its context nor a render. ``<out>/.bisectbot-dashboard.json``
(hidden: GitHub's upload-pages-artifact leaves dot files out) maps each page to the hash it was
rendered from; a page whose hash and file are unchanged is not rendered again. Pages the
manifest lists that the ledger no longer yields are removed; no other file is ever touched.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from .. import __version__
from .. import jsonio as _jsonio
from .data import RecipeData
from .views import bisection_context, recipe_context, slug

MANIFEST = ".bisectbot-dashboard.json"
MANIFEST_VERSION = 1


@dataclass
class RenderStats:
    """What one render did: pages ``rendered`` (written), ``unchanged`` (skipped by hash),
    ``removed``; ``seconds`` wall time; ``written`` the relative paths of the pages written;
    ``charts`` the threshold charts published this time (``charts/<recipe>/<hash>.png``)."""

    rendered: int = 0
    unchanged: int = 0
    removed: int = 0
    seconds: float = 0.0
    written: list[str] = field(default_factory=list)
    charts: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"{self.rendered} page(s) rendered, {self.unchanged} unchanged, {self.removed} removed "
                f"in {self.seconds:.2f} s")


def _enc(o: Any) -> Any:
    if dataclasses.is_dataclass(o):
        return o.__dict__
    if isinstance(o, datetime):
        return o.isoformat()
    raise TypeError(type(o).__name__)


class _Templates:
    def __init__(self) -> None:
        import jinja2

        root = resources.files("bisectbot.dashboard") / "templates"
        self.css = (root / "style.css").read_text(encoding="utf-8")
        digest = hashlib.sha256()
        sources = {}
        for f in sorted(root.iterdir(), key=lambda f: f.name):
            if f.name.endswith((".j2", ".css")):
                sources[f.name] = f.read_text(encoding="utf-8")
                digest.update(f.name.encode() + b"\0" + sources[f.name].encode() + b"\0")
        self.hash = digest.hexdigest()
        self.env = jinja2.Environment(loader=jinja2.DictLoader(sources), autoescape=True,
                                      undefined=jinja2.StrictUndefined, trim_blocks=False)
        self.css_hash = "sha256-" + base64.b64encode(hashlib.sha256(self.css.encode()).digest()).decode()

    def render(self, name: str, ctx: dict[str, Any]) -> str:
        from markupsafe import Markup

        return self.env.get_template(name).render(**ctx, css=Markup(self.css), css_hash=self.css_hash)


Page = tuple[str, str, Any, str | None]
"""(relative path, template, context or a function making it, input key or None: the context's JSON)."""


def _pages(recipes: list[RecipeData]) -> list[Page]:
    pages: list[Page] = []
    index = []
    as_of = ""
    for rd in recipes:
        ctx = recipe_context(rd)
        pages.append((f"r/{ctx['slug']}.html", "recipe.html.j2", {"root": "../", "r": ctx}, None))
        index.append({k: ctx[k] for k in ("name", "slug", "regress", "last", "streak_text", "flips30", "open_issue",
                                          "open_culprit", "n_bisections")})
        for b in rd.bisections:  # the context (session logs, probes) is built only for a page that changed
            pages.append((f"b/{b.key}.html", "bisection.html.j2",
                          lambda b=b, s=slug(rd.name): {"root": "../", "b": bisection_context(b, s)},
                          f"{slug(rd.name)}|{b.inputs()}"))
        as_of = max([as_of] + [s.updated for s in rd.sessions])
    pages.insert(0, ("index.html", "index.html.j2", {"root": "", "recipes": index, "as_of": as_of}, None))
    return pages


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_site(recipes: list[RecipeData], out: Path) -> RenderStats:
    """Render the pages of ``recipes`` into ``out`` (created), skipping unchanged ones; returns
    :class:`RenderStats`. Raises ``OSError`` when ``out`` cannot be written."""
    from .safe import refresh_secrets

    t0 = time.perf_counter()
    refresh_secrets()
    out.mkdir(parents=True, exist_ok=True)
    tpl = _Templates()
    mpath = out / MANIFEST
    try:
        old = _jsonio.loads(mpath.read_text(encoding="utf-8"))
        old_pages = dict(old.get("pages") or {}) if old.get("version") == MANIFEST_VERSION else {}
    except (OSError, ValueError, AttributeError):
        old_pages = {}
    stats = RenderStats()
    new_pages: dict[str, str] = {}
    salt = f"{tpl.hash}|{__version__}|".encode()
    for rel, template, ctx, key in _pages(recipes):
        data = key if key is not None else json.dumps(ctx, default=_enc, sort_keys=True)
        h = hashlib.sha256(salt + data.encode("utf-8", "surrogatepass")).hexdigest()
        new_pages[rel] = h
        target = out / rel
        if not target.resolve().is_relative_to(out.resolve()):  # keys are checked names; never write outside
            raise ValueError(f"page {rel!r} lies outside {out}")
        if old_pages.get(rel) == h and target.is_file():
            stats.unchanged += 1
            continue
        _write(target, tpl.render(template, ctx() if callable(ctx) else ctx))
        stats.rendered += 1
        stats.written.append(rel)
    for rel in sorted(set(old_pages) - set(new_pages)):
        p = out / rel
        if (rel.startswith(("r/", "b/")) or rel == "index.html") and ".." not in rel and p.is_file():
            p.unlink()
            stats.removed += 1
    _write(mpath, json.dumps({"version": MANIFEST_VERSION, "pages": new_pages}, sort_keys=True, indent=0))
    stats.seconds = time.perf_counter() - t0
    return stats


__all__ = ["MANIFEST", "RenderStats", "write_site"]
