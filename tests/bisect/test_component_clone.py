"""The commit stage after a bad nightly reaches the components' repositories as the recipe names them
(issue 24): a URL is cloned into the cache (``recipes/glm51-fp8-sparse-mla-prefill.yaml`` names
``https://github.com/vllm-project/vllm.git``; it used to be opened as a local path, "not a git
repository"), and a repository that cannot be cloned (GitHub down, no mirror) is a note while the
nightly result stands, instead of the night's exit 2.

Real parts: a real git repository cloned through a ``file://`` URL, the real ledger holding the two
nightlies' introspection (as ``nightlies record --introspect`` leaves it; pinned references need no
Docker), the real :class:`~bisectbot.session.stages.components.ComponentStage`. The stage's prober is
only asked for its ledger on these paths.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import git
import pytest

from bisectbot.ledger import Ledger
from bisectbot.models import Candidate, CandidateKind, RunResult, Status
from bisectbot.recipe import parse_recipe
from bisectbot.session.stages.components import ComponentStage

LG, FB = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def history(path: Path) -> tuple[str, str]:
    repo = git.Repo.init(path)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "T")
        cw.set_value("user", "email", "t@example.com")
    shas = []
    for i in range(2):
        (path / "f.py").write_text(f"X = {i}\n")
        repo.index.add(["f.py"])
        shas.append(repo.index.commit(f"c{i} (#{i})").hexsha)
    return shas[0], shas[1]


def stage(tmp_path: Path, repo_url: str, a: str, b: str, monkeypatch) -> tuple[ComponentStage, list, RunResult]:
    monkeypatch.setenv("BISECTBOT_CACHE", str(tmp_path / "cache"))
    ledger = Ledger(tmp_path / "state")
    for digest, sha in ((LG, a), (FB, b)):
        ledger.put_image_info(digest, {"vllm": {"version": f"0.19.1+g{sha[:9]}", "commit": sha[:9], "ref": sha[:9]}})
    recipe = parse_recipe(f"name: x\nsource: {{kind: registry, repository: rocm/vllm-dev}}\n"
                          f"bisect: {{components: {{vllm: {{kind: git, repo: '{repo_url}', component: vllm}}}}}}\n")
    ran: list = []
    st = ComponentStage(SimpleNamespace(ledger=ledger), None, recipe, echo=lambda s: None)  # type: ignore[arg-type]
    st.run = lambda old, new, **kw: ran.append((old, new, kw["repos"])) or []  # type: ignore[method-assign]
    return st, ran, RunResult(recipe="x", kind="regression", status=Status.CULPRIT)


def nightly(digest: str, tag: str) -> Candidate:
    return Candidate(CandidateKind.NIGHTLY, digest, tag, "image", {"image": f"h/rocm/vllm-dev@{digest}", "tag": tag})


def test_a_component_url_is_cloned_and_its_commits_resolved(tmp_path, monkeypatch) -> None:
    a, b = history(tmp_path / "vllm")
    st, ran, result = stage(tmp_path, (tmp_path / "vllm").as_uri(), a, b, monkeypatch)
    st.from_images(nightly(LG, "n1"), nightly(FB, "n2"), result)
    ((old, new, repos),) = ran
    assert (old, new) == ({"vllm": a}, {"vllm": b})  # short SHAs of the versions, resolved in the clone
    assert (tmp_path / "cache" / "repos") in repos["vllm"].path.parents  # cloned into the cache, not opened as a path


@pytest.mark.parametrize("url", ["file:///nonexistent/vllm.git", "CLONE-OK-BUT-COMMITS-MISSING"])
def test_an_unreachable_component_is_a_note_and_the_nightly_result_stands(tmp_path, monkeypatch, url) -> None:
    a, b = history(tmp_path / "vllm")
    if url.startswith("CLONE-OK"):  # a clone without the nightlies' commits (another fork)
        url = (tmp_path / "vllm").as_uri()
        a, b = "1" * 40, "2" * 40
    st, ran, result = stage(tmp_path, url, a, b, monkeypatch)
    assert st.from_images(nightly(LG, "n1"), nightly(FB, "n2"), result) == [] and ran == []
    (note,) = [n for n in result.notes if "cannot be bisected" in n]
    assert note.startswith("vllm changed") and "no commit stage ran" in note, result.notes
