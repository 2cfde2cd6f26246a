"""The dashboard of ledgers filled by real ``bisectbot run``s on real git histories (local runner,
the reference engine as the server), opened in a real headless Chromium:

* a fix bisection (``regress: success``) -- its words are "still broken" / "fixed";
* a history whose bad commits answer hostile model output (markup, script, bidi controls, a
  forged bisectbot marker, mentions) and carry a hostile commit subject: it stays inert text;
* a second night (one more commit, run again): only the index, that recipe's page and the new
  bisection's page are rendered again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisectbot.ledger import Ledger
from tests.bisect.conftest import git, make_engine_repo, write_recipe
from tests.dashboard.conftest import assert_marks_match, check_site, cli, read_chart, render

pytestmark = [pytest.mark.slow]

HOSTILE = ('<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
           '<a href="javascript:window.__pwned=3">click</a> \u202eexe.txt\u202c '
           '<!-- bisectbot:fingerprint=0123456789abcdef --> @maintainer #1 </pre></td><b>bold</b> '
           '/tmp/' + 'an_overlong_path_segment_without_spaces_' * 12)
SUBJECT = ('<b onmouseover="window.__pwned=4">[Perf] reuse the workspace</b> @someone #12 '
           + 'reuse_the_prefill_workspace_across_sub_chunks_' * 3)


def _hostile_repo(path: Path) -> tuple[Path, list[str]]:
    """4 healthy commits of the reference engine, then 4 whose engine answers HOSTILE to every chat
    request (garbage at every size: no known answer, no needles), the first under SUBJECT."""
    repo = make_engine_repo(path, n=4, k=99, high=30000, name="engine")
    reply = json.dumps({"id": "x", "object": "chat.completion", "model": "demo",
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": HOSTILE * 2}}]})
    for i in range(4, 8):
        (path / "engine.json").write_text(json.dumps({"threshold": 30000, "seed": i, "raw_reply": reply}))
        (path / "version.txt").write_text(f"engine-{i}\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", SUBJECT if i == 4 else f"engine change {i}")
        repo.shas.append(git(path, "rev-parse", "HEAD"))
    return path, repo.shas


def _bad_end_thresholds(state: Path, refs: list[str]) -> dict[str, tuple | None]:
    """What the ledger holds for each ref: the threshold of its first stored probe (read through the
    ledger's own API, not the dashboard's)."""
    out: dict[str, tuple | None] = {}
    with Ledger(state) as led:
        for p in led.probes():
            if p.candidate.ref in refs and p.candidate.ref not in out:
                out[p.candidate.ref] = tuple(p.threshold) if p.threshold else None
    return out


def test_fix_bisection_and_hostile_output_then_a_second_night(tmp_path, browser, artefacts, monkeypatch) -> None:
    monkeypatch.setenv("ENGINE_STARTS", str(tmp_path / "starts.txt"))
    state, site = tmp_path / "state", tmp_path / "site"

    fix = make_engine_repo(tmp_path / "fix-repo", n=12, k=7, low=30000, high=4000)  # garbage until commit 7
    fix_recipe = write_recipe(tmp_path / "fix.yaml", fix, tmp_path / "fix-out", regress="success", name="engine-fix")
    p = cli("--state", str(state), "run", str(fix_recipe))
    assert p.returncode == 0, p.stdout + p.stderr

    hpath, hshas = _hostile_repo(tmp_path / "hostile-repo")
    host_recipe = write_recipe(tmp_path / "hostile.yaml", type(fix)(hpath, hshas), tmp_path / "hostile-out",
                               name="engine-hostile")
    p = cli("--state", str(state), "run", str(host_recipe))
    assert p.returncode == 0, p.stdout + p.stderr
    assert hshas[4] in p.stdout  # the first hostile commit is the culprit

    doc = render(state, site, "--recipes", str(fix_recipe), "--recipes", str(host_recipe),
                 "--report", str(tmp_path / "fix-out"), "--report", str(tmp_path / "hostile-out"),
                 "--job-url", "https://github.com/octo-org/bisectbot/actions/runs/1")
    assert doc["rendered"] == 5 and doc["unchanged"] == 0, doc  # index, 2 recipes, 2 bisections
    pages = check_site(browser, site, artefacts)
    assert {"index.html", "r/engine-fix.html", "r/engine-hostile.html"} <= set(pages)
    assert len([p for p in pages if p.startswith("b/")]) == 2

    # the index: last night, streak, flips, in the reader's words
    browser.open((site / "index.html").as_uri())
    rows = browser.js("return Array.from(document.querySelectorAll('#recipes tr[data-recipe]')).map("
                      "r => [r.dataset.recipe, r.innerText])")
    rows = dict(rows)
    assert "fixed" in rows["engine-fix"] and "fixed since" in rows["engine-fix"], rows
    assert "bad since" in rows["engine-hostile"], rows

    # the fix bisection: first fixed = commit 7, in fix words; the chart's mark is the ledger's threshold
    browser.open((site / "r" / "engine-fix.html").as_uri())
    chart = read_chart(browser)
    assert_marks_match(chart, _bad_end_thresholds(state, [fix.shas[-1]]))
    text = browser.js("return document.body.innerText")
    assert "last broken" in text and "first fixed" in text and fix.shas[7][:10] in text, text[:3000]
    assert "job log" in text

    # hostile output: inert text, on the recipe page and on the bisection page
    browser.open((site / "r" / "engine-hostile.html").as_uri())
    chart = read_chart(browser)
    assert_marks_match(chart, _bad_end_thresholds(state, [hshas[-1]]))
    (mark,) = chart["marks"]
    assert mark["shape"] == "floor" and mark["verdict"] == "bad"  # garbage already at the smallest size
    href = browser.js("return Array.from(document.querySelectorAll('#bisections-table a')).map(a => a.getAttribute('href'))"
                      ".find(h => h.startsWith('../b/'))")
    browser.open((site / "r" / href).resolve().as_uri())
    got = browser.js("""return {pwned: typeof window.__pwned, imgs: document.querySelectorAll('img').length,
        bold: document.querySelectorAll('b').length, js: Array.from(document.querySelectorAll('a')).filter(
          a => (a.getAttribute('href') || '').startsWith('javascript')).length,
        excerpts: Array.from(document.querySelectorAll('td.excerpt')).map(e => e.textContent),
        labels: document.body.innerText}""")
    assert got["pwned"] == "undefined" and got["imgs"] == 0 and got["bold"] == 0 and got["js"] == 0, got
    hostile_cells = [e for e in got["excerpts"] if "window.__pwned=1" in e]
    assert hostile_cells, got["excerpts"]
    cell = hostile_cells[0]
    assert "<script>window.__pwned=1</script>" in cell and '<img src=x onerror="window.__pwned=2">' in cell
    assert "\u202e" not in cell and "\\u202e" in cell  # the bidi override shown, not obeyed
    assert "bisectbot:fingerprint=" not in got["labels"]  # a forged marker is broken
    assert '<b onmouseover="window.__pwned=4">' in got["labels"]  # the commit subject as text
    browser.full_screenshot(artefacts / "hostile-bisection.png")
    assert browser.console() == []

    # unchanged inputs: nothing rendered again
    doc = render(state, site, "--recipes", str(fix_recipe), "--recipes", str(host_recipe))
    assert doc["rendered"] == 0 and doc["unchanged"] == 5, doc

    # a second night of the fix recipe: one more (still fixed) commit, run again
    (fix.path / "engine.json").write_text(json.dumps({"threshold": 30000, "seed": 12}))
    git(fix.path, "commit", "-q", "-am", "engine change 12")
    fix.shas.append(git(fix.path, "rev-parse", "HEAD"))
    fix_recipe = write_recipe(tmp_path / "fix.yaml", fix, tmp_path / "fix-out2", regress="success", name="engine-fix")
    p = cli("--state", str(state), "run", str(fix_recipe))
    assert p.returncode == 0, p.stdout + p.stderr
    doc = render(state, site, "--recipes", str(fix_recipe), "--recipes", str(host_recipe),
                 "--report", str(tmp_path / "fix-out2"))
    written = set(doc["written"])
    (new_page,) = written - {"index.html", "r/engine-fix.html"}  # and the new night's bisection
    assert {"index.html", "r/engine-fix.html"} <= written and new_page.startswith("b/") and new_page not in pages, doc
    assert doc["unchanged"] == 3, doc  # the hostile recipe's page, both earlier bisections
    pages = check_site(browser, site, artefacts / "night2", max_shots=2)
    browser.open((site / "r" / "engine-fix.html").as_uri())
    assert_marks_match(read_chart(browser), _bad_end_thresholds(state, [fix.shas[-1], fix.shas[-2]]))
