"""Fixtures of the release-bisection tests: a local package index of a tiny synthetic ``vllm``.

The index is a real HTTP server on 127.0.0.1 (pytest-httpserver, as in
``tests/patches/test_releases.py``) serving PEP 691 JSON under ``/json/`` and PEP 503
HTML under ``/html/``; every request it answers is in ``httpserver.log``, so a test can
count which sdists were downloaded. The patch stack (one patch, ``demo-workspace``, on
``vllm/demo.py``) lives in a temporary directory named by ``BISECTBOT_PATCHES_DIR``.

Releases and the state of ``demo-workspace`` on each (``k`` = 1.6 is the first upstream one):

========  =====================================================
1.0-1.2   buggy form: the patch applies
1.3-1.5   buggy form below a longer header: applies with offset
1.6rc1    upstream form (pre-release: excluded unless include_prereleases)
1.6-1.8   upstream form: already upstream
1.8.post1 refactored (yanked: never a candidate)
1.9, 2.0  refactored: conflict
========  =====================================================
"""

from __future__ import annotations

import difflib
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

PATCH_ID = "demo-workspace"

BUGGY = '''def gather(chunks):
    """Collect one buffer per chunk."""
    out = []
    for c in chunks:
        buf = make_buffer(c)
        out.append(buf)
    return out


def other():
    return 1
'''

PATCHED = BUGGY.replace(
    "    out = []\n    for c in chunks:\n        buf = make_buffer(c)\n",
    "    out = []\n    ws = shared_workspace(chunks)  # bisectbot-patch: demo-workspace\n"
    "    for c in chunks:\n        buf = ws[: c.size]\n")

UPSTREAM = PATCHED.replace("  # bisectbot-patch: demo-workspace", "").replace(
    '"""Collect one buffer per chunk."""', '"""Slice every chunk out of one shared workspace."""')

REFACTORED = '''def gather(chunks, *, pool=None):
    result = []
    for chunk in chunks:
        result.append(allocate(chunk, pool))
    return result


def other():
    return 2
'''

HEADER = "".join(f"# header line {i}\n" for i in range(7))

FORMS: dict[str, str] = {
    "1.0": BUGGY, "1.1": BUGGY, "1.2": BUGGY,
    "1.3": HEADER + BUGGY, "1.4": HEADER + BUGGY, "1.5": HEADER + BUGGY,
    "1.6rc1": UPSTREAM,
    "1.6": UPSTREAM, "1.7": UPSTREAM, "1.8": HEADER + UPSTREAM,
    "1.8.post1": REFACTORED,
    "1.9": REFACTORED, "2.0": REFACTORED,
}
YANKED = {"1.8.post1"}

STACK_YAML = f"""version: 1
patches:
  - id: {PATCH_ID}
    package: vllm
    path: demo.py
    required: true
    description: "slice buffers from one shared workspace"
    variants:
      - id: v1
        diff: {PATCH_ID}/v1.patch
    upstream:
      reverse_applies: true
      code:
        all:
          - 'shared_workspace\\('
          - 'buf = ws\\['
        none:
          - 'make_buffer\\('
"""


def sdist(version: str, demo: str) -> bytes:
    """A ``vllm-<version>.tar.gz`` holding PKG-INFO, ``vllm/__init__.py``, ``vllm/demo.py`` and padding."""
    top = f"vllm-{version}"
    files = {"PKG-INFO": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n",
             "vllm/__init__.py": "", "vllm/demo.py": demo, "setup.py": "# padding\n" * 500}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@dataclass
class Index:
    """The served index: ``url(flavour)`` is the simple-index base; ``downloads()`` the sdists fetched."""

    server: HTTPServer
    blobs: dict[str, bytes] = field(default_factory=dict)

    def url(self, flavour: str = "json") -> str:
        return self.server.url_for(f"/{flavour}/")

    def downloads(self) -> list[str]:
        """Versions whose sdist was requested, in request order (one entry per request)."""
        out = []
        for req, _ in self.server.log:
            if req.path.startswith("/files/"):
                out.append(req.path.rsplit("/", 1)[1].removeprefix("vllm-").removesuffix(".tar.gz"))
        return out


@pytest.fixture
def index(httpserver: HTTPServer) -> Index:
    idx = Index(httpserver)
    for ver, form in FORMS.items():
        name = f"vllm-{ver}.tar.gz"
        idx.blobs[name] = data = sdist(ver, form)
        httpserver.expect_request(f"/files/{name}").respond_with_data(data, content_type="application/gzip")
    files = [{"filename": n, "url": f"/files/{n}", "hashes": {"sha256": hashlib.sha256(d).hexdigest()},
              "size": len(d), "upload-time": f"2026-01-{i + 1:02d}T00:00:00Z",
              "yanked": "yanked by the test" if any(n == f"vllm-{y}.tar.gz" for y in YANKED) else False}
             for i, (n, d) in enumerate(idx.blobs.items())]
    httpserver.expect_request("/json/vllm/").respond_with_data(
        json.dumps({"meta": {"api-version": "1.1"}, "name": "vllm", "files": files}),
        content_type="application/vnd.pypi.simple.v1+json")
    links = "".join(
        f'<a href="../../files/{n}#sha256={hashlib.sha256(d).hexdigest()}"'
        f'{" data-yanked" if any(n == f"vllm-{y}.tar.gz" for y in YANKED) else ""}>{n}</a><br/>'
        for n, d in idx.blobs.items())
    httpserver.expect_request("/html/vllm/").respond_with_data(f"<html><body>{links}</body></html>",
                                                               content_type="text/html")
    return idx


@pytest.fixture
def patches_dir(tmp_path: Path) -> Path:
    """A patch stack with the one synthetic patch (diff written with difflib, 3 lines of context)."""
    d = tmp_path / "patches"
    (d / PATCH_ID).mkdir(parents=True)
    diff = "".join(difflib.unified_diff(BUGGY.splitlines(True), PATCHED.splitlines(True),
                                        "a/vllm/demo.py", "b/vllm/demo.py", n=3))
    (d / PATCH_ID / "v1.patch").write_text(f"# bisectbot patch: {PATCH_ID}, variant v1\n{diff}")
    (d / "stack.yaml").write_text(STACK_YAML)
    return d
