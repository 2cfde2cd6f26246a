"""The environment is never a verdict (issue 35, item 2), through the installed ``bisectbot run``.

Members of one kind: a host-side failure that is the same for every candidate -- the Docker daemon
unreachable (``DOCKER_HOST`` at a missing socket), no space left on device during a build, a device
node the runner profile requires and this host lacks. Each aborts the run with its cause (exit 1),
caches no verdict in the ledger, writes no report or ``issue.md`` and files nothing. On main the
first ended "boundary-failed" with an upstream issue about this host, the second cached a skip for
every candidate, the third bisected as if the profile's devices were there.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bisectbot.ledger import Ledger
from tests.bisect.conftest import git
from tests.containers.fake_registry import FakeRegistry

REPO = "rocm/vllm-dev"
TAGS = [f"nightly_main_202604{d:02d}" for d in range(1, 9)]
DIG = {f"{REPO}:{t}": "sha256:" + hashlib.sha256(t.encode()).hexdigest() for t in TAGS}
STACK = ("version: 1\npatches:\n  - id: fix\n    package: vllm\n    path: engine_config.py\n    required: true\n"
         "    variants:\n      - id: v1\n        diff: p/v1.patch\n")
PATCH = "--- a/vllm/engine_config.py\n+++ b/vllm/engine_config.py\n@@ -1 +1 @@\n-A = 1\n+A = 2\n"


def probes_cached(state: Path) -> int:
    with Ledger(state) as led:
        return len(led.probes())


def assert_nothing_recorded(p: subprocess.CompletedProcess, state: Path, out: Path) -> None:
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    assert "not a verdict, nothing was recorded or filed" in p.stderr or "Nothing was probed" in p.stderr, p.stderr
    assert probes_cached(state) == 0
    assert not (out / "issue.md").exists() and not (out / "result.json").exists()


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of ``size`` (``mount -o size=``) at ``path``, unmounted after (root only, as in CI)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path) -> None:
    """Write ``disk/filler`` until the kernel says the disk is full."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


@pytest.fixture
def full_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 1 MiB tmpfs filled to the last byte."""
    with tmpfs(tmp_path / "full", "1m") as d:
        fill(d)
        yield d


def test_docker_daemon_unreachable_aborts_and_files_nothing(tmp_path) -> None:
    """The issue's input: nightlies with a patch stack, ``DOCKER_HOST`` at a missing socket. On main
    every probe was a skip "cannot reach the Docker daemon" and the run prepared an upstream issue."""
    (tmp_path / "patches" / "p").mkdir(parents=True)
    (tmp_path / "patches" / "stack.yaml").write_text(STACK)
    (tmp_path / "patches" / "p" / "v1.patch").write_text(PATCH)
    out, state = tmp_path / "out", tmp_path / "state"
    with FakeRegistry({REPO: TAGS}, DIG) as fake:
        r = tmp_path / "r.yaml"
        r.write_text(f"""name: dockerdown
source: {{kind: registry, registry: "127.0.0.1:{fake.port}", repository: {REPO}, tag_pattern: "nightly_main_*",
         insecure: true}}
