"""Dependency pins as the real repositories write them: pure readers, no I/O.

vLLM's ROCm images pin aiter, Triton, PyTorch, flash-attention and mori by tag or commit
(``docker/Dockerfile.rocm_base``: ``ARG AITER_BRANCH="v0.1.10.post3"``, ``ARG PYTORCH_BRANCH="8514f051" #
release/2.10 as of 3/17``, ``ARG BASE_IMAGE=rocm/dev-ubuntu-22.04:7.2.1-complete``; ``docker/Dockerfile.rocm``:
``ARG NIXL_BRANCH=...`` inside a build stage); Python packages by ``pkg==X`` or ``pkg @ git+URL@REF`` in
``requirements/*.txt`` (``bitsandbytes @ git+https://github.com/...bitsandbytes.git@6721333...``,
``numba == 0.65.0 # Required for ...``); aiter pins composable_kernel as a git submodule
(``.gitmodules`` plus a gitlink, mode ``160000``, at ``3rdparty/composable_kernel``); an image carries
the Dockerfile's values in ``/app/versions.txt`` (``AITER_BRANCH: v0.1.10.post3`` lines written by
``Dockerfile.rocm_base``, ``VLLM_BASE_IMAGE=...`` lines appended by ``Dockerfile.rocm``). The shapes tested
in ``tests/bisect/test_pins.py`` are lines taken from those files.

Every reader returns :class:`Pin` records; :func:`pin_file_moves` compares two versions of one pin
file and says whether anything but pin values changed. Git access lives in
:mod:`bisectbot.sources.pinned`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import BadInput

# ``NAME_<suffix>`` ARGs that pin a dependency (vLLM: ``_BRANCH``/``_REPO``; Dockerfile.rocm: NIXL_BRANCH,
# UCX_BRANCH, ROCSHMEM_BRANCH; other ROCm Dockerfiles: MORI_COMMIT, MORI_REF, TILELANG_COMMIT; the image:
# BASE_IMAGE; the toolchain: PYTHON_VERSION).
PIN_SUFFIXES = ("BRANCH", "COMMIT", "REF", "TAG", "SHA", "VERSION", "IMAGE")
"""Suffixes of Dockerfile ARG / versions.txt names that pin a component (``AITER_BRANCH``)."""

_REPO_SUFFIX = "REPO"

ALIASES: dict[str, str] = {
    "amd-aiter": "aiter",  # the PyPI/dist name of aiter (DOMAIN.md; ``pip show amd-aiter``)
    "pytorch": "torch",  # PYTORCH_BRANCH in Dockerfile.rocm_base
    "pytorch-vision": "torchvision",
    "pytorch-audio": "torchaudio",
    "fa": "flash-attention",  # FA_BRANCH / FA_REPO (Dao-AILab/flash-attention)
    "ck": "composable-kernel",
    "pytorch-triton-rocm": "triton",
}
"""Names that different files use for one component, normalised (see :func:`normalize`)."""

_ARG = re.compile(r"^\s*ARG\s+(?P<rest>.*)$", re.IGNORECASE)
_ASSIGN = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:=(?P<value>.*))?$", re.DOTALL)
_VT_LINE = re.compile(r"^\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*|=)(?P<value>.*?)\s*$")


def normalize(name: str) -> str:
    """A component key: lower case, runs of ``-``, ``_`` and ``.`` as one ``-`` (PEP 503), aliases
    applied (``AITER`` -> ``aiter``, ``amd_aiter`` -> ``aiter``, ``composable_kernel`` ->
    ``composable-kernel``)."""
    key = re.sub(r"[-_.]+", "-", name.strip().lower())
    return ALIASES.get(key, key)


@dataclass(frozen=True)
class Pin:
    """One dependency pin.

    ``component`` is the normalised key (``aiter``), ``name`` as written (``AITER_BRANCH``,
    ``amd-aiter``, ``3rdparty/composable_kernel``), ``ref`` the pinned tag, branch, SHA or version
    (``v0.1.22``, ``0.1.22``), ``kind`` one of ``dockerfile-arg``, ``requirement``, ``submodule``,
    ``versions-txt``; ``path`` the file (``docker/Dockerfile.rocm_base``; the gitlink's path for a
    submodule; ``/app/versions.txt``), ``line`` 1-based (0 for a gitlink), ``repo_url`` where the
    component comes from when the file says (``AITER_REPO``, the ``git+`` URL, ``.gitmodules``).
    """

    component: str
    name: str
    ref: str
    kind: str
    path: str = ""
    line: int = 0
    repo_url: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DockerArg:
    """One ``NAME[=VALUE]`` of an ``ARG`` instruction: ``value`` None when it has no default,
    quotes removed, a trailing ``# comment`` dropped; ``line`` 1-based."""

    name: str
    value: str | None
    line: int


