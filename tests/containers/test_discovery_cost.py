"""What nightly discovery costs in requests (issue 15): the tag list, plus a manifest ``HEAD`` only for
tags the ledger does not hold (or that move), 8 at a time, once per run.

Counted on the server side of the contract-following registry (``fake_registry.py``: token auth,
``Link`` pagination) while the installed CLI runs in a child process, and on the client side
against the real registry on 127.0.0.1:5000 (distribution ignores ``n`` and has no request log).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests

from bisectbot.ledger import Ledger
from bisectbot.recipe import parse_recipe
from bisectbot.session import RegistryCandidates
from bisectbot.sources.registry import NightlyTags, RegistryClient, discover, is_moving, record
from tests.containers.fake_registry import FakeRegistry

REPO = "rocm/vllm-dev"
DATED = [f"nightly_main_2026{m:02d}{d:02d}" for m in range(1, 11) for d in range(1, 29)]  # 280 dated tags
TAGS = DATED + ["nightly", "base", "ci_base"]
DIG = {f"{REPO}:{t}": "sha256:" + hashlib.sha256(t.encode()).hexdigest() for t in TAGS}
PAGE = 50  # tags per page: 6 pages for 283 tags


def cli(state: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, BISECTBOT_STATE=str(state))
    p = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(state), *args], capture_output=True,
                       text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return p


def counts(fake: FakeRegistry, since: int = 0) -> dict[str, int]:
    """Requests the server answered since ``since``: tag-list pages, manifest requests, tokens."""
    log = fake.log[since:]
    authed = [(m, p) for m, p, h in log if h.get("Authorization")]
    return {"list": sum(1 for _, p in authed if "/tags/list" in p),
            "listings": sum(1 for _, p in authed if "/tags/list" in p and "last=" not in p),
            "manifests": sum(1 for _, p in authed if "/manifests/" in p),
            "all": len(log)}


def recipe_file(tmp_path: Path, port: int, pattern: str, good: str | None = None, bad: str | None = None) -> Path:
    ends = f"bisect: {{good: {good}, bad: {bad}}}\n" if good else ""
    f = tmp_path / "nightly.yaml"
    f.write_text(f"""name: nightly-cost
