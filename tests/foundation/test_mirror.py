"""``$BISECTBOT_REGISTRY_MIRROR`` (bisectbot/mirror.py): a runner fetches a shipped recipe's nightlies
from its mirror without the recipe being edited (issue 24). The night through a real registry is
tests/act/test_glm_night_act.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from bisectbot.errors import BadInput
from bisectbot.mirror import ENV, Mirror, parse_mirrors
from bisectbot.recipe import load_recipe, parse_recipe

GLM = Path(__file__).resolve().parents[2] / "recipes" / "glm51-fp8-sparse-mla-prefill.yaml"


def test_a_bare_url_mirrors_docker_hub_under_each_of_its_names() -> None:
    m = parse_mirrors("http://127.0.0.1:5000/proxy/hub")
    assert set(m) == {"registry-1.docker.io", "docker.io", "index.docker.io"}
    assert m["docker.io"] == Mirror("127.0.0.1:5000", True, "proxy/hub")
    assert m["docker.io"].repository("rocm/vllm-dev") == "proxy/hub/rocm/vllm-dev"
    other = parse_mirrors("https://hub-mirror.example.com, ghcr.io=https://mirror.example.com/ghcr/")
    assert other["registry-1.docker.io"] == Mirror("hub-mirror.example.com", False, "")
    assert other["ghcr.io"] == Mirror("mirror.example.com", False, "ghcr")


@pytest.mark.parametrize("bad", ["127.0.0.1:5000", "ftp://x", "http://h/Upper", "ghcr io=https://m", "http://h/a b"])
def test_a_malformed_mirror_names_the_variable(bad: str) -> None:
    with pytest.raises(BadInput, match=ENV):
        parse_mirrors(bad)


def test_the_shipped_glm_recipe_reads_through_the_mirror(monkeypatch) -> None:
    plain, plain_hash = load_recipe(GLM).source, load_recipe(GLM).verdict_hash()
    assert (plain.registry, plain.repository, plain.insecure) == ("registry-1.docker.io", "rocm/vllm-dev", False)
    monkeypatch.setenv(ENV, "http://127.0.0.1:5000/night")
    r = load_recipe(GLM)
    assert (r.source.registry, r.source.repository, r.source.insecure, r.source.hub_api) == \
        ("127.0.0.1:5000", "night/rocm/vllm-dev", True, None)
    assert r.source.tag_pattern == plain.tag_pattern and r.verdict_hash() == plain_hash  # probes stay cached
    # another registry's recipe, and a git source, are not touched
    ghcr = parse_recipe("name: x\nsource: {kind: registry, registry: ghcr.io, repository: o/r}\n")
    assert (ghcr.source.registry, ghcr.source.repository) == ("ghcr.io", "o/r")
    assert parse_recipe("name: x\nsource: {kind: git, repo: .}\n").source.repo == "."
    monkeypatch.setenv(ENV, "not a url")
    with pytest.raises(BadInput, match=ENV):
        load_recipe(GLM)
