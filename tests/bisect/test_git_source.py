"""Git ranges (first-parent) and plausibility inputs on a real repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from bisectbot.bisect import plausibility_flags
from bisectbot.errors import BadInput
from bisectbot.sources.git import GitRepo


@pytest.fixture
def history(tmp_path: Path, kit):
    r = tmp_path / "repo"
    r.mkdir()
    g = lambda *a: kit.git(r, *a)  # noqa: E731
    g("init", "-q", "-b", "main")
    shas = {}

    def commit(name: str, path: str, text: str) -> None:
        p = r / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        g("add", "-A")
        g("commit", "-q", "-m", name)
        shas[name] = g("rev-parse", "HEAD")

    commit("c0", "vllm/a.py", "a = 0\n")
    commit("c1", "vllm/a.py", "a = 1\n")
    g("checkout", "-q", "-b", "topic")
    commit("t1", "vllm/b.py", "b = 1\n")
    commit("t2", "vllm/b.py", "b = 2\n")
    g("checkout", "-q", "main")
    commit("c2", "docs/x.md", "doc\n")
    g("merge", "-q", "--no-ff", "-m", "merge topic", "topic")
    shas["merge"] = g("rev-parse", "HEAD")
    commit("c3", "tools/lint.py", "print()\n")  # outside vllm/ (setup.py would ship: a build file)
    g("commit", "-q", "--allow-empty", "-m", "empty")
    shas["empty"] = g("rev-parse", "HEAD")
    commit("c4", "vllm/a.py", "a = 4\n")
    return GitRepo(r, "vllm"), shas


def test_first_parent_range_and_labels(history) -> None:
    repo, s = history
    cands = repo.commits(s["c0"], s["c4"])
    assert [c.ref for c in cands] == [s[k] for k in ("c0", "c1", "c2", "merge", "c3", "empty", "c4")]
    assert cands[3].meta["parents"] == 2 and cands[1].label.endswith("c1") and cands[0].component == "vllm"
    full = repo.commits(s["c0"], s["c4"], first_parent=False)
    assert {s["t1"], s["t2"]} <= {c.ref for c in full}


def test_range_errors_are_bad_input(history) -> None:
    repo, s = history
    with pytest.raises(BadInput, match="not an ancestor"):
        repo.commits(s["c4"], s["c0"])
    with pytest.raises(BadInput, match="first-parent chain"):
        repo.commits(s["t1"], s["c4"])
    with pytest.raises(BadInput, match="unknown commit"):
        repo.commits("nope", s["c4"])
    with pytest.raises(BadInput, match="same commit"):
        repo.commits(s["c1"], s["c1"])


def test_plausibility_inputs_give_flags(history) -> None:
    repo, s = history
    rt = ["vllm/"]
    assert plausibility_flags(runtime_paths=rt, **repo.plausibility_inputs(s["merge"], s["c2"])) == ["merge"]
    assert plausibility_flags(runtime_paths=rt, **repo.plausibility_inputs(s["c2"], s["c1"])) == ["docs-tests-only"]
    assert plausibility_flags(runtime_paths=rt, **repo.plausibility_inputs(s["c3"], s["merge"])) == [
        "outside-runtime-paths"]
    assert plausibility_flags(runtime_paths=rt, **repo.plausibility_inputs(s["empty"], s["c3"])) == ["no-op-build"]
    assert plausibility_flags(runtime_paths=rt, **repo.plausibility_inputs(s["c4"], s["empty"])) == []


def test_any_revision_git_takes_resolves_as_git_resolves_it(history, kit) -> None:
    """Issue 41, item 12: refs are resolved by git itself, so its whole revision syntax works
    (``@{-1}`` after a branch switch, a reflog entry, ``~``, ``^{}``) and a ref the git
    library could not parse is never an internal error."""
    repo, s = history
    r = repo.path
    assert repo.resolve("@{-1}") == s["t2"]  # the history switched topic -> main: the previous checkout
    assert repo.resolve("HEAD@{1}") == kit.git(r, "rev-parse", "HEAD@{1}")
    assert repo.resolve("main~3") == s["merge"]  # c4, empty, c3, merge
    assert repo.resolve(s["c4"][:10]) == s["c4"]
    assert repo.resolve(f"{s['c1']}^{{}}") == s["c1"]


@pytest.mark.parametrize("ref", ["@{-9}", "HEAD@{99}", "main@{upstream}", "@{push}", "HEAD@{not a date at all}x",
                                 "-n", "--output=/tmp/bisectbot-x", "", "a\nb", "a\x00b", "HEAD:vllm/a.py",
                                 "c1..c4", "nope"])
def test_a_revision_git_cannot_resolve_to_a_commit_is_bad_input(history, ref) -> None:
    repo, _ = history
    with pytest.raises(BadInput, match="unknown commit"):
        repo.resolve(ref)
    assert not Path("/tmp/bisectbot-x").exists()


def test_a_subject_of_megabytes_is_bounded_where_it_is_read(tmp_path: Path, kit) -> None:
    """Issue 41, item 16: a commit subject (and author name) is repository text, bounded as model output
    is: at most MAX_SUBJECT_CHARS characters and an ellipsis in the candidate's label and meta; a normal
    subject is kept whole."""
    from bisectbot.sources.git import MAX_SUBJECT_CHARS

    r = tmp_path / "repo"
    r.mkdir()
    kit.git(r, "init", "-q", "-b", "main")
    (r / "f").write_text("0")
    kit.git(r, "add", "-A")
    kit.git(r, "commit", "-q", "-m", "short title")
    (r / "f").write_text("1")
    kit.git(r, "add", "-A")
    (tmp_path / "msg").write_text("x" * 2_000_000 + "\n")  # one line of 2 MB: the subject (too long for argv)
    kit.git(r, "commit", "-q", "-F", str(tmp_path / "msg"), f"--author={'n' * 5000} <n@example.com>")
    a, b = GitRepo(r, "vllm").commits(kit.git(r, "rev-parse", "HEAD~1"), kit.git(r, "rev-parse", "HEAD"))
    assert a.label.endswith("short title") and a.meta["subject"] == "short title"
    assert len(b.meta["subject"]) == MAX_SUBJECT_CHARS + 1 and b.meta["subject"].endswith("…")
    assert len(b.label) <= MAX_SUBJECT_CHARS + 12 and len(b.meta["author"]) == MAX_SUBJECT_CHARS + 1


@pytest.mark.parametrize("size", [1, 3, 7, 64, 1 << 20])
@pytest.mark.parametrize("keep", [4, 50, 64 * 1024])
def test_log_fields_cut_each_field_and_read_the_same_fields_at_any_read_size(size: int, keep: int) -> None:
    """Issue 41, item 15. Kind: *a field of ``git log`` output held whole before it is cut*.
    Parameters: where the reads split the stream (inside a field, on a NUL, inside a multibyte
    character), how long a field is against ``keep`` (shorter, equal, far longer, the last one), and
    non-ASCII text."""
    import io

    from bisectbot.sources.git import _log_fields

    fields = ["a" * 40, "", "b" * (keep + 5), "é" * 30, "x" * keep, "ü" * (3 * keep), "last"]
    data = "\x00".join(fields).encode() + b"\x00"
    got = [f for part in _log_fields(io.BytesIO(data), keep=keep, size=size) for f in part]
    want = [f.encode()[:keep].decode("utf-8", "replace") for f in fields]
    assert got == want


@pytest.mark.slow
def test_a_subject_of_hundreds_of_megabytes_is_never_held_whole(tmp_path: Path, kit) -> None:
    """Issue 41, item 15: ``git log`` output was read whole, then each subject cut: a 200 MB subject
    cost the ``bisectbot run --dry-run`` process hundreds of MB. Peak RSS of the installed CLI
    (the process's own, at exit) over a range whose newest commit has a 200 MB subject, against the same range
    with a short one."""
    import subprocess
    import sys

    import yaml

    def rss_of_dry_run(repo: Path) -> tuple[int, str]:
        recipe = tmp_path / f"{repo.name}.yaml"
        recipe.write_text(yaml.safe_dump({
            "name": "big-subject", "source": {"kind": "git", "repo": str(repo)},
            "reproducer": {"kind": "command", "command": [sys.executable, "-c", "pass"]},
            "bisect": {"good": kit.git(repo, "rev-parse", "HEAD~1"), "bad": "HEAD"}}))
        # the bot's own peak (RUSAGE_SELF at exit): git's own memory for the object is git's
        probe = ("import atexit, resource, runpy, sys; atexit.register(lambda: print('MAXRSS', "
                 "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)); "
                 "sys.argv = ['bisectbot'] + sys.argv[1:]; runpy.run_module('bisectbot', run_name='__main__')")
        # started by a small launcher: the figure is not the pytest worker's (tests/hostile/peak_rss)
        from tests.hostile.peak_rss import run_measured

        out = tmp_path / f"{repo.name}.out"
        with open(out, "w") as fh:
            code, _, _ = run_measured([sys.executable, "-c", probe, "--state", str(tmp_path / "st"), "run",
                                       str(recipe), "--dry-run"], tmp_path, stdout=fh, stderr=subprocess.STDOUT)
        text = out.read_text(errors="replace")
        assert code == 0, text[-3000:]
        (line,) = [ln for ln in text.splitlines() if ln.startswith("MAXRSS ")]
        return int(line.split()[1]), text

    repos = []
    for name, subject_bytes in (("small", 20), ("big", 200_000_000)):
        r = tmp_path / name
        r.mkdir()
        kit.git(r, "init", "-q", "-b", "main")
        for i in range(2):
            (r / "f").write_text(str(i))
            kit.git(r, "add", "-A")
            msg = tmp_path / "msg"
            with open(msg, "wb") as f:
                f.write(b"y" * subject_bytes if i else b"first")
                f.write(b"\n")
            kit.git(r, "commit", "-q", "-F", str(msg))
        repos.append(r)
    base, _ = rss_of_dry_run(repos[0])
    big, text = rss_of_dry_run(repos[1])
    assert "y" * 1000 not in text
    assert big < base + 64 * 1024, (big, base)  # KiB: within 64 MiB of the short subject's run


@pytest.mark.slow
@pytest.mark.parametrize("reader", ["pin_range", "resolve_in_history"])
def test_every_reader_of_commit_subjects_bounds_them(tmp_path: Path, kit, reader: str) -> None:
    """Hostile pass (issue 41): after ``GitRepo._log``, two more readers held git's output whole: a
    pin range's first-parent walk and the nightly diff's mapping of a commit onto a history (a side
    commit with a 100 MB subject cost each ~300 MB). Kind: *every reader of repository text*, not
    one. Parameters: which reader, where the long subject sits (the walked chain, the commit
    mapped). Peak RSS of a process that only runs the reader (RUSAGE_SELF)."""
    import subprocess
    import sys

    r = tmp_path / "repo"
    r.mkdir()
    kit.git(r, "init", "-q", "-b", "main")
    for i in range(3):
        (r / "f").write_text(str(i))
        kit.git(r, "add", "-A")
        kit.git(r, "commit", "-q", "-m", f"c{i}")
    base = kit.git(r, "rev-parse", "HEAD~2")
    msg = tmp_path / "msg"
    with open(msg, "wb") as f:
        f.write(b"S" * 100_000_000 + b"\n")
    side = kit.git(r, "commit-tree", "HEAD^{tree}", "-p", base, "-F", str(msg))
    kit.git(r, "tag", "old", side)
    call = {"pin_range": f"res = pin_range(GitRepo({str(r)!r}), 'old', 'main')",
            "resolve_in_history": f"res = resolve_in_history({str(r)!r}, {side!r}, 'main')"}[reader]
    code = ("import resource, sys\nfrom bisectbot.sources.git import GitRepo\n"
            "from bisectbot.sources.pinned import pin_range\nfrom bisectbot.components import resolve_in_history\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            f"try:\n    {call}\nexcept Exception as e:\n    res = e\n"
            "print(type(res).__name__, before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    from tests.hostile.peak_rss import run_measured  # not the pytest worker's peak (tests/hostile/peak_rss)

    out = tmp_path / "reader.out"
    with open(out, "w") as fh:
        rc, _, _ = run_measured([sys.executable, "-c", code], tmp_path, stdout=fh, stderr=subprocess.STDOUT)
    assert rc == 0, out.read_text()[-3000:]
    kind, before, after = out.read_text().split()[-3:]
    assert int(after) - int(before) < 32 * 1024, (kind, before, after)  # KiB; the subject alone is 100 MB
