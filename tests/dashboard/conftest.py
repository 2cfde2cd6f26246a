"""Fixtures of the dashboard tests: a real headless Chromium (tests/dashboard/browser.py), the
checks every rendered site gets (pages load without console errors, every link resolves, the
chart's marks match the ledger), and where screenshots are kept.

Screenshots go to ``$BISECTBOT_TEST_ARTEFACTS/dashboard/<test>/`` (default: ``test-artefacts/`` in
the checkout, git-ignored), kept after the run.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from tests.dashboard.browser import Browser

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    b = Browser()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def artefacts(request) -> Path:
    base = Path(os.environ.get("BISECTBOT_TEST_ARTEFACTS") or ROOT / "test-artefacts")
    d = base / "dashboard" / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    d.mkdir(parents=True, exist_ok=True)
    for old in d.rglob("*.png"):
        old.unlink()
    return d


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m bisectbot ARGS`` (the installed bisectbot under scripts/test-all.sh)."""
    e = {**os.environ, **(env or {})}
    for k in ("GITHUB_TOKEN", "GH_TOKEN", "BISECTBOT_GITHUB_TOKEN", "BISECTBOT_STATE"):
        if k not in (env or {}):
            e.pop(k, None)
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], capture_output=True, text=True, env=e,
                          timeout=timeout)


def render(state: Path, site: Path, *args: str) -> dict:
    """``bisectbot --json --state STATE dashboard --out SITE ARGS``; returns its JSON document."""
    import json

    p = cli("--json", "--state", str(state), "dashboard", "--out", str(site), *args)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout)


LINKS = """return Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'))"""


def check_site(browser: Browser, site: Path, shots: Path, max_shots: int = 6) -> dict[str, dict]:
    """Open every page reachable from ``site/index.html`` by its links in the browser (file://):
    each loads without a browser-log entry (console error, failed load, CSP violation), has no
    script element and no open dialog, and every relative link names an existing file (and, with a
    ``#fragment``, an element of that id there). Screenshots of the first ``max_shots`` pages go to
    ``shots``. Returns ``{relative path: {"links": [...], "title": ...}}``."""
    seen: dict[str, dict] = {}
    todo = ["index.html"]
    browser.console()  # drop what earlier tests left
    while todo:
        rel = todo.pop(0)
        if rel in seen:
            continue
        page = site / rel
        assert page.is_file(), f"link to a missing page: {rel}"
        browser.open(page.as_uri())
        assert browser.alert_text() is None, f"{rel}: a dialog opened"
        logs = browser.console()
        assert logs == [], f"{rel}: browser log: {logs}"
        info = browser.js("return {title: document.title, scripts: document.scripts.length, "
                          "ids: Array.from(document.querySelectorAll('[id]')).map(e => e.id)}")
        assert info["scripts"] == 0, f"{rel}: {info['scripts']} script element(s)"
        links = browser.js(LINKS)
        seen[rel] = {"links": links, "title": info["title"], "ids": set(info["ids"])}
        if len(seen) <= max_shots:
            browser.full_screenshot(shots / (rel.replace("/", "_") + ".png"))
        check_layout(browser, rel)
        for href in links:
            u = urlparse(href)
            if u.scheme in ("http", "https"):
                continue  # issue and job-log links leave the site
            assert not u.scheme and not u.netloc, f"{rel}: unexpected link {href!r}"
            target = (page.parent / unquote(u.path)).resolve() if u.path else page.resolve()
            assert target.is_file(), f"{rel}: link {href!r} does not resolve"
            trel = target.relative_to(site.resolve()).as_posix()
            if u.fragment:
                seen.setdefault("#fragments", {}).setdefault(trel, set()).add(u.fragment)
            if trel.endswith(".html") and trel not in seen:
                todo.append(trel)
    for trel, frags in seen.pop("#fragments", {}).items():
        missing = frags - seen[trel]["ids"]
        assert not missing, f"{trel}: links to missing anchors {missing}"
    return seen


WIDTHS = (1024, 1280, 1920)
"""Window widths (CSS pixels) every page is laid out at: a laptop's, and the two of issue 41 item 10."""

LAYOUT = """
document.querySelectorAll('details').forEach(d => d.open = true);
const vw = document.documentElement.clientWidth, sw = document.documentElement.scrollWidth;
const wide = [];
if (sw > vw) {
  for (const el of document.body.querySelectorAll('*')) {
    if (el.parentElement && el.parentElement.closest('pre')) continue;
    const r = el.getBoundingClientRect();
    if (r.right > vw + 0.5) wide.push(el.tagName.toLowerCase() + '.' + el.className + ' right ' + Math.round(r.right) +
                                      ': ' + (el.textContent || '').slice(0, 60));
  }
}
// the page's own words and short data (numbers, SHAs, phases) are never broken inside a word:
// a word split over two lines has two client rects
const broken = [];
const walker = document.createTreeWalker(document.querySelector('main') || document.body, NodeFilter.SHOW_TEXT);
const range = document.createRange();
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  const el = node.parentElement;
  if (!el || el.closest('.text, td.reason, td.excerpt, .chain li, pre, svg') || !el.getClientRects().length) continue;
  for (const m of node.data.matchAll(/[^\\s\\/-]+/g)) {  // a hyphen or a slash is a break opportunity
    if (m[0].length > 40) continue;
    range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
    const rects = Array.from(range.getClientRects()).filter(r => r.width > 0);
    if (rects.length > 1 && broken.length < 6) broken.push(m[0] + ' in ' + el.tagName.toLowerCase() + '.' + el.className);
  }
}
const svg = document.getElementById('threshold-chart');
let texts = null, box = null;
if (svg) {
  const vb = svg.viewBox.baseVal;
  box = [vb.width, vb.height];
  texts = Array.from(svg.querySelectorAll('text')).filter(t => t.textContent.length).map(t => {
    const b = t.getBBox();
    return {cls: t.getAttribute('class'), text: t.textContent, x0: b.x, x1: b.x + b.width, y0: b.y, y1: b.y + b.height};
  });
}
return {vw: vw, sw: sw, wide: wide.slice(-6), box: box, texts: texts, broken: broken};
"""


