"""Derived images: ``FROM <base>@<digest>`` + optional source overlay + patch stack.

How a build goes (:func:`build_image`):

1. The base is pinned by digest and introspected (:func:`bisectbot.components.image_info`)
   to find where ``vllm`` / ``aiter`` are installed and which commit they were built from.
2. The content-addressed tag ``bisectbot/<recipe>:<key>`` is computed from the base
   digest, the overlay (component + commit), the patch-stack hash, the recipe hash and
   the build command; an existing image with that tag is reused (``reused=True``).
3. The installed package trees are copied out of the base image (sources only: compiled
   ``.so`` files and byte code are left in the image) into a staging root that holds one
   directory per package (``ROOT/vllm``, ``ROOT/aiter``: the layout
   ``bisectbot.patches.apply_stack`` expects).
4. Overlay (optional): the files of the package directory that changed between the base's
   commit and the target commit are taken from a local git clone (GitPython) and written
   over the staged tree (deleted files removed). When compiled sources changed in that
   range (:data:`COMPILED_PATTERNS`), a python-only overlay would be a lie:
   :class:`FullSourceBuildRequired` is raised unless a ``build_command`` is given, in
   which case the whole tree at the target commit is copied into the image and the
   command runs there (``RUN``) at build time.
5. The patch stack is applied to the staged installed packages (host side, at build time,
   atomically, through the patch step); a required patch that does not apply fails the
   build with its :class:`bisectbot.errors.PatchError`.
6. Only the files that differ from the base go into the image (``COPY``), deletions are
   replayed, and labels record base digest, overlay commit, stack hash and recipe hash.
   The build log goes to ``log_dir/build-<key>.log``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from . import jsonio as _jsonio
from .components import container_labels, ensure_image, image_digest, image_info
from .confine import ConfinementError, confined, copy_confined, safe_extract
from .errors import BisectbotError, BuildError
from .recipe import slug
from .slots import file_lock

log = logging.getLogger(__name__)

LABEL_PREFIX = "org.bisectbot."
#: Paths whose change between two commits means a python-only overlay is not enough.
COMPILED_PATTERNS = (
    "*.c", "*.cc", "*.cpp", "*.cxx", "*.cu", "*.cuh", "*.hip", "*.h", "*.hpp", "*.pyx", "*.pxd",
    "CMakeLists.txt", "*.cmake", "setup.py", "setup.cfg", "pyproject.toml", "csrc/*", "*/csrc/*",
)
#: Files never copied out of the base image (compiled artefacts, byte code).
SKIP_FROM_IMAGE = ("*.so", "*.so.*", "*.pyc", "*.pyo", "*.a", "*.o", "*.hsaco", "*.co")
_MAX_STAGED_FILE = 8 * 1024 * 1024  # bytes; larger data files stay in the image untouched

PatchFn = Callable[[Path, dict[str, str]], list[dict[str, Any]]]
"""Patch step: ``(root, versions) -> per-patch records``. ``root`` holds one directory per
package (``root/vllm``, ``root/aiter``); ``versions`` maps a package to its version string.
Raises :class:`bisectbot.errors.PatchError` when a required patch does not apply."""


class FullSourceBuildRequired(BuildError):
    """Compiled sources changed between the base's commit and the target: python-only overlay refused."""

    def __init__(self, component: str, base: str, target: str, paths: list[str]):
        self.paths = paths
        shown = ", ".join(paths[:5]) + (f" (+{len(paths) - 5} more)" if len(paths) > 5 else "")
        super().__init__(
            f"full source build required: {component} {base[:12]}..{target[:12]} changes compiled sources "
            f"({shown}); give server.build_command in the recipe to build it, else the candidate is skip"
        )


@dataclass
class Overlay:
    """Sources of ``component`` (``vllm`` | ``aiter``) at ``commit`` from the clone ``repo``.

    ``package_path`` is the package directory inside the repository (default: the
    component name, ``vllm/`` and ``aiter/`` in the upstream repositories);
    ``base_commit`` overrides the commit read from the base image's version string.
    """

    component: str
    repo: Path
    commit: str
    package_path: str = ""
    base_commit: str | None = None

    @property
    def package(self) -> str:
        return self.component

    @property
    def path_in_repo(self) -> str:
        return (self.package_path or self.component).strip("/")


