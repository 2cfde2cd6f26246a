"""The dashboard of two more real runs, opened in headless Chromium:

* ``bisectbot demo`` (a bisection over a commit history of the reference engine): its bisection
  page shows the culprit the demo planted, the session log ``bisectbot bisect log`` prints and the
  evidence of each probe;
* a patch-retirement run over releases of a real local package index (tests/releases): the patch
  stack table says, per release probed, applies / applies with offset / already upstream, and
  "upstream since" names the release ``bisectbot run`` found.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bisectbot.demo import history as H
from bisectbot.ledger import Ledger
from tests.dashboard.conftest import assert_marks_match, check_site, cli, read_chart, render
from tests.releases.release_fixtures import PATCH_ID, Index, index, patches_dir  # noqa: F401

pytestmark = [pytest.mark.slow]


def test_demo_ledger(tmp_path, browser, artefacts) -> None:
    out, state, site = tmp_path / "out", tmp_path / "state", tmp_path / "site"
    p = cli("demo", "--out", str(out), "--state", str(state), "--seed", "3", "--commits", "36")
    assert p.returncode == 0, p.stdout + p.stderr
    culprit = H.make_history(tmp_path / "again", commits=36, seed=3).culprit
    doc = render(state, site, "--report", str(out), "--recipes", str(out / "work" / "demo-engine-prefill.yaml"))
    assert doc["rendered"] == 3, doc
    pages = check_site(browser, site, artefacts)
    (bpage,) = [p for p in pages if p.startswith("b/")]
    browser.open((site / bpage).as_uri())
    text = browser.js("return document.body.innerText")
    assert f"culprit\tdemo-engine {culprit[:10]}" in text, text[:2000]
    log = browser.js("return document.querySelector('pre.session-log').textContent")
    cli_log = cli("--state", str(state), "bisect", "log").stdout
    verdict_lines = [ln.split("  #")[0] for ln in cli_log.splitlines() if ln.split(" ")[0] in ("good", "bad", "skip")]
    assert len(verdict_lines) >= 8 and all(v.split(" sig=")[0] in log for v in verdict_lines), (log, cli_log)
    assert "'\"'\"'" not in log, log  # a quote in a signature reads as written, not in shell quoting (item 10)
    ev = browser.js("return Array.from(document.querySelectorAll('table.evidence td.excerpt')).map(e => e.textContent)")
    assert any("2 + 2 equals 4" in e for e in ev), ev[:5]  # a healthy reply's excerpt, as the ledger keeps it
    assert any("2 + 2 equals 4" not in e for e in ev), ev[:5]  # and a garbage reply's, as data
    # whatever a garbage reply holds, no raw control character reaches the page (escaping: test_units)
    assert not any(ch < " " and ch not in "\t\n" for e in ev for ch in e), ev
    # the night's mark: the demo's bad end, at the threshold the ledger stored
    browser.open((site / "r" / "demo-engine-prefill.html").as_uri())
    res = json.loads((out / "result.json").read_text())
    bad = res["stages"][0]["candidates"][-1]["ref"]
    with Ledger(state) as led:
        want = next(tuple(p.threshold) for p in led.probes() if p.candidate.ref == bad)
    assert_marks_match(read_chart(browser), {bad: want})

    # a replay of the same ends (new-user pass): the archived report keeps the demo's own session,
    # and the replay's session keeps a page of its own
    (tmp_path / "session.log").write_text(cli_log)
    p = cli("--state", str(state), "bisect", "replay", str(out / "work" / "demo-engine-prefill.yaml"),
            str(tmp_path / "session.log"), "--out", str(tmp_path / "replayed"))
    assert p.returncode == 0, p.stdout + p.stderr
    replay_id = json.loads((tmp_path / "replayed" / "result.json").read_text())["session_id"]
    assert replay_id and replay_id != res["session_id"]
    render(state, site, "--recipes", str(out / "work" / "demo-engine-prefill.yaml"))
    browser.open((site / bpage).as_uri())
    assert browser.js("return document.querySelector('p.muted code').textContent") == res["session_id"]
    assert (site / "b" / f"s-{replay_id}.html").is_file(), sorted(x.name for x in (site / "b").iterdir())

    # without the recipe file and without an archived report, the pages still say the question the
    # sessions asked (new-user pass: every page said "regress: -")
    import shutil

    bare = tmp_path / "bare-state"
    shutil.copytree(state, bare, ignore=shutil.ignore_patterns("dashboard"))
    render(bare, tmp_path / "bare-site")
    browser.open((tmp_path / "bare-site" / "index.html").as_uri())
    row = browser.js("return document.querySelector('#recipes tr[data-recipe]').innerText")
    assert "garbage" in row, row


def test_patch_retirement_over_releases(index: Index, patches_dir, tmp_path, browser, artefacts) -> None:  # noqa: F811
    import yaml

    recipe = tmp_path / "retire.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "demo-retirement", "source": {"kind": "pypi", "package": "vllm", "index_url": index.url("json"),
                                              "min_version": "1.0", "max_version": "1.8"},
        "patches": [PATCH_ID], "regress": {"patch-upstream": PATCH_ID}, "report": {"dir": str(tmp_path / "unused")}}))
    state, out, site = tmp_path / "state", tmp_path / "out", tmp_path / "site"
    env = dict(os.environ, BISECTBOT_PATCHES_DIR=str(patches_dir), BISECTBOT_CACHE=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(state), "run", str(recipe), "--out", str(out)],
                       capture_output=True, text=True, timeout=180, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "upstream since: vllm 1.6" in r.stdout
    res = json.loads((out / "result.json").read_text())
    probed = {p["candidate"]["ref"]: p for p in res["stages"][0]["probes"]}
    render(state, site, "--report", str(out), "--recipes", str(recipe))
    check_site(browser, site, artefacts)
    browser.open((site / "r" / "demo-retirement.html").as_uri())
    table = browser.js("""const t = document.getElementById('patch-table');
        return {cols: Array.from(t.querySelectorAll('tr:first-child th')).slice(1, -1).map(th => th.textContent),
                cells: Array.from(t.querySelectorAll(`tr[data-patch] td`)).map(td => [td.className, td.textContent])}""")
    versions = sorted(probed, key=lambda v: [int(x) for x in v.split(".")])
    assert table["cols"] == [probed[v]["candidate"]["label"] for v in versions], table  # release order
    cells = dict(zip(versions, table["cells"][:-1]))
    since = table["cells"][-1][1]
    assert since == probed["1.6"]["candidate"]["label"], table  # what bisectbot run found
    for ver, (css, text) in cells.items():
        state_of = next(x for x in probed[ver]["patches"] if x["id"] == PATCH_ID)
        assert css == f"p-{state_of['state']}" and text == state_of["label"], (ver, css, text, state_of)
    assert {c for c, _ in cells.values()} >= {"p-applies", "p-already-upstream"}
    assert any(c == "p-applies-with-offset" for c, _ in cells.values()) == any(
        v in probed for v in ("1.3", "1.4", "1.5")), cells
    # patch modes have verdicts, not thresholds: the night's mark sits in the verdict row
    chart = read_chart(browser)
    assert [m["shape"] for m in chart["marks"]] == ["verdict"], chart["marks"]
    browser.full_screenshot(artefacts / "patch-stack.png")
