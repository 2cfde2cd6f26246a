"""``nightly.yml`` under ``act`` (host mode, tests/act/actkit.py) produces the GitHub Pages artifact.

A deployment with one recipe over three nightlies of the reference engine in the local registry
(the third is bad), the fake GitHub for the issue. The ``pages`` job runs after the night on the
ledger runner: it fetches the night's report artifacts, renders ``bisectbot dashboard`` beside
the ledger and hands the site to ``upload-pages-artifact`` / ``deploy-pages`` (local stand-ins,
tests/act/upload-pages-artifact and tests/act/deploy-pages). The tar the stand-in made with the
real action's flags is unpacked and opened in headless Chromium. Also checked on the workflow
file: ``pages: write`` and ``id-token: write`` only in that job, no secret referenced in it.
"""

from __future__ import annotations

import re
import tarfile
import uuid

import pytest
import yaml

from tests.act.actkit import ROOT, make_deployment
from tests.act.actnight import RECIPE, act, cleanup, recipe_text, spec
from tests.containers.conftest import base_image, no_container_left_behind, registry  # noqa: F401
from tests.containers.nightly_factory import push_nightlies
from tests.dashboard.conftest import check_site
from tests.night.conftest import GH_REPO, TOKEN, fake_github  # noqa: F401

WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"


def test_pages_job_permissions_and_no_secrets() -> None:
    text = WORKFLOW.read_text()
    jobs = yaml.safe_load(text)["jobs"]
    for name, job in jobs.items():
        perms = job.get("permissions") or {}
        has = {k for k in ("pages", "id-token") if perms.get(k) == "write"}
        assert has == ({"pages", "id-token"} if name == "pages" else set()), (name, perms)
    pages = text[text.index("\n  pages:\n"):]
    assert "secrets." not in pages and "github.token" not in pages
    needs = jobs["pages"]["needs"]
    needs = [needs] if isinstance(needs, str) else needs
    # after the night and its filing (issue 24 split filing into its own job: the chart address)
    assert "nightly" in needs and "bisectbot-ledger" in jobs["pages"]["runs-on"], needs
    # optional (issue 41 item 4): only a deployment that publishes (BISECTBOT_PAGES_URL) runs it
    assert "vars.BISECTBOT_PAGES_URL != ''" in jobs["pages"]["if"], jobs["pages"]["if"]
    pinned = re.findall(r"uses: (actions/(?:upload-pages-artifact|deploy-pages))@([0-9a-f]{40}) # v\d", pages)
    assert {p for p, _ in pinned} == {"actions/upload-pages-artifact", "actions/deploy-pages"}, pinned


@pytest.mark.docker
@pytest.mark.slow
def test_nightly_under_act_produces_the_pages_artifact(registry, base_image, fake_github, tmp_path,  # noqa: F811
                                                        browser, artefacts) -> None:
    repository = f"bisectbot-test/act-pages-{uuid.uuid4().hex[:8]}"
    specs = [spec(1, 1_000_000), spec(2, 1_000_000), spec(3, 3000)]
    pushed = push_nightlies(specs, repository, registry=registry, base=base_image)
    try:
        deploy = make_deployment(tmp_path / "deploy", {
            RECIPE: recipe_text(registry, repository, specs[0].tag, fake_github.base_url)})
        state = tmp_path / "state"
        pages_dir = tmp_path / "pages"
        run, art = act(deploy, "nightly.yml", "workflow_dispatch", {"inputs": {"recipe": RECIPE}}, tmp_path, state,
                       "night1", env={"ACT_TEST_PAGES": str(pages_dir)},
                       # the deployment publishes a dashboard: the pages job runs only with this variable
                       variables={"BISECTBOT_PAGES_URL": "https://bisectbot-test.github.io/deploy"})
        assert run.returncode == 0, run.tail()
        assert "nightly.yml/dashboard" in " ".join(run.jobs_started()) or any(
            "dashboard" in j for j in run.jobs_started()), run.jobs_started()
        assert TOKEN not in run.output
        # the report artifact (beside the commands one since issue 24): the Pages tar goes elsewhere
        (report,) = [d for d in art.iterdir() if (d / "report.json").is_file()]
        assert (report / "report.json").is_file()
        tar_path = pages_dir / "github-pages" / "artifact.tar"
        assert tar_path.is_file(), run.tail()
        with tarfile.open(tar_path) as tf:
            names = {n.removeprefix("./") for n in tf.getnames()} - {"."}
        assert {"index.html", f"r/{RECIPE}.html"} <= names, names
        assert any(n.startswith("b/") and n.endswith(".html") for n in names), names
        assert not any(part.startswith(".") for n in names for part in n.split("/") if part), names
        # the site was rendered beside the ledger (the next night renders only what changed)
        assert (state / "site" / ".bisectbot-dashboard.json").is_file()
        site = pages_dir / "deployed"
        assert (site / "index.html").is_file(), run.tail()
        pages = check_site(browser, site, artefacts)
        assert f"r/{RECIPE}.html" in pages
        browser.open((site / "index.html").as_uri())
        row = browser.js(f"return document.querySelector('tr[data-recipe=\"{RECIPE}\"]').innerText")
        assert f"{GH_REPO}#1" in row and specs[2].tag in row, row
        browser.open((site / "r" / f"{RECIPE}.html").as_uri())
        jobs = browser.js("return Array.from(document.querySelectorAll('#bisections-table a')).map(a => a.href)")
        assert any(re.fullmatch(r"https://github\.com/octo-org/bisectbot-deploy/actions/runs/\d+", j) for j in jobs), jobs
    finally:
        cleanup(pushed)
