"""Releases source against a real local HTTP index (PEP 691 JSON and PEP 503 HTML)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from bisectbot.errors import BadInput
from bisectbot.sources import releases
from bisectbot.sources.releases import (
    SourceError,
    configured_index_url,
    download,
    extract_sdist,
    list_releases,
)


def _sdist(version: str, extra: dict[str, bytes] | None = None) -> bytes:
    top = f"demo-{version}"
    files = {"PKG-INFO": f"Metadata-Version: 2.1\nName: demo\nVersion: {version}\n".encode(),
             "demo/__init__.py": b"", "demo/mod.py": b"X = 1\n", "setup.py": b"# big file\n" * 1000}
    files.update(extra or {})
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name if name.startswith("../") else f"{top}/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _wheel(version: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("demo/__init__.py", "")
        zf.writestr("demo/mod.py", "X = 2\n")
        zf.writestr(f"demo-{version}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: demo\nVersion: {version}\n")
    return buf.getvalue()


@pytest.fixture
def index(httpserver: HTTPServer):
    """A simple index serving demo 1.0 and 1.1 (sdist + wheel) as JSON and as HTML."""
    blobs = {"demo-1.0.tar.gz": _sdist("1.0"), "demo-1.1.tar.gz": _sdist("1.1"),
             "demo-1.1-py3-none-any.whl": _wheel("1.1"), "demo-2.0-py3-none-any.whl": _wheel("2.0")}
    for name, data in blobs.items():
        httpserver.expect_request(f"/files/{name}").respond_with_data(data)
    files = [{"filename": n, "url": f"/files/{n}", "hashes": {"sha256": hashlib.sha256(d).hexdigest()},
              "size": len(d), "upload-time": f"2026-0{i + 1}-01T00:00:00Z", "yanked": False}
             for i, (n, d) in enumerate(blobs.items())]
    files.append({"filename": "demo-notaversion.zip.asc", "url": "/x", "hashes": {}})
    httpserver.expect_request("/json/demo/").respond_with_data(
        json.dumps({"meta": {"api-version": "1.1"}, "name": "demo", "files": files}),
        content_type="application/vnd.pypi.simple.v1+json")
    links = "".join(f'<a href="../../files/{n}#sha256={hashlib.sha256(d).hexdigest()}">{n}</a><br/>'
                    for n, d in blobs.items())
    httpserver.expect_request("/html/demo/").respond_with_data(f"<html><body>{links}</body></html>",
                                                               content_type="text/html")
    return httpserver, blobs


def test_list_releases_json_and_html(index) -> None:
    srv, blobs = index
    for flavour in ("json", "html"):
        rels = list_releases("Demo", srv.url_for(f"/{flavour}/"))
        assert [r.version for r in rels] == ["1.0", "1.1", "2.0"]
        r11 = rels[1]
        assert {f.kind for f in r11.files} == {"sdist", "wheel"}
        assert r11.sdist.filename == "demo-1.1.tar.gz"
        assert r11.sdist.sha256 == hashlib.sha256(blobs["demo-1.1.tar.gz"]).hexdigest()
        assert r11.sdist.url == srv.url_for("/files/demo-1.1.tar.gz")
    assert list_releases("demo", srv.url_for("/json/"))[0].upload_time == "2026-01-01T00:00:00Z"


def test_download_cached_and_verified(index, tmp_path: Path) -> None:
    srv, blobs = index
    sd = releases.find_release("demo", "1.1", srv.url_for("/json/")).sdist
    p = download(sd, tmp_path / "cache")
    assert p.read_bytes() == blobs["demo-1.1.tar.gz"]
    assert p == tmp_path / "cache" / "dists" / sd.sha256[:2] / sd.sha256 / "demo-1.1.tar.gz"
    hits = len(srv.log)
    assert download(sd, tmp_path / "cache") == p and len(srv.log) == hits  # served from the cache
    bad = releases.ReleaseFile(sd.filename, sd.url, "0" * 64, "sdist")
    with pytest.raises(SourceError, match="does not match"):
        download(bad, tmp_path / "cache2")
    assert not [f for f in (tmp_path / "cache2").rglob("*") if f.is_file()]
    with pytest.raises(BadInput, match="demo==9.9 is not on the index"):
        releases.find_release("demo", "9.9", srv.url_for("/json/"))
    srv.expect_request("/json/other/").respond_with_data("not here", status=404)
    with pytest.raises(BadInput, match="no such project"):
        list_releases("other", srv.url_for("/json/"))


def test_fetch_tree_sdist_or_wheel(index, tmp_path: Path) -> None:
    srv, _ = index

    root = releases.fetch_sdist_tree("demo", "1.1", ["demo/mod.py"], tmp_path / "a", srv.url_for("/json/"),
                                     tmp_path / "cache")
    assert (root / "demo" / "mod.py").read_text() == "X = 1\n" and root.name == "demo-1.1"
    root = releases.fetch_sdist_tree("demo", "2.0", ["demo/mod.py"], tmp_path / "b", srv.url_for("/html/"),
                                     tmp_path / "cache")  # no sdist: the wheel
    assert root == tmp_path / "b" and (root / "demo" / "mod.py").read_text() == "X = 2\n"
    assert not (root / "demo" / "__init__.py").exists()
    assert (root / "demo-2.0.dist-info" / "METADATA").is_file()
    with pytest.raises(BadInput, match="no member demo/nope.py in the wheel"):
        releases.fetch_sdist_tree("demo", "2.0", ["demo/nope.py"], tmp_path / "c", srv.url_for("/json/"),
                                  tmp_path / "cache")


def test_index_unreachable_is_error(tmp_path: Path) -> None:
    from bisectbot.errors import UpstreamUnreachable

    with pytest.raises(UpstreamUnreachable, match="unreachable") as exc:  # exit code 5 (issue 14)
        list_releases("demo", "http://127.0.0.1:9/simple/")
    assert exc.value.exit_code == 5


def test_extract_members_only_and_safe(tmp_path: Path) -> None:
    arc = tmp_path / "demo-1.0.tar.gz"
    arc.write_bytes(_sdist("1.0", {"../evil.py": b"boom"}))
    root = extract_sdist(arc, tmp_path / "out", ["demo/mod.py"])
    assert root == tmp_path / "out" / "demo-1.0"
    got = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert got == ["demo-1.0/PKG-INFO", "demo-1.0/demo/mod.py"]
    assert not (tmp_path / "evil.py").exists()
    with pytest.raises(BadInput, match="no member demo/absent.py"):
        extract_sdist(arc, tmp_path / "out2", ["demo/absent.py"])
    full = extract_sdist(arc, tmp_path / "out3")
    assert (full / "setup.py").is_file()


def test_configured_index_url_respects_pip_index_url(monkeypatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:1/simple/")
    assert configured_index_url() == "http://127.0.0.1:1/simple/"
    monkeypatch.delenv("PIP_INDEX_URL")
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    assert configured_index_url() == releases.DEFAULT_INDEX


def test_file_index_yanks_and_unparsable_names(tmp_path: Path) -> None:
    """A directory index (file://, PEP 503 HTML) read through pypi-simple: yanked files flagged, names
    that packaging.utils cannot parse (signatures, eggs) skipped, the download verified."""
    files = tmp_path / "files"
    files.mkdir()
    blobs = {"demo-1.0.tar.gz": _sdist("1.0"), "demo-1.1-py3-none-any.whl": _wheel("1.1")}
    for n, d in blobs.items():
        (files / n).write_bytes(d)
    (tmp_path / "simple" / "demo").mkdir(parents=True)
    links = "".join(f'<a href="../../files/{n}#sha256={hashlib.sha256(d).hexdigest()}"'
                    f'{" data-yanked=&quot;broken&quot;" if n.endswith(".whl") else ""}>{n}</a>'
                    for n, d in blobs.items())
    links += '<a href="../../files/demo-1.0.tar.gz.asc">demo-1.0.tar.gz.asc</a><a href="x">demo-0.9-py2.7.egg</a>'
    (tmp_path / "simple" / "demo" / "index.html").write_text(f"<html><body>{links}</body></html>")
    rels = list_releases("DEMO", (tmp_path / "simple").as_uri() + "/")
    assert [(r.version, [(f.kind, f.yanked) for f in r.files]) for r in rels] == [
        ("1.0", [("sdist", False)]), ("1.1", [("wheel", True)])]
    p = download(rels[0].sdist, tmp_path / "cache")
    assert p.read_bytes() == blobs["demo-1.0.tar.gz"]
    with pytest.raises(BadInput, match="no such project"):
        list_releases("other", (tmp_path / "simple").as_uri())