def _pin_stem(name: str) -> str | None:
    """``AITER_BRANCH`` -> ``AITER``; None for names without a pin suffix (``GPU_ARCH``)."""
    stem, sep, suffix = name.rpartition("_")
    if not sep or not stem or suffix.upper() not in PIN_SUFFIXES:
        return None
    return stem


# ---------------------------------------------------------------------- Dockerfiles


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """Dockerfile lines with ``\\`` continuations joined, each with its first line number."""
    buf: list[str] = []
    start = 0
    for n, raw in enumerate(text.splitlines(), 1):
        if not buf:
            start = n
            if raw.lstrip().startswith("#"):
                continue
        if raw.rstrip().endswith("\\"):
            buf.append(raw.rstrip()[:-1])
            continue
        buf.append(raw)
        yield start, " ".join(buf)
        buf = []
    if buf:
        yield start, " ".join(buf)


def dockerfile_args(text: str) -> list[DockerArg]:
    """Every ``ARG`` of a Dockerfile, in file order (global and per-stage ones alike).

    ``ARG A=1 B="two words"`` gives two entries; ``ARG USE_SCCACHE`` gives ``value=None``;
    ``ARG LEGACY_HIPBLASLT_OPTION=`` gives ``""``. Values are read with POSIX shell quoting
    (:mod:`shlex`), so ``ARG PYTORCH_BRANCH="8514f051" # release/2.10 as of 3/17`` is
    ``8514f051``. A line that does not tokenise (an unbalanced quote) is read up to the first
    blank as one ``NAME=VALUE`` with the quotes stripped. Never raises.
    """
    out: list[DockerArg] = []
    for line, logical in _logical_lines(text):
        m = _ARG.match(logical)
        if not m:
            continue
        rest = m.group("rest")
        try:
            tokens = shlex.split(rest, comments=True, posix=True)
        except ValueError:
            tokens = [rest.split()[0].replace('"', "").replace("'", "")] if rest.split() else []
        for tok in tokens:
            a = _ASSIGN.match(tok)
            if a:
                out.append(DockerArg(a.group("name"), a.group("value"), line))
    return out


def _named_pins(values: Sequence[tuple[str, str | None, int]], kind: str, path: str) -> list[Pin]:
    """Pins among ``(name, value, line)`` triples: ``X_<suffix>`` names with a literal value, each
    with ``X_REPO``'s value as its ``repo_url``. The first definition of a name wins."""
    repos: dict[str, str] = {}
    for name, value, _ in values:
        if name.upper().endswith("_" + _REPO_SUFFIX) and value and "${" not in value:
            repos.setdefault(name[: -len(_REPO_SUFFIX) - 1].upper(), value)
    out: list[Pin] = []
    seen: set[str] = set()
    for name, value, line in values:
        stem = _pin_stem(name)
        if stem is None or not value or "$" in value or name in seen:
            continue
        seen.add(name)
        out.append(Pin(normalize(stem), name, value, kind, path, line, repos.get(stem.upper())))
    return out


def dockerfile_pins(text: str, path: str = "Dockerfile") -> list[Pin]:
    """Pins of a Dockerfile: ``ARG X_BRANCH|_COMMIT|_REF|_TAG|_SHA|_VERSION|_IMAGE=VALUE`` with a
    literal value (``${...}`` references and value-less re-declarations inside stages are not pins);
    ``ARG X_REPO=URL`` gives the pin's ``repo_url``. Component keys follow :func:`normalize`
    (``AITER_BRANCH`` -> ``aiter``, ``FA_BRANCH`` -> ``flash-attention``, ``BASE_IMAGE`` -> ``base``)."""
    return _named_pins([(a.name, a.value, a.line) for a in dockerfile_args(text)], "dockerfile-arg", path)


# ---------------------------------------------------------------------- pip requirements


def _strip_comment(line: str) -> str:
    """pip's rule: ``#`` at the start or after whitespace starts a comment (``#egg=`` does not)."""
    m = re.search(r"(^|\s)#", line)
    return line[: m.start()] if m else line


