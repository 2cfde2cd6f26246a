"""Pin readers (issue 26) on real file shapes, and pin diffs / ranges over real git repositories.

The text below is lines copied from the real files (only the lines a test needs):
vllm-project/vllm ``docker/Dockerfile.rocm_base`` (commits 00256d59 and 198129a7),
``docker/Dockerfile.rocm`` (00305ee5), ``requirements/rocm.txt`` (027281ae),
``requirements/test/rocm.txt`` (016bbe53); ROCm/aiter ``.gitmodules`` and the gitlink of
``3rdparty/composable_kernel`` (``git ls-tree`` at e4048607, bumped by 7c4d9e89 "Pin composable_kernel to
15e12dd7 (#4861)").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bisectbot import pins as P
from bisectbot.errors import BadInput
from bisectbot.sources.git import GitRepo
from bisectbot.sources.pinned import pin_diff, pin_of, pin_range, pins_at, resolve_pin

ROCM_BASE = '''\
ARG BASE_IMAGE=rocm/dev-ubuntu-22.04:7.2.1-complete
ARG TRITON_BRANCH="ba5c1517"
ARG TRITON_REPO="https://github.com/ROCm/triton.git"
ARG PYTORCH_BRANCH="8514f051" # release/2.10 as of 3/17
ARG PYTORCH_REPO="https://github.com/ROCm/pytorch.git"
ARG FA_BRANCH="0e60e394"
ARG FA_REPO="https://github.com/Dao-AILab/flash-attention.git"
ARG AITER_BRANCH="v0.1.10.post3"
ARG AITER_REPO="https://github.com/ROCm/aiter.git"
ARG MORI_BRANCH="2d02c6a9"
ARG MORI_REPO="https://github.com/ROCm/mori.git"

# Sccache configuration (only used in release pipeline)
ARG USE_SCCACHE
ARG SCCACHE_REGION_NAME=us-west-2

FROM ${BASE_IMAGE} AS base
ARG PYTORCH_ROCM_ARCH=gfx90a;gfx942;gfx950;gfx1100;gfx1101;gfx1200;gfx1201;gfx1150;gfx1151
ENV AITER_ROCM_ARCH=gfx942;gfx950
ARG PYTHON_VERSION=3.12

FROM base AS build_aiter
ARG AITER_BRANCH
ARG AITER_REPO
RUN git clone --recursive ${AITER_REPO}
RUN cd aiter \\
    && git checkout ${AITER_BRANCH} \\
    && git submodule update --init --recursive
'''

OLD_ROCM_BASE = '''\
ARG BASE_IMAGE=rocm/dev-ubuntu-22.04:6.3.1-complete
ARG HIPBLASLT_BRANCH="4d40e36"
ARG LEGACY_HIPBLASLT_OPTION=
ARG RCCL_BRANCH="648a58d"
ARG RCCL_REPO="https://github.com/ROCm/rccl"
'''

ROCM_STAGE_ARGS = '''\
FROM base AS build_nixl
ARG NIXL_BRANCH="231d56753047c989062a5cb2ac703a1ad761c7d2"
ARG NIXL_REPO="https://github.com/ai-dynamo/nixl.git"
FROM build_rocshmem AS build_deepep
ARG DEEPEP_BRANCH="0f63d3e9"
'''

REQUIREMENTS_ROCM = '''\
# Common dependencies
-r common.txt

# The version of gRPC libraries should be consistent with each other
grpcio==1.78.0
numba == 0.65.0 # Required for N-gram speculative decoding
datasets
packaging>=24.2
runai-model-streamer[s3,gcs,azure]==0.15.7
amd-quark==0.12.post1
fastsafetensors >= 0.3.3
'''

REQUIREMENTS_TEST_ROCM = '''\
# bitsandbytes 0.49.2 has broken ROCm .so naming; this commit (0.50.0.dev0) fixes it
bitsandbytes @ git+https://github.com/bitsandbytes-foundation/bitsandbytes.git@672133342089ddd01ae247068d7963ff05bb306d
    # via -r requirements/test/rocm.in
depyf @ git+https://github.com/rasmith/depyf.git@c67f28ddbdb5c4922fb14530743d77cc6468da32
    # via
'''

AITER_GITMODULES = '''\
[submodule "3rdparty/composable_kernel"]
	path = 3rdparty/composable_kernel
	url = https://github.com/ROCm/composable_kernel.git
'''

AITER_LS_TREE = '''\
040000 tree 2230eb8a8a884278bc8324682adba1572fb3d434\t3rdparty/ck_helper
160000 commit 15e12dd7f25ee583617c78f66cb502ff9916585f\t3rdparty/composable_kernel
'''

# /app/versions.txt as Dockerfile.rocm_base writes it ("NAME: value") and Dockerfile.rocm appends ("NAME=value")
VERSIONS_TXT = '''\
BASE_IMAGE: rocm/dev-ubuntu-22.04:7.2.1-complete
TRITON_BRANCH: ba5c1517
TRITON_REPO: https://github.com/ROCm/triton.git
AITER_BRANCH: v0.1.10.post3
AITER_REPO: https://github.com/ROCm/aiter.git
MORI_BRANCH: 2d02c6a9
VLLM_BASE_IMAGE=rocm/vllm-dev:base
MORI_NIC_BACKEND=all
ROCSHMEM_BRANCH="f0acb0c6"
'''


def by_name(pins: list[P.Pin]) -> dict[str, P.Pin]:
    return {p.name: p for p in pins}


# ---------------------------------------------------------------------- readers


def test_dockerfile_args_quoted_unquoted_comment_and_valueless() -> None:
    args = {(a.name, a.line): a.value for a in P.dockerfile_args(ROCM_BASE)}
    assert args[("BASE_IMAGE", 1)] == "rocm/dev-ubuntu-22.04:7.2.1-complete"  # unquoted
    assert args[("AITER_BRANCH", 8)] == "v0.1.10.post3"  # quoted
    assert args[("PYTORCH_BRANCH", 4)] == "8514f051"  # trailing "# release/2.10 as of 3/17"
    assert args[("USE_SCCACHE", 14)] is None
    assert ("AITER_BRANCH", 23) in args and args[("AITER_BRANCH", 23)] is None  # re-declared in a stage
    assert {a.value for a in P.dockerfile_args(OLD_ROCM_BASE) if a.name == "LEGACY_HIPBLASLT_OPTION"} == {""}


def test_dockerfile_pins_follow_branch_and_repo_conventions() -> None:
    pins = by_name(P.dockerfile_pins(ROCM_BASE, "docker/Dockerfile.rocm_base"))
    aiter = pins["AITER_BRANCH"]
    assert (aiter.component, aiter.ref, aiter.line, aiter.kind) == ("aiter", "v0.1.10.post3", 8, "dockerfile-arg")
    assert aiter.repo_url == "https://github.com/ROCm/aiter.git" and aiter.path == "docker/Dockerfile.rocm_base"
    assert pins["PYTORCH_BRANCH"].component == "torch" and pins["PYTORCH_BRANCH"].ref == "8514f051"
    assert pins["FA_BRANCH"].component == "flash-attention"
    assert pins["MORI_BRANCH"].repo_url == "https://github.com/ROCm/mori.git"
    assert pins["BASE_IMAGE"].component == "base" and pins["PYTHON_VERSION"].ref == "3.12"
    # not pins: no value, ${...} references, names without a pin suffix, repos themselves
    assert not {"USE_SCCACHE", "SCCACHE_REGION_NAME", "PYTORCH_ROCM_ARCH", "AITER_REPO"} & set(pins)
    stage = by_name(P.dockerfile_pins(ROCM_STAGE_ARGS, "docker/Dockerfile.rocm"))
    assert stage["NIXL_BRANCH"].ref.startswith("231d5675") and stage["NIXL_BRANCH"].repo_url.endswith("nixl.git")
    assert stage["DEEPEP_BRANCH"].component == "deepep"


def test_dockerfile_commit_and_ref_conventions() -> None:
    text = 'ARG MORI_COMMIT="84a2881d46bce5161f2c5ece346df8d747b03361"\nARG MORI_REF="42e895472b08"\n' \
           'ARG TILELANG_BRANCH="dsv32-mi35x"\nARG TILELANG_COMMIT=ae938cf885743f165a19656d1122ad42bb0e30b8\n'
    pins = by_name(P.dockerfile_pins(text))
    assert pins["MORI_COMMIT"].component == pins["MORI_REF"].component == "mori"
    assert pins["TILELANG_COMMIT"].ref == "ae938cf885743f165a19656d1122ad42bb0e30b8"


def test_requirement_pins_exact_and_git_refs_only() -> None:
    pins = by_name(P.requirement_pins(REQUIREMENTS_ROCM, "requirements/rocm.txt"))
    assert set(pins) == {"grpcio", "numba", "runai-model-streamer", "amd-quark"}
    assert pins["numba"].ref == "0.65.0" and pins["numba"].line == 6  # spaces and a comment
    assert pins["runai-model-streamer"].ref == "0.15.7"  # extras
    git = by_name(P.requirement_pins(REQUIREMENTS_TEST_ROCM, "requirements/test/rocm.txt"))
    bnb = git["bitsandbytes"]
    assert bnb.ref == "672133342089ddd01ae247068d7963ff05bb306d" and bnb.line == 2
    assert bnb.repo_url == "https://github.com/bitsandbytes-foundation/bitsandbytes.git"
    assert git["depyf"].repo_url == "https://github.com/rasmith/depyf.git"
    aiter = P.requirement_pins("amd-aiter @ git+https://github.com/ROCm/aiter.git@v0.1.14.post1\n")[0]
    assert (aiter.component, aiter.name, aiter.ref) == ("aiter", "amd-aiter", "v0.1.14.post1")
    assert P.requirement_pins("amd-aiter==0.1.22 ; python_version >= '3.10'\n")[0].ref == "0.1.22"


def test_submodule_pointer_from_gitmodules_and_ls_tree() -> None:
    modules = P.gitmodules(AITER_GITMODULES)
    links = P.ls_tree_gitlinks(AITER_LS_TREE)
    assert links == {"3rdparty/composable_kernel": "15e12dd7f25ee583617c78f66cb502ff9916585f"}  # not ck_helper (tree)
    pin = P.submodule_pin("3rdparty/composable_kernel", links["3rdparty/composable_kernel"], modules)
    assert (pin.component, pin.kind, pin.repo_url) == ("composable-kernel", "submodule",
                                                       "https://github.com/ROCm/composable_kernel.git")


def test_versions_txt_both_shapes_and_pins() -> None:
    vt = P.versions_txt(VERSIONS_TXT)
    assert vt["AITER_BRANCH"] == "v0.1.10.post3" and vt["VLLM_BASE_IMAGE"] == "rocm/vllm-dev:base"
    assert vt["ROCSHMEM_BRANCH"] == "f0acb0c6" and vt["BASE_IMAGE"] == "rocm/dev-ubuntu-22.04:7.2.1-complete"
    pins = by_name(P.versions_txt_pins(VERSIONS_TXT))
    assert pins["AITER_BRANCH"].component == "aiter" and pins["AITER_BRANCH"].repo_url.endswith("aiter.git")
    assert pins["TRITON_BRANCH"].ref == "ba5c1517" and "MORI_NIC_BACKEND" not in pins


def test_pin_file_moves_value_only_versus_other_lines() -> None:
    bumped = ROCM_BASE.replace('ARG AITER_BRANCH="v0.1.10.post3"', 'ARG AITER_BRANCH="v0.1.12"')
    fm = P.pin_file_moves("docker/Dockerfile.rocm_base", ROCM_BASE, bumped)
    assert not fm.other and [m.text() for m in fm.moved] == ["aiter v0.1.10.post3 → v0.1.12"]
    both = bumped.replace("git submodule update --init --recursive", "git submodule update --init")
    fm = P.pin_file_moves("docker/Dockerfile.rocm_base", ROCM_BASE, both)
    assert fm.other and len(fm.moved) == 1
    req = P.pin_file_moves("requirements/rocm.txt", REQUIREMENTS_ROCM, REQUIREMENTS_ROCM.replace(
        "amd-quark==0.12.post1", "amd-quark==0.13"))
    assert not req.other and req.moved[0].new == "0.13"
    ranged = P.pin_file_moves("requirements/rocm.txt", REQUIREMENTS_ROCM, REQUIREMENTS_ROCM.replace(
        "packaging>=24.2", "packaging>=25"))
    assert ranged.other and not ranged.moved  # a range is not a pin: pip resolves it at build time


def test_match_component_names_and_aliases() -> None:
    comps = {"aiter": [], "ck": ["composable_kernel"], "vllm": []}
    assert P.match_component("amd-aiter", comps) == "aiter"
    assert P.match_component("AITER", comps) == "aiter"
    assert P.match_component("composable-kernel", comps) == "ck"
    assert P.match_component("mori", comps) is None


# ---------------------------------------------------------------------- git: pins at a commit, diffs, ranges


def commit(kit, repo: Path, msg: str, files: dict[str, str]) -> str:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    kit.git(repo, "add", "-A")
    kit.git(repo, "commit", "-q", "-m", msg)
    return kit.git(repo, "rev-parse", "HEAD")


def init(kit, path: Path) -> Path:
    path.mkdir(parents=True)
    kit.git(path, "init", "-q", "-b", "main")
    return path


def test_pin_diff_classifies_real_commits(kit, tmp_path: Path) -> None:
    repo = init(kit, tmp_path / "vllm")
    base = commit(kit, repo, "v0", {"docker/Dockerfile.rocm_base": ROCM_BASE, "requirements/rocm.txt": REQUIREMENTS_ROCM,
                                    "vllm/attn.py": "X = 0\n", "docs/a.md": "a\n"})
    bump = commit(kit, repo, "[ROCm] Bump AITER (#1)", {"docker/Dockerfile.rocm_base": ROCM_BASE.replace(
        'AITER_BRANCH="v0.1.10.post3"', 'AITER_BRANCH="v0.1.12"'), "docs/a.md": "b\n"})
    g = GitRepo(repo, "vllm")
    d = pin_diff(g, base, bump, runtime_paths=["vllm/"])
    assert d.pin_only and [m.text() for m in d.moves] == ["aiter v0.1.10.post3 → v0.1.12"] and d.ignored == ["docs/a.md"]
    mixed = commit(kit, repo, "bump and code", {"requirements/rocm.txt": REQUIREMENTS_ROCM.replace(
        "amd-quark==0.12.post1", "amd-quark==0.13"), "vllm/attn.py": "X = 1\n"})
    d = pin_diff(g, bump, mixed, runtime_paths=["vllm/"])
    assert not d.pin_only and d.code == ["vllm/attn.py"] and d.moves[0].component == "amd-quark"
    assert not pin_diff(g, bump, mixed).pin_only  # no runtime paths: every path runs
    pins = by_name(pins_at(g, bump))
    assert pins["AITER_BRANCH"].ref == "v0.1.12" and pins["numba"].ref == "0.65.0"
    assert pin_of(g, bump, "aiter").ref == "v0.1.12"


def test_pin_diff_and_pins_at_read_gitlinks(kit, tmp_path: Path) -> None:
    ck = init(kit, tmp_path / "ck")
    c0 = commit(kit, ck, "ck 0", {"k.txt": "0\n"})
    c1 = commit(kit, ck, "ck 1", {"k.txt": "1\n"})
    aiter = init(kit, tmp_path / "aiter")
    commit(kit, aiter, "a0", {".gitmodules": AITER_GITMODULES, "aiter/x.py": "0\n"})
    kit.git(aiter, "update-index", "--add", "--cacheinfo", f"160000,{c0},3rdparty/composable_kernel")
    kit.git(aiter, "commit", "-q", "-m", "pin ck 0")
    a1 = kit.git(aiter, "rev-parse", "HEAD")
    kit.git(aiter, "update-index", "--cacheinfo", f"160000,{c1},3rdparty/composable_kernel")
    kit.git(aiter, "commit", "-q", "-m", "Pin composable_kernel to ck 1 (#4861)")
    a2 = kit.git(aiter, "rev-parse", "HEAD")
    g = GitRepo(aiter, "aiter")
    d = pin_diff(g, a1, a2, runtime_paths=["aiter/"])
    assert d.pin_only and d.moves[0].component == "composable-kernel" and (d.moves[0].old, d.moves[0].new) == (c0, c1)
    assert d.moves[0].repo_url == "https://github.com/ROCm/composable_kernel.git"
    assert pin_of(g, a2, "ck", ["composable_kernel"]).ref == c1


def test_resolve_pin_tags_versions_and_missing(kit, tmp_path: Path) -> None:
    repo = init(kit, tmp_path / "aiter")
    s0 = commit(kit, repo, "a0", {"x": "0\n"})
    kit.git(repo, "tag", "v0.1.22", s0)
    g = GitRepo(repo, "aiter")
    assert resolve_pin(g, "v0.1.22") == resolve_pin(g, "0.1.22") == s0
    assert resolve_pin(g, f"0.1.23.dev88+g{s0[:9]}") == s0
    assert resolve_pin(g, "v0.1.99") is None
    with pytest.raises(BadInput, match="v0.1.99.*not in the repository"):
        pin_range(g, "v0.1.22", "v0.1.99")


def test_pin_range_across_different_roots_maps_by_pr_and_subject(kit, tmp_path: Path) -> None:
    """aiter's tags <= v0.1.11.post1 and >= v0.1.12 live on different roots: the old tag's commits
    exist in the new history under other SHAs. The good end is the old tag's newest commit that maps."""
    repo = init(kit, tmp_path / "aiter")
    old = [commit(kit, repo, f"change {i} (#{100 + i})", {"x": f"{i}\n"}) for i in range(4)]
    old.append(commit(kit, repo, "Prepare v0.1.21.post2 release", {"v": "post2\n"}))
    kit.git(repo, "tag", "v0.1.21.post2", old[-1])
    kit.git(repo, "checkout", "-q", "--orphan", "rewritten")
    kit.git(repo, "rm", "-rq", "--cached", ".")
    new = [commit(kit, repo, f"change {i} (#{100 + i})", {"x": f"{i}\n", "y": "r\n"}) for i in range(4)]
    new += [commit(kit, repo, f"change {i} (#{100 + i})", {"x": f"{i}\n"}) for i in range(4, 7)]
    kit.git(repo, "tag", "v0.1.22", new[-1])
    g = GitRepo(repo, "aiter")
    assert g.merge_base("v0.1.21.post2", "v0.1.22") is None  # no common root
    r = pin_range(g, "v0.1.21.post2", "v0.1.22")
    assert (r.good, r.bad, r.how) == (new[3], new[-1], "pr")
    assert "maps by PR number" in r.note and "rewritten history" in r.note
    direct = pin_range(g, new[1], "v0.1.22")
    assert (direct.good, direct.how) == (new[1], "direct")


