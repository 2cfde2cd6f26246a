"""The dashboard of two real nights in containers (the flow of tests/night/test_night.py):
nightlies of the reference engine in the local registry (127.0.0.1:5000), ``bisectbot nightlies
record --introspect`` and ``bisectbot run --file-issue`` through the container runner, issues on
the contract-following fake GitHub; rendered after each night as ``nightly.yml`` does and opened
in headless Chromium.

Night 1 bisects six nightlies (N4 first bad), attributes the regression to aiter and bisects
aiter's commits (A4); night 2 adds a seventh, still bad nightly. Checked: every nightly probed is
one mark on a true date axis at its tag's date, plotted at the ledger's threshold; the bisection
is a band from N3 to N4 labelled with the culprit; the chain of stages; the issue link; the
vLLM/aiter versions of each digest; night 2 renders the pages that changed and keeps the rest.
"""

from __future__ import annotations

import subprocess
import uuid
from datetime import datetime, timezone

import pytest

from bisectbot.ledger import Ledger
from tests.containers.conftest import base_image, no_container_left_behind, registry  # noqa: F401
from tests.containers.nightly_factory import SERVER_COMMAND, push_nightlies
from tests.dashboard.conftest import assert_marks_match, check_site, cli, read_chart, render
from tests.night.conftest import GH_REPO, TOKEN, fake_github  # noqa: F401
from tests.night.test_night import STACK, _make_clones, _spec

pytestmark = [pytest.mark.docker, pytest.mark.slow]

NAME = "dash-night"


