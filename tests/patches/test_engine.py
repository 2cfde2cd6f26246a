"""Patch engine: states over a real git history, atomic apply, upstream detection, stack files."""

from __future__ import annotations

import difflib
import textwrap
from pathlib import Path

import git
import pytest
from patches_fixtures import AITER_MAIN_FORM, AITER_REL, AITER_TAG_FORM, run_stage1, sha, tree_bytes

from bisectbot.errors import PatchError
from bisectbot.patches import (
    State,
    apply_stack,
    check_stack,
    detect_versions,
    load_stack,
    parse_diff,
    stack_hash,
)

CLAMP = "aiter-chunkq-clamp"


def _commit(repo: git.Repo, root: Path, text: str, msg: str) -> str:
    f = root / AITER_REL
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(text)
    repo.index.add([AITER_REL])
    return repo.index.commit(msg).hexsha


def test_git_history_applies_offset_fuzz_conflict_upstream(tmp_path: Path, repo_stack) -> None:
    """A file's history walks through every answer of `check` for the real aiter patch."""
    root = tmp_path / "aiter-src"
    repo = git.Repo.init(root)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t").set_value("user", "email", "t@example.com")
    # 192 filler lines put the stage-1 wrapper where it sits in the real file (hunk at line 194)
    base = "".join(f"# filler {i}\n" for i in range(192)) + AITER_TAG_FORM
    shifted = "import os\nimport math\n\n# four lines added above\n" + base
    fuzzed = shifted.replace("    kv_cache_fp8, kv_cache_scale = (", "    kv_values, kv_cache_scale = (")
    conflict = shifted.replace("(heads // ChunkQ)\n", "max(heads // ChunkQ, 0)\n")
    upstream = shifted.replace(
        "    TileQCount = batch_size * next_n * (heads // ChunkQ)\n",
        "    ChunkQ = min(ChunkQ, heads)  # upstream's own wording of the fix\n"
        "    TileQCount = batch_size * next_n * (heads // ChunkQ)\n")
    commits = {name: _commit(repo, root, text, name) for name, text in
               [("applies", base), ("offset", shifted), ("fuzz", fuzzed), ("conflict", conflict),
                ("upstream", upstream)]}

    answers = {}
    for name, sha1 in commits.items():
        repo.git.checkout(sha1)
        before = tree_bytes(root / "aiter")
        [st] = check_stack(repo_stack, [CLAMP], root)
        assert tree_bytes(root / "aiter") == before, "check must not touch the tree"
        answers[name] = st

    assert answers["applies"].state is State.APPLIES and answers["applies"].variant == "v0.1.10"
    assert answers["applies"].label == "applies [variant v0.1.10]"
    assert answers["offset"].state is State.APPLIES_OFFSET and answers["offset"].offset == 4
    assert answers["offset"].label == "applies with offset 4 [variant v0.1.10]"
    assert answers["fuzz"].state is State.APPLIES_FUZZ and answers["fuzz"].fuzz == 1
    assert answers["fuzz"].label.startswith("applies with fuzz 1")
    c = answers["conflict"]
    assert c.state is State.CONFLICT and c.failed_hunk["number"] == 1
    assert "    TileQCount = batch_size * next_n * (heads // ChunkQ)" in c.failed_hunk["expected"]
    assert c.failed_hunk["found_at"] == 194 + 4
    assert "    TileQCount = batch_size * next_n * max(heads // ChunkQ, 0)" in c.failed_hunk["found"]
    assert c.label.startswith("conflict: hunk #1 @@ -194,7")
    assert c.sha256_after == c.sha256_before
    u = answers["upstream"]
    assert u.state is State.UPSTREAM and "ChunkQ = min(ChunkQ, heads)" in u.detail