def test_pin_range_release_branch_takes_the_newest_ancestor_on_the_chain(kit, tmp_path: Path) -> None:
    """Release tags sit on release branches (v0.1.12 is not an ancestor of v0.1.13)."""
    repo = init(kit, tmp_path / "aiter")
    main = [commit(kit, repo, f"main {i} (#{i})", {"x": f"{i}\n"}) for i in range(3)]
    kit.git(repo, "checkout", "-q", "-b", "release/v0.1.12")
    commit(kit, repo, "Prepare v0.1.12 release", {"v": "12\n"})
    kit.git(repo, "tag", "v0.1.12")
    kit.git(repo, "checkout", "-q", "main")
    later = [commit(kit, repo, f"main {i} (#{i})", {"x": f"{i}\n"}) for i in range(3, 6)]
    kit.git(repo, "tag", "v0.1.13")
    r = pin_range(GitRepo(repo, "aiter"), "v0.1.12", "v0.1.13")
    assert (r.good, r.bad, r.how) == (main[2], later[-1], "ancestor") and "newest ancestor" in r.note


def test_image_introspection_reads_versions_txt_through_the_pin_reader() -> None:
    """The image side uses the same reader: quotes stripped, both line shapes, aiter's pin as its branch."""
    from bisectbot.components import enrich

    info = enrich({"aiter": {"version": "0.1.10.post3"}, "versions_txt": {"ROCSHMEM_BRANCH": '"f0acb0c6"'},
                   "versions_txt_raw": VERSIONS_TXT})
    assert info["versions_txt"]["ROCSHMEM_BRANCH"] == "f0acb0c6"
    assert info["aiter"]["branch"] == "v0.1.10.post3" and info["aiter"]["ref"] == "v0.1.10.post3"
    assert {p["component"]: p["ref"] for p in info["pins"]}["mori"] == "2d02c6a9"


