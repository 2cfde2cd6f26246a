"""Version grammar: every real example of DOMAIN.md, with its traps."""

import pytest

from bisectbot.versions import commit_of, parse_version

# (raw, base, dev, commit, dirty_date, rocm)
VLLM = [
    ("0.20.1rc1.dev159+ge6ff3e9c8.rocm721", "0.20.1rc1", 159, "e6ff3e9c8", None, "721"),
    ("0.23.1rc1.dev1120+g0f0f28b53.rocm723", "0.23.1rc1", 1120, "0f0f28b53", None, "723"),
    ("0.10.1rc2.dev110+g31282401b.rocm700", "0.10.1rc2", 110, "31282401b", None, "700"),
    ("0.11.0rc2.dev160+g790d22168.rocm700", "0.11.0rc2", 160, "790d22168", None, "700"),
    ("0.15.1.dev0+gf17644344.d20260828.rocm711", "0.15.1", 0, "f17644344", "20260828", "711"),
    ("0.23.1rc1.dev589+g77654d080.d20260630", "0.23.1rc1", 589, "77654d080", "20260630", None),
    ("0.21.1.dev0+gad7125a43", "0.21.1", 0, "ad7125a43", None, None),
    ("0.19.1rc1.dev210.rocm700", "0.19.1rc1", 210, None, None, "700"),  # no hash
    ("0.23.0", "0.23.0", None, None, None, None),
    ("0.10.1.1", "0.10.1.1", None, None, None, None),
    ("0.0.0+rocm.csrc.build", "0.0.0", None, None, None, None),
    ("0.19.1rc1.dev296+gbcc2306ce", "0.19.1rc1", 296, "bcc2306ce", None, None),
]


@pytest.mark.parametrize("raw,base,dev,commit,dirty,rocm", VLLM)
def test_vllm_versions(raw, base, dev, commit, dirty, rocm):
    v = parse_version(raw)
    assert v.valid
    assert (v.base, v.dev, v.commit, v.dirty_date, v.rocm) == (base, dev, commit, dirty, rocm)
    assert commit_of(raw) == commit


def test_dirty_date_is_not_a_commit_nor_a_build_date():
    v = parse_version("0.15.1.dev0+gf17644344.d20260828.rocm711")
    assert v.commit == "f17644344" and v.build_date is None and v.dirty_date == "20260828"


def test_rocm_suffix_in_public_part_is_stripped_from_public():
    v = parse_version("0.19.1rc1.dev210.rocm700")
    assert v.public == "0.19.1rc1.dev210" and v.rocm == "700" and v.commit is None


def test_banner_form_without_rocm_suffix_has_same_commit():
    assert commit_of("0.20.1rc1.dev159+ge6ff3e9c8") == commit_of("0.20.1rc1.dev159+ge6ff3e9c8.rocm721")


def test_placeholder_version():
    v = parse_version("0.0.0+rocm.csrc.build")
    assert v.is_placeholder and v.commit is None and v.extra == ("rocm", "csrc", "build")


@pytest.mark.parametrize("raw", ["0.19.1+gfx942.fork", "0.19.1+gremlin", "0.19.1+g12345"])
def test_fork_suffix_starting_with_g_is_not_a_commit(raw):
    v = parse_version(raw)
    assert v.valid and v.commit is None and v.extra


def test_aiter_versions():
    assert parse_version("0.1.10.post3").base == "0.1.10.post3"
    assert parse_version("0.1.10.post3").post == 3
    v = parse_version("0.1.23.dev88+gb3eed3fd4")
    assert (v.base, v.dev, v.commit) == ("0.1.23", 88, "b3eed3fd4")
    # nightly wheel: a date, never a hash
    n = parse_version("0.1.20.post1+20260820")
    assert n.commit is None and n.build_date == "20260820"


def test_torch_and_full_sha():
    assert parse_version("2.10.0+git8514f05").commit == "8514f05"
    full = "a" * 40
    assert parse_version(f"0.21.1.dev3+g{full}").commit == full
    assert parse_version(f"0.21.1.dev3+g{'a' * 41}").commit is None


@pytest.mark.parametrize("raw", ["", "garbage", "v", "latest", "nightly_main_20260401"])
def test_invalid(raw):
    v = parse_version(raw)
    assert not v.valid and v.commit is None


def test_leading_v_tag():
    assert parse_version("v0.1.12").base == "0.1.12"