def check_layout(browser: Browser, rel: str) -> None:
    """The open page at each of :data:`WIDTHS`, every ``<details>`` open: nothing is wider than the
    window (the page never scrolls sideways: a long word in a table cell, an evidence excerpt
    without spaces), no word of the page's own or of short data (outside the free-text cells) is
    broken across lines, and in the chart every label lies inside the SVG and no two tick or band
    labels overlap (measured by the browser: ``getBBox``)."""
    try:
        for width in WIDTHS:
            browser._cmd("POST", "/window/rect", {"width": width, "height": 1000})
            got = browser.js(LAYOUT)
            assert got["sw"] <= got["vw"], f"{rel} at {width} px: {got['sw']} px wide: {got['wide']}"
            assert not got["broken"], f"{rel} at {width} px: words broken inside: {got['broken']}"
            if got["texts"] is None:
                continue
            w, h = got["box"]
            for t in got["texts"]:
                assert -0.5 <= t["x0"] and t["x1"] <= w + 0.5 and -0.5 <= t["y0"] and t["y1"] <= h + 0.5, \
                    f"{rel}: chart label outside the chart ({w}x{h}): {t}"
            for cls in ("tick xtick", "bandlabel"):
                row = sorted((t for t in got["texts"] if t["cls"] == cls), key=lambda t: t["x0"])
                for a, b in zip(row, row[1:]):
                    assert a["x1"] <= b["x0"], f"{rel}: chart labels overlap: {a} {b}"
    finally:
        browser._cmd("POST", "/window/rect", {"width": 1280, "height": 1000})


MARKS = """
const svg = document.getElementById('threshold-chart');
if (!svg) return null;
const ticks = Array.from(svg.querySelectorAll('text.ytick')).map(t => [parseFloat(t.dataset.value), parseFloat(t.dataset.y)]);
const marks = Array.from(svg.querySelectorAll('g.pt')).map(g => {
  const out = {ref: g.dataset.ref, shape: g.dataset.shape, verdict: g.dataset.verdict, when: g.dataset.when,
               lo: g.dataset.lo, hi: g.dataset.hi, title: g.querySelector('title').textContent};
  const bar = g.querySelector('line.bar'), dot = g.querySelector('circle'), tri = g.querySelector('path');
  if (bar) { out.y_lo = parseFloat(bar.getAttribute('y1')); out.y_hi = parseFloat(bar.getAttribute('y2')); }
  if (dot) { out.y_dot = parseFloat(dot.getAttribute('cy')); out.x = parseFloat(dot.getAttribute('cx')); }
  if (tri) { const b = tri.getBBox(); out.tri_y = b.y; out.tri_h = b.height; out.x = b.x + b.width / 2; }
  return out;
});
const xt = Array.from(svg.querySelectorAll('text.xtick')).map(t => [parseFloat(t.dataset.value), parseFloat(t.getAttribute('x'))]);
const bands = Array.from(svg.querySelectorAll('rect.band')).map(r => ({x: parseFloat(r.getAttribute('x')),
  w: parseFloat(r.getAttribute('width')), title: r.querySelector('title').textContent}));
return {ticks: ticks, marks: marks, xticks: xt, bands: bands};
"""


def read_chart(browser: Browser) -> dict | None:
    """The open page's chart as plotted: marks with the token values their *pixel positions* stand
    for (inverted through the y axis' tick labels, a log scale), and the bands."""
    data = browser.js(MARKS)
    if data is None:
        return None
    (v1, y1), (v2, y2) = data["ticks"][0], data["ticks"][-1]

    def value(y: float) -> float:  # log scale through two ticks
        return 10 ** (math.log10(v1) + (y - y1) / (y2 - y1) * (math.log10(v2) - math.log10(v1)))

    for m in data["marks"]:
        m["lo"] = int(m["lo"]) if m["lo"] else None
        m["hi"] = int(m["hi"]) if m["hi"] else None
        if m["shape"] == "interval":
            m["plotted"] = (value(m["y_lo"]), value(m["y_dot"]))
        elif m["shape"] == "ceiling":  # the triangle's base is 4 px under the value, its tip 6 px over it
            m["plotted"] = (value(m["tri_y"] + 6), None)
        elif m["shape"] == "floor":
            m["plotted"] = (None, value(m["tri_y"] + 4))
        else:
            m["plotted"] = (None, None)
    return data


def assert_marks_match(chart: dict, expected: dict[str, tuple[int | None, int | None] | None]) -> None:
    """Every ref of ``expected`` (ref -> ledger threshold ``[last_ok, first_garbage]`` tokens, None
    for none) is one mark whose plotted position stands for that threshold (within 0.5 %), and no
    other mark is drawn."""
    marks = {m["ref"]: m for m in chart["marks"]}
    assert set(marks) == set(expected), (sorted(marks), sorted(expected))
    for ref, thr in expected.items():
        m = marks[ref]
        lo, hi = thr if thr else (None, None)
        assert (m["lo"], m["hi"]) == (lo, hi), (ref, m, thr)
        for got, want in zip(m["plotted"], (lo, hi)):
            if want is None:
                assert got is None or m["shape"] in ("ceiling", "floor"), (ref, m)
                continue
            assert got is not None and abs(got - want) / want < 0.005, (ref, got, want, m)
