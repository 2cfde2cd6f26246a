"""Issue 36: a hostile candidate under ``bisectbot run`` (local runner, a real git history, the CLI
in a subprocess) tries every route out of its probe; none leads anywhere.

The candidate (``tests/sandbox/hostile.py``, :data:`~tests.sandbox.hostile.HOSTILE`) answers like
the engine's own check, so the bisection must still name the right culprit, and on every probe
tries the routes the issue lists: other processes' environment, command line and memory
(``/proc/*/mem``, ``ptrace``), descriptors it inherited or can open through ``/proc/PID/fd``,
hooks and config in the repository's git directory, a ``setsid`` survivor, the job's command
files, the bot's state directory, ``~/.netrc``/``~/.git-credentials``/``~/.gitconfig``
(``git credential fill``), the Docker socket (``docker inspect`` of every container) and, as
root, unmounting or remounting what hides and protects. Each test fails on main 3832fe5 (no
sandbox, secrets and git configuration inherited) or with ``BISECTBOT_SANDBOX=off``; the routes
added since (memory, descriptors, home credentials, Docker, mounts) were checked with the
sandbox off (``test_each_check_fails_without_the_sandbox`` keeps that check).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.bisect.conftest import git, make_engine_repo, run_cli, write_recipe
from tests.sandbox import hostile as H
from tests.sandbox.hostile import Night


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Night:
    return Night(tmp_path_factory.mktemp("hostile-night"))


@pytest.mark.parametrize("check", H.ALL, ids=lambda c: c.__name__)
def test_route_stays_closed(night: Night, check) -> None:
    night.ok()
    check(night)


@pytest.fixture(scope="module")
def unconfined(tmp_path_factory: pytest.TempPathFactory) -> Night:
    """The same hostile night with the sandbox off (explicit opt-out), on a repository an
    unconfined night left hooks, fsmonitor and drivers in."""
    return Night(tmp_path_factory.mktemp("unconfined-night"), preplant=True, sandbox="off")


def test_code_planted_by_an_earlier_night_never_runs(unconfined: Night) -> None:
    # the bot's own git runs none of the planted code, the culprit is right (gitenv, not the sandbox)
    unconfined.ok()
    ran = sorted(p.name for p in unconfined.loot.glob("*-RAN"))
    assert ran == [], f"the bot's git ran repository-controlled code: {ran}"


def _docker_reachable() -> bool:
    import socket

    for sock in ("/run/docker.sock", "/var/run/docker.sock"):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(sock)
            return True
        except OSError:
            pass
        finally:
            s.close()
    return False


@pytest.mark.parametrize("check", H.ALL, ids=lambda c: c.__name__)
def test_each_check_fails_without_the_sandbox(unconfined: Night, check) -> None:
    # the checks above can fail: with the sandbox off, the same candidate gets through each route
    # (as root: the bot's memory, ptrace and descriptors; below root the bot's non-dumpable flag
    # closes those, tests/sandbox/test_unprivileged.py)
    unconfined.ok()
    if check is H.no_docker and not _docker_reachable():
        pytest.skip("no Docker daemon reachable by this uid: nothing for a candidate to reach either")
    if check in (H.no_memory_or_ptrace, H.no_descriptor) and os.getuid() != 0:
        pytest.skip("below root the bot's non-dumpable flag closes /proc/PID/mem, ptrace and /proc/PID/fd")
    with pytest.raises(AssertionError):
        check(unconfined)


def test_no_sandbox_fails_closed_naming_what_is_missing(tmp_path: Path) -> None:
    # a host without bwrap: the run stops before any candidate runs, and says why and how to opt out
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "sh", "env", "setsid", "sleep", "cat", "touch", "patch"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    repo = make_engine_repo(tmp_path / "repo", n=4, k=2)
    rec = write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out", mode="command")
    starts = tmp_path / "starts"
    starts.write_text("")
    base = {"PATH": str(bin_dir), "ENGINE_STARTS": str(starts)}
    p = run_cli("--state", str(tmp_path / "state"), "run", str(rec), "--out", str(tmp_path / "out"), env=base)
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    assert "bwrap is not installed" in p.stderr and "BISECTBOT_SANDBOX=off" in p.stderr, p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    assert starts.read_text() == ""  # no candidate ran
    p = run_cli("--state", str(tmp_path / "state2"), "run", str(rec), "--out", str(tmp_path / "out2"),
                env={**base, "BISECTBOT_SANDBOX": "off"})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert repo.shas[2] in p.stdout
    # the opt-out is said where the result is read: result.json's environment, report.md's notes
    res = json.loads((tmp_path / "out2" / "result.json").read_text())
    assert res["environment"].get("candidate sandbox") == "off (BISECTBOT_SANDBOX=off)", res["environment"]
    assert "candidates ran unconfined on this host" in (tmp_path / "out2" / "report.md").read_text()


def test_sandboxed_probe_sees_only_its_own_processes(tmp_path: Path) -> None:
    # the PID namespace, seen from inside: the reproducer lists /proc and finds only itself and its
    # parents inside the sandbox (no bot, no git child)
    repo = make_engine_repo(tmp_path / "repo", n=3, k=1)
    out = tmp_path / "loot"
    out.mkdir()
    script = out / "ps.py"
    script.write_text("import os,sys\n"
                      f"open('{out}/ps-'+str(os.getpid()),'w').write(' '.join(p for p in os.listdir('/proc') if p.isdigit()))\n"
                      "sys.exit(0)\n")
    rec = write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out", mode="command")
    data = yaml.safe_load(rec.read_text())
    data["reproducer"]["command"] = [sys.executable, str(script)]
    data["regress"] = "success"
    rec.write_text(yaml.safe_dump(data, sort_keys=False))
    t0 = time.monotonic()
    run_cli("--state", str(tmp_path / "state"), "run", str(rec), "--out", str(tmp_path / "out"),
            env={"BISECTBOT_SANDBOX_WRITABLE": str(out)})
    seen = [f.read_text().split() for f in out.glob("ps-*")]
    assert seen, f"the reproducer never ran ({time.monotonic() - t0:.1f} s)"
    for pids in seen:
        assert len(pids) <= 3, pids  # bwrap's init, the reproducer (and at most a shell between)
    git(repo.path, "status")  # the repository is intact
