"""Ledger: WAL SQLite shared by processes; a kill -9 mid-write loses at most that probe."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bisectbot.errors import LedgerError
from bisectbot.ledger import SCHEMA_VERSION, Ledger
from bisectbot.models import Candidate, CandidateKind, ProbeResult, Verdict

WRITER = textwrap.dedent(
    """
    import sys
    from bisectbot.ledger import Ledger
    from bisectbot.models import Candidate, CandidateKind, ProbeResult, Verdict
    state, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    led = Ledger(state)
    i = 0
    while n < 0 or i < n:
        c = Candidate(CandidateKind.COMMIT, f"{prefix}{i:06d}")
        r = ProbeResult(c, Verdict.GOOD if i % 2 else Verdict.BAD, reason="x" * 20000,
                        threshold=(i, i + 1), table=[{"size": s} for s in range(50)], cache_key=f"{prefix}-{i}")
        led.put_probe(r)
        print(i, flush=True)
        i += 1
    """
)


def _spawn(state: Path, prefix: str, n: int) -> subprocess.Popen:
    env = dict(os.environ)
    return subprocess.Popen([sys.executable, "-c", WRITER, str(state), prefix, str(n)],
                            stdout=subprocess.PIPE, text=True, env=env)


def test_roundtrip_and_schema(tmp_path: Path) -> None:
    with Ledger(tmp_path) as led:
        assert led.schema_version == SCHEMA_VERSION
        assert led._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        c = Candidate(CandidateKind.NIGHTLY, "sha256:ab", "nightly_main_20260101", "image")
        led.put_probe(ProbeResult(c, Verdict.BAD, threshold=(19000, 20500), cache_key="k1"))
        led.record_nightly("rocm/vllm-dev", "nightly", "sha256:1", seen="2026-01-01T00:00:00+00:00")
        led.record_nightly("rocm/vllm-dev", "nightly", "sha256:1", seen="2026-01-02T00:00:00+00:00")
        led.record_nightly("rocm/vllm-dev", "nightly", "sha256:2", seen="2026-01-03T00:00:00+00:00")
    with Ledger(tmp_path) as led:  # reopen: nothing lost, no re-migration
        got = led.get_probe("k1")
        assert got is not None and got.threshold == (19000, 20500) and got.candidate == c
        rows = led.nightlies("rocm/vllm-dev")
        assert [(r["digest"], r["first_seen"][:10], r["last_seen"][:10]) for r in rows] == [
            ("sha256:1", "2026-01-01", "2026-01-02"), ("sha256:2", "2026-01-03", "2026-01-03")]


def test_newer_schema_refused(tmp_path: Path) -> None:
    Ledger(tmp_path).close()
    db = sqlite3.connect(tmp_path / "ledger.sqlite3")
    db.execute("UPDATE meta SET value='999' WHERE key='schema_version'")
    db.commit()
    db.close()
    with pytest.raises(LedgerError, match="schema 999"):
        Ledger(tmp_path)


def test_not_a_ledger(tmp_path: Path) -> None:
    (tmp_path / "ledger.sqlite3").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(LedgerError, match="unreadable"):
        Ledger(tmp_path)


def test_two_processes_lose_nothing(tmp_path: Path) -> None:
    Ledger(tmp_path).close()
    a, b = _spawn(tmp_path, "a", 150), _spawn(tmp_path, "b", 150)
    assert a.wait(120) == 0 and b.wait(120) == 0
    with Ledger(tmp_path) as led:
        keys = {p.cache_key for p in led.probes()}
    assert keys == {f"a-{i}" for i in range(150)} | {f"b-{i}" for i in range(150)}


def test_kill_9_mid_write_leaves_readable_ledger(tmp_path: Path) -> None:
    Ledger(tmp_path).close()
    p = _spawn(tmp_path, "k", -1)
    done = []
    assert p.stdout is not None
    deadline = time.monotonic() + 60
    while len(done) < 40 and time.monotonic() < deadline:
        done.append(int(p.stdout.readline()))
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    db = sqlite3.connect(tmp_path / "ledger.sqlite3")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    with Ledger(tmp_path) as led:
        keys = {r.cache_key for r in led.probes()}
    # every probe the writer reported as committed is there; at most the one in flight is missing
    assert {f"k-{i}" for i in done} <= keys
    assert len(keys) >= len(done)


def _probe(i: int) -> ProbeResult:
    """A probe shaped like a real threshold search: 7 sizes, votes, excerpts, patches, logs."""
    c = Candidate(CandidateKind.COMMIT, f"{i:040x}", f"{i:010x} indexer: reuse the workspace buffer", "vllm",
                  {"parents": 1, "date": "2026-04-12T07:00:00+00:00", "repo": "/src/vllm", "author": "A. Dev",
                   "subject": "indexer: reuse the workspace buffer"})
    table = [{"requested": s, "prompt_tokens": s + 3, "outcome": "ok" if s < 20000 else "garbage",
              "reasons": [] if s < 20000 else ["repetition", "low-entropy"], "agreement": 1.0,
              "votes": {"ok": 3} if s < 20000 else {"garbage": 3}, "requests": 3, "seconds": 4.125,
              "excerpt": ("The capital of France is Paris. " * 4)[:120]}
             for s in (2048, 4096, 8192, 16384, 20480, 24576, 32768)]
    return ProbeResult(c, Verdict.BAD if i % 2 else Verdict.GOOD, reason="threshold 16384..20480 tokens",
                       threshold=(16384, 20480), signature="garbage@16K-20K", table=table, duration_s=312.5,
                       log_paths=[f"/state/logs/{i}/server.log"], patches=[{"id": "aiter-chunkq-clamp",
                                                                            "state": "applied"}],
                       cache_key=f"key-{i:08d}", extra={"build_key": f"b{i}", "requests": 21, "status": "found"})


def test_probe_storage_is_compact_streamed_and_reads_old_rows(tmp_path: Path) -> None:
    """Issue 15: under 2 KB per probe on disk; ``probes()`` streams and counts; rows written as plain
    JSON text by earlier versions still read."""
    import json

    with Ledger(tmp_path) as led:
        for i in range(500):
            led.put_probe(_probe(i))
        led._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = led.path.stat().st_size
        assert size / 500 < 2048, size / 500
        old = _probe(999)
        led._db.execute("INSERT INTO probes(cache_key, candidate, verdict, threshold_lo, threshold_hi, result, created)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?)", (old.cache_key, old.candidate.ref, "bad", 16384, 20480,
                                                          json.dumps(old.to_dict(), sort_keys=True), "2026-01-01"))
        rows = led.probes()
        assert len(rows) == 501
        it = iter(rows)
        assert next(it).to_dict() == _probe(0).to_dict()  # one row decoded, the rest still in SQLite
        assert led.get_probe(old.cache_key).to_dict() == old.to_dict()
        assert [p.cache_key for p in rows][-1] == old.cache_key


def test_nightly_digests_and_batch_record(tmp_path: Path) -> None:
    with Ledger(tmp_path) as led:
        led.record_nightlies([("r/x", "nightly", "sha256:a", None), ("r/x", "n_20260101", "sha256:b", "2026-01-01")],
                             seen="2026-01-01T00:00:00+00:00")
        led.record_nightlies([("r/x", "nightly", "sha256:c", None)], seen="2026-01-02T00:00:00+00:00")
        assert led.nightly_digests("r/x") == {"nightly": "sha256:c", "n_20260101": "sha256:b"}
        assert len(led.nightlies("r/x")) == 3 and led.nightly_digests("other") == {}
