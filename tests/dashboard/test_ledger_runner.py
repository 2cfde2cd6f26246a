"""The dashboard as deployed (deployment finding 9): ``nightly.yml``'s ``pages`` job renders on the
ledger runner, whose ledger is not the one the night was bisected in (that stays on the GPU host) nor
the one the issue was filed from (the hosted ``file`` job's, thrown away with its runner). Tonight
reaches it only as artifacts: the night's ``report.json`` and the file job's ``filed.json``.

Three state directories stand for the three machines; a real ``bisectbot demo`` bisects, a real
``report file`` files on the contract-checked fake GitHub (in its own HTTP server) under a marker
key, and ``bisectbot dashboard --report ... --filed ...`` on a fresh ledger shows the night's
verdict and threshold and links the issue.
"""

from __future__ import annotations

import json
import re

import yaml

from tests.dashboard.conftest import cli, render
from tests.night.conftest import GH_REPO, TOKEN, fake_github  # noqa: F401


def _text(path) -> str:
    t = re.sub(r"<style.*?</style>", "", path.read_text(encoding="utf-8"), flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", t))


def test_the_ledger_runner_dashboard_shows_the_night_and_its_issue(tmp_path, fake_github) -> None:  # noqa: F811
    out, gpu, hosted, ledger, site = (tmp_path / n for n in ("out", "gpu", "hosted", "ledger", "site"))
    p = cli("demo", "--out", str(out), "--state", str(gpu), "--seed", "3", "--commits", "36")
    assert p.returncode == 0, p.stdout + p.stderr
    recipe = out / "work" / "demo-engine-prefill.yaml"
    doc = yaml.safe_load(recipe.read_text())
    doc["report"] = {**(doc.get("report") or {}), "github": {
        "repo": GH_REPO, "labels": ["bisectbot"], "api_url": fake_github.base_url, "bot_login": "bisectbot-app"}}
    recipe.write_text(yaml.safe_dump(doc))
    bad = json.loads((out / "result.json").read_text())["stages"][0]["candidates"][-1]["ref"]

    # the `file` job: a hosted runner's throwaway ledger, the token and a marker key
    filed_out = tmp_path / "artifacts" / "filed-demo-engine-prefill-1"
    f = cli("--json", "--state", str(hosted), "report", "file", str(out / "result.json"), "--recipe", str(recipe),
            "--out", str(filed_out), env={"BISECTBOT_GITHUB_TOKEN": TOKEN, "BISECTBOT_MARKER_KEY": "k" * 32})
    assert f.returncode == 0, f.stdout + f.stderr
    outcome = json.loads(f.stdout)
    (number,) = fake_github.repos[GH_REPO].issues
    assert outcome["action"] == "created" and outcome["number"] == number
    raw = (filed_out / "filed.json").read_text()
    filed = json.loads(raw)
    assert TOKEN not in raw and "k" * 32 not in raw
    assert filed["repo"] == GH_REPO and filed["number"] == number and filed["schema"] == "bisectbot.filed/1"
    report_fp = json.loads((out / "report.json").read_text())["fingerprint"]  # the run held no key
    assert filed["fingerprints"] == [outcome["fingerprint"], report_fp] and outcome["fingerprint"] != report_fp

    # the pages job: the ledger runner's ledger has neither the night's session nor the filing
    doc = render(ledger, site, "--report", str(out), "--filed", str(tmp_path / "artifacts"),
                 "--recipes", str(recipe))
    assert doc["filed"] == [f"{GH_REPO}#{number}"], doc
    index = _text(site / "index.html")
    row = index[index.index("demo-engine-prefill garbage"):]
    assert "bad since" in row and "(1 tested night)" in row and f"{GH_REPO}#{number}" in row, index
    page = site / "r" / "demo-engine-prefill.html"
    assert "Nights (1)" in _text(page) and bad[:10] in _text(page)
    (href,) = set(re.findall(r'href="\.\./b/(r-[0-9a-f]{16})\.html"', page.read_text()))
    assert (site / "b" / f"{href}.html").is_file()
    assert f"issues/{number}" in page.read_text()

    # a forged filed.json (issue 41 item 14): the same recipe and fingerprints, another repository and
    # number. With --recipes the dashboard checks a filing against its recipe's targets: the forged one
    # is named and not recorded (exit 2, after rendering what was genuine); nothing links to it
    forged_dir = tmp_path / "forged" / "filed-demo-engine-prefill-2"
    forged_dir.mkdir(parents=True)
    for who, recipe_name in (("evil-org/elsewhere", "demo-engine-prefill"), (GH_REPO, "no-such-recipe")):
        (forged_dir / "filed.json").write_text(json.dumps({**filed, "repo": who, "recipe": recipe_name,
                                                           "number": number + 40}))
        site2 = tmp_path / f"site-forged-{recipe_name}"
        p = cli("--json", "--state", str(tmp_path / f"ledger-{recipe_name}"), "dashboard", "--out", str(site2),
                "--report", str(out), "--filed", str(tmp_path / "artifacts"), "--filed", str(forged_dir),
                "--recipes", str(recipe))
        assert p.returncode == 2, p.stdout + p.stderr
        assert f"{forged_dir / 'filed.json'}: not recorded" in p.stderr, p.stderr
        assert json.loads(p.stdout)["filed"] == [f"{GH_REPO}#{number}"], p.stdout
        html = "".join(f.read_text() for f in site2.rglob("*.html"))
        assert f"issues/{number + 40}" not in html and "evil-org" not in html and f"issues/{number}" in html

    # rendered from the ledger that bisected it (the demo's own), the night is the ledger's, once
    doc = render(gpu, tmp_path / "site-gpu", "--report", str(out), "--recipes", str(recipe))
    assert "Nights (1)" in _text(tmp_path / "site-gpu" / "r" / "demo-engine-prefill.html")
