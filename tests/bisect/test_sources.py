"""Stage-1 sources: nightlies from the ledger when the registry is unreachable."""

from __future__ import annotations

import time

import pytest

from bisectbot.errors import BadInput
from bisectbot.ledger import Ledger
from bisectbot.recipe import parse_recipe
from bisectbot.session import RegistryCandidates, make_source
from bisectbot.sources.registry import RegistryClient


def test_registry_source_falls_back_to_ledger_nightlies(tmp_path) -> None:
    r = parse_recipe("""
name: nightly-demo
source: {kind: registry, registry: "127.0.0.1:1", repository: rocm/vllm-dev, tag_pattern: "nightly_main_*",
         insecure: true}
""")
    with Ledger(tmp_path) as led:
        digests = {"20260101": "sha256:" + "a" * 64, "20260102": "sha256:" + "b" * 64,
                   "20260103": "sha256:" + "b" * 64, "20260104": "sha256:" + "c" * 64,
                   "20260105": "sha256:" + "d" * 64}
        for day, d in digests.items():
            led.record_nightly("rocm/vllm-dev", f"nightly_main_{day}", d)
        led.record_nightly("rocm/vllm-dev", "base", "sha256:" + "e" * 64)
        assert isinstance(make_source(r, None, led), RegistryCandidates)
        src = RegistryCandidates(r, led, RegistryClient("127.0.0.1:1", insecure=True, max_attempts=1, timeout_s=5))
        t0 = time.monotonic()
        cands = src.candidates("nightly_main_20260101", "nightly_main_20260105")
        assert time.monotonic() - t0 < 60
        # same digest under two tags is one candidate; tags outside the pattern are left out
        assert [c.label for c in cands] == ["nightly_main_20260101", "nightly_main_20260102",
                                            "nightly_main_20260104", "nightly_main_20260105"]
        assert cands[0].meta["image"] == "127.0.0.1:1/rocm/vllm-dev@sha256:" + "a" * 64
        assert cands[0].kind.value == "nightly"
        with pytest.raises(BadInput, match="not older"):
            src.candidates("nightly_main_20260105", "nightly_main_20260101")
        with pytest.raises(BadInput, match="not found"):
            src.candidates("nightly_main_20250101", "nightly_main_20260105")


def test_unreachable_registry_and_empty_ledger_names_the_way_out(tmp_path) -> None:
    """Deployment finding 10: offline with no recorded nightlies, the error says what to do: a mirror
    (BISECTBOT_REGISTRY_MIRROR) or ``nightlies record`` while the registry answers."""
    from bisectbot.errors import UpstreamUnreachable

    r = parse_recipe("""
name: nightly-demo
source: {kind: registry, registry: "127.0.0.1:1", repository: rocm/vllm-dev, tag_pattern: "nightly_main_*",
         insecure: true}
""")
    with Ledger(tmp_path) as led:
        src = RegistryCandidates(r, led, RegistryClient("127.0.0.1:1", insecure=True, max_attempts=1, timeout_s=5))
        with pytest.raises((UpstreamUnreachable, BadInput)) as err:
            src.candidates("nightly_main_20260101", "nightly_main_20260105")
    msg = str(err.value)
    assert "the ledger has no nightlies of rocm/vllm-dev" in msg
    assert "BISECTBOT_REGISTRY_MIRROR" in msg and "bisectbot nightlies record --recipe" in msg