def _night(state, recipe, out) -> None:
    env = {"BISECTBOT_PATCHES_DIR": str(STACK), "GITHUB_TOKEN": TOKEN}
    p = cli("--state", str(state), "nightlies", "record", "--recipe", str(recipe), "--introspect", env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    p = cli("--state", str(state), "run", str(recipe), "--out", str(out), "--file-issue", env=env)
    assert p.returncode == 0, p.stdout + p.stderr[-6000:]


def _ledger_thresholds(state, digests) -> dict:
    out: dict = {}
    with Ledger(state) as led:
        for p in led.probes():
            if p.candidate.ref in digests and p.candidate.ref not in out:
                out[p.candidate.ref] = tuple(p.threshold) if p.threshold else None
    return out


def test_two_nights_in_containers(registry, base_image, fake_github, tmp_path, browser, artefacts) -> None:  # noqa: F811
    vr, v, ar, a = _make_clones(tmp_path)
    pins = [(v[0], a[0]), (v[1], a[0]), (v[2], a[1]), (v[4], a[4]), (v[4], a[5]), (v[5], a[5])]
    specs = [_spec(n, vr, vs, ar, s) for n, (vs, s) in enumerate(pins, start=1)]
    repository = f"bisectbot-test/dash-{uuid.uuid4().hex[:8]}"
    pushed = push_nightlies(specs, repository, registry=registry, base=base_image)
    try:
        cmd = ", ".join(f'"{x}"' for x in SERVER_COMMAND)
        recipe = tmp_path / "recipe.yaml"
        recipe.write_text(f"""\
name: {NAME}
model: demo
source: {{kind: registry, registry: "{registry}", repository: {repository}, tag_pattern: "nightly_main_*",
          insecure: true}}
server: {{command: [{cmd}], port: 8000, health_timeout_s: 60, request_timeout_s: 60}}
runner: cpu
patches: [aiter-chunkq-clamp]
reproducer: {{min_size: 1000, max_size: 6000, sizes: [1000, 6000]}}
regress: garbage
bisect:
  good: {specs[0].tag}
  components:
    vllm: {{repo: "{vr.working_tree_dir}", runtime_paths: [vllm/]}}
    aiter: {{repo: "{ar.working_tree_dir}", runtime_paths: [aiter/]}}
report:
  dir: "{tmp_path / 'out'}"
  github: {{repo: {GH_REPO}, labels: [bisectbot], api_url: "{fake_github.base_url}", bot_login: bisectbot-app}}
""")
        state, site = tmp_path / "state", tmp_path / "site"

        # ---- night 1
        _night(state, recipe, tmp_path / "out1")
        (number,) = fake_github.repos[GH_REPO].issues
        doc = render(state, site, "--recipes", str(recipe), "--report", str(tmp_path / "out1"),
                     "--job-url", "https://github.com/octo-org/bisectbot-deploy/actions/runs/101")
        assert doc["rendered"] == 3 and doc["unchanged"] == 0, doc  # index, the recipe, its bisection
        pages = check_site(browser, site, artefacts / "night1")
        assert f"r/{NAME}.html" in pages and len([p for p in pages if p.startswith("b/")]) == 1, pages
        browser.open((site / "r" / f"{NAME}.html").as_uri())
        chart = read_chart(browser)
        digests = {p.digest: p for p in pushed}
        assert_marks_match(chart, _ledger_thresholds(state, set(digests)))
        for m in chart["marks"]:  # a true date axis: each nightly at the date in its tag
            tag = digests[m["ref"]].spec.tag
            assert datetime.fromisoformat(m["when"]) == datetime.strptime(tag[-8:], "%Y%m%d").replace(tzinfo=timezone.utc)
        xs = [m["x"] for m in sorted(chart["marks"], key=lambda m: m["when"])]
        assert xs == sorted(xs) and len(set(round(b - a_, 1) for a_, b in zip(xs, xs[1:]))) <= 2  # evenly spaced days
        (band,) = chart["bands"]
        assert a[3][:10] in band["title"] and specs[2].tag in band["title"] and specs[3].tag in band["title"], band
        n3 = next(m for m in chart["marks"] if m["ref"] == pushed[2].digest)
        n4 = next(m for m in chart["marks"] if m["ref"] == pushed[3].digest)
        assert abs(band["x"] - n3["x"]) < 1 and abs(band["x"] + band["w"] - n4["x"]) < 1, (band, n3, n4)
        # digests and versions: in the nights table and on hover
        rows = browser.js("return Array.from(document.querySelectorAll('#nights-table tr[data-ref]')).map("
                          "r => [r.dataset.ref, r.innerText])")
        rows = dict(rows)
        for p in pushed:
            if p.digest in rows:
                assert p.spec.vllm_version in rows[p.digest] and p.spec.aiter_version in rows[p.digest], rows[p.digest]
        assert p.spec.vllm_version in n4["title"] or pushed[3].spec.vllm_version in n4["title"], n4
        # the bisection page: chain of stages, the issue, the job log
        href = browser.js("return document.querySelector('#bisections-table a[href^=\"../b/\"]').getAttribute('href')")
        browser.open((site / "r" / href).resolve().as_uri())
        info = browser.js("""return {chain: Array.from(document.querySelectorAll('.chain li:not(.arrow)')).map(l => l.innerText),
            links: Array.from(document.querySelectorAll('#summary a')).map(a => [a.textContent, a.href]),
            logs: document.querySelectorAll('pre.session-log').length}""")
        assert len(info["chain"]) >= 3 and info["chain"][0].startswith("stage 1"), info
        assert "aiter" in info["chain"][-1] and a[3][:10] in info["chain"][-1], info
        assert [f"{GH_REPO}#{number}", f"https://github.com/{GH_REPO}/issues/{number}"] in info["links"], info
        assert ["job log", "https://github.com/octo-org/bisectbot-deploy/actions/runs/101"] in info["links"], info
        assert info["logs"] >= 2  # stage 1 and the aiter commits each have a session log
        browser.full_screenshot(artefacts / "night1-bisection.png")
        browser.open((site / "index.html").as_uri())
        row = browser.js(f"return document.querySelector('tr[data-recipe=\"{NAME}\"]').innerText")
        assert f"{GH_REPO}#{number}" in row and a[3][:10] in row and "bad since 2026-04-04 (2 tested nights)" in row, row

        # ---- night 2: a seventh nightly, still bad
        pushed += push_nightlies([_spec(7, vr, v[6], ar, a[5])], repository, registry=registry, base=base_image)
        _night(state, recipe, tmp_path / "out2")
        doc2 = render(state, site, "--recipes", str(recipe), "--report", str(tmp_path / "out2"),
                      "--job-url", "https://github.com/octo-org/bisectbot-deploy/actions/runs/102")
        written = set(doc2["written"])
        assert {"index.html", f"r/{NAME}.html"} <= written, doc2
        new = [w for w in written if w.startswith("b/") and w not in pages]
        assert len(new) == 1 and doc2["rendered"] + doc2["unchanged"] == len(pages) + 1, doc2
        pages2 = check_site(browser, site, artefacts / "night2")
        assert len([p for p in pages2 if p.startswith("b/")]) == 2
        browser.open((site / "r" / f"{NAME}.html").as_uri())
        chart = read_chart(browser)
        assert_marks_match(chart, _ledger_thresholds(state, {p.digest for p in pushed}))
        assert pushed[-1].digest in {m["ref"] for m in chart["marks"]}
        assert len(chart["bands"]) == 1  # the same range, found twice: one band
        browser.full_screenshot(artefacts / "night2-recipe.png")
        browser.open((site / "index.html").as_uri())
        row = browser.js(f"return document.querySelector('tr[data-recipe=\"{NAME}\"]').innerText")
        assert "bad since 2026-04-04 (3 tested nights)" in row, row
    finally:
        built = [i for p in pushed for i in subprocess.run(
            ["docker", "images", "-q", "--filter", f"label=org.bisectbot.base-digest={p.digest}"],
            capture_output=True, text=True).stdout.split()]
        subprocess.run(["docker", "rmi", "-f", *sorted(set(built)), *[x for p in pushed for x in (p.ref, p.pinned)]],
                       capture_output=True)