def _git_url_ref(url: str) -> tuple[str, str | None]:
    """``git+https://host/o/r.git@REF#egg=x`` -> (``https://host/o/r.git``, ``REF``)."""
    u = url[4:] if url.startswith("git+") else url
    u = u.split("#", 1)[0]
    scheme, sep, rest = u.partition("://")
    if not sep:
        scheme, rest = "", u
    path_part = rest.split("/", 1)
    if len(path_part) == 2 and "@" in path_part[1]:
        repo_path, ref = path_part[1].rsplit("@", 1)
        base = f"{scheme}://{path_part[0]}/{repo_path}" if scheme else f"{path_part[0]}/{repo_path}"
        return base, ref or None
    return u, None


def requirement_pins(text: str, path: str = "requirements.txt") -> list[Pin]:
    """Exact pins of a pip requirements file: ``pkg==X`` (also ``pkg == X``, extras, markers and
    ``===``) and ``pkg @ git+URL@REF``. Ranges (``>=``), unpinned names, options (``-r``, ``-c``,
    ``--index-url``) and comments are not pins. Parsed with :mod:`packaging.requirements`; a line
    it rejects is skipped. The key is the normalised distribution name (``amd-aiter`` -> ``aiter``)."""
    from packaging.requirements import InvalidRequirement, Requirement

    out: list[Pin] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw).strip()
        if not line or line.startswith("-"):
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.url:
            if not req.url.startswith("git+"):
                continue
            repo_url, ref = _git_url_ref(req.url)
            if ref:
                out.append(Pin(normalize(req.name), req.name, ref, "requirement", path, n, repo_url))
            continue
        specs = list(req.specifier)
        if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
            out.append(Pin(normalize(req.name), req.name, specs[0].version, "requirement", path, n))
    return out


# ---------------------------------------------------------------------- git submodules


