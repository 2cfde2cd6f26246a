"""Issue 40, the re-check of the hostile pass: the members of *a wheel label that names this commit and no
other* (:func:`bisectbot.run.commit_wheels.names_commit`, :meth:`bisectbot.sources.git.GitRepo.commits_with_prefix`).

Members: a 7-digit label ambiguous with a blob only (still this commit's), with another commit beyond a
shallow clone's depth (the clone cannot vouch for it: only a full name), a version naming two commits,
a SHA-256 repository's full name, distribution names spelt with case, ``-`` and ``_``."""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from bisectbot.run.commit_wheels import commit_label, names_commit
from bisectbot.sources.git import GitRepo


def git(repo: Path, *a: str, inp: bytes | None = None) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e",
           "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    return subprocess.run(["git", "-C", str(repo), *a], input=inp, capture_output=True, check=True,
                          env=env).stdout.decode().strip()


def _repo(path: Path, n: int = 3, fmt: str = "sha1") -> list[str]:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main", f"--object-format={fmt}")
    out = []
    for i in range(n):
        (path / "f").write_text(f"{i}\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"c{i}")
        out.append(git(path, "rev-parse", "HEAD"))
    return out


def _commit_and_object_sharing_7(repo: Path, kind: str) -> tuple[str, str]:
    """A new head commit (same tree/parent) whose name shares 7 hex digits with a ``kind`` object (blob)."""
    tree, parent = git(repo, "rev-parse", "HEAD^{tree}"), git(repo, "rev-parse", "HEAD~1")
    who = "t <t@e> 1700000000 +0000"

    def cbody(j: int) -> bytes:
        return f"tree {tree}\nparent {parent}\nauthor {who}\ncommitter {who}\n\nhead {j}\n".encode()

    def h(t: str, b: bytes) -> str:
        return hashlib.sha1(f"{t} {len(b)}\0".encode() + b).hexdigest()

    seen = {h("commit", cbody(j))[:7]: j for j in range(60_000)}
    k = 0
    while h("blob", b"blob %d\n" % k)[:7] not in seen:
        k += 1
    blob = b"blob %d\n" % k
    head = cbody(seen[h("blob", blob)[:7]])
    c = git(repo, "hash-object", "-t", "commit", "-w", "--stdin", inp=head)
    b = git(repo, "hash-object", "-t", "blob", "-w", "--stdin", inp=blob)
    assert c[:7] == b[:7] and c != b
    git(repo, "update-ref", "refs/heads/main", c)
    return c, b


def _commit_pair_sharing_7(repo: Path) -> tuple[str, str]:
    from tests.releases.test_commit_wheels import _collide_head
    return _collide_head(repo)


def whl(label: str, dist: str = "vllm") -> str:
    return f"{dist}-0.11.1.dev16+{label}.cu129-cp38-abi3-manylinux1_x86_64.whl"


def test_a_label_ambiguous_only_with_a_blob_still_names_the_commit(tmp_path: Path) -> None:
    _repo(tmp_path / "r")
    c, _ = _commit_and_object_sharing_7(tmp_path / "r", "blob")
    g = GitRepo(tmp_path / "r", "vllm")
    assert names_commit(whl(f"g{c[:7]}"), c, "vllm", g.commits_with_prefix)


def test_a_shallow_clone_cannot_say_a_label_names_no_other_commit(tmp_path: Path) -> None:
    """The collision partner lies beyond a shallow clone's boundary: the clone cannot tell. A label the
    clone cannot vouch for (a shallow repository, where commits are missing by construction) is refused."""
    src = tmp_path / "src"
    _repo(src, 4)
    head, other = _commit_pair_sharing_7(src)
    # make the other commit reachable upstream (another branch), then clone only main, depth 1
    git(src, "update-ref", "refs/heads/other", other)
    subprocess.run(["git", "clone", "-q", "--bare", "--depth", "1", "--single-branch", "-b", "main",
                    f"file://{src}", str(tmp_path / "shallow")], check=True)
    g = GitRepo(tmp_path / "shallow", "vllm")
    assert g.commits_with_prefix(head[:7]) is None  # a shallow clone cannot say which commits share it
    assert names_commit(whl(f"g{head}"), head, "vllm", g.commits_with_prefix)  # a full name needs no clone
    assert not names_commit(whl(f"g{head[:7]}"), head, "vllm", g.commits_with_prefix), \
        "a 7-hex label checked against a shallow clone was taken as naming one commit"


def test_a_local_version_naming_two_commits_is_no_build_of_either(tmp_path: Path) -> None:
    shas = _repo(tmp_path / "r", 3)
    g = GitRepo(tmp_path / "r", "vllm")
    name = whl(f"g{shas[-1][:9]}.g{shas[0][:9]}")
    assert commit_label(name, "vllm") == ""  # two commits in one version: no label
    assert not names_commit(name, shas[-1], "vllm", g.commits_with_prefix), \
        "a wheel whose version names two commits was taken as the first one's"


def test_a_full_name_in_a_sha256_repository_is_read(tmp_path: Path) -> None:
    try:
        shas = _repo(tmp_path / "r", 2, fmt="sha256")
    except subprocess.CalledProcessError:
        pytest.skip("git without sha256")
    g = GitRepo(tmp_path / "r", "vllm")
    assert names_commit(whl(f"g{shas[-1][:12]}"), shas[-1], "vllm", g.commits_with_prefix)
    assert names_commit(whl(f"g{shas[-1]}"), shas[-1], "vllm", g.commits_with_prefix), \
        "a SHA-256 repository's full commit name (64 hex) in a wheel label is not read"


@pytest.mark.parametrize("pkg,dist,ok", [("Vllm", "vllm", True), ("vllm", "Vllm", True), ("v_llm", "vllm", False),
                                         ("vllm", "v_llm", False), ("v-llm", "v_llm", True)])
def test_distribution_names(tmp_path: Path, pkg: str, dist: str, ok: bool) -> None:
    shas = _repo(tmp_path / "r", 2)
    g = GitRepo(tmp_path / "r", "vllm")
    assert names_commit(whl(f"g{shas[-1][:9]}", dist), shas[-1], pkg, g.commits_with_prefix) is ok


def test_full_name_of_another_commit_and_8_digit_ambiguity(tmp_path: Path) -> None:
    shas = _repo(tmp_path / "r", 3)
    g = GitRepo(tmp_path / "r", "vllm")
    assert not names_commit(whl(f"g{shas[0]}"), shas[-1], "vllm", g.commits_with_prefix)
    assert names_commit(whl(f"g{shas[-1]}"), shas[-1], "vllm", g.commits_with_prefix)
    assert names_commit(whl(f"g{shas[-1][:8].upper()}"), shas[-1], "vllm", g.commits_with_prefix)
