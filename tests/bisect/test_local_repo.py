"""Recipes name repositories by path or URL: URLs are cloned once into the cache and fetched later."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bisectbot.errors import BadInput
from bisectbot.sources.git import GitRepo, is_url, local_repo


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.com",
                               "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.com",
                               "HOME": str(cwd), "PATH": "/usr/bin:/bin:/usr/local/bin"}).stdout.strip()


def _commit(repo: Path, n: int) -> str:
    (repo / "f.txt").write_text(f"{n}\n")
    _git(repo, "add", "f.txt")
    _git(repo, "commit", "-qm", f"change {n}")
    return _git(repo, "rev-parse", "HEAD")


def test_url_is_cloned_once_then_fetched(tmp_path: Path) -> None:
    up = tmp_path / "upstream"
    up.mkdir()
    _git(up, "init", "-q", "-b", "main")
    first = _commit(up, 1)
    url = up.as_uri()  # file:///...
    assert is_url(url) and is_url("git@github.com:ROCm/aiter.git") and not is_url("./engine-history")
    cache = tmp_path / "cache"
    clone = local_repo(url, cache_dir=cache)
    assert clone.parent == cache / "repos" and clone.name.startswith("upstream-")
    assert GitRepo(clone, "x").resolve("main") == first
    second = _commit(up, 2)
    assert local_repo(url, cache_dir=cache) == clone  # same clone, fetched
    assert [c.ref for c in GitRepo(clone, "x").commits(first, "main")] == [first, second]
    with pytest.raises(BadInput, match="cannot clone"):
        local_repo((tmp_path / "nope").as_uri(), cache_dir=cache)


def test_relative_paths_next_to_recipe_then_cwd(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "recipes" / "engine").mkdir(parents=True)
    assert local_repo("engine", tmp_path / "recipes") == (tmp_path / "recipes" / "engine").resolve()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "other").mkdir()
    assert local_repo("other", tmp_path / "recipes") == (tmp_path / "other").resolve()
    with pytest.raises(BadInput, match="no such directory next to the recipe"):
        local_repo("missing", tmp_path / "recipes")
