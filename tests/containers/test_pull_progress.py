"""Issue 40: a pull says how far it is (layers and bytes), as a server start does.

A 30--60 GB ROCm nightly is tens of minutes of pull; ``ensure_image`` printed nothing until it ended.
Through a real Docker daemon and the local registry: an image of several layers is pushed, removed
locally and pulled by tag and by digest with the heartbeat at every event; the lines count the
layers and bytes, end at "N of N layers done", and the image is there afterwards. A pull of a tag the
registry lacks is a BisectbotError naming it, as before."""

from __future__ import annotations

import subprocess
import uuid

import pytest

from bisectbot import progress
from bisectbot.components import ensure_image, pull_progress
from bisectbot.errors import BisectbotError
from tests.containers.conftest import REGISTRY

pytestmark = [pytest.mark.docker]


def test_pull_progress_counts_layers_and_bytes() -> None:
    assert pull_progress({}) == "0 of 0 layers done"
    assert pull_progress({"a": (5_000_000, 10_000_000, False), "b": (3_000_000, 3_000_000, True)}) == \
        "1 of 2 layers done, 8 of 13 MB"
    assert pull_progress({"a": (2_000_000_000, 30_000_000_000, False)}) == "0 of 1 layers done, 2.0 of 30.0 GB"
    assert pull_progress({"a": (0, 0, True)}) == "1 of 1 layers done"  # already present: no bytes


@pytest.mark.parametrize("by", ["tag", "digest"])
def test_a_pull_prints_its_layers_and_bytes(base_image: str, registry, tmp_path, monkeypatch, by: str) -> None:  # noqa: F811
    name = f"{REGISTRY}/bisectbot-test/pull-{uuid.uuid4().hex[:8]}"
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "a.bin").write_bytes(b"\0" * 3_000_000)
    (ctx / "b.bin").write_bytes(bytes(range(256)) * 8_000)
    (ctx / "Dockerfile").write_text(f"FROM {base_image}\nCOPY a.bin /a.bin\nCOPY b.bin /b.bin\n")
    ref = f"{name}:t1"
    subprocess.run(["docker", "build", "-q", "-t", ref, str(ctx)], check=True, capture_output=True)
    subprocess.run(["docker", "push", ref], check=True, capture_output=True)
    digest = subprocess.run(["docker", "inspect", "--format", "{{index .RepoDigests 0}}", ref], check=True,
                            capture_output=True, text=True).stdout.strip()
    subprocess.run(["docker", "rmi", "-f", ref], check=True, capture_output=True)
    lines: list[str] = []
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.0)
    progress.enable(lines.append)
    try:
        img = ensure_image(ref if by == "tag" else digest)
    finally:
        progress.enable(None)
        subprocess.run(["docker", "rmi", "-f", ref, digest], capture_output=True)
    assert img.id
    beats = [ln for ln in lines if ln.startswith("pull ")]
    assert beats and all("layers done" in ln for ln in beats), lines
    n = int(beats[-1].split(" of ")[1].split()[0])
    assert n >= 2 and f"{n} of {n} layers done" in beats[-1], beats[-1]  # the base's layers exist: two are new


def test_a_missing_tag_is_a_clear_error(registry) -> None:  # noqa: F811
    with pytest.raises(BisectbotError, match="cannot pull"):
        ensure_image(f"{REGISTRY}/bisectbot-test/none-{uuid.uuid4().hex[:8]}:nope")


def test_a_build_beats_with_its_current_step(base_image: str, tmp_path, monkeypatch) -> None:
    """The build half of the same defect: ``docker build`` through the API with the heartbeat at every
    event names the Dockerfile step it is at (``Step 2/3 : RUN ...``)."""
    import docker

    from bisectbot.build import _docker_build

    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f"FROM {base_image}\nRUN echo one > /one\nRUN echo two > /two\n")
    tag = f"bisectbot-test/beat-{uuid.uuid4().hex[:8]}"
    lines: list[str] = []
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.0)
    progress.enable(lines.append)
    try:
        assert _docker_build(docker.from_env(), ctx, tag, {}, tmp_path / "build.log")
    finally:
        progress.enable(None)
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
    beats = [ln for ln in lines if ln.startswith(f"build {tag}")]
    assert any("Step 3/3 : RUN echo two" in ln for ln in beats), lines