source: {{kind: registry, registry: "127.0.0.1:{port}", repository: {REPO}, tag_pattern: "{pattern}",
         insecure: true}}
{ends}""")
    return f


def test_moving_tags_are_the_ones_without_a_digit() -> None:
    assert [t for t in ["nightly", "latest", "base-nightly", "nightly_main_20260412", "v0.11.2",
                        "nightly-" + "a" * 40] if is_moving(t)] == ["nightly", "latest", "base-nightly"]


def test_second_record_and_warm_dry_run_send_no_manifest_request(tmp_path) -> None:
    """The issue's "Done when": on the plain registry path a second ``nightlies record`` and a
    ``run --dry-run`` on a warm ledger send no manifest request for recorded tags; a run lists once."""
    state = tmp_path / "state"
    with FakeRegistry({REPO: TAGS}, DIG) as fake:
        port = fake.port
        rec = ["--json", "nightlies", "record", "--registry", f"127.0.0.1:{port}", "--repository", REPO,
               "--pattern", "nightly_main_*|nightly", "--insecure", "--page-size", str(PAGE)]
        out = json.loads(cli(state, *rec).stdout)
        first = counts(fake)
        assert out["recorded"] == 281 and len(out["new"]) == 281
        assert first["list"] == 6 and first["manifests"] == 281  # cold ledger: one HEAD per matching tag

        mark = len(fake.log)
        out = json.loads(cli(state, *rec).stdout)
        second = counts(fake, mark)
        assert out["recorded"] == 281 and out["new"] == []
        # only the moving tag is asked again; every dated tag comes from the ledger
        assert second["list"] == 6 and second["manifests"] == 1
        assert second["all"] <= 1.2 * first["list"] + 2  # + the 401 and the token of a fresh process

        mark = len(fake.log)
        cli(state, "run", str(recipe_file(tmp_path, port, "nightly_main_*")), "--dry-run")
        dry = counts(fake, mark)
        assert dry["listings"] == 1, "a run lists the tags once (it used to discover twice)"
        assert dry["manifests"] == 0

        # `nightlies list` reads the same ledger: only the moving tag is asked
        mark = len(fake.log)
        listed = json.loads(cli(state, "--json", "nightlies", "list", *rec[3:]).stdout)
        assert len(listed) == 281 and all(r["digest"] for r in listed)
        assert counts(fake, mark)["manifests"] == 1

        # --refresh asks for every digest again (a tag re-pushed under the same name)
        mark = len(fake.log)
        cli(state, "nightlies", "record", "--refresh", *rec[3:])
        assert counts(fake, mark)["manifests"] == 281


def test_cold_dry_run_heads_only_the_searched_range_eight_at_a_time(tmp_path) -> None:
    """A cold ledger and a range of 11 nightlies: 11 manifest requests, not 280, in flight 8 at once."""
    state = tmp_path / "state"
    with FakeRegistry({REPO: TAGS}, DIG, latency_s=0.2) as fake:
        f = recipe_file(tmp_path, fake.port, "nightly_main_*", "nightly_main_20260310", "nightly_main_20260320")
        p = cli(state, "run", str(f), "--dry-run")
        c = counts(fake)
        assert c["listings"] == 1 and c["manifests"] == 11, c
        # 10 HEADs after the first on 8 workers: concurrent, never more than 8 at once (how many overlap
        # exactly depends on thread start-up on a loaded machine)
        assert 3 <= fake.max_inflight <= 8, fake.max_inflight
        assert "nightly_main_20260310" in p.stdout
    with Ledger(state) as led:  # what the run learnt is recorded: the next run asks none of them
        assert len(led.nightly_digests(REPO)) == 11


def test_nightly_tags_lists_once_and_fills_only_the_asked_range() -> None:
    with FakeRegistry({REPO: TAGS}, DIG) as fake:
        r = parse_recipe(f"""
name: n
source: {{kind: registry, registry: "127.0.0.1:{fake.port}", repository: {REPO}, tag_pattern: "nightly_main_*",
         insecure: true}}
""")
        client = RegistryClient(f"127.0.0.1:{fake.port}", insecure=True)
        nt = NightlyTags(r.source, client, known={DATED[0]: DIG[f"{REPO}:{DATED[0]}"]}, page_size=PAGE)
        assert len(nt.tags()) == 280 and nt.tags() is nt.tags()
        part = nt.digests(0, 9)
        assert [t.digest for t in part] == [DIG[f"{REPO}:{t}"] for t in DATED[:10]]
        assert nt.heads == 9  # the first came from ``known``
        # a digest as an end is found without asking for more digests when the ledger knows it
        assert nt.index(DIG[f"{REPO}:{DATED[5]}"]) == 5 and nt.heads == 9
        assert counts(fake)["list"] == 6


def test_dry_run_range_records_and_moving_bad_end_is_asked_again(tmp_path) -> None:
    """``nightly`` (moving) as the bad end: asked every run even with the ledger warm."""
    with FakeRegistry({REPO: TAGS}, DIG) as fake, Ledger(tmp_path) as led:
        r = parse_recipe(f"""
name: n
source: {{kind: registry, registry: "127.0.0.1:{fake.port}", repository: {REPO},
         tag_pattern: "nightly_main_202610*|nightly", insecure: true}}
