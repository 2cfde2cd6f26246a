"""Issue 36, as an unprivileged user: the whole ``bisectbot run`` as ``nobody`` (uid 65534, through
``setpriv`` when the tests run as root, as ``tests/installed/test_reaper_parallel.py`` does), with
the system ``python3`` and a world-readable copy of the installed package and its dependencies
(``tests/sandbox/hostile.py``, :func:`~tests.sandbox.hostile.portable_lib`). The hostile candidate
tries every route; each stays closed. Where the host refuses unprivileged namespaces, the run must
fail closed naming that instead (the other branch of the first test).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.sandbox import hostile as H

pytestmark = pytest.mark.skipif(os.getuid() != 0, reason="the tests drop to nobody from root; below root "
                                "tests/sandbox/test_routes.py already runs unprivileged")


def _bwrap_as_nobody() -> bool:
    p = subprocess.run(["setpriv", f"--reuid={H.NOBODY}", f"--regid={H.NOBODY}", "--clear-groups", "--",
                        "bwrap", "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc",
                        "--unshare-pid", "--die-with-parent", "--", "true"], capture_output=True)
    return p.returncode == 0


@pytest.fixture(scope="module")
def lib() -> Path:
    d = H.world_dir("bisectbot-lib-")
    H.portable_lib(d / "lib")
    yield d / "lib"
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def night(lib: Path) -> H.Night:
    d = H.world_dir("bisectbot-nobody-")
    yield H.Night(d, user="nobody", lib=lib)
    shutil.rmtree(d, ignore_errors=True)


def test_the_night_runs_as_nobody_or_fails_closed(night: H.Night) -> None:
    if not _bwrap_as_nobody():  # the host refuses unprivileged namespaces: no candidate may run
        assert night.p.returncode == 1, night.p.stderr[-2000:]
        assert "refuses the namespaces" in night.p.stderr and "BISECTBOT_SANDBOX=off" in night.p.stderr
        assert night.probes == []
        return
    night.ok()
    assert {p["uid"] for p in night.probes} == {H.NOBODY}


@pytest.mark.parametrize("check", H.ALL, ids=lambda c: c.__name__)
def test_route_stays_closed_as_nobody(night: H.Night, check) -> None:
    if not _bwrap_as_nobody():
        pytest.skip("this host refuses unprivileged namespaces: the run failed closed (test above)")
    night.ok()
    check(night)


def test_the_unprivileged_checks_can_fail(lib: Path) -> None:
    # the same night as nobody with the sandbox off: the routes a same-uid candidate has are open
    # (the bot's non-dumpable flag keeps its memory, ptrace and descriptors closed even then)
    d = H.world_dir("bisectbot-nobody-off-")
    try:
        n = H.Night(d, user="nobody", lib=lib, sandbox="off")
        n.ok()
        for check in (H.no_secret_found, H.no_survivor, H.job_files_untouched, H.state_untouched):
            with pytest.raises(AssertionError):
                check(n)
    finally:
        H.kill_survivors()
        shutil.rmtree(d, ignore_errors=True)