def test_pin_range_refuses_a_downgrade_and_says_what_to_do(kit, tmp_path: Path) -> None:
    """The next member of the kind: a pin that moves back (vllm#39509 moved aiter back to v0.1.10.post3)."""
    repo = init(kit, tmp_path / "aiter")
    s = [commit(kit, repo, f"a{i} (#{i})", {"x": f"{i}\n"}) for i in range(4)]
    kit.git(repo, "tag", "v0.1.10.post3", s[1])
    kit.git(repo, "tag", "v0.1.12", s[3])
    with pytest.raises(BadInput, match=r"v0.1.10.post3 is older than v0.1.12.*moves back.*fix bisection"):
        pin_range(GitRepo(repo, "aiter"), "v0.1.12", "v0.1.10.post3")


def test_chain_text_names_vehicle_and_culprit_or_says_none_was_found() -> None:
    from bisectbot.models import Candidate, CandidateKind, ChainLink
    from bisectbot.report.views import chain_text

    v5, a6, a5 = "5" * 40, "6" * 40, "a" * 40
    move = P.PinMove("aiter", "AITER_BRANCH", "docker/Dockerfile.rocm_base", "dockerfile-arg", "v0.1.21.post2", "v0.1.22")
    vehicle = ChainLink("vehicle", "vllm", "stage 1", Candidate(CandidateKind.COMMIT, v5), moves=[move.to_dict()])
    culprit = ChainLink("culprit", "aiter", "aiter commits",
                        Candidate(CandidateKind.COMMIT, a6, meta={"subject": "[Kernel] tile (#4006)"}),
                        Candidate(CandidateKind.COMMIT, a5), range=(a5, a6))
    assert chain_text([vehicle, culprit]) == (f"{v5[:12]} bumps aiter v0.1.21.post2 → v0.1.22; the regression is "
                                              f"aiter {a6[:12]} ([Kernel] tile (#4006)), last good {a5[:12]}")
    none = ChainLink("searched", "aiter", "aiter commits", range=(a5, a6))
    assert chain_text([vehicle, none]).endswith(f"the aiter stage {a5[:12]}..{a6[:12]} named no culprit")
    assert ChainLink.from_dict(culprit.to_dict()) == culprit


