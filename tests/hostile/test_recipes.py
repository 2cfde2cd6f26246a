"""Class 7 of issue 13: hostile recipe files are refused with FILE:LINE:COL and exit 2, never a
traceback or an exhausted host. The CLI runs in a subprocess (``recipe validate``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.bisect.conftest import run_cli

BASE = """\
name: hostile
source: {kind: git, repo: /tmp/nowhere}
"""

LAUGHS = "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n" + "".join(
    f"{c}: &{c} [{','.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))

CASES: dict[str, tuple[bytes, str]] = {
    # name: (file bytes, text expected in the one-line error)
    "billion-laughs": ((BASE + "description: x\nx-laughs:\n" + "".join("  " + ln + "\n" for ln in LAUGHS.splitlines())
                        ).encode(), "alias"),
    "alias-expansion-few-aliases": ((BASE + "a: &a [" + ",".join(["x"] * 2000) + "]\n"
                                     "b: &b [" + ",".join(["*a"] * 60) + "]\n").encode(), "nodes"),
    "deep-nesting": ((BASE + "description: " + "[" * 5000 + "]" * 5000 + "\n").encode(), "deep"),
    "deep-mapping": ((BASE + "reproducer:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 60))).encode(),
                     "deep"),
    "non-utf8": (BASE.encode() + b"description: caf\xe9\n", "not UTF-8"),
    "utf16-bom": ("\ufeff".encode("utf-16-le") + BASE.encode("utf-16-le"), "not UTF-8"),
    "huge-integer": ((BASE + "tp: " + "9" * 5000 + "\n").encode(), "too large"),
    "huge-max-size": ((BASE + "reproducer: {max_size: 100000000000000000000000000}\n").encode(), "too large"),
    "max-size-over-cap": ((BASE + "reproducer: {max_size: 1000000000}\n").encode(), "max_size"),
    "negative-size": ((BASE + "reproducer: {sizes: [2000, -5, 8000]}\n").encode(), "sizes[1]"),
    "zero-size": ((BASE + "reproducer: {sizes: [0]}\n").encode(), "sizes[0]"),
    "negative-threshold-below": ((BASE + "regress: {threshold-below: -20000}\n").encode(), "threshold-below"),
    "duplicate-key": ((BASE + "tp: 4\nmodel: x\ntp: 8\n").encode(), "duplicate key 'tp'"),
    "duplicate-nested-key": ((BASE + "server:\n  port: 8000\n  port: 9000\n").encode(), "duplicate key 'port'"),
    "mount-root": ((BASE + "server: {mounts: ['/:/host']}\n").encode(), "mount"),
    "mount-docker-socket": ((BASE + "server: {mounts: ['/var/run/docker.sock:/var/run/docker.sock']}\n").encode(),
                            "Docker socket"),
    "mount-run-docker-socket": ((BASE + "server: {mounts: ['/run/docker.sock:/d.sock:ro']}\n").encode(),
                                "Docker socket"),
    "mount-relative": ((BASE + "server: {mounts: ['data:/data']}\n").encode(), "absolute"),
    "mount-dotdot-root": ((BASE + "server: {mounts: ['/tmp/../:/x']}\n").encode(), "mount"),
    "mount-etc": ((BASE + "server: {mounts: ['/etc:/etc:ro']}\n").encode(), "mount"),
    # issue 41, item 12: a NUL byte no process argument or environment value can hold, in each field
    # that reaches an execve (at the start, the middle or the end of the word)
    "nul-reproducer-command": ((BASE + 'reproducer: {kind: command, command: [sh, "-c\\0", x]}\n').encode(),
                               "reproducer.command[1]: a NUL byte"),
    "nul-server-command": ((BASE + 'server: {command: ["\\0vllm", serve]}\n').encode(), "server.command[0]: a NUL"),
    "nul-build-command": ((BASE + 'server: {build_command: [make, "all\\0"]}\n').encode(),
                          "server.build_command[1]: a NUL"),
    "nul-server-env": ((BASE + 'server: {env: {HIP_VISIBLE_DEVICES: "0\\0,1"}}\n').encode(),
                       "server.env.HIP_VISIBLE_DEVICES: a NUL"),
    "nul-triage-args": ((BASE + 'triage: [{name: t, args: ["--x\\0"]}]\n').encode(), "args[0]: a NUL"),
    "nul-triage-env": ((BASE + 'triage: [{name: t, env: {A: "\\0"}}]\n').encode(), "env.A: a NUL"),
    "oversized-file": ((BASE + "description: '" + "x" * (2 * 1024 * 1024) + "'\n").encode(), "larger than"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_recipe_is_exit_2_with_a_located_error(tmp_path: Path, name: str) -> None:
    data, expect = CASES[name]
    f = tmp_path / "r.yaml"
    f.write_bytes(data)
    p = run_cli("recipe", "validate", str(f), timeout=120)
    out = p.stdout + p.stderr
    assert p.returncode == 2, (p.returncode, out[-3000:])
    assert "Traceback" not in out, out[-3000:]
    assert f"{f}:" in out and expect in out, out[-3000:]


def test_duplicate_key_names_file_line_and_column(tmp_path: Path) -> None:
    f = tmp_path / "r.yaml"
    f.write_text(BASE + "tp: 4\nmodel: x\ntp: 8\n")
    p = run_cli("recipe", "validate", str(f))
    assert f"{f}:5:1: (yaml): duplicate key 'tp' (first at line 3, column 1)" in p.stdout + p.stderr


def test_mount_to_home_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home" / "runner"
    home.mkdir(parents=True)
    f = tmp_path / "r.yaml"
    for m in (f"{home}:/h", f"{home.parent}:/h", "~:/h", "~/:/h", "~/..:/h"):
        f.write_text(BASE + f"server: {{mounts: ['{m}']}}\n")
        p = run_cli("recipe", "validate", str(f), env={"HOME": str(home)})
        assert p.returncode == 2 and "home directory" in p.stdout + p.stderr, p.stdout + p.stderr
    # a subdirectory of home (the Hugging Face cache) is fine
    (home / ".cache").mkdir()
    for m in (f"{home}/.cache:/root/.cache:ro", "~/.cache/huggingface:/root/.cache/huggingface"):
        f.write_text(BASE + f"server: {{mounts: ['{m}']}}\n")
        p = run_cli("recipe", "validate", str(f), env={"HOME": str(home)})
        assert p.returncode == 0 and ": ok" in p.stdout, p.stdout + p.stderr


def test_symlink_to_docker_socket_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "innocent"
    link.symlink_to("/var/run/docker.sock")
    f = tmp_path / "r.yaml"
    f.write_text(BASE + f"server: {{mounts: ['{link}:/x']}}\n")
    p = run_cli("recipe", "validate", str(f))
    assert p.returncode == 2 and "Docker socket" in p.stdout + p.stderr


def test_billion_laughs_memory_stays_small(tmp_path: Path) -> None:
    f = tmp_path / "r.yaml"
    f.write_text(BASE + LAUGHS)
    # The child prints its own peak RSS, VmHWM of /proc/self/status (KiB): the high-water mark of
    # its own address space since exec. Not getrusage's ru_maxrss: Linux carries the exec-ing
    # process's high-water mark over execve, so that one is at least the pytest worker's own peak
    # and failed under load when earlier tests in the same worker had used > 300 MiB.
    code = ("from bisectbot.recipe import load_recipe\nfrom bisectbot.errors import RecipeError\n"
            f"try:\n    load_recipe({str(f)!r})\nexcept RecipeError as e:\n    print(e)\n"
            "print(next(ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM:')))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "alias" in p.stdout
    assert int(p.stdout.split()[-1]) < 300 * 1024  # KiB


def test_probe_max_size_1e26_is_exit_2(tmp_path: Path) -> None:
    p = run_cli("probe", "--endpoint", "http://127.0.0.1:9", "--max-size", "1" + "0" * 26, timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr


def test_recipe_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    import os

    f = tmp_path / "r.yaml"
    os.mkfifo(f)  # nobody writes: opening it for reading would block forever
    p = run_cli("recipe", "validate", str(f), timeout=60)
    out = p.stdout + p.stderr
    assert p.returncode == 2 and "Traceback" not in out, out[-3000:]
    assert f"{f}:1:1:" in out and "not a regular file" in out, out[-3000:]
