"""Issue 39: the dashboard of a performance bisection (``regress: slower``) shows the measured metric
per candidate with its spread, opened in headless Chromium (laid out at three widths by check_site)."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.bisect import test_measured as world
from tests.dashboard.conftest import check_site, cli, render

pytestmark = [pytest.mark.slow]


class _Kit:
    @staticmethod
    def git(repo, *args):
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                              env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
                                   "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin"}).stdout.strip()

    run_cli = staticmethod(cli)


def test_the_bisection_page_shows_each_candidates_median_and_spread(tmp_path, browser, artefacts) -> None:
    shas = world.history(_Kit, tmp_path / "repo", [100.0] * 6 + [70.0] * 6)
    d = tmp_path / "a"
    p, res = world.run(_Kit, d, world.recipe(d, tmp_path / "repo", shas[0], shas[-1], samples=5), 5)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    site = tmp_path / "site"
    render(d / "s", site, "--report", str(d / "out"))
    pages = check_site(browser, site, artefacts)
    (bpage,) = [x for x in pages if x.startswith("b/")]
    browser.open((site / bpage).as_uri())
    head = browser.js("return Array.from(document.querySelectorAll('table.probes th')).map(e => e.textContent)")
    assert "measured: median (IQR), n" in head, head
    col = head.index("measured: median (IQR), n")
    cells = browser.js(f"return Array.from(document.querySelectorAll('table.probes tr.probe')).map("
                       f"r => r.children[{col}].textContent)")
    assert len(cells) == len(res["stages"][-1]["probes"]) >= 4, cells
    for c in cells:
        m = re.fullmatch(r"([0-9.]+) \(([0-9.]+)-([0-9.]+)\), n=(\d+)", c.strip())
        assert m and float(m[2]) <= float(m[1]) <= float(m[3]) and int(m[4]) >= 5, c
