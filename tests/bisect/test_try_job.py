"""Issue 42: ``bisectbot try`` -- does a change fix the first bad? Through the CLI, the reference engine
and real server starts.

Kind: *a change tried on a bad candidate, answered by comparing the candidate's probes with and without
it on the same prompts*. Parameters an input fixes, each varied here: how far the change moves the
failure (not at all, to a larger size inside the reproducer's range, beyond it), how the change comes
(a patch file, a git ref, a format-patch mail), where the candidate comes from (``--on``, the last
bisection's first bad in the ledger), whether the change applies at all, and the reproducer's kind (a
prefill threshold; a size-less command).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisectbot.ledger import Ledger


def _engine(kit, tmp_path: Path, mode: str = "prefill"):
    repo = kit.make_engine_repo(tmp_path / "repo", 6, 3, low=4000, high=30000)
    recipe = kit.write_recipe(tmp_path / "recipe.yaml", repo, tmp_path / "out", mode=mode)
    return repo, recipe


def _threshold_patch(kit, repo, tmp_path: Path, threshold: int, name: str = "fix") -> Path:
    """A diff of engine.json on the bad end: the engine answers garbage above ``threshold`` tokens."""
    return _cfg_patch(kit, repo, tmp_path, name, threshold=threshold)


def _fix_branch(kit, repo, branch: str, start: str | None = None, also=None) -> None:
    """Branch ``branch`` (from ``start``, else HEAD): a commit adding NOTES, then the fix (threshold 100000,
    and whatever ``also`` writes)."""
    kit.git(repo.path, "checkout", "-q", "-b", branch, *([start] if start else []))
    (repo.path / "NOTES").write_text("investigating\n")
    kit.git(repo.path, "add", "NOTES")
    kit.git(repo.path, "commit", "-q", "-m", "notes")
    cfg = json.loads((repo.path / "engine.json").read_text())
    cfg["threshold"] = 100000
    (repo.path / "engine.json").write_text(json.dumps(cfg))
    if also is not None:
        also()
    kit.git(repo.path, "commit", "-q", "-am", "the fix")


def _try(kit, tmp_path: Path, recipe: Path, *args: str, state: Path | None = None):
    p = kit.run_cli("--state", str(state or tmp_path / "state"), "--json", "try", str(recipe), *args,
                    "--out", str(tmp_path / "try"), timeout=600)
    return p, (json.loads(p.stdout) if p.stdout.strip().startswith("{") else {})


@pytest.mark.slow
def test_a_patch_that_moves_the_threshold_is_partly_with_both_thresholds(kit, tmp_path: Path, starts_file) -> None:
    repo, recipe = _engine(kit, tmp_path)
    patch = _threshold_patch(kit, repo, tmp_path, 12000)
    p, doc = _try(kit, tmp_path, recipe, "--on", repo.shas[-1], "--patch", str(patch))
    assert p.returncode == 1, p.stderr[-3000:]
    assert doc["answer"] == "partly", doc
    before, after = doc["before"]["threshold"], doc["after"]["threshold"]
    assert before[1] is not None and before[1] <= 8000 and after[1] is not None and after[1] > 8000, doc
    assert f"{before[1]:,}" in doc["words"] and f"{after[1]:,}" in doc["words"], doc["words"]
    # the same prompts: every prompt on which the bad end failed was asked of the change
    failed = [r for r in doc["prompts"] if r["before"] == "GARBAGE"]
    assert failed and any(r["after"] == "OK" for r in failed), doc["prompts"]
    md = (tmp_path / "try" / "try.md").read_text()
    assert "partly" in md and f"{before[1]:,}" in md and f"{after[1]:,}" in md and doc["session"] in md
    # recorded in the ledger: a session of stage try whose status is the answer
    with Ledger(tmp_path / "state") as led:
        s = led.get_session(doc["session"])
    assert s is not None and s["status"] == "partly" and s["state"]["stage"] == "try"
    assert s["state"]["change"]["sha256"] == doc["change"]["sha256"]
    # shown on the dashboard: the recipe page's try table, both thresholds; the nightly points untouched
    p = kit.run_cli("--state", str(tmp_path / "state"), "dashboard", "--out", str(tmp_path / "site"))
    assert p.returncode == 0, p.stderr[-2000:]
    page = (tmp_path / "site" / "r" / "engine-demo.html").read_text()
    row = page[page.index(f'id="try-{doc["session"]}"'):].split("</tr>")[0]
    assert ">partly<" in row and f"garbage from {before[1]} tokens" in row and f"garbage from {after[1]} tokens" in row


@pytest.mark.slow
def test_a_fix_is_fixed_a_no_op_still_broken_and_the_unchanged_probe_is_not_repeated(
        kit, tmp_path: Path, starts_file) -> None:
    repo, recipe = _engine(kit, tmp_path)
    fix = _threshold_patch(kit, repo, tmp_path, 100000, "fix")
    p, doc = _try(kit, tmp_path, recipe, "--on", repo.shas[-1], "--patch", str(fix))
    assert p.returncode == 0 and doc["answer"] == "fixed", (p.stderr[-3000:], doc)
    assert doc["after"]["threshold"] is None or doc["after"]["threshold"][1] is None
    starts = [v for _, v in kit.read_starts(starts_file)]
    # once as it is (GARBAGE on two prompts: a start-level flake cannot fake that), twice with the change
    # (a start-level flake can fake an OK: "fixed" needs two agreeing starts, issue 40's standard)
    assert starts.count("engine-5") == 3, starts
    assert "the same answer in a second start" in doc["words"], doc["words"]
    # a change that does not touch the failure: still broken; the unchanged probe comes from the ledger
    (repo.path / "NOTES").write_text("notes\n")
    kit.git(repo.path, "add", "NOTES")
    noop = tmp_path / "noop.diff"
    noop.write_text(kit.git(repo.path, "diff", "--no-ext-diff", "--cached") + "\n")
    kit.git(repo.path, "reset", "-q", "HEAD", "NOTES")
    (repo.path / "NOTES").unlink()
    p, doc = _try(kit, tmp_path, recipe, "--on", repo.shas[-1], "--patch", str(noop))
    assert p.returncode == 1 and doc["answer"] == "still broken", (p.stderr[-3000:], doc)
    assert doc["before"]["cached_from"], doc["before"]
    starts = [v for _, v in kit.read_starts(starts_file)]
    assert starts.count("engine-5") == 4, starts  # only the changed probe started a server (once: still broken)


@pytest.mark.slow
def test_the_first_bad_comes_from_the_last_bisection_and_a_ref_is_a_change(kit, tmp_path: Path, starts_file) -> None:
    repo, recipe = _engine(kit, tmp_path)
    p = kit.run_cli("--state", str(tmp_path / "state"), "--json", "run", str(recipe), "--out", str(tmp_path / "out"),
                    timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    # a fix branch off the first bad (commit 3): two commits, the second restores the threshold
    _fix_branch(kit, repo, "fix", repo.shas[3])
    kit.git(repo.path, "checkout", "-q", "main")
    p, doc = _try(kit, tmp_path, recipe, "--ref", "fix")
    assert p.returncode == 0 and doc["answer"] == "fixed", (p.stderr[-3000:], doc)
    assert doc["candidate"]["ref"] == repo.shas[3] and "last bisection" in doc["on_from"], doc
    assert "2 commit(s)" in doc["change"]["source"] and sorted(doc["change"]["files"]) == ["NOTES", "engine.json"]
    assert doc["before"]["cached_from"], doc["before"]  # the bisection measured the first bad on this host


@pytest.mark.slow
def test_a_change_that_does_not_apply_is_untested_and_says_the_file_and_hunk(kit, tmp_path: Path, starts_file) -> None:
    repo, recipe = _engine(kit, tmp_path)
    bad = tmp_path / "stale.diff"
    bad.write_text("diff --git a/engine.json b/engine.json\n--- a/engine.json\n+++ b/engine.json\n@@ -1 +1 @@\n"
                   "-{\"threshold\": 1, \"seed\": 99}\n+{\"threshold\": 100000, \"seed\": 99}\n")
    p, doc = _try(kit, tmp_path, recipe, "--on", repo.shas[-1], "--patch", str(bad))
    assert p.returncode == 3 and doc["answer"] == "untested", (p.stderr[-3000:], doc)
    assert "engine.json" in doc["words"] and "hunk 1" in doc["words"] and "does not apply" in doc["words"], doc["words"]


@pytest.mark.parametrize("content, why", [
    ("", "no file in the diff"),
    ("just some text\n", "no file in the diff"),
    ("--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-x\n+y\n", "leaves the tree"),
    ("--- a/.git/hooks/post-checkout\n+++ b/.git/hooks/post-checkout\n@@ -1 +1 @@\n-x\n+y\n", ".git"),
])
def test_bad_patches_are_bad_input_naming_the_file(kit, tmp_path: Path, content: str, why: str) -> None:
    repo, recipe = _engine(kit, tmp_path)
    patch = tmp_path / "x.diff"
    patch.write_text(content)
    p, doc = _try(kit, tmp_path, recipe, "--on", repo.shas[-1], "--patch", str(patch))
    assert p.returncode == 2, p.stderr[-2000:]
    assert why in doc["error"]["message"] and "x.diff" in doc["error"]["message"], doc


@pytest.mark.slow
def test_a_format_patch_mail_and_a_command_reproducer(kit, tmp_path: Path, starts_file) -> None:
    repo, recipe = _engine(kit, tmp_path, mode="command")
    kit.git(repo.path, "checkout", "-q", "-b", "fix")
    cfg = json.loads((repo.path / "engine.json").read_text())
    cfg["threshold"] = 20000
    (repo.path / "engine.json").write_text(json.dumps(cfg))
    kit.git(repo.path, "commit", "-q", "-am", "raise the threshold")
    mail = kit.git(repo.path, "format-patch", "-1", "--stdout")
    kit.git(repo.path, "checkout", "-q", "main")
    patch = tmp_path / "0001-fix.patch"
    patch.write_text(mail + "\n")
    p, doc = _try(kit, tmp_path, recipe, "--on", repo.shas[-1], "--patch", str(patch))
    assert p.returncode == 0 and doc["answer"] == "fixed", (p.stderr[-3000:], doc)
    assert doc["prompts"] == [] and "passes with the change" in doc["words"]


@pytest.mark.parametrize("content, why", [
    ("diff --git a/x b/y\nsimilarity index 100%\nrename from ../../etc/passwd\nrename to y\n", "leaves the tree"),
    ("diff --git a/x b/x\nnew file mode 120000\n--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+/etc\n\\ No newline at end of file\n",
     "symbolic link"),
    ("diff --git a/m b/m\nnew file mode 160000\nindex 0000000..1111111\n--- /dev/null\n+++ b/m\n@@ -0,0 +1 @@\n"
     "+Subproject commit 1111111111111111111111111111111111111111\n", "submodule"),
])
def test_extended_git_headers_cannot_escape_or_plant_links(kit, tmp_path: Path, content: str, why: str) -> None:
    """Kind: *a path or a file type a diff names outside its ---/+++ lines* (git's rename/copy and mode
    headers); each is refused before anything is applied."""
    repo, recipe = _engine(kit, tmp_path)
    patch = tmp_path / "x.diff"
    patch.write_text(content)
    p, doc = _try(kit, tmp_path, recipe, "--on", repo.shas[-1], "--patch", str(patch))
    assert p.returncode == 2 and why in doc["error"]["message"], (p.stderr[-2000:], doc)


@pytest.mark.slow
def test_under_threshold_below_a_threshold_moved_past_n_is_fixed_as_the_recipe_asks(kit, tmp_path: Path,
                                                                                    starts_file) -> None:
    repo = kit.make_engine_repo(tmp_path / "repo", 6, 3, low=4000, high=30000)
    recipe = kit.write_recipe(tmp_path / "recipe.yaml", repo, tmp_path / "out", regress="threshold-below: 10000")
    patch = _threshold_patch(kit, repo, tmp_path, 12000)
    p, doc = _try(kit, tmp_path, recipe, "--on", repo.shas[-1], "--patch", str(patch))
    assert p.returncode == 0 and doc["answer"] == "fixed", (p.stderr[-3000:], doc)
    assert "threshold-below 10,000" in doc["words"] and doc["after"]["threshold"][1] >= 10000, doc
    patch = _threshold_patch(kit, repo, tmp_path, 7000, "partial")
    p, doc = _try(kit, tmp_path, recipe, "--on", repo.shas[-1], "--patch", str(patch))
    assert p.returncode == 1 and doc["answer"] == "partly", (p.stderr[-3000:], doc)


@pytest.mark.slow
def test_a_good_candidate_is_untested_without_probing_the_change_and_a_far_branch_is_said(
        kit, tmp_path: Path, starts_file) -> None:
    """New-user pass: a good candidate's change was probed for nothing (a GPU probe wasted) and try.md said
    "no GARBAGE" for a change that never ran; a --ref branch cut from main carried every later commit too."""
    repo, recipe = _engine(kit, tmp_path)
    fix = _threshold_patch(kit, repo, tmp_path, 100000)
    p, doc = _try(kit, tmp_path, recipe, "--on", repo.shas[0], "--patch", str(fix))
    assert p.returncode == 3 and doc["answer"] == "untested" and "nothing to fix here" in doc["words"], doc
    assert [v for _, v in kit.read_starts(starts_file)] == ["engine-0"]  # the change was not probed
    md = (tmp_path / "try" / "try.md").read_text()
    assert "with it: not measured (skip)" in md, md
    kit.git(repo.path, "checkout", "-q", "-b", "late-fix")  # cut from main: 2 later commits ride along
    cfg = json.loads((repo.path / "engine.json").read_text())
    cfg["threshold"] = 100000
    (repo.path / "engine.json").write_text(json.dumps(cfg))
    kit.git(repo.path, "commit", "-q", "-am", "fix on main")
    kit.git(repo.path, "checkout", "-q", "main")
    p, doc = _try(kit, tmp_path, recipe, "--on", repo.shas[3], "--ref", "late-fix")
    assert p.returncode == 0 and "3 commits; a branch cut from a later commit" in p.stderr, p.stderr[-2000:]


def _cfg_patch(kit, repo, tmp_path: Path, name: str, **cfg) -> Path:
    """A diff of the bad end's engine.json setting ``cfg``."""
    data = json.loads((repo.path / "engine.json").read_text())
    data.update(cfg)
    (repo.path / "engine.json").write_text(json.dumps(data))
    diff = kit.git(repo.path, "diff", "--no-ext-diff")
    kit.git(repo.path, "checkout", "--", "engine.json")
    p = tmp_path / f"{name}.diff"
    p.write_text(diff + "\n")
    return p