""")
        client = RegistryClient(f"127.0.0.1:{fake.port}", insecure=True)
        cands = RegistryCandidates(r, led, client).candidates("nightly_main_20261001", "nightly")
        # nightly points at its own digest here, so it is the 29th candidate
        assert len(cands) == 29 and cands[-1].label == "nightly"
        assert counts(fake)["manifests"] == 29
        mark = len(fake.log)
        again = RegistryCandidates(r, led, client).candidates("nightly_main_20261001", "nightly")
        assert [c.ref for c in again] == [c.ref for c in cands]
        assert counts(fake, mark)["manifests"] == 1


# ---------------------------------------------------------------------- the real registry


def _push_tags(registry: str, repo: str, tags: list[str]) -> dict[str, str]:
    """Push one tiny OCI image per tag straight through the distribution API (no Docker needed):
    one config blob, one manifest per tag (distinct by annotation). Returns tag -> manifest digest."""
    base = f"http://{registry}/v2/{repo}"
    blob = b'{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}'
    bdig = "sha256:" + hashlib.sha256(blob).hexdigest()
    r = requests.post(f"{base}/blobs/uploads/", timeout=30)
    assert r.status_code == 202, r.text
    loc = requests.compat.urljoin(f"http://{registry}", r.headers["Location"])
    sep = "&" if "?" in loc else "?"
    assert requests.put(f"{loc}{sep}digest={bdig}", data=blob, timeout=30).status_code == 201
    out = {}
    for t in tags:
        m = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": bdig,
                                   "size": len(blob)},
                        "layers": [], "annotations": {"org.opencontainers.image.ref.name": t}}).encode()
        r = requests.put(f"{base}/manifests/{t}", data=m, timeout=30,
                         headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
        assert r.status_code == 201, r.text
        out[t] = r.headers["Docker-Content-Digest"]
    return out


@pytest.mark.docker
def test_real_registry_warm_ledger_sends_no_manifest_request(registry, tmp_path) -> None:
    repo = f"bisectbot-test/cost-{uuid.uuid4().hex[:8]}"
    tags = [f"nightly_main_202604{d:02d}" for d in range(1, 25)] + ["nightly"]
    pushed = _push_tags(registry, repo, tags)
    sent: list[tuple[str, str]] = []
    session = requests.Session()
    session.hooks["response"].append(lambda resp, *a, **k: sent.append((resp.request.method, resp.request.url)))
    client = RegistryClient(registry, insecure=True, session=session)
    r = parse_recipe(f"""
name: n
source: {{kind: registry, registry: "{registry}", repository: {repo}, tag_pattern: "nightly_main_*|nightly",
         insecure: true}}
""")
    with Ledger(tmp_path) as led:
        infos = discover(r.source, client)
        assert {i.tag: i.digest for i in infos} == pushed  # HEAD digests are what the registry stored
        assert sum(1 for m, u in sent if "/manifests/" in u) == 25
        record(led, infos)
        sent.clear()
        infos2 = discover(r.source, client, known=led.nightly_digests(repo))
        assert {i.tag: i.digest for i in infos2} == pushed
        assert [u.rsplit("/", 1)[-1] for m, u in sent if "/manifests/" in u] == ["nightly"]
        sent.clear()
        src = RegistryCandidates(r, led, client)
        cands = src.candidates(*src.default_ends())
        assert len(cands) == 25 and cands[-1].label == "nightly"
        assert sum(1 for m, u in sent if "/tags/list" in u) == 1  # listed once for ends and range
        assert [u.rsplit("/", 1)[-1] for m, u in sent if "/manifests/" in u] == ["nightly"]


def test_recorded_digest_trusted_for_immutable_tags_older_than_two_days() -> None:
    from datetime import date

    from bisectbot.sources.registry import trust_recorded

    today = date(2026, 4, 12)
    assert trust_recorded("nightly_main_20260409", today)  # three days old: as recorded
    assert not trust_recorded("nightly_main_20260411", today)  # may still be rebuilt: asked again
    assert not trust_recorded("nightly", today) and trust_recorded("v0.11.2", today)
    assert trust_recorded("nightly-" + "0123abc" * 5 + "01234", today)  # a commit-named tag
