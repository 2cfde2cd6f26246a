"""Registry and Docker Hub clients against a contract-following local server and the real registry."""

from __future__ import annotations

import time

import pytest

from bisectbot.errors import RegistryError
from bisectbot.sources.registry import (
    HubClient,
    RegistryClient,
    TagInfo,
    filter_tags,
    merge_hub_dates,
    order_tags,
    parse_link_next,
    parse_www_authenticate,
    split_image_ref,
    tag_date,
)
from tests.containers.fake_registry import FakeRegistry, hub_sample_pages

TAGS = ["nightly"] + [f"nightly_main_202604{d:02d}" for d in range(1, 13)] + ["base", "ci_base"]
DIG = {f"rocm/vllm-dev:{t}": f"sha256:{i:064x}" for i, t in enumerate(TAGS)}


def client(fake: FakeRegistry, **kw) -> RegistryClient:
    sleeps: list[float] = []
    c = RegistryClient(f"127.0.0.1:{fake.port}", insecure=True, sleep=sleeps.append, backoff_s=0.01, **kw)
    c.sleeps = sleeps  # type: ignore[attr-defined]
    return c


def test_token_flow_and_link_pagination():
    with FakeRegistry({"rocm/vllm-dev": TAGS}, DIG) as fake:
        c = client(fake)
        tags = c.tags("rocm/vllm-dev", page_size=5)
        assert tags == sorted(TAGS)  # lexical, every page followed
        assert len(fake.tokens_issued) == 1 and fake.tokens_issued[0] == "repository:rocm/vllm-dev:pull"
        pages = [p for m, p, h in fake.log if "/tags/list" in p and h.get("Authorization")]
        # 15 tags, 5 per page: 3 pages, the 2nd and 3rd from the relative Link URLs
        assert [p.split("?")[1] for p in pages] == [
            "n=5", "last=nightly_main_20260402&n=5", "last=nightly_main_20260407&n=5"]
        # the token never travels to the log of the client
        assert all("tok-" not in p for _, p, _ in fake.log)


def test_pagination_without_link_header_falls_back_to_last():
    with FakeRegistry({"rocm/vllm-dev": TAGS}, DIG, link=False) as fake:
        assert client(fake).tags("rocm/vllm-dev", page_size=4) == sorted(TAGS)


def test_manifest_head_sends_index_accept_types():
    with FakeRegistry({"rocm/vllm-dev": TAGS}, DIG) as fake:
        c = client(fake)
        assert c.digest("rocm/vllm-dev", "nightly") == DIG["rocm/vllm-dev:nightly"]
        heads = [h for m, p, h in fake.log if m == "HEAD" and h.get("Authorization")]
        assert "application/vnd.oci.image.index.v1+json" in heads[-1]["Accept"]
        infos = c.tag_infos("rocm/vllm-dev", "nightly_main_*", page_size=100)
        assert [i.tag for i in infos] == [t for t in sorted(TAGS) if t.startswith("nightly_main_")]
        assert all(i.digest == DIG[f"rocm/vllm-dev:{i.tag}"] for i in infos)
        assert len(fake.tokens_issued) == 1  # cached for the scope


def test_429_retry_after_honoured():
    with FakeRegistry({"rocm/vllm-dev": TAGS}, DIG, fail_429=2, retry_after="3") as fake:
        c = client(fake)
        assert c.tags("rocm/vllm-dev") == sorted(TAGS)
        assert c.sleeps == [3.0, 3.0]


def test_429_real_sleep_is_short_and_bounded():
    with FakeRegistry({"rocm/vllm-dev": TAGS}, DIG, fail_429=1, retry_after="1") as fake:
        c = RegistryClient(f"127.0.0.1:{fake.port}", insecure=True, max_wait_s=5)
        t0 = time.monotonic()
        assert c.tags("rocm/vllm-dev")
        assert 0.9 <= time.monotonic() - t0 < 5


