"""Issue 25, done-when: report.md and issue.md rendered to HTML by GitHub's Markdown rules (a
CommonMark renderer with GFM tables and strikethrough: markdown-it-py, HTML blocks allowed as
GitHub allows <details>/<summary>/<sub>) and looked at as images (Debian's chromium, headless) in
the tests' artefacts (``$BISECTBOT_TEST_ARTIFACTS``, else the test's tmp directory).

The HTML is checked structurally: the evidence tables are real tables with one cell per end (a
reply's ``|`` never opens a cell), the diverges table has the reference and both ends, the
Reproduce section's code blocks keep their languages, nothing active (script, event handlers,
javascript: links) comes through."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CSS = ("body{font:14px -apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1012px;margin:24px auto;"
       "color:#1f2328}table{border-collapse:collapse}td,th{border:1px solid #d1d9e0;padding:4px 8px;"
       "vertical-align:top}pre{background:#f6f8fa;padding:8px;overflow:auto}code{font-size:12px}")


class Doc(HTMLParser):
    """Tables (rows of cell texts), code blocks (class, text) and every tag/attribute seen."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.code: list[tuple[str, str]] = []
        self.attrs: list[tuple[str, str, str]] = []
        self._cell: list[str] | None = None
        self._code: list[str] | None = None
        self._cls = ""

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            self.attrs.append((tag, k, v or ""))
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "code":
            self._code, self._cls = [], dict(attrs).get("class") or ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self.tables and self.tables[-1]:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "code" and self._code is not None:
            self.code.append((self._cls, "".join(self._code)))
            self._code = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._code is not None:
            self._code.append(data)


def to_html(md: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(md)


def screenshot(html: str, out: Path) -> Path | None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return None
    page = out.with_suffix(".html")
    page.write_text(f"<!doctype html><meta charset=utf-8><style>{CSS}</style>{html}", encoding="utf-8")
    png = out.with_suffix(".png")
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1100,3800", f"--screenshot={png}", page.as_uri()], capture_output=True, timeout=120)
    return png if png.exists() else None


def test_subtle_demo_report_and_issue_render_as_github_would(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BISECTBOT_STATE", "GITHUB_", "GH_"))}
    r = subprocess.run([sys.executable, "-m", "bisectbot", "demo", "--subtle", "--out", "out"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    art = Path(os.environ.get("BISECTBOT_TEST_ARTIFACTS") or tmp_path) / "issue25-html"
    art.mkdir(parents=True, exist_ok=True)
    for name in ("report.md", "issue.md"):
        html = to_html((tmp_path / "out" / name).read_text())
        doc = Doc()
        doc.feed(html)
        evidence = next(t for t in doc.tables if t and t[0] and t[0][0] == "" and t[0][1].startswith("Last good"))
        assert all(len(row) == 3 for row in evidence), evidence  # one cell per end, whatever the reply holds
        rows = {row[0]: row[1:] for row in evidence}
        assert rows["outcome"] == ["OK", "GARBAGE"] and rows["reply"][0] != rows["reply"][1]
        div = next(t for t in doc.tables if t and t[0][:4] == ["", "reference", "last good", "first bad"])
        assert all(len(row) == 4 for row in div) and {row[0] for row in div} >= {"continuation", "first diverging word"}
        langs = [cls for cls, _ in doc.code]
        assert ["language-sh", "language-sh", "language-python", "language-sh", "language-yaml"] == \
            [c for c in langs if c in ("language-sh", "language-python", "language-yaml")][-5:], langs
        assert not any(tag == "script" or k.startswith("on") or v.strip().lower().startswith("javascript:")
                       for tag, k, v in doc.attrs), [a for a in doc.attrs if a[0] == "script" or a[1].startswith("on")]
        if name == "report.md":
            assert ("img", "src", "threshold.png") in doc.attrs
            shutil.copy(tmp_path / "out" / "threshold.png", art / "threshold.png")
        png = screenshot(html, art / name.replace(".md", ""))
        if png is not None:  # looked at as an image: not blank
            from PIL import Image

            img = Image.open(png).convert("L")
            assert img.getextrema()[0] < 100, f"blank screenshot {png}"