server: {{command: [python3, -m, engine, --port, "{{port}}"], health_timeout_s: 20}}
patches: [fix]
bisect: {{good: {TAGS[0]}, bad: {TAGS[-1]}}}
report: {{dir: {out}, github: {{repo: octo-org/vllm}}}}
""")
        env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent.sock", "GITHUB_TOKEN": ""}
        p = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(state), "run", str(r), "--file-issue"],
                           capture_output=True, text=True, env=env, timeout=300)
    assert_nothing_recorded(p, state, out)
    assert "cannot reach the Docker daemon" in p.stderr and "docker" in p.stderr
    assert "boundary-failed" not in p.stdout + p.stderr


def test_no_space_left_during_a_build_aborts_and_caches_no_skip(tmp_path, kit, starts_file, full_fs) -> None:
    """The build writes its artefacts to a cache on a full disk (a real ENOSPC from the kernel). On main
    each candidate became a cached skip "build failed" and the run ended at the boundary."""
    repo = kit.make_engine_repo(tmp_path / "engine", 6, 3)
    out, state = tmp_path / "out", tmp_path / "state"
    build = [sys.executable, "-c",
             f"open({str(full_fs / 'artefact.bin')!r}, 'wb').write(b'x' * 65536); print('built')"]
    r = kit.write_recipe(tmp_path / "r.yaml", repo, out, mode="command", server={"build_command": build})
    p = kit.run_cli("--state", str(state), "run", str(r))
    assert_nothing_recorded(p, state, out)
    assert "the disk is full" in p.stderr and "No space left on device" in p.stderr
    assert kit.read_starts(starts_file) == []  # no reproducer ran on a half-built candidate


def test_a_device_the_profile_requires_is_missing(tmp_path, kit, starts_file) -> None:
    """The recipe's runner profile passes /dev/kfd-like nodes this host lacks: the same preflight as
    ``runner check`` stops the run before the first probe. On main the local runner bisected anyway."""
    missing = tmp_path / "dev" / "kfd"  # a device path that does not exist here (nor on CI)
    (tmp_path / "runners").mkdir()
    (tmp_path / "runners" / "gpuhost.yaml").write_text(yaml.safe_dump(
        {"name": "gpuhost", "description": "needs a GPU device", "devices": [str(missing)]}))
    repo = kit.make_engine_repo(tmp_path / "engine", 6, 3)
    out, state = tmp_path / "out", tmp_path / "state"
    r = kit.write_recipe(tmp_path / "r.yaml", repo, out, mode="command", runner="gpuhost")
    p = kit.run_cli("--state", str(state), "run", str(r))
    assert_nothing_recorded(p, state, out)
    assert f"device {missing}: missing" in p.stderr and "'gpuhost'" in p.stderr
    assert "bisectbot runner check" in p.stderr
    assert kit.read_starts(starts_file) == []
    # runner check says the same thing
    chk = kit.run_cli("--state", str(state), "runner", "check", "--recipe", str(r))
    assert chk.returncode == 1 and f"device {missing}" in chk.stdout


def test_state_directory_on_a_full_disk(tmp_path, kit, starts_file, full_fs) -> None:
    """Another member: the state directory (ledger, logs, worktrees) on a full disk."""
    repo = kit.make_engine_repo(tmp_path / "engine", 6, 3)
    out = tmp_path / "out"
    r = kit.write_recipe(tmp_path / "r.yaml", repo, out, mode="command")
    p = kit.run_cli("--state", str(full_fs / "state"), "run", str(r))
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert "disk is full" in p.stderr or "No space left on device" in p.stderr, p.stderr
    assert not (out / "issue.md").exists() and kit.read_starts(starts_file) == []


@pytest.mark.parametrize("fake", [
    "OSError: [Errno 28] No space left on device",
    "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
    "error gathering device information while adding custom device \"/dev/kfd\": no such file or directory",
])
def test_a_candidate_that_prints_a_host_failure_is_a_skip_not_a_stopped_night(tmp_path, fake: str) -> None:
    """Hostile pass: build and server logs are the candidate's output. A commit whose build prints a
    host failure it did not meet (the disk has room, no daemon is needed, the device exists or is not
    the profile's) must not stop every night: the bot observes the host itself. On the previous main
    the run ended exit 1 "This is the host" and wrote no report; now the commit is a skip and the
    bisection names the culprit."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(8):
        (repo / "state.txt").write_text(f"{'bad' if i >= 5 else 'good'} {i}\n")
        (repo / "build.py").write_text(f"import sys\nprint({fake!r}, file=sys.stderr)\nsys.exit(1)\n" if i == 3
                                       else "print('built')\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"change {i}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "fake-host", "source": {"kind": "git", "repo": str(repo)}, "regress": "command",
        "server": {"build_command": [sys.executable, "build.py"]},
        "reproducer": {"kind": "command", "command": [sys.executable, "-c",
                                                      "import sys; sys.exit(open('state.txt').read().startswith('bad'))"]},
        "bisect": {"good": shas[0], "bad": shas[-1]}, "report": {"dir": str(tmp_path / "out")}}))
    p = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp_path / "state"), "--json", "run",
                        str(recipe), "--runner", "local", "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=600)
    assert "This is the host" not in p.stderr, p.stderr[-2000:]
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    final = json.loads(p.stdout)["result"]["stages"][-1] if "result" in json.loads(p.stdout) else \
        json.loads(p.stdout)["stages"][-1]
    assert final["first_bad"]["ref"] == shas[5]