# ---------------------------------------------------------------- rewriting a pin (issue 38)

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize("text", [
    'ARG AITER_BRANCH="v0.1.22"\n',
    "ARG AITER_BRANCH=v0.1.22\n",
    "ARG AITER_BRANCH='v0.1.22'\n",
    'ARG AITER_BRANCH="v0.1.22" # the tag of 3/17\n',
    'ARG BASE_IMAGE=rocm/x:7 \\\n    AITER_BRANCH="v0.1.22" \\\n    AITER_REPO=https://github.com/ROCm/aiter.git\n',
    'ARG AITER_BRANCH="v0.1.22"\r\nARG MORI_BRANCH="v0.1.22"\r\n',
    'ARG XAITER_BRANCH="v0.1.22" AITER_BRANCH="v0.1.22"\n',
])
def test_a_dockerfile_arg_is_rewritten_and_reads_back_as_the_commit(text: str) -> None:
    [pin] = [p for p in P.dockerfile_pins(text, "docker/Dockerfile.rocm_base") if p.name == "AITER_BRANCH"]
    new, row = P.rewrite_pin(text, pin, SHA, "file:///r")
    after = {p.name: p.ref for p in P.dockerfile_pins(new, "docker/Dockerfile.rocm_base")}
    before = {p.name: p.ref for p in P.dockerfile_pins(text, "docker/Dockerfile.rocm_base")}
    assert after == {**before, "AITER_BRANCH": SHA}  # that pin alone moved
    assert SHA in row.after and "v0.1.22" in row.before and new.count("\n") == text.count("\n")
    assert ("\r\n" in new) == ("\r\n" in text)