def gitmodules(text: str) -> dict[str, dict[str, str]]:
    """``.gitmodules`` as ``{path: {"name", "url", "branch"?}}`` (git-config syntax, ``[submodule
    "NAME"]`` sections with ``path = ...`` and ``url = ...``). Never raises; sections without a
    path are left out."""
    out: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    sections: list[dict[str, str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        m = re.match(r'^\[\s*submodule\s+"(?P<name>[^"]*)"\s*\]$', line)
        if m:
            current = {"name": m.group("name")}
            sections.append(current)
            continue
        if line.startswith("["):
            current = None
            continue
        key, eq, value = line.partition("=")
        if current is not None and eq:
            current[key.strip().lower()] = value.strip().strip('"')
    for s in sections:
        if s.get("path"):
            out[s["path"]] = s
    return out


def submodule_pin(path: str, sha: str, modules: Mapping[str, Mapping[str, str]] | None = None) -> Pin:
    """The pin of one gitlink: ``path`` (``3rdparty/composable_kernel``) at commit ``sha`` (from ``git
    ls-tree``), keyed by the path's last part (``composable-kernel``), URL from ``.gitmodules``."""
    entry = (modules or {}).get(path) or {}
    return Pin(normalize(path.rstrip("/").rsplit("/", 1)[-1]), path, sha, "submodule", path, 0, entry.get("url"))


def ls_tree_gitlinks(ls_tree: str) -> dict[str, str]:
    """Gitlinks in ``git ls-tree`` output (``160000 commit <sha>\\t<path>`` lines): ``{path: sha}``."""
    out: dict[str, str] = {}
    for line in ls_tree.splitlines():
        meta, tab, path = line.partition("\t")
        parts = meta.split()
        if tab and len(parts) == 3 and parts[0] == "160000" and parts[1] == "commit":
            out[path] = parts[2]
    return out


# ---------------------------------------------------------------------- versions.txt


def versions_txt(text: str) -> dict[str, str]:
    """``/app/versions.txt`` as a mapping. Both shapes vLLM writes are read: ``NAME: value``
    (``Dockerfile.rocm_base``) and ``NAME=value`` (appended by ``Dockerfile.rocm``); surrounding
    quotes are removed (``ROCSHMEM_BRANCH="f0acb0c6"``). Later lines win, as the file is appended to."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        m = _VT_LINE.match(raw)
        if not m:
            continue
        value = m.group("value")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[m.group("name")] = value
    return out


def versions_txt_pins(text: str | Mapping[str, str], path: str = "/app/versions.txt") -> list[Pin]:
    """Pins an image's ``versions.txt`` records (the raw text or :func:`versions_txt`'s mapping):
    the same ``X_BRANCH``/``X_REPO`` conventions as :func:`dockerfile_pins`."""
    values = versions_txt(text) if isinstance(text, str) else dict(text)
    return _named_pins([(k, v, 0) for k, v in values.items()], "versions-txt", path)


# ---------------------------------------------------------------------- files and moves


def is_dockerfile(path: str) -> bool:
    """``Dockerfile``, ``Dockerfile.rocm_base``, ``docker/rocm.Dockerfile``, ``Dockerfile.rocm`` ..."""
    base = path.rsplit("/", 1)[-1]
    return base.startswith("Dockerfile") or base.endswith(".Dockerfile") or base.endswith(".dockerfile")


def is_requirements(path: str) -> bool:
    """``requirements.txt``, ``requirements-rocm.txt``, ``requirements/rocm.txt``,
    ``requirements/test/rocm.txt``, ``requirements/build/rocm.txt``."""
    base = path.rsplit("/", 1)[-1]
    return base.endswith(".txt") and (base.startswith("requirements") or "requirements/" in f"/{path}")


def is_pin_file(path: str) -> bool:
    """A file whose pins :func:`file_pins` reads (Dockerfiles, requirements files, ``.gitmodules``)."""
    return is_dockerfile(path) or is_requirements(path) or path.rsplit("/", 1)[-1] == ".gitmodules"


def file_pins(path: str, text: str) -> list[Pin]:
    """Pins of one file by its kind (see :func:`is_pin_file`); ``[]`` for other files."""
    if is_dockerfile(path):
        return dockerfile_pins(text, path)
    if is_requirements(path):
        return requirement_pins(text, path)
    return []


def _masked(path: str, text: str) -> list[str]:
    """The file's lines with every pin value (and X_REPO / submodule URL) replaced by a marker:
    two versions that mask alike differ only in pin values."""
    lines = text.splitlines()
    if path.rsplit("/", 1)[-1] == ".gitmodules":
        return [re.sub(r"^(\s*(?:url|branch)\s*=).*$", r"\1<pin>", ln) for ln in lines if ln.strip()]
    marked: set[int] = set()
    if is_dockerfile(path):
        for a in dockerfile_args(text):
            if _pin_stem(a.name) or a.name.upper().endswith("_" + _REPO_SUFFIX):
                marked.add(a.line)
        out = []
        for n, ln in enumerate(lines, 1):
            if n in marked:
                ln = re.sub(r"^(\s*ARG\s+[A-Za-z_][A-Za-z0-9_]*=).*$", r"\1<pin>", ln, flags=re.IGNORECASE)
            out.append(ln)
        return out
    pins = {p.line: p for p in requirement_pins(text, path)}
    return [f"{pins[n].name}<pin>" if n in pins else ln for n, ln in enumerate(lines, 1)]


@dataclass(frozen=True)
class PinMove:
    """A pin that moved between two commits of the pinning repository: ``component`` (normalised
    key), ``name``/``path``/``kind`` as in :class:`Pin`, ``old``/``new`` refs, ``repo_url``."""

    component: str
    name: str
    path: str
    kind: str
    old: str
    new: str
    repo_url: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        """``aiter v0.1.21.post2 → v0.1.22`` (SHAs shortened to 12)."""
        return f"{self.component} {short_ref(self.old)} → {short_ref(self.new)}"


def short_ref(ref: str) -> str:
    """A 40-hex SHA cut to 12 characters; tags and versions as they are."""
    return ref[:12] if re.fullmatch(r"[0-9a-f]{40}", ref) else ref


def moves_between(old: Iterable[Pin], new: Iterable[Pin]) -> list[PinMove]:
    """Pins present on both sides (same ``path`` and ``name``) whose ref changed."""
    before = {(p.path, p.name): p for p in old}
    out: list[PinMove] = []
    for p in new:
        q = before.get((p.path, p.name))
        if q is not None and q.ref != p.ref:
            out.append(PinMove(p.component, p.name, p.path, p.kind, q.ref, p.ref, p.repo_url or q.repo_url))
    return out


@dataclass
class FileMoves:
    """What changed in one pin file: the pins that ``moved`` and whether ``other`` lines changed
    too (a real change to the build, not only a pin)."""

    path: str
    moved: list[PinMove] = field(default_factory=list)
    other: bool = False


def pin_file_moves(path: str, old_text: str, new_text: str) -> FileMoves:
    """Compare two versions of one pin file (see :func:`is_pin_file`). ``other`` is True when
    anything but pin values differs (a new ARG, a changed RUN line, an added requirement)."""
    moved = moves_between(file_pins(path, old_text), file_pins(path, new_text))
    return FileMoves(path, moved, _masked(path, old_text) != _masked(path, new_text))


def match_component(key: str, components: Mapping[str, Sequence[str]]) -> str | None:
    """The configured component a pin key names: ``components`` maps a recipe component name to
    the other names it is pinned under (``{"aiter": ["amd-aiter"]}``). Names compare after
    :func:`normalize`; None when no component matches."""
    k = normalize(key)
    for name, extra in components.items():
        if normalize(name) == k or any(normalize(e) == k for e in extra):
            return name
    return None


def parse_pins(text: str) -> dict[str, str]:
    """``vllm=SHA,aiter=SHA`` -> ``{"vllm": "SHA", "aiter": "SHA"}``; BadInput when malformed."""
    out: dict[str, str] = {}
    for part in text.split(","):
        name, eq, ref = part.partition("=")
        if not eq or not name.strip() or not ref.strip():
            raise BadInput(f"expected component=commit[,component=commit], got {text!r}")
        out[name.strip()] = ref.strip()
    return out


# ---------------------------------------------------------------------- rewriting a pin (issue 38)


@dataclass(frozen=True)
class PinRewrite:
    """One pin line of a holding tree rewritten to a candidate's commit: ``path`` and 1-based
    ``line`` of the file, the line ``before`` and ``after`` (without the newline)."""

    path: str
    line: int
    before: str
    after: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rewrite_pin(text: str, pin: Pin, ref: str, git_url: str) -> tuple[str, PinRewrite] | None:
    """``text`` (the file ``pin.path``) with ``pin`` set to ``ref`` (a full commit SHA), and the
    rewritten line; None when the pin is not found where it was read (then nothing is changed).

    * ``dockerfile-arg``: the value of ``NAME=VALUE`` on the pin's line or its ``\\`` continuations,
      its quotes kept (``ARG AITER_BRANCH="v0.1.22"`` -> ``ARG AITER_BRANCH="<sha>"``: vLLM's build
      runs ``git checkout ${AITER_BRANCH}``, which takes a commit);
    * ``requirement`` with a git URL: its ``@REF`` (``pkg @ git+URL@REF#egg=x``);
    * ``requirement`` by version (``amd-aiter==0.1.22``): a version cannot name a commit, so the
      line becomes a direct reference to the commit, ``amd-aiter @ git+<git_url>@<sha>`` (PEP 508;
      extras, markers and a comment kept). ``git_url`` is the component's repository as pip takes
      it (``https://...``, ``file:///...``).
    Gitlinks are not text (the runner moves them in the index)."""
    lines = text.splitlines(keepends=True)
    if not 1 <= pin.line <= len(lines):
        return None
    i = pin.line - 1
    if pin.kind == "dockerfile-arg":
        pat = re.compile(r"(?<![A-Za-z0-9_])(" + re.escape(pin.name) + r"=)([\"']?)" + re.escape(pin.ref)
                         + r"\2(?=\s|\\|$)")
        j = i
        while j < len(lines):
            new, n = pat.subn(lambda m: f"{m.group(1)}{m.group(2)}{ref}{m.group(2)}", lines[j], count=1)
            if n:
                return _replaced(lines, j, new, pin.path)
            if not lines[j].rstrip("\r\n").rstrip().endswith("\\"):
                return None
            j += 1
        return None
    if pin.kind != "requirement":
        return None
    line = lines[i]
    if pin.repo_url is not None:  # pkg @ git+URL@REF[#egg=...]
        pat = re.compile(r"@" + re.escape(pin.ref) + r"(?=$|[\s#;])")
        found = list(pat.finditer(line))
        if not found:
            return None
        m = found[-1]
        return _replaced(lines, i, line[: m.start()] + "@" + ref + line[m.end():], pin.path)
    pat = re.compile(r"^(\s*)(" + re.escape(pin.name) + r"(?:\s*\[[^\]]*\])?)\s*===?\s*" + re.escape(pin.ref)
                     + r"(?=$|[\s#;,])", re.IGNORECASE)
    m = pat.search(line)
    if m is None:
        return None
    rest = line[m.end():]
    sep = " " if rest[:1] == ";" else ""
    return _replaced(lines, i, f"{m.group(1)}{m.group(2)} @ git+{git_url}@{ref}{sep}{rest}", pin.path)


def _replaced(lines: list[str], j: int, new: str, path: str) -> tuple[str, PinRewrite]:
    before = lines[j].rstrip("\r\n")
    out = list(lines)
    out[j] = new
    return "".join(out), PinRewrite(path, j + 1, before, new.rstrip("\r\n"))
