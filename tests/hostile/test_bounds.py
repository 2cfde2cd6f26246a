"""Classes 5 and 6 of issue 13: time and memory bounds against hostile servers and reproducers.

Each hostile server is a real process (``hostile_server.py``); the probe runs as the installed CLI
in its own process, and its peak RSS is read from ``wait4`` in a small launcher (``peak_rss.py``:
that process and what it waited for, never the test runner's).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.hostile import peak_rss

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RSS_LIMIT_KIB = 512 * 1024


@pytest.fixture
def hostile() -> Iterator:
    procs = []

    def start(mode: str) -> str:
        p = subprocess.Popen([sys.executable, str(HERE / "hostile_server.py"), mode], stdout=subprocess.PIPE, text=True)
        procs.append(p)
        port = p.stdout.readline().strip()
        return f"http://127.0.0.1:{port}"

    yield start
    for p in procs:
        p.kill()
        p.wait()


def run_measured(args: list[str], tmp: Path, env: dict[str, str] | None = None,
                 timeout: float = 300) -> tuple[int, str, str, int, float]:
    """(exit code, stdout, stderr, peak RSS in KiB, wall seconds) of ``bisectbot ARGS`` in its own process.

    The peak RSS is that process's own (and that of the children it waited for), not the test
    runner's: see ``peak_rss.py`` for why ``wait4`` from the runner itself would not do.
    """
    e = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
    out_p, err_p = tmp / "stdout.txt", tmp / "stderr.txt"
    with open(out_p, "wb") as fo, open(err_p, "wb") as fe:
        rc, rss, wall = peak_rss.run_measured([sys.executable, "-m", "bisectbot", *args], tmp, env=e,
                                              timeout=timeout, stdout=fo, stderr=fe)
    return rc, out_p.read_text(errors="replace"), err_p.read_text(errors="replace"), rss, wall


PROBE = ["--json", "probe", "--sizes", "200", "--max-tokens", "10"]


def test_dribbling_body_is_cut_off_at_the_timeout(hostile, tmp_path: Path) -> None:
    url = hostile("dribble")
    rc, out, err, _, wall = run_measured([*PROBE, "--endpoint", url, "--timeout", "3"], tmp_path)
    assert rc == 4 or '"error"' in out, (rc, out[-2000:], err[-2000:])
    assert "timeout" in out + err
    # before: > 45 s for --timeout 3 (the timeout bounded only the gap between bytes)
    assert wall < 25, wall


def test_dribbling_headers_are_cut_off_at_the_timeout(hostile, tmp_path: Path) -> None:
    url = hostile("dribble-headers")
    rc, out, err, _, wall = run_measured([*PROBE, "--endpoint", url, "--timeout", "3"], tmp_path)
    assert "timeout" in out + err, (rc, out[-2000:], err[-2000:])
    assert wall < 25, wall


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["huge", "huge-declared", "gzip-bomb"])
def test_huge_reply_is_capped_and_memory_stays_bounded(hostile, tmp_path: Path, mode: str) -> None:
    url = hostile(mode)
    rc, out, err, rss, _ = run_measured([*PROBE, "--endpoint", url, "--timeout", "60"], tmp_path)
    assert "limit" in out + err, (rc, out[-2000:], err[-2000:])  # "reply larger than the ...-byte limit"
    assert rc == 4 and json.loads(out)["status"] == "error"  # a server error, never GARBAGE
    # before: 1.8 GB for the 50 MB reply
    assert rss < RSS_LIMIT_KIB, f"peak RSS {rss / 1024:.0f} MiB"


@pytest.mark.slow
def test_reproducer_printing_500_mb_keeps_memory_bounded(tmp_path: Path) -> None:
    flood = tmp_path / "flood.py"
    flood.write_text("import sys\nb = b'x' * (1 << 20)\nfor _ in range(500):\n    sys.stdout.buffer.write(b)\n"
                     "sys.stderr.write('last words: threshold below 10000\\n')\nsys.exit(1)\n")
    rec = tmp_path / "r.yaml"
    rec.write_text(yaml.safe_dump({
        "name": "flood", "source": {"kind": "git", "repo": str(tmp_path)},
        "reproducer": {"kind": "command", "command": [sys.executable, str(flood), "{size}"], "sizes": [1000],
                       "min_size": 1000, "max_size": 1000, "command_timeout_s": 120},
        "regress": "command"}))
    rc, out, err, rss, _ = run_measured(["--json", "probe", "--recipe", str(rec)], tmp_path)
    assert "last words" in out, (rc, out[-2000:], err[-2000:])  # the tail survives
    # before: 1 GB for 500 MB of output
    assert rss < RSS_LIMIT_KIB, f"peak RSS {rss / 1024:.0f} MiB"


def test_server_echoing_the_api_key_never_shows_it(hostile, tmp_path: Path) -> None:
    # class 1 again, from the other side: a hostile server echoes the bearer token back
    key = "sk-hostile-echo-0123456789"
    for mode in ("echo-key", "echo-key-error"):
        url = hostile(mode)
        rc, out, err, _, _ = run_measured([*PROBE, "--endpoint", url, "--timeout", "10"], tmp_path,
                                          env={"BISECTBOT_API_KEY": key})
        assert "Bearer" in out + err or "bad key" in out + err or rc in (0, 1, 3, 4), (rc, out[-2000:])
        assert key not in out + err, mode


def test_bounded_process_streams_output_to_the_log(tmp_path: Path) -> None:
    from bisectbot.bounded import run_process

    log = tmp_path / "cmd.log"
    r = run_process([sys.executable, "-c", "import sys\nfor i in range(20000): print(i)\nprint('end', file=sys.stderr)"],
                    timeout_s=60, log_path=log, tail_bytes=64, log_limit=1000)
    assert r.returncode == 0 and r.stdout_tail.endswith("19999\n") and len(r.stdout_tail) <= 64
    assert r.stderr_tail == "end\n" and r.stdout_bytes > 100_000
    text = log.read_text()
    assert "log cut at 1000 bytes" in text and len(text) < 1200
    t0 = time.monotonic()
    r = run_process([sys.executable, "-c", "import time; print('x', flush=True); time.sleep(60)"], timeout_s=1)
    assert r.timed_out and r.returncode is None and time.monotonic() - t0 < 20
