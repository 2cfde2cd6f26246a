"""Issue 42 on images: ``bisectbot try`` on a nightly with a change to aiter (the component stage's kind of
culprit) or to vLLM, through the CLI, real dockerd and the local registry. The change is applied to the
installed package in a derived image (only files under a package the image has; compiled sources refused);
the unchanged nightly is probed as it is.

Members: an aiter change that fixes, a vLLM change that leaves aiter's bug in place (still broken), a change
that touches no package of the image (untested, said), a C++ source (refused: an image needs a source build).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.act.actnight import cleanup, recipe_text
from tests.containers.conftest import base_image, no_container_left_behind, registry  # noqa: F401
from tests.containers.nightly_factory import NightlySpec, push_nightlies

pytestmark = [pytest.mark.docker, pytest.mark.slow]

AITER = "# Prompt tokens above which aiter kernels corrupt the output.\nGARBAGE_ABOVE = {n}\n"
VLLM = "# Prompt tokens above which answers turn to garbage.\nGARBAGE_ABOVE = {n}\n"


def _diff(path: str, old: str, new: str) -> str:
    a, b = old.splitlines(), new.splitlines()
    body = "".join(f" {x}\n" if x == y else f"-{x}\n+{y}\n" for x, y in zip(a, b))
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,{len(a)} +1,{len(b)} @@\n{body}"


def _try(state: Path, recipe: Path, patch: Path, out: Path) -> tuple[int, dict, str]:
    p = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(state), "--json", "try", str(recipe),
                        "--patch", str(patch), "--out", str(out)], capture_output=True, text=True, timeout=900,
                       env=os.environ)
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip().startswith("{") else {}), p.stderr


def test_an_aiter_change_is_tried_on_the_newest_nightly(registry, base_image, tmp_path: Path) -> None:  # noqa: F811
    repository = f"bisectbot-test/try-{uuid.uuid4().hex[:8]}"
    specs = [NightlySpec("nightly_main_20260601", vllm_version="0.19.1rc1.dev1+g0000001ab"),
             NightlySpec("nightly_main_20260602", vllm_version="0.19.1rc1.dev2+g0000002ab", aiter_garbage_above=3000)]
    pushed = push_nightlies(specs, repository, registry=registry, base=base_image)
    try:
        recipe = tmp_path / "r.yaml"
        recipe.write_text(recipe_text(registry, repository, specs[0].tag, "http://127.0.0.1:9"))
        state = tmp_path / "state"
        cases = [
            ("aiter-fix", _diff("aiter/engine_config.py", AITER.format(n=3000), AITER.format(n=1_000_000)), 0, "fixed"),
            ("vllm-only", _diff("vllm/engine_config.py", VLLM.format(n=1_000_000), VLLM.format(n=2_000_000)), 1,
             "still broken"),
            ("no-package", _diff("docs/notes.md", "a\n", "b\n"), 3, "untested"),
            ("compiled", _diff("csrc/attention.cu", "a\n", "b\n"), 3, "untested"),
        ]
        for name, text, rc, answer in cases:
            patch = tmp_path / f"{name}.diff"
            patch.write_text(text)
            got, doc, err = _try(state, recipe, patch, tmp_path / name)
            assert got == rc and doc.get("answer") == answer, (name, got, doc.get("words"), err[-2000:])
            assert doc["candidate"]["label"] == specs[1].tag
        words = {n: json.loads((tmp_path / n / "try.json").read_text())["words"] for n, *_ in cases}
        assert "touches no package this image has" in words["no-package"], words
        assert "compiled sources" in words["compiled"] and "source build" in words["compiled"], words
    finally:
        cleanup(pushed)