def test_real_aiter_patch_fixes_both_forms(tmp_path: Path, repo_stack) -> None:
    """The real diff applies to both structures (tag v0.1.10.post3 / main) and removes the ZeroDivisionError."""
    for form, variant in ((AITER_TAG_FORM, "v0.1.10"), (AITER_MAIN_FORM, "v0.1.20")):
        root = tmp_path / variant
        (root / AITER_REL).parent.mkdir(parents=True)
        (root / AITER_REL).write_text(form)
        with pytest.raises(ZeroDivisionError):
            run_stage1(form, heads=16)  # GLM-5.1 at TP=4: 16 heads per rank < ChunkQ 64
        app = apply_stack(repo_stack, [CLAMP], root)
        st = app.status(CLAMP)
        assert st.state.applies and st.variant == variant and st.fuzz == 0
        patched = (root / AITER_REL).read_text()
        assert run_stage1(patched, heads=16) == {"ChunkQ": 16, "TileQCount": 2, "SplitKV": 80}
        assert run_stage1(patched, heads=64) == run_stage1(form, heads=64)  # unchanged when heads >= ChunkQ
        assert run_stage1(patched, heads=128)["ChunkQ"] == 64
        # applying again: recognised as already applied, nothing written
        again = tree_bytes(root)
        [st2] = check_stack(repo_stack, [CLAMP], root)
        assert st2.state is State.UPSTREAM and "marker" in st2.detail
        apply_stack(repo_stack, [CLAMP], root)
        assert tree_bytes(root) == again


def _mini_stack(d: Path, patches: list[dict]) -> Path:
    """Write a stack.yaml + diffs into ``d``; each patch dict gives id, package, path, old, new, extra yaml."""
    import yaml

    entries = []
    for p in patches:
        diffs = []
        for i, (old, new) in enumerate(p["variants"]):
            rel = f"{p['id']}/v{i}.patch"
            (d / p["id"]).mkdir(parents=True, exist_ok=True)
            body = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                f"a/{p['package']}/{p['path']}", f"b/{p['package']}/{p['path']}"))
            (d / rel).write_text(f"# test patch {p['id']}\n" + body)
            diffs.append({"id": f"v{i}", "diff": rel})
        e = {"id": p["id"], "package": p["package"], "path": p["path"], "required": p.get("required", True),
             "variants": diffs, "upstream": p.get("upstream", {"reverse_applies": True})}
        if "requires" in p:
            e["requires"] = p["requires"]
        entries.append(e)
    (d / "stack.yaml").write_text(yaml.safe_dump({"version": 1, "patches": entries}, sort_keys=False))
    return d / "stack.yaml"


MOD_A = "def a():\n    x = 1\n    y = 2\n    z = 3\n    return x + y + z\n"
MOD_B = "def b():\n    p = 1\n    q = 2\n    r = 3\n    return p * q * r\n"


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "a.py").write_text(MOD_A)
    (root / "vllm" / "b.py").write_text(MOD_B)
    (root / "vllm-9.9.9.dist-info").mkdir()
    (root / "vllm-9.9.9.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 9.9.9\n")
    return root


