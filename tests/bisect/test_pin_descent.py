"""Descent through dependency pins (issue 26), end to end through ``bisectbot run`` on real git
repositories with the local runner and a command reproducer.

The failing input: a vLLM history of 10 commits whose v5 only bumps ``docker/Dockerfile.rocm_base``'s
``ARG AITER_BRANCH="v0.1.21.post2"`` to ``"v0.1.22"``; the bad output comes from aiter commit a6,
between those tags. Each vLLM candidate runs with the aiter its own commit pins (as its image build
would); the descent bisects aiter v0.1.21.post2..v0.1.22 with vLLM held at v5.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

# The first lines of vllm-project/vllm docker/Dockerfile.rocm_base (commit 00256d59), aiter pin renamed
# per test; the build stage's re-declarations and checkout lines as in the real file.
DOCKERFILE = '''\
ARG BASE_IMAGE=rocm/dev-ubuntu-22.04:7.2.1-complete
ARG TRITON_BRANCH="ba5c1517"
ARG TRITON_REPO="https://github.com/ROCm/triton.git"
ARG PYTORCH_BRANCH="8514f051" # release/2.10 as of 3/17
ARG AITER_BRANCH="{aiter}"
ARG AITER_REPO="https://github.com/ROCm/aiter.git"
ARG MORI_BRANCH="{mori}"
ARG MORI_REPO="https://github.com/ROCm/mori.git"

FROM ${{BASE_IMAGE}} AS base
FROM base AS build_aiter
ARG AITER_BRANCH
ARG AITER_REPO
RUN git clone --recursive ${{AITER_REPO}}
RUN cd aiter \\
    && git checkout ${{AITER_BRANCH}} \\
    && git submodule update --init --recursive
'''

# requirements/rocm.txt shape (vllm-project/vllm 027281ae) with an aiter pin line
REQUIREMENTS = '''\
# Common dependencies
-r common.txt
numba == 0.65.0 # Required for N-gram speculative decoding
amd-aiter=={aiter}
'''

CHECK = """\
import os, sys
def read(d, f, default="-"):
    try:
        return open(os.path.join(d, f)).read().strip()
    except OSError:
        return default
vllm, aiter, ck = (sys.argv[1:] + ["", "", ""])[:3]
with open(os.environ["ENGINE_STARTS"], "a") as fh:
    fh.write("x " + read(vllm, "v.txt") + "+" + read(aiter, "v.txt") + "+" + read(ck, "v.txt") + "\\n")