@pytest.mark.parametrize("after", [1, 3])
def test_the_disk_fills_mid_run_and_nothing_finished_is_lost(tmp_path, kit, starts_file, after: int) -> None:
    """Issue 41, item 12: the disk holding the state directory fills while the run is under way,
    after ``after`` reproducer runs (the test fills a real tmpfs from outside; where the bot is then
    -- a ledger write, a log, a worktree -- is wherever the kernel says ENOSPC). The run stops with
    the cause (exit 1, "the disk is full", no traceback, no "cannot rollback"); once space is freed
    the ledger reads, and a re-run resumes: every probe finished before the disk filled is answered
    from the ledger, not run again, and the culprit is named."""
    import threading
    import time

    with tmpfs(tmp_path / "disk", "32m") as disk:
        repo = kit.make_engine_repo(tmp_path / "engine", 12, 7)
        out, state = tmp_path / "out", disk / "state"
        r = kit.write_recipe(tmp_path / "r.yaml", repo, out, mode="command")
        env = {**os.environ, "CHECK_SLEEP": "0.5"}
        proc = subprocess.Popen([sys.executable, "-m", "bisectbot", "--state", str(state), "--json", "run", str(r)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        filled = threading.Event()

        def fill_after() -> None:
            deadline = time.monotonic() + 120
            while len(kit.read_starts(starts_file)) < after and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            fill(disk)
            filled.set()

        t = threading.Thread(target=fill_after)
        t.start()
        stdout, stderr = proc.communicate(timeout=300)
        t.join()
        assert filled.is_set()
        assert proc.returncode == 1, stdout[-2000:] + stderr[-3000:]
        assert "Traceback" not in stderr and "cannot rollback" not in stderr, stderr[-3000:]
        assert "the disk is full" in stderr, stderr[-3000:]
        assert not (out / "issue.md").exists()
        before = kit.read_starts(starts_file)
        (disk / "filler").unlink()
        with Ledger(state) as led:  # readable again, what was finished is there
            done = {repo.index_of(p.candidate.ref) for p in led.probes() if p.candidate.ref in repo.shas}
            rows = [(p.candidate.ref[:8], p.verdict.value, p.reason[:100]) for p in led.probes()]
        p = kit.run_cli("--state", str(state), "--json", "run", str(r))
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
        doc = json.loads(p.stdout)
        final = (doc["result"] if "result" in doc else doc)["stages"][-1]
        assert final["status"] == "culprit" and final["first_bad"]["ref"] == repo.shas[7], final
        again = kit.read_starts(starts_file)[len(before):]
        rerun = {int(v.rsplit("-", 1)[1]) for _, v in again}
        # the verification re-measures the culprit and its predecessor in this run (by design); the rest
        # of what the first run finished comes from the ledger (a host error is no cached skip)
        assert (done or after == 1) and not (done - {6, 7}) & rerun, (sorted(done), again, rows, p.stderr[-3000:])


def test_a_ledger_write_on_a_disk_that_filled_says_the_disk(tmp_path: Path) -> None:
    """Issue 41, item 12, the ledger's member: a write of a ledger that exists, once its disk has
    filled. SQLite rolls the transaction back itself; the ledger's own ROLLBACK then failed with
    "cannot rollback - no transaction is active", which hid the cause and read as a bug (exit 70).
    The write raises the OS's ENOSPC (the CLI's boundary turns it into exit 1 naming the disk), and
    once space is freed the ledger reads and writes as before."""
    import errno

    with tmpfs(tmp_path / "disk", "2m") as disk:
        with Ledger(disk / "state") as led:
            led.save_session("s1", "r", "h", "g", "b", "running", {"k": 1})
            fill(disk)
            with pytest.raises(OSError) as ei:
                led.save_session("s2", "r", "h", "g", "b", "running", {"big": "x" * 3_000_000})
            assert ei.value.errno == errno.ENOSPC and "cannot rollback" not in str(ei.value), ei.value
            (disk / "filler").unlink()
            led.save_session("s3", "r", "h", "g", "b", "running", {"k": 3})
        with Ledger(disk / "state") as led:
            assert led.get_session("s1") is not None and led.get_session("s3") is not None