def test_half_applicable_stack_leaves_tree_byte_identical(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    stack = load_stack(_mini_stack(tmp_path / "st", [
        {"id": "fix-a", "package": "vllm", "path": "a.py", "variants": [(MOD_A, MOD_A.replace("y = 2", "y = 20"))]},
        {"id": "fix-b", "package": "vllm", "path": "b.py",
         "variants": [(MOD_B.replace("q = 2", "q = 5"), MOD_B.replace("q = 2", "q = 50"))]},
    ]))
    before = tree_bytes(root)
    sts = check_stack(stack, None, root)
    assert [s.state for s in sts] == [State.APPLIES, State.CONFLICT]
    assert sts[1].failed_hunk["found"][:3] == ["def b():", "    p = 1", "    q = 2"]
    with pytest.raises(PatchError) as ei:
        apply_stack(stack, None, root)
    msg = str(ei.value)
    assert ei.value.status.id == "fix-b" and not ei.value.application.applied
    assert [x["state"] for x in ei.value.application.to_dict()["patches"]] == ["applies", "conflict"]
    assert "patch fix-b" in msg and "hunk #1" in msg and "    q = 5" in msg and "    q = 2" in msg
    assert tree_bytes(root) == before


def test_syntax_error_is_loud_and_leaves_tree(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    stack = load_stack(_mini_stack(tmp_path / "st", [
        {"id": "fix-a", "package": "vllm", "path": "a.py", "variants": [(MOD_A, MOD_A.replace("y = 2", "y = 20"))]},
        {"id": "broken", "package": "vllm", "path": "b.py", "variants": [(MOD_B, MOD_B.replace("q = 2", "q = (2"))]},
    ]))
    before = tree_bytes(root)
    with pytest.raises(PatchError, match=r"broken.*does not compile: .*b\.py:3"):
        apply_stack(stack, None, root)
    assert tree_bytes(root) == before


def test_best_effort_conflict_recorded_rest_applied_with_hashes(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    new_a = MOD_A.replace("y = 2", "y = 20")
    stack = load_stack(_mini_stack(tmp_path / "st", [
        {"id": "fix-a", "package": "vllm", "path": "a.py", "variants": [(MOD_A, new_a)]},
        {"id": "nice-b", "package": "vllm", "path": "b.py", "required": False,
         "variants": [(MOD_B.replace("q = 2", "q = 5"), MOD_B.replace("q = 2", "q = 50"))]},
        {"id": "fix-a2", "package": "vllm", "path": "a.py", "requires": ["fix-a"],
         "variants": [(new_a, new_a.replace("z = 3", "z = 30"))]},
    ]))
    app = apply_stack(stack, None, root)
    assert [s.state for s in app.statuses] == [State.APPLIES, State.CONFLICT, State.APPLIES]
    assert app.ok and app.applied and app.versions == {"vllm": "9.9.9"}
    final_a = new_a.replace("z = 3", "z = 30")
    assert (root / "vllm" / "a.py").read_text() == final_a
    assert (root / "vllm" / "b.py").read_text() == MOD_B
    s1, s2, s3 = app.statuses
    assert s1.sha256_before == sha(MOD_A.encode()) and s1.sha256_after == sha(new_a.encode())
    assert s3.sha256_before == s1.sha256_after and s3.sha256_after == sha(final_a.encode())
    assert app.files["vllm/a.py"] == {"before": sha(MOD_A.encode()), "after": sha(final_a.encode())}
    assert app.files["vllm/b.py"]["before"] == app.files["vllm/b.py"]["after"]
    assert (root / "vllm" / "__pycache__").is_dir()  # byte-compiled
    d = app.to_dict()
    assert d["patches"][1]["state"] == "conflict" and d["patches"][1]["failed_hunk"]["expected"]
    # applied hash covers only what applied; stack hash covers the selection
    assert app.applied_hash != app.stack_hash == stack_hash(stack, ["fix-a", "nice-b", "fix-a2"])


def test_reverse_applies_means_upstream_and_requires(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    new_a = MOD_A.replace("y = 2", "y = 20")
    (root / "vllm" / "a.py").write_text(new_a)  # upstream already has exactly this change
    stack = load_stack(_mini_stack(tmp_path / "st", [
        {"id": "fix-a", "package": "vllm", "path": "a.py", "variants": [(MOD_A, new_a)]},
        {"id": "dep", "package": "vllm", "path": "b.py", "requires": ["fix-a"],
         "variants": [(MOD_B, MOD_B.replace("r = 3", "r = 4"))]},
        {"id": "aiter-thing", "package": "aiter", "path": "x.py", "variants": [(MOD_B, MOD_A)]},
    ]))
    sts = check_stack(stack, None, root)
    assert sts[0].state is State.UPSTREAM and "reverse-applies" in sts[0].detail
    assert sts[1].state is State.APPLIES  # its requirement is upstream
    assert sts[2].state is State.NOT_APPLICABLE and "aiter" in sts[2].detail
    [dep] = check_stack(stack, ["dep"], root)  # its requirement is evaluated implicitly
    assert dep.id == "dep" and dep.state is State.APPLIES
    with pytest.raises(PatchError, match="requires fix-a"):
        apply_stack(stack, ["dep"], root)  # applying must name every patch it applies
    with pytest.raises(PatchError, match="unknown patch id"):
        check_stack(stack, ["nope"], root)


def test_variant_choice_and_conditions(tmp_path: Path) -> None:
    """Version ranges pick the preferred variant; content conditions and `when` work; unknown version is fine."""
    import yaml

    root = _tree(tmp_path)
    st = tmp_path / "st"
    _mini_stack(st, [{"id": "fix-a", "package": "vllm", "path": "a.py",
                      "variants": [(MOD_A.replace("x = 1", "x = 9"), MOD_A), (MOD_A, MOD_A.replace("x = 1", "x = 2"))]}])
    data = yaml.safe_load((st / "stack.yaml").read_text())
    data["patches"][0]["variants"][0]["versions"] = ">=9.0"
    data["patches"][0]["variants"][1]["versions"] = "<9.0"
    data["patches"].append({"id": "old-only", "package": "vllm", "path": "a.py", "required": True,
                            "when": {"versions": "<1.0"}, "variants": [{"id": "v", "diff": "fix-a/v1.patch"}]})
    data["patches"].append({"id": "needs-text", "package": "vllm", "path": "b.py",
                            "when": {"contains": "def zzz"}, "variants": [{"id": "v", "diff": "fix-a/v1.patch"}]})
    (st / "stack.yaml").write_text(yaml.safe_dump(data))
    stack = load_stack(st / "stack.yaml")
    s = check_stack(stack, None, root)  # version 9.9.9 from dist-info: v0 preferred, fails; v1 applies
    assert s[0].variant == "v1" and s[0].state is State.APPLIES and "although version 9.9.9" in s[0].detail
    assert s[0].tried[0] == "v0"
    assert s[1].state is State.NOT_APPLICABLE and s[1].label == "not applicable (condition: version 9.9.9 not in <1.0)"
    assert s[2].state is State.NOT_APPLICABLE and "lacks 'def zzz'" in s[2].detail
    s = check_stack(stack, ["fix-a"], root, versions={"vllm": "0.5.0rc1.dev3+gabc.rocm700"})
    assert s[0].variant == "v1" and not s[0].detail  # preferred by its range
    assert detect_versions(root) == {"vllm": "9.9.9"}


def test_stack_file_errors_are_located(tmp_path: Path) -> None:
    (tmp_path / "stack.yaml").write_text(textwrap.dedent("""\
        version: 1
        patches:
          - id: a
            package: vllm
            path: x.py
            colour: red
            variants:
              - id: v
                diff: missing.patch
                versions: "not a spec"
    """))
    with pytest.raises(PatchError) as ei:
        load_stack(tmp_path / "stack.yaml")
    msg = str(ei.value)
    assert f"{tmp_path / 'stack.yaml'}:6:5: patches[0].colour: unknown field" in msg
    assert "patches[0].variants[0].versions" in msg and ":10:" in msg
    (tmp_path / "stack.yaml").write_text("version: 1\npatches:\n  - id: a\n    package: vllm\n    path: x.py\n"
                                         "    variants:\n      - id: v\n        diff: missing.patch\n")
    with pytest.raises(PatchError, match=r"stack\.yaml:8:\d+: patches\[0\]\.variants\[0\]\.diff: cannot read"):
        load_stack(tmp_path / "stack.yaml")
    (tmp_path / "garbage.patch").write_text("just words\n")
    (tmp_path / "stack.yaml").write_text((tmp_path / "stack.yaml").read_text().replace("missing", "garbage"))
    with pytest.raises(PatchError, match="no unified-diff hunk"):
        load_stack(tmp_path / "stack.yaml")


def test_repo_stack_headers_and_hash(repo_stack, monkeypatch, tmp_path: Path) -> None:
    """Every shipped diff parses and carries the header the stack promises; hash reacts to content and order."""
    for spec in repo_stack.patches:
        for var in spec.variants:
            text = repo_stack.diff_path(var).read_text()
            head = text.split("\n--- ", 1)[0]
            for key in ("Fixes:", "Upstream file:", "Upstream discussion:", "Upstream when:"):
                assert key in head, f"{var.diff}: header lacks {key}"
            assert f"bisectbot patch: {spec.id}" in head
            hunks = parse_diff(text, var.diff)
            assert any(f"bisectbot-patch: {spec.id}" in ln for h in hunks for ln in h.lines if ln.startswith("+"))
    ids = repo_stack.ids
    h = stack_hash(repo_stack, ids)
    assert len(h) == 64 and h == stack_hash(repo_stack, ids)
    assert stack_hash(repo_stack, ids[::-1]) != h and stack_hash(repo_stack, ids[:1]) != h
    # BISECTBOT_PATCHES_DIR points at a copy; editing one diff byte changes the hash
    import shutil

    copy = tmp_path / "patches"
    shutil.copytree(repo_stack.base_dir, copy)
    monkeypatch.setenv("BISECTBOT_PATCHES_DIR", str(copy))
    st2 = load_stack()
    assert st2.base_dir == copy and stack_hash(st2, ids) == h
    p = copy / repo_stack.patches[0].variants[0].diff
    p.write_text(p.read_text().replace("bisectbot-patch:", "bisectbot-patch: ", 1))
    assert stack_hash(load_stack(), ids) != h