bad = read(aiter, "bug.txt") == "1" or read(ck, "bug.txt") == "1"
# an unconfigured component cannot be checked out: its pinned version shows in the vLLM tree only
bad = bad or 'MORI_BRANCH="3e0d5f1a"' in read(vllm, "docker/Dockerfile.rocm_base", "")
sys.exit(1 if bad else 0)
"""

OLD_TAG, NEW_TAG = "v0.1.21.post2", "v0.1.22"


def commit(kit, repo: Path, msg: str, files: dict[str, str]) -> str:
    """Write ``files`` and commit exactly them (``git add -A`` would drop a gitlink whose submodule
    is not checked out)."""
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    kit.git(repo, "add", "--", *files)
    kit.git(repo, "commit", "-q", "-m", msg)
    return kit.git(repo, "rev-parse", "HEAD")


def init(kit, path: Path) -> Path:
    path.mkdir(parents=True)
    kit.git(path, "init", "-q", "-b", "main")
    return path


CK_PATH = "3rdparty/composable_kernel"
GITMODULES = ('[submodule "3rdparty/composable_kernel"]\n\tpath = 3rdparty/composable_kernel\n'
              '\turl = https://github.com/ROCm/composable_kernel.git\n')  # ROCm/aiter's .gitmodules


def aiter_repo(kit, path: Path, n: int = 10, bug_at: int | None = 6, old_at: int = 2, new_at: int = 9,
               gitlinks: dict[int, str] | None = None) -> list[str]:
    """aiter a0..a{n-1}; tags OLD_TAG at a{old_at}, NEW_TAG at a{new_at}; a{bug_at} on are bad.
    ``gitlinks`` maps a commit index to the composable_kernel commit it pins: a0 adds the submodule,
    any later index is a commit that only moves the gitlink."""
    init(kit, path)
    shas = []
    for i in range(n):
        if gitlinks and i in gitlinks and i > 0:
            kit.git(path, "update-index", "--cacheinfo", f"160000,{gitlinks[i]},{CK_PATH}")
            kit.git(path, "commit", "-q", "-m", f"Pin composable_kernel to {gitlinks[i][:8]} (#{4800 + i})")
            shas.append(kit.git(path, "rev-parse", "HEAD"))
            continue
        if gitlinks and i == 0:
            kit.git(path, "update-index", "--add", "--cacheinfo", f"160000,{gitlinks[0]},{CK_PATH}")
        files = {"v.txt": f"a{i}\n", "aiter/ops.py": f"X = {i}\n",
                 "bug.txt": "1\n" if bug_at is not None and i >= bug_at else "0\n"}
        if gitlinks and i == 0:
            files[".gitmodules"] = GITMODULES
        shas.append(commit(kit, path, f"aiter change {i} (#{4000 + i})", files))
    kit.git(path, "tag", OLD_TAG, shas[old_at])
    kit.git(path, "tag", NEW_TAG, shas[new_at])
    return shas


def ck_repo(kit, path: Path, n: int = 8, bug_at: int = 4) -> list[str]:
    """composable_kernel c0..c{n-1}; c{bug_at} on are bad."""
    init(kit, path)
    return [commit(kit, path, f"ck change {i}", {"v.txt": f"c{i}\n", "kernels/k.cpp": f"{i}\n",
                                                 "bug.txt": "1\n" if i >= bug_at else "0\n"}) for i in range(n)]


def vllm_repo(kit, path: Path, n: int = 10, bump_at: int = 5, *, pin_file: str = "docker",
              new_aiter: str = NEW_TAG, code_change_in_bump: bool = False, new_mori: str | None = None,
              old_aiter: str = OLD_TAG) -> list[str]:
    """vLLM v0..v{n-1}: every commit changes vllm/ except v{bump_at}, which only moves the aiter pin
    (``pin_file``: ``docker`` for Dockerfile.rocm_base, ``requirements`` for requirements/rocm.txt) or,
    with ``new_mori``, the mori pin."""
    init(kit, path)
    shas = []

    def files(aiter: str, mori: str) -> dict[str, str]:
        if pin_file == "requirements":
            docker = "".join(ln for ln in DOCKERFILE.format(aiter="", mori=mori).splitlines(True) if "AITER" not in ln)
            return {"requirements/rocm.txt": REQUIREMENTS.format(aiter=aiter.lstrip("v")),
                    "docker/Dockerfile.rocm_base": docker}
        return {"docker/Dockerfile.rocm_base": DOCKERFILE.format(aiter=aiter, mori=mori)}

    aiter, mori = old_aiter, "2d02c6a9"
    for i in range(n):
        if i == bump_at:
            aiter, mori = (aiter, new_mori) if new_mori else (new_aiter, mori)
            # besides the pin only paths outside vllm/ (not runtime): v.txt and the docs
            change = {**files(aiter, mori), "v.txt": f"v{i}\n", "docs/notes.md": f"{i}\n"}
            if code_change_in_bump:
                change["vllm/attention.py"] = f"X = {i}  # and a real change\n"
            shas.append(commit(kit, path, f"[ROCm] Bump {'MORI' if new_mori else 'AITER'} (#{56870 + i})", change))
            continue
        shas.append(commit(kit, path, f"vllm change {i} (#{56000 + i})",
                           {**files(aiter, mori), "v.txt": f"v{i}\n", "vllm/attention.py": f"X = {i}\n",
                            "docs/notes.md": f"{i}\n"}))
    return shas


def recipe(tmp_path: Path, vllm: Path, aiter: Path, ck: Path | None = None) -> Path:
    (tmp_path / "check.py").write_text(CHECK)
    comps = {"vllm": {"repo": str(vllm), "runtime_paths": ["vllm/"]},
             "aiter": {"repo": str(aiter), "runtime_paths": ["aiter/"]}}
    argv = [sys.executable, str(tmp_path / "check.py"), "{source:vllm}", "{source:aiter}"]
    if ck is not None:
        comps["composable_kernel"] = {"repo": str(ck), "runtime_paths": ["kernels/"]}
        argv.append("{source:composable_kernel}")
    data = {
        "name": "pin-descent",
        "source": {"kind": "git", "repo": str(vllm), "component": "vllm", "runtime_paths": ["vllm/"]},
        "reproducer": {"kind": "command", "command": argv},
        "regress": "command",
        "bisect": {"components": comps},
        "report": {"dir": str(tmp_path / "out")},
        "env_passthrough": ["ENGINE_STARTS"],
    }
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def run(kit, tmp_path: Path, r: Path, good: str, bad: str):
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r), "--good", good, "--bad", bad)
    out = tmp_path / "out"
    res = json.loads((out / "result.json").read_text()) if (out / "result.json").exists() else {}
    md = (out / "report.md").read_text() if (out / "report.md").exists() else ""
    return p, res, md


def test_failing_input_v5_only_bumps_aiter_descends_to_a6(tmp_path, kit, starts_file) -> None:
    a = aiter_repo(kit, tmp_path / "aiter")
    v = vllm_repo(kit, tmp_path / "vllm")
    p, res, md = run(kit, tmp_path, recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter"), v[0], v[9])
    assert p.returncode == 0, p.stdout + p.stderr
    st1, st2 = res["stages"]
    assert st1["first_bad"]["ref"] == v[5] and st1["last_good"]["ref"] == v[4]
    assert "bumps aiter v0.1.21.post2 → v0.1.22" in st1["message"]
    assert st2["component"] == "aiter" and st2["status"] == "culprit"
    assert (st2["first_bad"]["ref"], st2["last_good"]["ref"]) == (a[6], a[5])
    # the chain: vehicle (the pin bump in vLLM) -> culprit (in aiter), each with range, probes, confidence
    vehicle, culprit = res["chain"]
    assert (vehicle["role"], vehicle["component"], vehicle["first_bad"]["ref"]) == ("vehicle", "vllm", v[5])
    assert vehicle["range"] == [v[0], v[9]] and vehicle["probes"] >= 3 and vehicle["confidence"] == 1.0
    assert [(m["component"], m["old"], m["new"]) for m in vehicle["moves"]] == [("aiter", OLD_TAG, NEW_TAG)]
    assert (culprit["role"], culprit["component"], culprit["first_bad"]["ref"]) == ("culprit", "aiter", a[6])
    assert culprit["range"] == [a[2], a[9]] and culprit["probes"] >= 3 and culprit["confidence"] == 1.0
    assert culprit["held"] == {"vllm": v[5]}
    # stage 1 ran each vLLM commit with the aiter it pins; the aiter stage held vLLM at v5
    starts = [s.split("+") for _, s in kit.read_starts(starts_file)]
    assert {ai for vl, ai, _ in starts if vl in ("v0", "v4")} == {"a2"}
    assert {ai for vl, ai, _ in starts if vl in ("v5", "v9")} >= {"a9"}
    inside = [(vl, ai) for vl, ai, _ in starts if ai not in ("a2", "a9")]
    assert len(inside) >= 2 and {vl for vl, _ in inside} == {"v5"}
    assert "bumps aiter v0.1.21.post2 → v0.1.22" in md
    assert f"the regression is aiter {a[6][:10]}" in md and f"last good {a[5][:10]}" in md
    assert "may blame" in " ".join(res["notes"])
    # the printed Reproduce command repeats the aiter stage with vLLM held at v5
    assert f"--good aiter={a[5]},vllm={v[5]} --bad aiter={a[6]},vllm={v[5]}" in res["reproduce"]
    again = kit.run_cli("--state", str(tmp_path / "s2"), "run", str(tmp_path / "r.yaml"),
                        "--good", f"aiter={a[5]},vllm={v[5]}", "--bad", f"aiter={a[6]},vllm={v[5]}",
                        "--out", str(tmp_path / "again"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads((tmp_path / "again" / "result.json").read_text())["stages"][-1]["first_bad"]["ref"] == a[6]


def test_requirements_pin_bump_descends(tmp_path, kit, starts_file) -> None:
    a = aiter_repo(kit, tmp_path / "aiter")
    v = vllm_repo(kit, tmp_path / "vllm", pin_file="requirements")
    p, res, md = run(kit, tmp_path, recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter"), v[0], v[9])
    assert p.returncode == 0, p.stdout + p.stderr
    assert res["stages"][0]["first_bad"]["ref"] == v[5]
    assert res["stages"][-1]["first_bad"]["ref"] == a[6]
    moves = res["chain"][0]["moves"]
    assert [(m["name"], m["path"], m["old"], m["new"]) for m in moves] == [
        ("amd-aiter", "requirements/rocm.txt", "0.1.21.post2", "0.1.22")]
    assert "bumps aiter 0.1.21.post2 → 0.1.22" in md


def test_submodule_bump_two_levels_deep(tmp_path, kit, starts_file) -> None:
    """vLLM v5 bumps aiter; aiter's a6 only moves its composable_kernel gitlink; ck c4 is the culprit."""
    ck = tmp_path / "ck"
    c = ck_repo(kit, ck)
    a = aiter_repo(kit, tmp_path / "aiter", bug_at=None, gitlinks={0: c[1], 6: c[7]})
    v = vllm_repo(kit, tmp_path / "vllm")
    p, res, md = run(kit, tmp_path, recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter", ck), v[0], v[9])
    assert p.returncode == 0, p.stdout + p.stderr
    names = [(s["component"], s["first_bad"]["ref"] if s["first_bad"] else None) for s in res["stages"]]
    assert names == [("vllm", v[5]), ("aiter", a[6]), ("composable_kernel", c[4])]
    roles = [(x["role"], x["component"]) for x in res["chain"]]
    assert roles == [("vehicle", "vllm"), ("vehicle", "aiter"), ("culprit", "composable_kernel")]
    assert res["chain"][1]["moves"][0]["component"] == "composable-kernel"
    assert res["chain"][2]["held"] == {"vllm": v[5], "aiter": a[6]}
    assert res["chain"][2]["last_good"]["ref"] == c[3]
    assert f"the regression is composable\\_kernel {c[4][:10]}" in md  # "_" escaped in Markdown


def test_pin_bump_mixed_with_a_code_change_is_not_descended(tmp_path, kit, starts_file) -> None:
    aiter_repo(kit, tmp_path / "aiter")
    v = vllm_repo(kit, tmp_path / "vllm", code_change_in_bump=True)
    p, res, md = run(kit, tmp_path, recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter"), v[0], v[9])
    assert p.returncode == 0, p.stdout + p.stderr
    assert [s["name"] for s in res["stages"]] == ["stage 1"]
    st = res["stages"][0]
    assert st["first_bad"]["ref"] == v[5]
    assert "bumps aiter v0.1.21.post2 → v0.1.22" in st["message"]
    assert "also changes vllm/attention.py" in st["message"] and "not descended" in st["message"]
    assert "not descended" in md and "pin-bump" not in st["flags"]


def test_bump_between_tags_on_different_roots(tmp_path, kit, starts_file) -> None:
    """aiter's history was rewritten: the old tag's root is not the new tag's; the range starts at
    the commit the old tag's history maps to by PR number."""
    aiter = init(kit, tmp_path / "aiter")
    old = [commit(kit, aiter, f"aiter change {i} (#{4000 + i})",
                  {"v.txt": f"old-a{i}\n", "aiter/ops.py": f"X = {i}\n", "bug.txt": "0\n"}) for i in range(3)]
    old.append(commit(kit, aiter, "Prepare v0.1.21.post2 release", {"aiter/version.py": "0.1.21.post2\n"}))
    kit.git(aiter, "tag", OLD_TAG, old[-1])
    kit.git(aiter, "checkout", "-q", "--orphan", "rewritten")
    kit.git(aiter, "rm", "-rqf", "--", ".")
    a = [commit(kit, aiter, f"aiter change {i} (#{4000 + i})",
                {"v.txt": f"a{i}\n", "aiter/ops.py": f"X = {i}\n", "bug.txt": "1\n" if i >= 6 else "0\n"})
         for i in range(10)]
    kit.git(aiter, "tag", NEW_TAG, a[-1])
    v = vllm_repo(kit, tmp_path / "vllm")
    p, res, md = run(kit, tmp_path, recipe(tmp_path, tmp_path / "vllm", aiter), v[0], v[9])
    assert p.returncode == 0, p.stdout + p.stderr
    culprit = res["chain"][-1]
    assert culprit["first_bad"]["ref"] == a[6] and culprit["last_good"]["ref"] == a[5]
    assert culprit["range"] == [a[2], a[9]]  # old tag's "aiter change 2 (#4002)" maps to the rewritten a2
    assert "maps by PR number" in md and "rewritten history" in md


def test_unconfigured_component_bump_is_reported_and_not_blamed(tmp_path, kit, starts_file) -> None:
    aiter_repo(kit, tmp_path / "aiter", bug_at=None)
    v = vllm_repo(kit, tmp_path / "vllm", new_mori="3e0d5f1a")
    p, res, md = run(kit, tmp_path, recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter"), v[0], v[9])
    assert p.returncode == 3, p.stdout + p.stderr
    st = res["stages"][-1]
    assert st["first_bad"]["ref"] == v[5] and "pin-bump" in st["flags"]
    text = f"{v[5][:12]} bumps mori 2d02c6a9 → 3e0d5f1a; mori is not configured: add `bisect.components.mori`"
    assert text in st["message"]
    assert "mori is not configured: add" in md and "bisect.components.mori" in md  # backticks escaped in Markdown
    assert "will not blame" in " ".join(res["notes"])


def test_pin_to_a_missing_tag_is_reported_and_not_blamed(tmp_path, kit, starts_file) -> None:
    """The pinned commit does not exist in the configured mori repository: not bisectable, not a code change."""
    aiter_repo(kit, tmp_path / "aiter", bug_at=None)
    v = vllm_repo(kit, tmp_path / "vllm", new_mori="3e0d5f1a")
    # mori configured but its repository lacks the pinned commit
    mori = init(kit, tmp_path / "mori")
    commit(kit, mori, "mori 0", {"m": "0\n"})
    r = recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter")
    data = yaml.safe_load(r.read_text())
    data["bisect"]["components"]["mori"] = {"repo": str(mori)}
    r.write_text(yaml.safe_dump(data))
    p, res, md = run(kit, tmp_path, r, v[0], v[9])
    # issue 35, item 5: the bad end itself pins the ref mori lacks: bad input naming file, pin and
    # repository (it used to run with mori's HEAD and bisect as if the pin were there)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "pins mori '3e0d5f1a' in docker/Dockerfile.rocm_base" in p.stderr and str(mori) in p.stderr
    assert res == {}


def test_the_culprit_is_filed_where_the_recipe_says_for_its_component(tmp_path, kit, starts_file) -> None:
    """An aiter culprit goes to aiter's repository (bisect.components.aiter.github), the issue names the
    vehicle; nothing is filed on the recipe's vLLM target."""
    from tests.report.fake_github import serving

    token = "ghp_PINStoken1234567890abcdefghijklmnopqr"
    a = aiter_repo(kit, tmp_path / "aiter")
    v = vllm_repo(kit, tmp_path / "vllm")
    r = recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter")
    with serving(token, "octo-org/vllm") as fake:
        fake.add_repo("octo-org/aiter")
        data = yaml.safe_load(r.read_text())
        target = {"labels": ["bisectbot"], "api_url": fake.base_url, "bot_login": "bisectbot-app"}
        data["report"]["github"] = {"repo": "octo-org/vllm", **target}
        data["bisect"]["components"]["aiter"]["github"] = {"repo": "octo-org/aiter", **target}
        r.write_text(yaml.safe_dump(data))
        p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r), "--good", v[0], "--bad", v[9], "--file-issue",
                        env={"GITHUB_TOKEN": token, "BISECTBOT_GITHUB_TOKEN": "", "GH_TOKEN": ""})
        assert p.returncode == 0, p.stdout + p.stderr
        assert fake.issues("octo-org/vllm") == []
        (issue,) = fake.issues("octo-org/aiter")
        assert a[6][:12] in issue["title"] + issue["body"]
        assert v[5][:12] in issue["body"] and "bumps aiter v0.1.21.post2 → v0.1.22" in issue["body"]


def test_pin_moved_back_is_reported_as_a_downgrade_and_not_blamed(tmp_path, kit, starts_file) -> None:
    """The next member of the kind: v5 moves aiter back (vllm#39509 moved aiter back to v0.1.10.post3)
    and loses aiter a6's fix. Not a range to bisect for a regression: said, flagged, not blamed."""
    aiter_repo(kit, tmp_path / "aiter", bug_at=None)
    v = vllm_repo(kit, tmp_path / "vllm", old_aiter=NEW_TAG, new_aiter=OLD_TAG)
    r = recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter")
    # a0..a5 carry a bug that a6 fixes
    (tmp_path / "check.py").write_text(CHECK.replace('bad = read(aiter, "bug.txt") == "1"',
                                                     'bad = read(aiter, "v.txt") in ("a0", "a1", "a2", "a3", "a4", "a5")'))
    p, res, md = run(kit, tmp_path, r, v[0], v[9])
    assert p.returncode == 3, p.stdout + p.stderr
    st = res["stages"][-1]
    assert [s["name"] for s in res["stages"]] == ["stage 1"] and st["first_bad"]["ref"] == v[5]
    assert "bumps aiter v0.1.22 → v0.1.21.post2" in st["message"] and "moves back" in st["message"]
    assert "fix bisection" in st["message"] and "pin-bump" in st["flags"]


# ------------------------------------------- issue 38: the build reads the pin, not the checkout

BUILD_FROM_PIN = """\
import re, shlex, subprocess, sys
vllm, aiter_repo, aiter_tree, ck_repo = sys.argv[1:5]
def text(path):
    try:
        return open(path).read()
    except OSError:
        return ""
ref = None
for line in text(vllm + "/docker/Dockerfile.rocm_base").splitlines():  # as vLLM's ROCm base image: the ARG
    m = re.match(r"ARG (.*)", line)
    for tok in shlex.split(m.group(1), comments=True) if m else []:
        if tok.startswith("AITER_BRANCH=") and tok.split("=", 1)[1]:
            ref = tok.split("=", 1)[1]
for line in text(vllm + "/requirements/rocm.txt").splitlines():  # as pip: a version, or a direct reference
    m = re.match(r"amd-aiter\\s*==\\s*(\\S+)", line) or re.match(r"amd-aiter\\s*@\\s*git\\+\\S+@([0-9a-f]+)", line)
    if m:
        ref = m.group(1) if "@" in line else "v" + m.group(1)
bug = subprocess.run(["git", "-C", aiter_repo, "show", ref + ":bug.txt"], capture_output=True, text=True).stdout
# aiter's composable_kernel, as `git submodule update` takes it: the gitlink in the aiter tree's index
ls = subprocess.run(["git", "-C", aiter_tree, "ls-files", "-s", "3rdparty/composable_kernel"], capture_output=True,
                    text=True).stdout.split()
ck = subprocess.run(["git", "-C", ck_repo, "show", ls[1] + ":bug.txt"], capture_output=True,
                    text=True).stdout if len(ls) > 1 and ck_repo != "-" else ""
open(vllm + "/built.txt", "w").write("aiter " + ref + " bug " + bug.strip() + " ck " + ck.strip() + "\\n")
"""

CHECK_BUILT = """\
import sys
built = open(sys.argv[1] + "/built.txt").read()
sys.exit(1 if "bug 1" in built or "ck 1" in built else 0)
"""


def built_recipe(tmp_path: Path, vllm: Path, aiter: Path, ck: Path | None = None) -> Path:
    """The recipe of :func:`recipe`, but the aiter (and composable_kernel) the check sees is what a
    build step installed from the vLLM tree's pin -- never the aiter worktree's checkout."""
    r = recipe(tmp_path, vllm, aiter, ck)
    data = yaml.safe_load(r.read_text())
    (tmp_path / "build.py").write_text(BUILD_FROM_PIN)
    (tmp_path / "check_built.py").write_text(CHECK_BUILT)
    data["server"] = {"build_command": [sys.executable, str(tmp_path / "build.py"), "{source:vllm}", str(aiter),
                                       "{source:aiter}", str(ck) if ck else "-"]}
    data["reproducer"]["command"] = [sys.executable, str(tmp_path / "check_built.py"), "{source:vllm}"]
    r.write_text(yaml.safe_dump(data))
    return r


@pytest.mark.parametrize("pin_file", ["docker", "requirements"])
def test_the_descent_builds_what_the_rewritten_pin_names(tmp_path, kit, starts_file, pin_file) -> None:
    """Issue 38's new-user input: v5 only moves the aiter pin, a6 is bad, and the build reads the aiter
    ref from the pin in the vLLM tree (the Dockerfile ARG; or the requirements line, which pip reads).
    Each descent candidate's holding tree has the pin set to that candidate's commit, so the build
    builds it: a6 is named, and the report shows the rewritten line."""
    a = aiter_repo(kit, tmp_path / "aiter")
    v = vllm_repo(kit, tmp_path / "vllm", pin_file=pin_file)
    p, res, md = run(kit, tmp_path, built_recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter"), v[0], v[9])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert [s["component"] for s in res["stages"]] == ["vllm", "aiter"], res.get("status")
    st2 = res["stages"][1]
    assert (st2["first_bad"]["ref"], st2["last_good"]["ref"]) == (a[6], a[5]), st2["message"]
    fb = next(pr for pr in st2["probes"] if pr["candidate"]["ref"] == a[6])
    [row] = fb["extra"]["pins_rewritten"]
    path = "docker/Dockerfile.rocm_base" if pin_file == "docker" else "requirements/rocm.txt"
    assert row["path"] == path and a[6] in row["after"], row
    if pin_file == "docker":
        assert row["before"] == f'ARG AITER_BRANCH="{NEW_TAG}"' and row["after"] == f'ARG AITER_BRANCH="{a[6]}"'
    else:
        assert row["before"] == "amd-aiter==0.1.22" and row["after"].startswith("amd-aiter @ git+file://")
    plain = md.replace("\\_", "_")  # the report escapes Markdown
    assert "Built with the pin set to the candidate" in md and f"{path}:" in plain and a[6] in md


def test_a_gitlink_the_build_reads_from_the_index_is_set_to_the_candidate(tmp_path, kit, starts_file) -> None:
    """The submodule member: aiter a6 only moves its composable_kernel gitlink; the build takes ck
    from the gitlink in the aiter tree's index (``git submodule update``). Each ck candidate's aiter
    tree has the gitlink set to it: ck c4 is named, two levels down."""
    ck = tmp_path / "ck"
    c = ck_repo(kit, ck)
    a = aiter_repo(kit, tmp_path / "aiter", bug_at=None, gitlinks={0: c[1], 6: c[7]})
    v = vllm_repo(kit, tmp_path / "vllm")
    p, res, md = run(kit, tmp_path, built_recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter", ck), v[0], v[9])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    names = [(s["component"], s["first_bad"]["ref"] if s["first_bad"] else None) for s in res["stages"]]
    assert names == [("vllm", v[5]), ("aiter", a[6]), ("composable_kernel", c[4])]
    fb = next(pr for pr in res["stages"][2]["probes"] if pr["candidate"]["ref"] == c[4])
    rows = fb["extra"]["pins_rewritten"]
    assert any(r["after"] == f"{CK_PATH} gitlink {c[4]}" for r in rows), rows


LOOP_CHECK = """\
import os, sys
def read(d, f):
    try:
        return open(os.path.join(d, f)).read()
    except OSError:
        return ""
vllm, aiter = sys.argv[1:3]
# the bug comes with aiter a6 on (its v.txt: outside aiter's runtime paths, so a6 still only moves a pin);
# the checkout's requirements/vllm.txt says the vLLM candidate itself (the pin substitution of issue 38)
sys.exit(1 if int(read(aiter, "v.txt").strip().lstrip("a") or 0) >= 6 else 0)
"""


def test_a_pin_loop_back_into_a_component_on_the_chain_is_said_and_keeps_the_culprits(tmp_path, kit) -> None:
    """Issue 41, item 15 (the kind: a descent whose next pin move leads into a component already on its
    chain): vLLM v5 only bumps the aiter pin, and aiter a6 only moves aiter's own pin of vLLM
    (``requirements/vllm.txt``: ``vllm @ git+…@v2`` -> ``@v7``). Before: the descent went back into vLLM
    with vLLM held at v5 and ended "boundary-failed", hiding v5 and a6. Now: v5 and a6 are named on the
    chain, the aiter stage says the loop, nothing is descended twice."""
    v = vllm_repo(kit, tmp_path / "vllm")
    old, new = v[2], v[7]
    path = init(kit, tmp_path / "aiter")
    a = []
    for i in range(10):
        pin = new if i >= 6 else old
        files = {"v.txt": f"a{i}\n", "requirements/vllm.txt": f"vllm @ git+https://github.com/vllm-project/vllm.git@{pin}\n"}
        if i != 6:
            files["aiter/ops.py"] = f"X = {i}\n"
        a.append(commit(kit, path, f"{'Pin vLLM' if i == 6 else 'aiter change'} {i} (#{4100 + i})", files))
    kit.git(path, "tag", OLD_TAG, a[2])
    kit.git(path, "tag", NEW_TAG, a[9])
    r = recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter")
    (tmp_path / "check.py").write_text(LOOP_CHECK)  # after recipe(), which writes CHECK
    p, res, md = run(kit, tmp_path, r, v[0], v[9])
    out = p.stdout + p.stderr
    assert p.returncode in (0, 3) and "Traceback" not in out, out
    stages = res["stages"]
    assert [s["component"] for s in stages] == ["vllm", "aiter"], [(s["component"], s["status"]) for s in stages]
    assert stages[0]["first_bad"]["ref"] == v[5] and stages[1]["first_bad"]["ref"] == a[6]
    assert "vllm is already on the descent chain (vllm -> aiter -> vllm): a pin loop" in stages[1]["message"]
    assert "boundary-failed" not in (res["status"], stages[-1]["status"])
    roles = [(c["role"], c["component"], c["first_bad"]["ref"]) for c in res["chain"]]
    assert roles[0] == ("vehicle", "vllm", v[5]) and roles[-1][1:] == ("aiter", a[6]), roles
    assert "pin loop" in md


def test_a_pin_file_too_large_to_read_is_named_before_any_probe(tmp_path, kit, starts_file) -> None:
    """Issue 41, item 15 (the kind: a candidate's content read whole, whatever its size): the bad end
    commits a 2 MB ``requirements/huge.txt``. Before: every pin file was read whole (a 200 MB one
    took 5.3x its size in memory). Now its size is asked first and a file over
    ``MAX_PIN_FILE_BYTES`` is never read: the run stops as on bad input (exit 2) naming the file, the
    commit and the sizes, before any probe (nothing to lose, nothing recorded)."""
    aiter_repo(kit, tmp_path / "aiter")
    v = vllm_repo(kit, tmp_path / "vllm")
    huge = "# " + "x" * 78 + "\n"
    v.append(commit(kit, tmp_path / "vllm", "Add a huge requirements file (#57000)",
                    {"requirements/huge.txt": huge * (2 * 1024 * 1024 // len(huge)), "v.txt": "v10\n",
                     "vllm/attention.py": "X = 10\n"}))
    p, res, md = run(kit, tmp_path, recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter"), v[0], v[10])
    out = p.stdout + p.stderr
    assert p.returncode == 2 and "Traceback" not in out, out
    assert f"requirements/huge.txt at {v[10][:12]} is 2,097,090 bytes; a pin file is read up to 1,048,576 bytes" \
        in out, out
    assert kit.read_starts(starts_file) == [] and not res
