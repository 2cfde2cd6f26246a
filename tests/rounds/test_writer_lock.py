"""One writer per session (issue 16): two concurrent 'bisectbot run' on one state never
store a wrong verdict; the lock names its holder; probe directories of live probes stay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bisectbot.errors import BisectbotError
from bisectbot.ledger import Ledger
from bisectbot.session.lock import (
    WriterBusy,
    cleanup_free_probe_dirs,
    lock_is_free,
    probe_dir,
    read_holder,
    writer_lock,
    writer_lock_path,
)


def wait_for_holder(path: Path, timeout: float = 60) -> dict:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if path.exists() and not lock_is_free(path) and read_holder(path):
            return read_holder(path)
        time.sleep(0.05)
    raise AssertionError(f"nobody took {path}")


def assert_every_stored_verdict_is_true(state: Path, hist) -> int:
    with Ledger(state) as led:
        rows = list(led.probes())
    for r in rows:
        i = hist.shas.index(r.candidate.ref)
        truth = "bad" if i >= hist.culprit else "good"
        assert r.verdict.value == truth, (i, r.verdict, r.reason)
    return len(rows)


def test_second_run_exits_naming_the_holder_and_no_verdict_is_wrong(tmp_path, kit) -> None:
    hist = kit.make_history(tmp_path / "repo", 40, 9)
    recipe = kit.write_recipe(tmp_path / "r.yaml", hist, tmp_path / "out")
    state = tmp_path / "state"
    env = {"CHECK_SLEEP": "0.7"}
    a = kit.cli_popen("--state", str(state), "run", str(recipe), env=env)
    holder = wait_for_holder(writer_lock_path(state, "rounds-r"))
    assert holder["pid"] == a.pid
    b = kit.cli("--state", str(state), "run", str(recipe), env=env)
    assert b.returncode == 1
    assert "another bisectbot writer holds recipe 'rounds-r'" in b.stderr and f"pid {a.pid}" in b.stderr
    assert "Traceback" not in b.stderr
    out, err = a.communicate(timeout=300)
    assert a.returncode == 0, err
    assert json.loads((tmp_path / "out" / "result.json").read_text())["stages"][-1]["first_bad"]["ref"] == \
        hist.shas[9]
    assert assert_every_stored_verdict_is_true(state, hist) >= 6


def test_waiting_writer_runs_after_the_first_and_reuses_its_verdicts(tmp_path, kit) -> None:
    hist = kit.make_history(tmp_path / "repo", 40, 23)
    recipe = kit.write_recipe(tmp_path / "r.yaml", hist, tmp_path / "out")
    state = tmp_path / "state"
    env = {"CHECK_SLEEP": "0.5"}
    a = kit.cli_popen("--state", str(state), "run", str(recipe), "--parallel", "2", env=env)
    wait_for_holder(writer_lock_path(state, "rounds-r"))
    b = kit.cli_popen("--state", str(state), "run", str(recipe), "--parallel", "2", "--wait-lock", "-1", env=env)
    out_a, err_a = a.communicate(timeout=300)
    out_b, err_b = b.communicate(timeout=300)
    assert a.returncode == 0, err_a
    assert b.returncode == 0, err_b
    assert "waiting for the writer lock of recipe 'rounds-r'" in err_b
    assert "every verdict came from the probe cache" in out_b
    assert "SIGKILL" not in out_a + err_a + out_b + err_b
    assert assert_every_stored_verdict_is_true(state, hist) >= 6


def test_lock_file_symlink_is_refused(tmp_path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    p = writer_lock_path(tmp_path / "state", "r")
    p.parent.mkdir(parents=True)
    p.symlink_to(target)
    with pytest.raises(BisectbotError, match="symbolic link"):
        with writer_lock(tmp_path / "state", "r"):
            pass
    assert target.read_text() == "keep"


def test_lock_names_holder_and_times_out(tmp_path) -> None:
    code = ("import sys, time; from pathlib import Path; from bisectbot.session.lock import writer_lock\n"
            "with writer_lock(Path(sys.argv[1]), 'r'):\n    print('held', flush=True); time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        with pytest.raises(WriterBusy, match=f"pid {holder.pid} on "):
            with writer_lock(tmp_path, "r", wait_s=0.5):
                pass
        assert time.monotonic() - t0 >= 0.5
    finally:
        holder.kill()
        holder.wait()
    with writer_lock(tmp_path, "r"):  # the kernel released it with the dead holder
        assert read_holder(writer_lock_path(tmp_path, "r"))["pid"] == os.getpid()


def test_cleanup_removes_only_probe_dirs_of_dead_probes(tmp_path) -> None:
    root = tmp_path / "probes"
    code = ("import sys, time; from pathlib import Path; from bisectbot.session.lock import probe_dir\n"
            "with probe_dir(Path(sys.argv[1])) as d:\n    print(d, flush=True); time.sleep(60)\n")
    live = subprocess.Popen([sys.executable, "-c", code, str(root)], stdout=subprocess.PIPE, text=True)
    dead = subprocess.Popen([sys.executable, "-c", code, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        live_dir = Path(live.stdout.readline().strip())
        dead_dir = Path(dead.stdout.readline().strip())
        dead.kill()  # kill -9: its directory stays behind, its lock is free
        dead.wait()
        cleaned: list[Path] = []
        removed = cleanup_free_probe_dirs(root, cleaned.append)
        assert removed == [dead_dir] == cleaned
        assert live_dir.is_dir() and not dead_dir.exists()
    finally:
        live.kill()
        live.wait()
    with probe_dir(root) as d:
        assert d.is_dir()
    assert not d.exists()


MOUNTS = """\
/dev/sda1 / ext4 rw,relatime 0 0
server:/export /mnt/shared nfs4 rw,relatime 0 0
/dev/sdb1 /mnt/shared/local ext4 rw 0 0
tmpfs /tmp tmpfs rw 0 0
"""


def test_state_on_a_network_filesystem_is_refused_clearly() -> None:
    from bisectbot.session.lock import check_local_disk, filesystem_of

    assert filesystem_of(Path("/mnt/shared/state"), MOUNTS) == "nfs4"
    assert filesystem_of(Path("/mnt/shared/local/state"), MOUNTS) == "ext4"
    assert filesystem_of(Path("/mnt/sharedx"), MOUNTS) == "ext4"
    with pytest.raises(BisectbotError, match=r"network filesystem \(nfs4\).*local disk"):
        check_local_disk(Path("/mnt/shared/state"), MOUNTS)
    check_local_disk(Path("/mnt/shared/local/state"), MOUNTS)
    check_local_disk(Path("/tmp/x"))  # this machine's real /proc/mounts: a local disk