def test_429_gives_up_with_one_line():
    with FakeRegistry({"rocm/vllm-dev": TAGS}, DIG, fail_429=100) as fake:
        c = client(fake, max_attempts=3)
        with pytest.raises(RegistryError) as e:
            c.tags("rocm/vllm-dev")
        msg = str(e.value)
        assert "\n" not in msg and "429" in msg and "gave up after 3 attempts" in msg


def test_5xx_retried_with_backoff():
    with FakeRegistry({"rocm/vllm-dev": TAGS}, DIG, fail_500=2) as fake:
        c = client(fake)
        assert c.tags("rocm/vllm-dev")
        assert c.sleeps == [0.01, 0.02]


def test_404_unknown_repository_one_line():
    with FakeRegistry({"rocm/vllm-dev": TAGS}, DIG) as fake:
        with pytest.raises(RegistryError) as e:
            client(fake).tags("rocm/nope")
        assert "\n" not in str(e.value) and "NAME_UNKNOWN" in str(e.value) and "rocm/nope" in str(e.value)
        with pytest.raises(RegistryError, match="manifest rocm/vllm-dev:nightly_main_20250101: not found"):
            client(fake).digest("rocm/vllm-dev", "nightly_main_20250101")


def test_connection_refused_is_registry_error():
    """Refused: upstream unreachable at once (exit 5, issue 14), still a RegistryError; no retries."""
    from bisectbot.errors import EXIT_UNREACHABLE

    sleeps: list[float] = []
    c = RegistryClient("127.0.0.1:9", insecure=True, max_attempts=2, sleep=sleeps.append)
    with pytest.raises(RegistryError, match="upstream unreachable \\(connection refused\\)") as e:
        c.tags("x/y")
    assert e.value.exit_code == EXIT_UNREACHABLE and sleeps == []


def test_hub_pagination_over_contract_sample():
    with FakeRegistry({}, hub_pages=hub_sample_pages()) as fake:
        tags = HubClient(fake.url, sleep=lambda s: None).tags("rocm/vllm-dev", page_size=5)
    assert len(tags) == 13
    assert tags[0].tag == "nightly" and tags[0].last_updated.startswith("2026-04-12")
    byname = {t.tag: t for t in tags}
    assert byname["nightly"].digest == byname["nightly_main_20260412"].digest


def test_hub_429_x_retry_after_unix_time():
    with FakeRegistry({}, hub_pages=hub_sample_pages(), fail_429=1) as fake:
        sleeps: list[float] = []
        tags = HubClient(fake.url, sleep=sleeps.append).tags("rocm/vllm-dev")
    assert len(tags) == 13 and len(sleeps) == 1 and 0 <= sleeps[0] <= 2


def test_order_and_filter():
    infos = [TagInfo("r", t, f"sha256:{i}") for i, t in enumerate(TAGS)]
    hub = [TagInfo("r", "nightly", None, "2026-04-12T06:28:24Z"),
           TagInfo("r", "nightly_main_20260412", None, "2026-04-12T06:27:43Z")]
    merge_hub_dates(infos, hub)
    sel = [i for i in infos if i.tag in filter_tags(TAGS, "nightly_main_*|nightly")]
    ordered = [i.tag for i in order_tags(sel)]
    assert ordered[0] == "nightly_main_20260401"
    assert ordered[-2:] == ["nightly_main_20260412", "nightly"]  # moving tag after the dated one it equals
    assert filter_tags(TAGS, "base") == ["base"]
    assert tag_date("nightly_main_20260412") == "2026-04-12" and tag_date("nightly-" + "a" * 40) is None
    assert tag_date("nightly_main_20261399") is None