@dataclass
class BuildRequest:
    """What to build. ``base`` is an image reference (``host/repo@sha256:...`` preferred).
    ``stack_hash`` identifies the patch stack content (``""``: no patches), ``patch_ids`` the
    ids applied in order, ``patch_fn`` applies them (see :data:`PatchFn`)."""

    base: str
    recipe: str
    recipe_hash: str = ""
    overlay: Overlay | None = None
    patch_ids: Sequence[str] = ()
    stack_hash: str = ""
    patch_fn: PatchFn | None = None
    build_command: list[str] | None = None
    log_dir: Path | None = None
    #: a change under test (issue 42; :class:`bisectbot.change.Change`): applied after the patch
    #: stack, only to files under the staged package directories
    change: Any = None


@dataclass
class BuildResult:
    """A built (or reused) image. ``tag`` is ``bisectbot/<recipe>:<key>``; ``patches`` the
    per-patch records of the patch step (empty when reused: read them from the labels)."""

    tag: str
    key: str
    image_id: str
    reused: bool
    base_digest: str
    labels: dict[str, str] = field(default_factory=dict)
    log_path: str | None = None
    patches: list[dict[str, Any]] = field(default_factory=list)
    changed_files: list[str] = field(default_factory=list)
    deleted_files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------- helpers


def _matches(path: str, patterns: Sequence[str]) -> bool:
    name = PurePosixPath(path).name
    return any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(name, p) for p in patterns)


def compiled_changes(repo: Path, base_commit: str, target_commit: str) -> list[str]:
    """Paths matching :data:`COMPILED_PATTERNS` that differ between two commits (whole repo)."""
    return [p for p in changed_paths(repo, base_commit, target_commit) if _matches(p, COMPILED_PATTERNS)]


def changed_paths(repo: Path, a: str, b: str) -> list[str]:
    """Every path added, modified, deleted or renamed between commits ``a`` and ``b``."""
    import git

    r = git.Repo(str(repo))
    ca, cb = r.commit(resolve_commit(repo, a)), r.commit(resolve_commit(repo, b))
    out: set[str] = set()
    for d in ca.diff(cb):
        for p in (d.a_path, d.b_path):
            if p:
                out.add(p)
    return sorted(out)


