"""Issue 40: a commit stage over per-commit prebuilt wheels probes without a source build.

A real local index (pytest-httpserver) in vLLM's per-commit layout -- ``/wheels/<full sha>/`` is a
PEP 503/691 root whose ``toypkg/`` page lists that commit's wheel (version ``0.1.devN+g<sha>``, as
vLLM's ``0.11.1rc6.dev16+g933cdea44``) -- over a real git history whose ``toypkg`` answers wrong from
commit k. ``build.py`` (the recipe's source build) writes a line per run to a file the sandbox lets
it write, so a test sees every source build.

Kind: *a candidate that has a prebuilt artefact of its own commit*. Members: every commit has a
wheel (no source build at all); some commits, the culprit among them, have none (those and only
those are built from source, and the probe says so); the index unreachable (an error, never a source
build in its place); a recipe that asks what a wheel cannot carry (the patch stack; a component's
wheels), refused with the field named.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pytest_httpserver import HTTPServer

from tests.releases.test_release_runs import ROOT, wheel

CHECK = ("import os, sys, toypkg; print('toypkg', toypkg.VERSION, 'at', toypkg.__file__); "
         "print('aiter-jit', os.environ.get('AITER_JIT_DIR')); "
         "sys.exit(0 if toypkg.answer() == 42 else 1)")
BUILD = ("import os, sys\n"
         "with open(os.path.join(os.environ['BUILDS_DIR'], 'builds.txt'), 'a') as fh:\n"
         "    fh.write(open('VERSION').read().strip() + '\\n')\n"
         "print('built from source')\n")


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def history(path: Path, n: int, k: int) -> list[str]:
    """``n`` commits of ``toypkg`` (source tree: ``toypkg/__init__.py``, ``build.py``, ``VERSION``); wrong from ``k``."""
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    (path / "build.py").write_text(BUILD)
    shas = []
    for i in range(n):
        (path / "toypkg").mkdir(exist_ok=True)
        (path / "toypkg" / "__init__.py").write_text(_module(i, k))
        (path / "VERSION").write_text(f"c{i}\n")
        _git(path, "add", "-A")
        _git(path, "commit", "-q", "-m", f"change {i}")
        shas.append(_git(path, "rev-parse", "HEAD"))
    return shas


def _module(i: int, k: int) -> str:
    return f"VERSION = 'c{i}'\n\ndef answer():\n    return {41 if i >= k else 42}\n"


def publish_commits(httpserver: HTTPServer, shas: list[str], k: int, missing: set[int],
                    serves: dict[int, list[int]] | None = None, label: dict[int, int] | None = None,
                    dist: dict[int, str] | None = None) -> str:
    """Each commit's wheel under ``/wheels/<sha>/toypkg/`` (JSON simple API); ``missing`` commits: 404;
    ``serves``: commit -> the commits whose wheels its page lists instead (a stale copy, an alias);
    ``label``: commit -> hex digits of its ``+g`` label (default 9, vLLM's); ``dist``: commit -> the
    distribution its wheel is of (default ``toypkg``)."""
    import hashlib

    blobs = {}
    for i, sha in enumerate(shas):
        name, data = wheel((dist or {}).get(i, "toypkg"), f"0.1.dev{i}+g{sha[:(label or {}).get(i, 9)]}",
                           {"toypkg/__init__.py": _module(i, k)})
        httpserver.expect_request(f"/files/{sha}/{name}").respond_with_data(data)
        blobs[i] = {"filename": name, "url": f"/files/{sha}/{name}",
                    "hashes": {"sha256": hashlib.sha256(data).hexdigest()}}
    for i, sha in enumerate(shas):
        page = f"/wheels/{sha}/toypkg/"
        if i in missing:
            httpserver.expect_request(page).respond_with_data("Not Found", status=404)
            continue
        files = [blobs[j] for j in (serves or {}).get(i, [i])]
        httpserver.expect_request(page).respond_with_data(
            json.dumps({"meta": {"api-version": "1.1"}, "name": "toypkg", "files": files}),
            content_type="application/vnd.pypi.simple.v1+json")
    return httpserver.url_for("/wheels/") + "{commit}/"


def recipe(tmp: Path, repo: Path, shas: list[str], index: str, **extra) -> Path:
    data = {"name": "toy-commits",
            "source": {"kind": "git", "repo": str(repo), "wheels": {"index": index, "package": "toypkg"}},
            "server": {"build_command": [sys.executable, "build.py"]},
            "reproducer": {"kind": "command", "command": ["python", "-c", CHECK], "command_timeout_s": 60},
            "regress": "command",
            "bisect": {"good": shas[0], "bad": shas[-1]}, "report": {"dir": str(tmp / "out")},
            "env_passthrough": ["BUILDS_DIR"], **extra}
    p = tmp / "r.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def run(tmp: Path, r: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    builds = tmp / "builds"
    builds.mkdir(exist_ok=True)
    env = dict(os.environ, BISECTBOT_CACHE=str(tmp / "cache"), BUILDS_DIR=str(builds),
               BISECTBOT_SANDBOX_WRITABLE=str(builds), **extra_env)
    return subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp / "state"), "run", str(r), *args],
                          capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)


def source_builds(tmp: Path) -> list[str]:
    f = tmp / "builds" / "builds.txt"
    return f.read_text().split() if f.is_file() else []


def probes(tmp: Path) -> list[dict]:
    return json.loads((tmp / "out" / "result.json").read_text())["stages"][-1]["probes"]


def test_every_commit_with_a_wheel_is_probed_without_a_source_build(httpserver: HTTPServer, tmp_path: Path) -> None:
    n, k = 12, 7
    shas = history(tmp_path / "repo", n, k)
    r = recipe(tmp_path, tmp_path / "repo", shas, publish_commits(httpserver, shas, k, set()))
    p = run(tmp_path, r)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    st = json.loads((tmp_path / "out" / "result.json").read_text())["stages"][-1]
    assert st["status"] == "culprit" and st["first_bad"]["ref"] == shas[k]
    assert source_builds(tmp_path) == [], "a commit with a wheel is never built from source"
    said = [pr["extra"].get("built_from", "") for pr in probes(tmp_path)]
    assert said and all(s.startswith("prebuilt wheel toypkg-0.1.dev") for s in said), said
    assert "install prebuilt wheel toypkg-0.1.dev" in p.stderr
    # the wheel's module ran, not a worktree's: the command printed where it imported toypkg from
    jit = {}
    for pr in probes(tmp_path):
        out = pr["extra"].get("stdout_tail", "")
        assert "/envs/toypkg-" in out and "/site-packages/toypkg/__init__.py" in out, out
        jit[pr["candidate"]["ref"]] = next(ln.split()[1] for ln in out.splitlines() if ln.startswith("aiter-jit "))
    # each wheel's environment is resolved at its install: no two commits' wheels share aiter's JIT modules
    # (hostile pass: every wheel candidate was given one aiter directory)
    assert len(set(jit.values())) == len(jit) > 2 and "None" not in jit.values(), jit
    # the report's Reproduce section installs the culprit's wheel as the bot did, no checkout and build
    # (new-user pass: it gave source-build steps for wheel-installed ends)
    report = (tmp_path / "out" / "report.md").read_text()
    repro = report[report.index("### Reproduce"):]
    assert f"toypkg==0.1.dev{k}+g{shas[k][:9]}" in repro and "pip install --only-binary :all:" in repro, repro[:3000]
    assert f"{shas[k]}/" in repro and "git checkout --detach" not in repro.split("**With bisectbot")[0], repro[:3000]
    assert f"install the prebuilt wheel of {shas[k - 1]}" in repro, repro[:3000]


@pytest.mark.parametrize("missing", [{7}, {3, 6, 7, 8}])
def test_a_commit_without_a_wheel_is_built_from_source_and_says_so(httpserver: HTTPServer, tmp_path: Path,
                                                                  missing: set[int]) -> None:
    n, k = 12, 7
    shas = history(tmp_path / "repo", n, k)
    r = recipe(tmp_path, tmp_path / "repo", shas, publish_commits(httpserver, shas, k, missing))
    p = run(tmp_path, r)
    assert p.returncode in (0, 3), p.stdout[-2000:] + p.stderr[-3000:]
    st = json.loads((tmp_path / "out" / "result.json").read_text())["stages"][-1]
    assert st["status"] == "culprit" and st["first_bad"]["ref"] == shas[k]
    probed = {pr["candidate"]["ref"]: pr["extra"].get("built_from", "") for pr in probes(tmp_path)}
    built = set(source_builds(tmp_path))
    for i, sha in enumerate(shas):
        if sha not in probed:
            continue
        if i in missing:
            assert probed[sha].startswith("source build (") and "has no toypkg wheels for this commit" in probed[sha]
            assert f"c{i}" in built
        else:
            assert probed[sha].startswith("prebuilt wheel"), (i, probed[sha])
            assert f"c{i}" not in built
    assert "no prebuilt wheel (" in p.stderr and "building from source" in p.stderr
    # the culprit c7 came from source: with a wheel predecessor the pair differs beyond the commit -- said,
    # and never blamed (exit 3); with both built from source the culprit stands
    st_flags = st.get("flags") or []
    if 6 in missing:
        assert "mixed-builds" not in st_flags and p.returncode == 0
    else:
        assert "mixed-builds" in st_flags and "differ beyond the commit" in st["message"], st


@pytest.mark.parametrize("serves,built", [
    ({5: [4], 6: [4]}, {5, 6}),  # stale copies of c4's wheel on c5's and c6's pages (hostile pass)
    ({i: [0, i] for i in range(1, 12)}, set()),  # every page lists c0's wheel beside its own: its own is taken
    ({7: [8]}, {7}),  # the culprit's page serves the next commit's wheel
])
def test_a_wheel_of_another_commit_is_never_installed_as_this_one(httpserver: HTTPServer, tmp_path: Path,
                                                                  serves: dict, built: set) -> None:
    """Kind: *an artefact a commit's page serves that is not that commit's build*. A wheel whose version does
    not name the commit (+g<sha>) is no build of it: the commit is built from source (said), and the
    culprit is the commit that changed."""
    n, k = 12, 7
    shas = history(tmp_path / "repo", n, k)
    r = recipe(tmp_path, tmp_path / "repo", shas, publish_commits(httpserver, shas, k, set(), serves))
    p = run(tmp_path, r)
    assert p.returncode in (0, 3), p.stdout[-2000:] + p.stderr[-3000:]
    st = json.loads((tmp_path / "out" / "result.json").read_text())["stages"][-1]
    assert st["status"] == "culprit" and st["first_bad"]["ref"] == shas[k], st["message"]
    probed = {pr["candidate"]["ref"]: pr["extra"].get("built_from", "") for pr in probes(tmp_path)}
    for i in built & {i for i, sha in enumerate(shas) if sha in probed}:
        assert probed[shas[i]].startswith("source build (") and "none naming commit" in probed[shas[i]], probed
    for i, sha in enumerate(shas):
        if sha in probed and i not in built:
            assert f"+g{sha[:9]}" in probed[sha], (i, probed[sha])


def _collide_head(repo: Path) -> tuple[str, str]:
    """Replace ``repo``'s last commit by one of the same tree and parent whose name shares its first 7 hex
    digits with another commit written beside it (unreachable, as a pushed-over or other-branch commit is):
    a birthday search over commit messages, ~50,000 SHA-1s. Returns ``(new head, the other commit)``."""
    import hashlib

    tree, parent = _git(repo, "rev-parse", "HEAD^{tree}"), _git(repo, "rev-parse", "HEAD~1")

    def body(msg: str) -> bytes:
        who = "t <t@example.com> 1700000000 +0000"
        return f"tree {tree}\nparent {parent}\nauthor {who}\ncommitter {who}\n\n{msg}\n".encode()

    def name(b: bytes) -> str:
        return hashlib.sha1(b"commit %d\0" % len(b) + b).hexdigest()

    seen = {name(body(f"the bad end {j}"))[:7]: j for j in range(50_000)}
    k = 0
    while name(body(f"another commit {k}"))[:7] not in seen:
        k += 1
    head, other = body(f"the bad end {seen[name(body(f'another commit {k}'))[:7]]}"), body(f"another commit {k}")
    shas = [subprocess.run(["git", "hash-object", "-t", "commit", "-w", "--stdin"], cwd=repo, input=b, check=True,
                           capture_output=True).stdout.decode().strip() for b in (head, other)]
    assert shas == [name(head), name(other)] and shas[0][:7] == shas[1][:7] and shas[0] != shas[1]
    _git(repo, "update-ref", "refs/heads/main", shas[0])
    return shas[0], shas[1]


@pytest.mark.parametrize("digits,from_wheel", [(7, False), (9, True)])
def test_a_label_that_names_two_commits_is_no_build_of_either(httpserver: HTTPServer, tmp_path: Path,
                                                             digits: int, from_wheel: bool) -> None:
    """Kind: *an abbreviated commit name that stopped being unique* (git abbreviates to what is unique
    when the wheel is built; the repository grows). The bad end shares its first 7 hex digits with another
    commit of the repository: a ``+g<7 digits>`` label names both -- the bad end is built from source, said --
    and a ``+g<9 digits>`` one names it alone (hostile pass: the 7-digit label was taken)."""
    n, k = 8, 5
    shas = history(tmp_path / "repo", n, k)
    shas[-1], other = _collide_head(tmp_path / "repo")
    r = recipe(tmp_path, tmp_path / "repo", shas,
               publish_commits(httpserver, shas, k, set(), label={n - 1: digits}))
    p = run(tmp_path, r)
    assert p.returncode in (0, 3), p.stdout[-2000:] + p.stderr[-3000:]
    st = json.loads((tmp_path / "out" / "result.json").read_text())["stages"][-1]
    assert st["status"] == "culprit" and st["first_bad"]["ref"] == shas[k], st["message"]
    said = {pr["candidate"]["ref"]: pr["extra"].get("built_from", "") for pr in probes(tmp_path)}[shas[-1]]
    if from_wheel:
        assert said.startswith("prebuilt wheel") and f"+g{shas[-1][:9]}" in said, said
    else:
        assert said.startswith("source build (") and "no other commit of the repository" in said, said
        assert f"c{n - 1}" in source_builds(tmp_path)


def test_a_wheel_of_another_distribution_on_the_page_is_not_the_packages(httpserver: HTTPServer,
                                                                        tmp_path: Path) -> None:
    """Kind: *a file the package's page lists that is not a build of the package*: a wheel of another
    distribution (``nottoypkg``) naming the commit is no ``toypkg`` build of it (hostile pass)."""
    n, k = 8, 5
    shas = history(tmp_path / "repo", n, k)
    r = recipe(tmp_path, tmp_path / "repo", shas,
               publish_commits(httpserver, shas, k, set(), dist={n - 1: "nottoypkg"}))
    p = run(tmp_path, r)
    assert p.returncode in (0, 3), p.stdout[-2000:] + p.stderr[-3000:]
    said = {pr["candidate"]["ref"]: pr["extra"].get("built_from", "") for pr in probes(tmp_path)}[shas[-1]]
    assert said.startswith("source build (") and "as a toypkg wheel" in said, said
    assert f"c{n - 1}" in source_builds(tmp_path)


def test_a_source_built_commit_whose_python_is_a_shim_under_the_veiled_home_says_so(httpserver: HTTPServer,
                                                                                     tmp_path: Path) -> None:
    """New-user re-check: ``python`` is the wheel environment's on a wheel candidate and the host PATH's on a
    source-built one -- there a shim under the home, which the sandbox veils. The ends (wheels) ran, so no
    check stopped the run; the source-built commit's skip now says why and what to name instead."""
    n, k = 8, 5
    shas = history(tmp_path / "repo", n, k)
    home = tmp_path / "home"
    (home / ".tool" / "shims").mkdir(parents=True)
    (home / ".tool" / "libexec").mkdir()
    tool = home / ".tool" / "libexec" / "python"
    tool.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    shim = home / ".tool" / "shims" / "python"
    shim.write_text(f"#!/bin/sh\nexec {tool} \"$@\"\n")
    for f in (tool, shim):
        f.chmod(0o755)
    r = recipe(tmp_path, tmp_path / "repo", shas, publish_commits(httpserver, shas, k, {3, 4, 5}))
    p = run(tmp_path, r, HOME=str(home), PATH=f"{shim.parent}:{os.environ.get('PATH', '')}")
    said = [pr["reason"] for pr in probes(tmp_path) if pr["extra"].get("built_from", "").startswith("source build")]
    assert said, p.stdout[-2000:] + p.stderr[-3000:]
    assert all(f"{shim} lies under {home}, which the candidate's sandbox veils" in x for x in said), said


def test_an_unreachable_index_is_an_error_never_a_source_build(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    shas = history(tmp_path / "repo", 6, 3)
    r = recipe(tmp_path, tmp_path / "repo", shas, f"http://127.0.0.1:{port}/wheels/{{commit}}/")
    p = run(tmp_path, r)
    assert p.returncode not in (0, 1, 70), p.returncode
    assert source_builds(tmp_path) == []
    assert f"127.0.0.1:{port}" in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]


@pytest.mark.parametrize("extra,field", [
    ({"patches": ["vllm-sparse-mla-workspace"]}, "patches"),
    ({"source": {"kind": "git", "repo": "/x", "wheels": {"index": "https://w/{commit}/?token=x", "package": "p"}}},
     "source.wheels.index"),
    ({"bisect": {"components": {"aiter": {"kind": "git", "repo": "/x",
                                          "wheels": {"index": "https://w/{commit}/", "package": "amd-aiter"}}}}},
     "bisect.components.aiter.wheels"),
])
def test_what_a_wheel_cannot_carry_is_refused_with_its_field(tmp_path: Path, extra: dict, field: str) -> None:
    shas = ["a" * 40, "b" * 40]
    r = recipe(tmp_path, tmp_path / "repo", shas, "https://wheels.example/{commit}/", **extra)
    p = subprocess.run([sys.executable, "-m", "bisectbot", "recipe", "validate", str(r)], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 2, p.stdout + p.stderr
    assert field in p.stdout + p.stderr and "r.yaml:" in p.stdout + p.stderr