@pytest.mark.slow
@pytest.mark.parametrize("cfg", [{"error_above": 5000}, {"crash_above": 5000}, {"max_model_len": 6000}],
                         ids=["errors", "crashes", "refuses"])
def test_a_change_that_errors_where_it_failed_is_never_fixed(kit, tmp_path: Path, starts_file, cfg: dict) -> None:
    """Hostile pass: a change that removes the GARBAGE but answers the larger failing prompts with an HTTP error,
    a dead server or a refused size read as "fixed (7)" from the two prompts it was asked. Every prompt on
    which the candidate failed is asked of the change now, and an error there is never read as fixed."""
    repo, recipe = _engine(kit, tmp_path)
    patch = _cfg_patch(kit, repo, tmp_path, "x", threshold=100000, **cfg)
    p, doc = _try(kit, tmp_path, recipe, "--on", repo.shas[-1], "--patch", str(patch))
    assert doc.get("answer") == "untested" and p.returncode == 3, (doc.get("words"), p.stderr[-2000:])
    assert "never read as fixed" in doc["words"] or "could not be tested" in doc["words"], doc["words"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [14, 15, 17, 19])
def test_a_flaky_candidate_does_not_make_a_no_op_change_fixed(kit, tmp_path: Path, starts_file, seed: int) -> None:
    """Hostile pass: on a candidate that answers garbage at random, a change that touches nothing read as
    "fixed" (seed 17) or "partly" (seeds 14, 19) from one start on each side."""
    repo = kit.make_engine_repo(tmp_path / "repo", 6, 3, low=4000, high=30000, extra_cfg={"flaky": 0.5, "seed": seed})
    recipe = kit.write_recipe(tmp_path / "recipe.yaml", repo, tmp_path / "out")
    (repo.path / "NOTES").write_text("notes\n")
    kit.git(repo.path, "add", "NOTES")
    noop = tmp_path / "noop.diff"
    noop.write_text(kit.git(repo.path, "diff", "--no-ext-diff", "--cached") + "\n")
    kit.git(repo.path, "reset", "-q", "HEAD", "NOTES")
    p, doc = _try(kit, tmp_path, recipe, "--on", repo.shas[-1], "--patch", str(noop))
    # re-check: "partly" for every seed, once with a threshold that moved *down*: mixed answers below the
    # new first failure are no moved threshold
    assert doc.get("answer") not in ("fixed", "partly"), (doc.get("words"), p.stderr[-2000:])