def build_key(base_digest: str, overlay: Overlay | None, stack_hash: str, recipe_hash: str,
              build_command: list[str] | None, change: str = "") -> str:
    """16 hex characters of SHA-256 over what defines the derived image's content (``change``: the
    change's :meth:`bisectbot.change.Change.key`, ``""`` for none)."""
    ov = None
    if overlay is not None:
        ov = {"component": overlay.component, "commit": _full_commit(overlay), "path": overlay.path_in_repo}
    doc: dict[str, Any] = {"base": base_digest, "overlay": ov, "stack": stack_hash, "recipe": recipe_hash,
                           "build_command": build_command}
    if change:
        doc["change"] = change
    blob = json.dumps(doc, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def resolve_commit(repo: Path, ref: str) -> str:
    """Full SHA of ``ref`` in the clone ``repo``; :class:`BuildError` when it is not a commit there."""
    import git

    try:
        return git.Repo(str(repo)).git.rev_parse("--verify", "--quiet", f"{ref}^{{commit}}").strip()
    except (git.GitCommandError, git.NoSuchPathError, git.InvalidGitRepositoryError, ValueError):
        raise BuildError(f"commit {ref} not found in {repo} (fetch it, or check the clone)") from None


def _full_commit(ov: Overlay) -> str:
    return resolve_commit(ov.repo, ov.commit)


def _extract_package(client: Any, image: str, pkg_dir: str, dest: Path) -> None:
    """Copy ``pkg_dir`` out of ``image`` into ``dest/<basename>`` (sources only, see SKIP_FROM_IMAGE)."""
    import docker

    container = client.containers.create(image, entrypoint=["true"], command=[],
                                         labels=container_labels("extract"), network_disabled=True)
    try:
        stream, _ = container.get_archive(pkg_dir)
        buf = tempfile.TemporaryFile()  # a real vllm package with its .so files is ~1 GB: not in memory
        for chunk in stream:
            buf.write(chunk)
        buf.seek(0)
        with buf, tarfile.open(fileobj=buf) as tar:
            members = []
            for m in tar.getmembers():
                if m.issym() or m.islnk() or m.isdev():
                    continue
                if m.isfile() and (_matches(m.name, SKIP_FROM_IMAGE) or m.size > _MAX_STAGED_FILE):
                    continue
                if "__pycache__" in PurePosixPath(m.name).parts:
                    continue
                if PurePosixPath(m.name).is_absolute() or ".." in PurePosixPath(m.name).parts:
                    continue
                members.append(m)
            safe_extract(tar, dest, members)  # tarfile's data filter: nothing lands outside dest
    except ConfinementError as e:
        raise BuildError(f"cannot copy {pkg_dir} out of {image}: {e}") from None
    except docker.errors.APIError as e:
        raise BuildError(f"cannot copy {pkg_dir} out of {image}: {e.explanation or e}") from None
    finally:
        container.remove(force=True)


def _file_digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _tree(root: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of every source file under ``root`` (byte code left out)."""
    return {str(p.relative_to(root)): _file_digest(p) for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")}


def _apply_overlay(ov: Overlay, base_commit: str, stage_pkg: Path) -> list[str]:
    """Write the package files changed between ``base_commit`` and ``ov.commit`` into ``stage_pkg``."""
    import git

    repo = git.Repo(str(ov.repo))
    ca, cb = repo.commit(resolve_commit(ov.repo, base_commit)), repo.commit(_full_commit(ov))
    prefix = ov.path_in_repo + "/"
    touched = []
    for d in ca.diff(cb):
        try:
            if d.a_path and d.a_path.startswith(prefix) and (d.deleted_file or d.renamed_file):
                target = confined(stage_pkg, d.a_path[len(prefix):], "overlay path")
                if target.exists() or target.is_symlink():
                    target.unlink()
                touched.append(d.a_path)
            if d.b_path and d.b_path.startswith(prefix) and not d.deleted_file:
                target = confined(stage_pkg, d.b_path[len(prefix):], "overlay path")
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.is_symlink():
                    target.unlink()  # replaced, never written through
                # a symlink blob (mode 120000) is written as a plain file holding its target path
                target.write_bytes(d.b_blob.data_stream.read())
                touched.append(d.b_path)
        except ConfinementError as e:
            raise BuildError(f"overlay {ov.component}@{ov.commit}: {e}") from None
    return touched


def stack_file(stack_dir: Path | None) -> Path | None:
    """``stack.yaml`` of a stack directory (or the file itself); None means the default stack."""
    if stack_dir is None:
        return None
    p = Path(stack_dir)
    return p if p.is_file() else p / "stack.yaml"


def _default_patch_fn(stack_dir: Path | None, ids: Sequence[str]) -> PatchFn:
    """The project's patch step (``bisectbot.patches.apply_stack``) bound to a stack and ids.

    The returned records are ``StackApplication.to_dict()['patches']`` (state, variant,
    SHA-256 before/after per patch)."""

    def run(root: Path, versions: dict[str, str]) -> list[dict[str, Any]]:
        try:
            from . import patches as patches_mod  # type: ignore[attr-defined]
        except ImportError:
            raise BuildError("patch stack requested but bisectbot.patches is not available") from None
        stack = patches_mod.load_stack(stack_file(stack_dir))
        pkg_versions = {k: v for k, v in versions.items() if k in ("vllm", "aiter") and v}
        app = patches_mod.apply_stack(stack, list(ids), root, pkg_versions)
        return list(app.to_dict().get("patches") or [])

    return run


# ---------------------------------------------------------------------- build


def build_image(req: BuildRequest, client: Any = None, ledger: Any = None) -> BuildResult:
    """Build (or reuse) the derived image for ``req``. See the module docstring.

    Raises :class:`FullSourceBuildRequired`, :class:`BuildError` (docker build failed, overlay
    commit unknown, base without the package) or :class:`bisectbot.errors.PatchError`.
    """
    import docker

    if client is None:
        try:
            client = docker.from_env()
        except docker.errors.DockerException as e:
            raise BisectbotError(f"cannot reach the Docker daemon: {e}") from None
    base_digest = image_digest(req.base, client)
    base_ref = req.base
    if "@" not in base_ref and base_digest.startswith("sha256:"):
        name = base_ref.rsplit(":", 1)[0] if ":" in base_ref.rsplit("/", 1)[-1] else base_ref
        img = ensure_image(req.base, client)
        if any(rd.startswith(name + "@") for rd in img.attrs.get("RepoDigests") or []):
            base_ref = f"{name}@{base_digest}"
    key = build_key(base_digest, req.overlay, req.stack_hash, req.recipe_hash, req.build_command,
                    req.change.key() if req.change is not None else "")
    tag = f"bisectbot/{slug(req.recipe).lower()}:{key}"
    labels = {
        LABEL_PREFIX + "base": req.base,
        LABEL_PREFIX + "base-digest": base_digest,
        LABEL_PREFIX + "overlay": f"{req.overlay.component}@{_full_commit(req.overlay)}" if req.overlay else "",
        LABEL_PREFIX + "stack-hash": req.stack_hash,
        LABEL_PREFIX + "patches": ",".join(req.patch_ids),
        LABEL_PREFIX + "recipe": req.recipe,
        LABEL_PREFIX + "recipe-hash": req.recipe_hash,
        LABEL_PREFIX + "build-key": key,
    }
    if req.change is not None:
        labels[LABEL_PREFIX + "change"] = req.change.sha256
    reused = _existing(client, tag, key, base_digest)
    if reused is not None:
        return reused
    # Two probes (parallel plan) may want the same image: build it once, per host.
    with file_lock(f"build-{key}", timeout_s=3600):
        reused = _existing(client, tag, key, base_digest)
        if reused is not None:
            return reused
        return _build_locked(req, client, ledger, base_ref, base_digest, key, tag, labels)


def _existing(client: Any, tag: str, key: str, base_digest: str) -> BuildResult | None:
    import docker

    try:
        existing = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None
    if (existing.labels or {}).get(LABEL_PREFIX + "build-key") != key:
        return None
    log.info("reusing %s", tag)
    labels = dict(existing.labels or {})
    try:
        patches = _jsonio.loads(labels.get(LABEL_PREFIX + "patch-records", "[]"))
    except ValueError:
        patches = []
    return BuildResult(tag, key, existing.id, True, base_digest, labels, patches=patches)


def _build_locked(req: BuildRequest, client: Any, ledger: Any, base_ref: str, base_digest: str, key: str,
                  tag: str, labels: dict[str, str]) -> BuildResult:
    log_path: Path | None = None
    if req.log_dir:
        Path(req.log_dir).mkdir(parents=True, exist_ok=True)
        log_path = Path(req.log_dir) / f"build-{key}.log"
    info = image_info(base_ref, ledger=ledger, client=client)
    versions = {p: (info.get(p) or {}).get("version") or "" for p in ("vllm", "aiter")}

    with tempfile.TemporaryDirectory(prefix="bisectbot-build-") as tmp:
        tmpd = Path(tmp)
        orig, work, ctx = tmpd / "orig", tmpd / "work", tmpd / "ctx"
        for d in (orig, work, ctx):
            d.mkdir()
        packages = set()
        if req.overlay:
            packages.add(req.overlay.package)
        if req.patch_ids:
            packages.update(p for p in ("vllm", "aiter") if (info.get(p) or {}).get("dir"))
        change_pkgs: tuple[str, ...] = ()
        if req.change is not None:  # the packages the change touches that this image has (issue 42)
            paths = req.change.files()
            tops = {PurePosixPath(p).parts[0] for p in paths}
            change_pkgs = tuple(sorted(p for p in tops & {"vllm", "aiter"} if (info.get(p) or {}).get("dir")))
            compiled = [p for p in paths if _matches(p, COMPILED_PATTERNS)]
            if compiled and not req.build_command:
                raise BuildError(f"the change touches compiled sources ({', '.join(compiled[:5])}): an image "
                                 "needs a source build (server.build_command) to test it")
            if not change_pkgs:
                raise BuildError(f"the change touches no package this image has ({', '.join(sorted(tops))}; "
                                 "the image has " + ", ".join(p for p in ("vllm", "aiter")
                                                             if (info.get(p) or {}).get("dir")) + ")")
            packages.update(change_pkgs)
        pkg_dirs: dict[str, str] = {}
        for p in sorted(packages):
            d = (info.get(p) or {}).get("dir")
            if not d:
                raise BuildError(f"base image {req.base} has no installed '{p}' package to overlay or patch")
            pkg_dirs[p] = d
            _extract_package(client, base_ref, d, orig)
            extracted = orig / PurePosixPath(d).name
            if extracted.name != p:
                extracted.rename(orig / p)
        shutil.copytree(orig, work, dirs_exist_ok=True)

        full_src: Path | None = None
        if req.overlay:
            ov = req.overlay
            base_commit = ov.base_commit or (info.get(ov.component) or {}).get("commit")
            if not base_commit:
                raise BuildError(
                    f"base image's {ov.component} version {versions.get(ov.component)!r} carries no commit: "
                    "pass the base commit explicitly (--base-commit) for an overlay"
                )
            target = _full_commit(ov)
            compiled = compiled_changes(ov.repo, base_commit, target)
            if compiled and not req.build_command:
                raise FullSourceBuildRequired(ov.component, base_commit, target, compiled)
            if compiled:
                full_src = ctx / "src"
                _git_archive(ov.repo, target, full_src)
            else:
                _apply_overlay(ov, base_commit, work / ov.package)
            versions[f"{ov.component}_commit"] = target

        records: list[dict[str, Any]] = []
        if req.patch_ids:
            if req.patch_fn is None:
                raise BuildError("patch ids given without a patch step")
            # Full source build: patch the source tree that the build command installs
            # (ROOT/<package> of a checkout); else the staged installed packages.
            root = full_src if full_src is not None else work
            records = req.patch_fn(root, {k: v for k, v in versions.items() if v})
        if req.change is not None:
            from .change import apply_change

            applied = apply_change(req.change, full_src if full_src is not None else work, only_under=change_pkgs)
            labels[LABEL_PREFIX + "change-applied"] = json.dumps(applied.to_dict())[:4000]

        before, after = _tree(orig), _tree(work)
        changed = sorted(p for p, h in after.items() if before.get(p) != h)
        deleted = sorted(p for p in before if p not in after)
        files = ctx / "files"
        for rel in changed:
            pkg, _, rest = rel.partition("/")
            try:  # never follow a symlink out of the work tree, never write outside the build context
                copy_confined(work / rel, files, str(PurePosixPath(pkg_dirs[pkg].lstrip("/")) / rest))
            except ConfinementError as e:
                raise BuildError(f"build context: {rel}: {e}") from None
        deleted_abs = [str(PurePosixPath(pkg_dirs[r.partition("/")[0]]) / r.partition("/")[2]) for r in deleted]
        changed_abs = [str(PurePosixPath(pkg_dirs[r.partition("/")[0]]) / r.partition("/")[2]) for r in changed]
        lines = [f"FROM {base_ref}"]
        if changed:
            lines.append("COPY files/ /")
        if deleted_abs:
            lines.append("RUN " + json.dumps(["python3", "-c",
                         f"import os\nfor p in {deleted_abs!r}:\n    os.path.exists(p) and os.remove(p)"]))
        if full_src is not None and req.build_command:
            lines.append(f"COPY src/ /opt/bisectbot/src/{req.overlay.component}/")  # type: ignore[union-attr]
            lines.append(f"WORKDIR /opt/bisectbot/src/{req.overlay.component}")  # type: ignore[union-attr]
            lines.append("RUN " + json.dumps(list(req.build_command)))
            workdir = (ensure_image(base_ref, client).attrs.get("Config") or {}).get("WorkingDir") or "/"
            lines.append(f"WORKDIR {workdir}")
        (ctx / "Dockerfile").write_text("\n".join(lines) + "\n")
        labels[LABEL_PREFIX + "patch-records"] = json.dumps(
            [{k: r.get(k) for k in ("id", "state", "variant") if k in r} for r in records])[:4000]
        image_id = _docker_build(client, ctx, tag, labels, log_path)
    return BuildResult(tag, key, image_id, False, base_digest, labels, str(log_path) if log_path else None,
                       records, changed_abs, deleted_abs)


def _git_archive(repo: Path, commit: str, dest: Path) -> None:
    import git

    r = git.Repo(str(repo))
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as buf:  # a whole source tree: on disk, not in memory
        r.archive(buf, treeish=commit, format="tar")
        buf.seek(0)
        with tarfile.open(fileobj=buf) as tar:
            try:
                safe_extract(tar, dest)  # a crafted commit's links cannot point the extraction outside dest
            except ConfinementError as e:
                raise BuildError(f"{repo}@{commit[:12]}: {e}") from None


def _docker_build(client: Any, ctx: Path, tag: str, labels: dict[str, str], log_path: Path | None) -> str:
    import docker

    from . import progress

    tail: list[str] = []
    step = ""
    beat = progress.heartbeat(f"build {tag[:80]}")  # issue 40: a long build says where it is
    with open(log_path, "w", encoding="utf-8") if log_path else open(os.devnull, "w") as fh:
        try:
            for chunk in client.api.build(path=str(ctx), tag=tag, labels=labels, rm=True, forcerm=True,
                                          decode=True, pull=False):
                text = chunk.get("stream") or chunk.get("status") or ""
                if "error" in chunk:
                    text = f"ERROR: {chunk['error']}\n"
                if text:
                    fh.write(text)
                    tail.extend(text.rstrip("\n").splitlines())
                    del tail[:-20]
                    step = next((ln.strip()[:100] for ln in reversed(tail) if ln.lstrip().startswith("Step ")), step)
                beat.beat(step)
                if "error" in chunk:
                    where = f" (log {log_path})" if log_path else ""
                    raise BuildError(f"docker build of {tag} failed: {chunk['error'].strip()}{where}")
        except docker.errors.APIError as e:
            raise BuildError(f"docker build of {tag} failed: {e.explanation or e}") from None
    try:
        return client.images.get(tag).id
    except docker.errors.ImageNotFound:
        raise BuildError(f"docker build of {tag} produced no image: {' | '.join(tail[-3:])}") from None
