"""Issue 36 through ``bisectbot round probe`` (the fan-out's per-candidate command): the hostile
candidate of ``tests/sandbox/hostile.py`` under ``round plan`` + one ``round probe`` per planned
probe, each writing its verdict file into ``verdicts/`` under a shell that sets ``GITHUB_ENV`` and
``GITHUB_OUTPUT`` -- as root and, when the tests run as root, as ``nobody``. It finds no secret,
leaves no process, plants nothing, and cannot touch the verdict files' directory, the job's
command files or the state directory.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.sandbox import hostile as H

CHECKS = (*H.ALL, H.verdicts_untouched)


@pytest.fixture(scope="module", params=["root", "nobody"])
def night(request: pytest.FixtureRequest) -> H.Night:
    if request.param == "nobody" and os.getuid() != 0:
        pytest.skip("the tests drop to nobody from root")
    d = H.world_dir("bisectbot-round-")
    lib = H.portable_lib(d / "lib") if request.param == "nobody" else None
    work = d / "w"
    work.mkdir()
    yield H.Night(work, user=request.param, lib=lib, mode="round")
    shutil.rmtree(d, ignore_errors=True)


def test_round_probe_writes_its_verdicts(night: H.Night) -> None:
    night.ok()
    assert len(night.verdict_files) == len(night.plan["probes"]) >= 1


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_route_stays_closed_under_round_probe(night: H.Night, check) -> None:
    night.ok()
    check(night)


def test_the_round_checks_can_fail(tmp_path: Path) -> None:
    # the same round with the sandbox off (as root): the verdict directory, job files and state are reached
    n = H.Night(tmp_path, mode="round", sandbox="off")
    n.ok()
    for check in (H.verdicts_untouched, H.job_files_untouched, H.state_untouched, H.no_secret_found):
        with pytest.raises(AssertionError):
            check(n)