@pytest.mark.slow
def test_diff_shapes_a_series_a_removed_dash_line_spaces_and_a_noprefix_user(kit, tmp_path: Path, starts_file,
                                                                            monkeypatch) -> None:
    """Hostile pass. Kind: *a diff whose shape the patch step read other than git wrote it*: a two-commit
    format-patch series kept only its first commit; a plain diff removing a line "- " was cut as a mail
    signature; a file name with a space patched another file; a user's diff.noprefix made --ref patch the
    wrong directory; --- and +++ naming different files."""
    repo, recipe = _engine(kit, tmp_path)
    (repo.path / "my notes.txt").write_text("- \nkeep\n")
    kit.git(repo.path, "add", "-A")
    kit.git(repo.path, "commit", "-q", "-m", "notes")
    bad = kit.git(repo.path, "rev-parse", "HEAD")
    _fix_branch(kit, repo, "series", also=lambda: (repo.path / "my notes.txt").write_text("keep\n"))  # removes "- "
    series = tmp_path / "series.patch"
    series.write_text(kit.git(repo.path, "format-patch", "-2", "--stdout") + "\n")
    plain = tmp_path / "plain.diff"
    plain.write_text(kit.git(repo.path, "diff", "--no-ext-diff", f"{bad}..series") + "\n")
    kit.git(repo.path, "checkout", "-q", "main")
    for patch in (series, plain):
        p, doc = _try(kit, tmp_path, recipe, "--on", bad, "--patch", str(patch))
        assert p.returncode == 0 and doc["answer"] == "fixed", (patch.name, doc.get("words"), p.stderr[-2000:])
        assert sorted(doc["change"]["files"]) == ["NOTES", "engine.json", "my notes.txt"], doc["change"]
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text("[diff]\n\tnoprefix = true\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    p, doc = _try(kit, tmp_path, recipe, "--on", bad, "--ref", "series")
    assert p.returncode == 0 and doc["answer"] == "fixed", (doc.get("words"), p.stderr[-2000:])
    mixed = tmp_path / "mixed.diff"
    mixed.write_text("--- a/version.txt\n+++ b/engine.json\n@@ -1 +1 @@\n-x\n+y\n")
    p, doc = _try(kit, tmp_path, recipe, "--on", bad, "--patch", str(mixed))
    assert p.returncode == 2 and "name different files" in doc["error"]["message"], doc


@pytest.mark.slow
def test_a_quoted_non_ascii_name_applies_and_a_hostile_request_file_is_bad_input(kit, tmp_path: Path,
                                                                                starts_file) -> None:
    """Re-check of the hostile pass: git's default quoting of a non-ASCII name ("a/notes \\303\\251.txt") was
    refused as leaving the tree; --request read any file whole (/dev/zero: exit 70)."""
    repo, recipe = _engine(kit, tmp_path)
    (repo.path / "notes é.txt").write_text("a\n")
    kit.git(repo.path, "add", "-A")
    kit.git(repo.path, "commit", "-q", "-m", "notes")
    bad = kit.git(repo.path, "rev-parse", "HEAD")
    (repo.path / "notes é.txt").write_text("b\n")
    cfg = json.loads((repo.path / "engine.json").read_text())
    cfg["threshold"] = 100000
    (repo.path / "engine.json").write_text(json.dumps(cfg))
    diff = kit.git(repo.path, "-c", "core.quotePath=true", "diff", "--no-ext-diff")
    kit.git(repo.path, "checkout", "--", ".")
    assert '"a/notes \\303\\251.txt"' in diff
    patch = tmp_path / "quoted.diff"
    patch.write_text(diff + "\n")
    p, doc = _try(kit, tmp_path, recipe, "--on", bad, "--patch", str(patch))
    assert p.returncode == 0 and doc["answer"] == "fixed" and "notes é.txt" in doc["change"]["files"], \
        (doc.get("words"), p.stderr[-2000:])
    p, doc = _try(kit, tmp_path, recipe, "--on", bad, "--patch", str(patch), "--request", "/dev/zero")
    assert p.returncode == 2 and "not a resolved request" in doc["error"]["message"], doc