@pytest.mark.parametrize("line, name", [
    ("amd-aiter==0.1.22", "amd-aiter"),
    ("amd-aiter == 0.1.22 # Required for MLA", "amd-aiter"),
    ('amd_aiter[triton]==0.1.22; platform_machine == "x86_64"', "amd_aiter"),
    ('amd-aiter===0.1.22;python_version>"3"', "amd-aiter"),
    ("bitsandbytes @ git+https://github.com/x/bitsandbytes.git@6721333#egg=bitsandbytes", "bitsandbytes"),
    ("aiter @ git+https://user@example.com/ROCm/aiter.git@v0.1.22 ; sys_platform == 'linux'", "aiter"),
])
def test_a_requirement_is_rewritten_to_the_commit_and_pip_reads_it(line: str, name: str) -> None:
    """A version cannot name a commit: the line becomes a PEP 508 direct reference to it; a git URL
    keeps its URL, ``#egg`` and markers. :mod:`packaging` reads every rewritten line."""
    from packaging.requirements import Requirement

    text = f"# Common dependencies\n-r common.txt\n{line}\nnumba == 0.65.0\n"
    [pin] = [p for p in P.requirement_pins(text, "requirements/rocm.txt") if p.name == name]
    new, row = P.rewrite_pin(text, pin, SHA, "file:///srv/aiter")
    assert row.line == 3 and row.before == line
    req = Requirement(P._strip_comment(new.splitlines()[2]).strip())
    assert req.url is not None and req.url.startswith("git+") and req.url.split("#")[0].endswith("@" + SHA)
    assert req.marker == Requirement(P._strip_comment(line).strip()).marker
    [back] = [p for p in P.requirement_pins(new, "requirements/rocm.txt") if p.line == 3]
    assert back.ref == SHA
    assert new.splitlines()[3] == "numba == 0.65.0"


def test_a_pin_no_longer_where_it_was_read_is_not_rewritten() -> None:
    text = 'ARG AITER_BRANCH="v0.1.22"\n'
    [pin] = P.dockerfile_pins(text, "D")
    assert P.rewrite_pin('# moved\nARG AITER_BRANCH="v0.1.23"\n', pin, SHA, "file:///r") is None
    assert P.rewrite_pin("", pin, SHA, "file:///r") is None