def test_header_parsers_and_refs():
    scheme, p = parse_www_authenticate(
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:rocm/vllm-dev:pull"')
    assert scheme == "bearer" and p["service"] == "registry.docker.io" and p["scope"].endswith(":pull")
    assert parse_link_next('</v2/r/tags/list?last=b&n=2>; rel="next"', "http://h:5000/v2/r/tags/list?n=2") == \
        "http://h:5000/v2/r/tags/list?last=b&n=2"
    assert parse_link_next(None, "http://x") is None
    assert split_image_ref("rocm/vllm-dev:nightly") == ("registry-1.docker.io", "rocm/vllm-dev", "nightly")
    assert split_image_ref("127.0.0.1:5000/a/b@sha256:" + "1" * 64)[0] == "127.0.0.1:5000"
    assert split_image_ref("ubuntu") == ("registry-1.docker.io", "library/ubuntu", "latest")


@pytest.mark.docker
def test_real_registry_tags_and_digests(nightlies, registry):
    """Against the real docker-registry (distribution 2.8 ignores ``n`` on tags/list and answers
    every tag unsorted in one page, so pagination is exercised on the contract server above):
    a small ``n`` must neither loop nor lose tags, and HEAD digests equal the pushed digests."""
    repo = nightlies["repository"]
    c = RegistryClient(registry, insecure=True)
    tags = c.tags(repo, page_size=2)
    assert sorted(tags) == sorted(p.spec.tag for p in nightlies["pushed"])
    for p in nightlies["pushed"]:
        assert c.digest(repo, p.spec.tag) == p.digest
    with pytest.raises(RegistryError, match="not found"):
        c.tags(repo + "-missing")


def test_discover_with_hub_dates_and_record_moving_tag(tmp_path):
    """A recipe source over the contract server: dated tags + the moving ``nightly`` tag, dates from
    the Hub API; recording twice while ``nightly`` moves gives a dated history of its digests."""
    from bisectbot.ledger import Ledger
    from bisectbot.recipe import RegistrySource
    from bisectbot.sources.registry import discover, record

    pages = hub_sample_pages()
    hub_tags = [r["name"] for p in pages for r in p["results"]]
    digests = {f"rocm/vllm-dev:{r['name']}": r["digest"] for p in pages for r in p["results"]}
    old_one = next(r for p in pages for r in p["results"] if r["name"] == "nightly_main_20260401")
    old_one["digest"] = None  # a Hub entry without digest: asked from the registry (HEAD)
    with FakeRegistry({"rocm/vllm-dev": hub_tags + ["base"]}, digests, hub_pages=pages) as fake:
        src = RegistrySource(registry=f"127.0.0.1:{fake.port}", repository="rocm/vllm-dev",
                             tag_pattern="nightly_main_*|nightly", hub_api=fake.url, insecure=True)
        infos = discover(src, page_size=5)
        assert [i.tag for i in infos][:2] == ["nightly_main_20260401", "nightly_main_20260402"]
        assert [i.tag for i in infos][-2:] == ["nightly_main_20260412", "nightly"]
        assert all(i.last_updated for i in infos) and "base" not in [i.tag for i in infos]
        assert infos[-1].digest == infos[-2].digest  # the moving tag = the newest dated one
        with Ledger(tmp_path) as led:
            assert record(led, infos, seen="2026-04-12T08:00:00+00:00") == 13
            assert infos[0].digest == digests["rocm/vllm-dev:nightly_main_20260401"]
            heads = [p for m, p, h in fake.log if m == "HEAD"]
            assert len(heads) == 2 and all("nightly_main_20260401" in p for p in heads)  # 401, then with token
            moved = next(r for p in pages for r in p["results"] if r["name"] == "nightly")
            moved["digest"] = "sha256:" + "e" * 64  # the nightly job moved the tag
            record(led, discover(src), seen="2026-04-13T08:00:00+00:00")
            rows = [r for r in led.nightlies("rocm/vllm-dev") if r["tag"] == "nightly"]
    assert [(r["digest"], r["first_seen"][:10]) for r in rows] == [
        (infos[-1].digest, "2026-04-12"), ("sha256:" + "e" * 64, "2026-04-13")]
