"""The environment is never a verdict (issue 35, item 2), through the installed ``bisectbot run``.

Members of one kind: a host-side failure that is the same for every candidate -- the Docker daemon
unreachable (``DOCKER_HOST`` at a missing socket), no space left on device during a build, a device
node the runner profile requires and this host lacks. Each aborts the run with its cause (exit 1),
caches no verdict in the ledger, writes no report or ``issue.md`` and files nothing. On main the
first ended "boundary-failed" with an upstream issue about this host, the second cached a skip for
every candidate, the third bisected as if the profile's devices were there.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bisectbot.ledger import Ledger
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


@pytest.fixture
def full_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 1 MiB tmpfs filled to the last byte (root only, as in CI)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    d = tmp_path / "full"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(d)], check=True)
    try:
        fd = os.open(d / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


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
