"""Class 8 of issue 13: nothing the bot writes leaves the tree it belongs to (patch application,
archive extraction, overlay copy, lock files, patch file names). Real files, real git, real tar."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from bisectbot.build import Overlay, _apply_overlay, _git_archive
from bisectbot.confine import ConfinementError, confined, copy_confined, safe_extract
from bisectbot.errors import BisectbotError, BuildError, PatchError
from bisectbot.patches import apply_stack, load_stack
from bisectbot.slots import file_lock, gpu_slot

ORIGINAL = "def f(x):\n    return x\n\n\ndef g():\n    return 1\n"
DIFF = """\
--- a/vllm/mod.py
+++ b/vllm/mod.py
@@ -1,2 +1,2 @@
 def f(x):
-    return x
+    return x + 1
"""


def _stack(tmp: Path, diff_name: str = "fix.diff") -> Path:
    sd = tmp / "stack"
    sd.mkdir()
    if diff_name == "fix.diff":
        (sd / "fix.diff").write_text(DIFF)
    (sd / "stack.yaml").write_text(f"""\
version: 1
patches:
  - id: fix
    package: vllm
    path: mod.py
    variants: [{{id: v1, diff: "{diff_name}"}}]
""")
    return sd / "stack.yaml"


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


# ----------------------------------------------------------------------------- patch application

# issue 41, item 13: the tree given as a path relative to the working directory (``patches apply --source
# tree``) was checked as if it were relative to itself, so a link out of it passed; every member both ways
ROOTS = pytest.mark.parametrize("relative", [False, True], ids=["absolute-root", "relative-root"])


def _root(tmp_path: Path, relative: bool, monkeypatch) -> Path:
    if relative:
        monkeypatch.chdir(tmp_path)
        return Path("tree")
    return tmp_path / "tree"


@ROOTS
def test_patch_does_not_follow_a_symlinked_package_dir_out_of_the_tree(tmp_path: Path, relative: bool,
                                                                       monkeypatch) -> None:
    outside = tmp_path / "outside" / "vllm"
    outside.mkdir(parents=True)
    (outside / "mod.py").write_text(ORIGINAL)
    root = _root(tmp_path, relative, monkeypatch)
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "vllm").symlink_to(outside)
    stack = load_stack(_stack(tmp_path))
    with pytest.raises(PatchError, match="outside"):
        apply_stack(stack, ["fix"], root)
    assert (outside / "mod.py").read_text() == ORIGINAL


@ROOTS
def test_patch_does_not_follow_a_symlinked_target_file(tmp_path: Path, relative: bool, monkeypatch) -> None:
    # found here: the package dir is real but the target file is a link to a file elsewhere
    secret = tmp_path / "elsewhere.py"
    secret.write_text(ORIGINAL)
    root = _root(tmp_path, relative, monkeypatch)
    (tmp_path / "tree" / "vllm").mkdir(parents=True)
    (tmp_path / "tree" / "vllm" / "mod.py").symlink_to(secret)
    with pytest.raises(PatchError, match="outside"):
        apply_stack(load_stack(_stack(tmp_path)), ["fix"], root)
    assert secret.read_text() == ORIGINAL


@ROOTS
def test_patch_inside_a_tree_given_either_way_applies(tmp_path: Path, relative: bool, monkeypatch) -> None:
    root = _root(tmp_path, relative, monkeypatch)
    (tmp_path / "tree" / "vllm").mkdir(parents=True)
    (tmp_path / "tree" / "vllm" / "mod.py").write_text(ORIGINAL)
    apply_stack(load_stack(_stack(tmp_path)), ["fix"], root)
    assert "x + 1" in (tmp_path / "tree" / "vllm" / "mod.py").read_text()


def test_patch_inside_the_tree_still_applies(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "mod.py").write_text(ORIGINAL)
    apply_stack(load_stack(_stack(tmp_path)), ["fix"], root)
    assert "x + 1" in (root / "vllm" / "mod.py").read_text()


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "sub/../../x.diff"])
def test_variant_diff_names_are_confined_to_the_stack_dir(tmp_path: Path, name: str) -> None:
    with pytest.raises(PatchError, match=r"stack.yaml:\d+:\d+: .*diff"):
        load_stack(_stack(tmp_path, name))


def test_variant_diff_symlink_out_of_the_stack_dir_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "private.diff"
    target.write_text(DIFF)
    sf = _stack(tmp_path, "link.diff")
    (sf.parent / "link.diff").symlink_to(target)
    with pytest.raises(PatchError, match="outside"):
        load_stack(sf)


# ----------------------------------------------------------------------------- archives

def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> tarfile.TarFile:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    buf.seek(0)
    return tarfile.open(fileobj=buf)


def _file(name: str) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), b"pwned"


def _link(name: str, target: str, hard: bool = False) -> tuple[tarfile.TarInfo, None]:
    i = tarfile.TarInfo(name)
    i.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    i.linkname = target
    return i, None


@pytest.mark.parametrize("members", [
    [_file("../escaped.txt")],
    [_file("/tmp/absolute-escape-bisectbot.txt")],
    [_link("ln", "../"), _file("ln/escaped.txt")],
    [_link("abs", "/etc")],
    [_link("hard", "../escaped.txt", hard=True)],
], ids=["dotdot", "absolute", "symlink-then-write", "absolute-symlink", "hardlink-out"])
def test_archive_members_cannot_escape(tmp_path: Path, members) -> None:
    dest = tmp_path / "d" / "dest"
    dest.mkdir(parents=True)
    try:
        safe_extract(_tar(members), dest)
    except ConfinementError:
        pass
    else:  # the data filter may also re-root a member inside dest (absolute names lose their '/')
        assert all(p.resolve().is_relative_to(dest.resolve()) for p in dest.rglob("*"))
    assert not (tmp_path / "d" / "escaped.txt").exists()
    assert not Path("/tmp/absolute-escape-bisectbot.txt").exists()


def test_git_archive_of_a_crafted_commit_stays_in_dest(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "ok.py").write_text("x = 1\n")
    os.symlink("/etc", repo / "etc-link")  # a commit under test may carry any symlink
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "crafted")
    with pytest.raises(BuildError, match="etc-link"):
        _git_archive(repo, _git(repo, "rev-parse", "HEAD"), tmp_path / "out")


# ----------------------------------------------------------------------------- overlay copy

def test_overlay_never_writes_through_a_symlink_in_the_staging_tree(tmp_path: Path) -> None:
    repo = tmp_path / "vllm-src"
    (repo / "vllm" / "sub").mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "vllm" / "sub" / "a.py").write_text("a = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD")
    (repo / "vllm" / "sub" / "a.py").write_text("a = 2\n")
    _git(repo, "commit", "-qam", "change")
    head = _git(repo, "rev-parse", "HEAD")
    stage = tmp_path / "stage" / "vllm"
    stage.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (stage / "sub").symlink_to(outside)  # a planted link in the staged package
    with pytest.raises(BuildError, match="outside"):
        _apply_overlay(Overlay("vllm", repo, head), base, stage)
    assert not (outside / "a.py").exists()


def test_copy_confined_refuses_symlink_sources_and_escaping_destinations(tmp_path: Path) -> None:
    root = tmp_path / "ctx"
    root.mkdir()
    src = tmp_path / "src.py"
    src.write_text("x")
    link = tmp_path / "link.py"
    link.symlink_to("/etc/hostname")
    with pytest.raises(ConfinementError, match="symlink"):
        copy_confined(link, root, "a/link.py")
    with pytest.raises(ConfinementError):
        copy_confined(src, root, "../escaped.py")
    (root / "out").symlink_to(tmp_path)
    with pytest.raises(ConfinementError, match="outside"):
        copy_confined(src, root, "out/escaped.py")
    assert not (tmp_path / "escaped.py").exists()
    assert copy_confined(src, root, "usr/lib/x.py").read_text() == "x"
    with pytest.raises(ConfinementError):
        confined(root, "")


# ----------------------------------------------------------------------------- lock files

def test_planted_lock_symlink_is_not_followed(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    locks.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (locks / "build.lock").symlink_to(victim)
    with pytest.raises(BisectbotError, match="symlink"):
        with file_lock("build", lock_dir=locks, timeout_s=1):
            pass
    (locks / "gpu-0.lock").symlink_to(victim)
    with pytest.raises(BisectbotError, match="symlink"):
        with gpu_slot(["0"], lock_dir=locks, timeout_s=1):
            pass
    assert victim.read_text() == "precious\n"


def test_shared_or_symlinked_lock_dir_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(BisectbotError, match="writable by other users"):
        with file_lock("x", lock_dir=shared, timeout_s=1):
            pass
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "linkdir").symlink_to(real)
    with pytest.raises(BisectbotError, match="symlink"):
        with file_lock("x", lock_dir=tmp_path / "linkdir", timeout_s=1):
            pass


def test_default_lock_dir_is_under_the_state_dir(tmp_path: Path, monkeypatch) -> None:
    from bisectbot.slots import default_lock_dir

    monkeypatch.setenv("BISECTBOT_STATE", str(tmp_path / "state"))
    assert default_lock_dir() == tmp_path / "state" / "locks"
    with file_lock("build", timeout_s=1) as p:
        assert p.parent == tmp_path / "state" / "locks"
        assert (os.stat(p.parent).st_mode & 0o777) == 0o700
