"""The ledger: one SQLite file (WAL mode) holding everything the bot has seen.

Tables (schema versioned, migrated forward on open):

* ``nightlies``   -- every (repository, tag, digest) seen, first/last seen (UTC ISO), components JSON
* ``images``      -- what an image holds, cached by digest (JSON from ``bisectbot.components``)
* ``probes``      -- probe results keyed by cache key (candidate + build key + reproducer key); the
  full result (size table, evidence, patches) is zlib-compressed JSON in ``result`` (a BLOB; rows
  written as plain JSON text by earlier versions are still read), so a probe costs well under 2 KB
* ``sessions``    -- bisection sessions (recipe, range, state JSON) for resume
* ``events``      -- the readable, replayable log of each session (``bisectbot bisect log``)
* ``github``      -- fingerprint -> issue number, written *before* and *after* create (crash safety)

Location: ``$XDG_STATE_HOME/bisectbot/ledger.sqlite3`` (default ``~/.local/state``),
overridden by ``--state DIR`` or ``BISECTBOT_STATE``.

Concurrency: every write is one short ``BEGIN IMMEDIATE`` transaction with a 30 s busy
timeout, so two processes writing at once serialise instead of failing, and a process
killed mid-write loses at most the transaction it was in (SQLite's journal guarantees).
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import time
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import jsonio as _jsonio
from .errors import LedgerError
from .models import ProbeResult
from .secrets import redact_data

SCHEMA_VERSION = 2

_MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE nightlies (
            repository TEXT NOT NULL, tag TEXT NOT NULL, digest TEXT NOT NULL,
            first_seen TEXT NOT NULL, last_seen TEXT NOT NULL, last_updated TEXT,
            components TEXT, PRIMARY KEY (repository, tag, digest))""",
        """CREATE TABLE probes (
            cache_key TEXT PRIMARY KEY, candidate TEXT NOT NULL, verdict TEXT NOT NULL,
            threshold_lo INTEGER, threshold_hi INTEGER, result TEXT NOT NULL,
            created TEXT NOT NULL)""",
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY, recipe TEXT NOT NULL, recipe_hash TEXT NOT NULL,
            good TEXT, bad TEXT, status TEXT NOT NULL, state TEXT NOT NULL,
            created TEXT NOT NULL, updated TEXT NOT NULL)""",
        """CREATE TABLE events (
            id INTEGER PRIMARY KEY AUTOINCREMENT, session TEXT NOT NULL,
            at TEXT NOT NULL, kind TEXT NOT NULL, data TEXT NOT NULL)""",
        "CREATE INDEX events_session ON events(session, id)",
    ],
    2: [
        """CREATE TABLE images (
            digest TEXT PRIMARY KEY, info TEXT NOT NULL, created TEXT NOT NULL)""",
        """CREATE TABLE github (
            fingerprint TEXT PRIMARY KEY, repo TEXT NOT NULL, number INTEGER,
            state TEXT NOT NULL, updated TEXT NOT NULL)""",
    ],
}


def _pack(obj: Any) -> bytes:
    """Compact JSON, zlib-compressed (level 6): a probe with a 7-size table shrinks ~4x."""
    return zlib.compress(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode(), 6)


def _unpack(raw: bytes | str) -> Any:
    """Inverse of :func:`_pack`; plain JSON text (rows of earlier versions) is read as is."""
    if isinstance(raw, (bytes, bytearray, memoryview)):
        return _jsonio.loads(zlib.decompress(bytes(raw)))
    return _jsonio.loads(raw)


class ProbeRows:
    """The ledger's probe results, oldest first, read lazily: iterating streams rows from SQLite
    (one decoded :class:`ProbeResult` at a time, so 100,000 probes never sit in memory at once);
    ``len()`` is one ``COUNT(*)``."""

    def __init__(self, db: sqlite3.Connection):
        self._db = db

    def __iter__(self) -> Iterator[ProbeResult]:
        cur = self._db.execute("SELECT result FROM probes ORDER BY rowid")  # insertion = created order, no sort
        while True:
            rows = cur.fetchmany(256)
            if not rows:
                return
            for (raw,) in rows:
                yield ProbeResult.from_dict(_unpack(raw))

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM probes").fetchone()[0])


def now_iso() -> str:
    """Current UTC time, ISO 8601 with seconds."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


LEDGER_FILE = "ledger.sqlite3"
"""The ledger's file name inside the state directory."""


def default_state_dir() -> Path:
    """``$BISECTBOT_STATE``, else ``$XDG_STATE_HOME/bisectbot``, else ``~/.local/state/bisectbot``."""
    if os.environ.get("BISECTBOT_STATE"):
        return Path(os.environ["BISECTBOT_STATE"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "bisectbot"


class Ledger:
    """SQLite ledger. Safe to open from several processes at once.

    Raises :class:`LedgerError` when the file is not a ledger or has a newer schema.
    """

    def __init__(self, state_dir: str | Path | None = None):
        self.state_dir = Path(state_dir) if state_dir else default_state_dir()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        from .sandbox import protect

        protect(self.state_dir, "hide")  # no candidate reads or rewrites the state (issue 36, input 5)
        self.path = self.state_dir / LEDGER_FILE
        try:
            self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=30000")
            self._migrate()
        except sqlite3.DatabaseError as e:
            raise LedgerError(f"ledger {self.path} is unreadable: {e}") from None

    # ------------------------------------------------------------------ plumbing
    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        for attempt in range(50):
            try:
                self._db.execute("BEGIN IMMEDIATE")
                break
            except sqlite3.OperationalError as e:  # pragma: no cover - busy beyond timeout
                if "locked" not in str(e) or attempt == 49:
                    raise
                time.sleep(0.1)
        try:
            yield self._db
            self._db.execute("COMMIT")
        except BaseException as e:
            # SQLite has already rolled back a transaction a full disk ended ("cannot rollback - no
            # transaction is active" then hid the cause): roll back only what is still open
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            if isinstance(e, sqlite3.OperationalError) and "database or disk is full" in str(e):
                # the host's failure, said as the OS says it (the CLI's boundary names the disk, exit 1)
                raise OSError(errno.ENOSPC, f"No space left on device (the ledger {self.path}: {e})") from e
            raise

    def _migrate(self) -> None:
        with self._tx() as db:
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise LedgerError(
                    f"ledger {self.path} has schema {version}, this bisectbot knows {SCHEMA_VERSION}: upgrade bisectbot"
                )
            for v in range(version + 1, SCHEMA_VERSION + 1):
                for stmt in _MIGRATIONS[v]:
                    db.execute(stmt)
            db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])

    # ------------------------------------------------------------------ nightlies
    def record_nightly(
        self, repository: str, tag: str, digest: str, last_updated: str | None = None,
        components: dict[str, Any] | None = None, seen: str | None = None,
    ) -> None:
        """Record that ``repository:tag`` pointed at ``digest`` now (or at ``seen``, ISO UTC)."""
        seen = seen or now_iso()
        comp = json.dumps(components) if components is not None else None
        with self._tx() as db:
            db.execute(
                """INSERT INTO nightlies(repository, tag, digest, first_seen, last_seen, last_updated, components)
                   VALUES (?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT(repository, tag, digest) DO UPDATE SET
                     last_seen=excluded.last_seen,
                     last_updated=COALESCE(excluded.last_updated, nightlies.last_updated),
                     components=COALESCE(excluded.components, nightlies.components)""",
                (repository, tag, digest, seen, seen, last_updated, comp),
            )

    def record_nightlies(self, rows: Iterable[tuple[str, str, str, str | None]], seen: str | None = None) -> None:
        """:meth:`record_nightly` for many ``(repository, tag, digest, last_updated)`` rows in one
        transaction (a discovery of 5,000 tags is one commit, not 5,000)."""
        seen = seen or now_iso()
        with self._tx() as db:
            db.executemany(
                """INSERT INTO nightlies(repository, tag, digest, first_seen, last_seen, last_updated)
                   VALUES (?, ?, ?, ?, ?, ?)
                   ON CONFLICT(repository, tag, digest) DO UPDATE SET
                     last_seen=excluded.last_seen,
                     last_updated=COALESCE(excluded.last_updated, nightlies.last_updated)""",
                [(repo, tag, dig, seen, seen, lu) for repo, tag, dig, lu in rows],
            )

    def nightly_digests(self, repository: str) -> dict[str, str]:
        """``tag -> digest`` last seen for each recorded tag of ``repository`` (what discovery need
        not ask the registry again for an immutable tag)."""
        rows = self._db.execute(
            "SELECT tag, digest FROM nightlies WHERE repository=? ORDER BY last_seen, first_seen", (repository,)
        ).fetchall()
        return {t: d for t, d in rows}

    def nightlies(self, repository: str | None = None) -> list[dict[str, Any]]:
        """All recorded (tag, digest) rows, oldest first-seen first."""
        q = "SELECT repository, tag, digest, first_seen, last_seen, last_updated, components FROM nightlies"
        args: tuple = ()
        if repository:
            q += " WHERE repository=?"
            args = (repository,)
        q += " ORDER BY first_seen, tag"
        rows = self._db.execute(q, args).fetchall()
        keys = ("repository", "tag", "digest", "first_seen", "last_seen", "last_updated", "components")
        out = []
        for r in rows:
            d = dict(zip(keys, r))
            d["components"] = _jsonio.loads(d["components"]) if d["components"] else None
            out.append(d)
        return out

    # ------------------------------------------------------------------ images
    def put_image_info(self, digest: str, info: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO images(digest, info, created) VALUES (?, ?, ?)",
                (digest, json.dumps(info, sort_keys=True), now_iso()),
            )

    def get_image_info(self, digest: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT info FROM images WHERE digest=?", (digest,)).fetchone()
        return _jsonio.loads(row[0]) if row else None

    # ------------------------------------------------------------------ probes
    def put_probe(self, result: ProbeResult) -> None:
        """Store a probe result under ``result.cache_key`` (must be set)."""
        self.put_probes([result])

    def put_probes(self, results: Iterable[ProbeResult]) -> int:
        """Store many probe results in one transaction (an import, a merged round); returns how many.
        Raises ValueError, storing none, when one has no ``cache_key``."""
        rows = []
        t = now_iso()
        for result in results:
            if not result.cache_key:
                raise ValueError("ProbeResult.cache_key is empty")
            lo, hi = result.threshold if result.threshold else (None, None)
            rows.append((result.cache_key, result.candidate.ref, result.verdict.value, lo, hi,
                         _pack(result.to_dict()), t))
        with self._tx() as db:
            db.executemany(
                """INSERT OR REPLACE INTO probes(cache_key, candidate, verdict, threshold_lo, threshold_hi,
                   result, created) VALUES (?, ?, ?, ?, ?, ?, ?)""", rows)
        return len(rows)

    def get_probe(self, cache_key: str) -> ProbeResult | None:
        row = self._db.execute("SELECT result FROM probes WHERE cache_key=?", (cache_key,)).fetchone()
        return ProbeResult.from_dict(_unpack(row[0])) if row else None

    def get_probe_stored(self, cache_key: str) -> tuple[ProbeResult, str] | None:
        """The probe result stored under ``cache_key`` and when it was stored (UTC ISO 8601,
        ``2026-12-02T05:04:57+00:00``: the time its probe finished), or None."""
        row = self._db.execute("SELECT result, created FROM probes WHERE cache_key=?", (cache_key,)).fetchone()
        return (ProbeResult.from_dict(_unpack(row[0])), str(row[1])) if row else None

    def probes(self) -> ProbeRows:
        """Every stored probe result, oldest first, streamed (see :class:`ProbeRows`; ``len()`` works)."""
        return ProbeRows(self._db)

    # ------------------------------------------------------------------ sessions
    def save_session(
        self, session_id: str, recipe: str, recipe_hash: str, good: str | None, bad: str | None,
        status: str, state: dict[str, Any],
    ) -> None:
        t = now_iso()
        with self._tx() as db:
            db.execute(
                """INSERT INTO sessions(id, recipe, recipe_hash, good, bad, status, state, created, updated)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT(id) DO UPDATE SET status=excluded.status, state=excluded.state,
                     updated=excluded.updated, good=excluded.good, bad=excluded.bad""",
                (session_id, recipe, recipe_hash, good, bad, status, json.dumps(redact_data(state), sort_keys=True), t, t),
            )

    def get_session(self, session_id: str) -> dict[str, Any] | None:
        row = self._db.execute(
            "SELECT id, recipe, recipe_hash, good, bad, status, state, created, updated FROM sessions WHERE id=?",
            (session_id,),
        ).fetchone()
        if not row:
            return None
        keys = ("id", "recipe", "recipe_hash", "good", "bad", "status", "state", "created", "updated")
        d = dict(zip(keys, row))
        d["state"] = _jsonio.loads(d["state"])
        return d

    def sessions(self, recipe: str | None = None) -> list[dict[str, Any]]:
        q = "SELECT id FROM sessions" + (" WHERE recipe=?" if recipe else "") + " ORDER BY created"
        ids = [r[0] for r in self._db.execute(q, (recipe,) if recipe else ()).fetchall()]
        return [s for s in (self.get_session(i) for i in ids) if s]

    def log_event(self, session_id: str, kind: str, data: dict[str, Any]) -> None:
        """Append one line to a session's log (``bisectbot bisect log``)."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO events(session, at, kind, data) VALUES (?, ?, ?, ?)",
                (session_id, now_iso(), kind, json.dumps(redact_data(data), sort_keys=True)),
            )

    def events(self, session_id: str) -> list[dict[str, Any]]:
        rows = self._db.execute(
            "SELECT at, kind, data FROM events WHERE session=? ORDER BY id", (session_id,)
        ).fetchall()
        return [{"at": a, "kind": k, "data": _jsonio.loads(d)} for a, k, d in rows]

    # ------------------------------------------------------------------ github
    def github_intent(self, fingerprint: str, repo: str) -> None:
        """Record 'about to create an issue for fingerprint' (before the API call)."""
        with self._tx() as db:
            db.execute(
                """INSERT INTO github(fingerprint, repo, number, state, updated) VALUES (?, ?, NULL, 'creating', ?)
                   ON CONFLICT(fingerprint) DO UPDATE SET updated=excluded.updated
                   WHERE github.number IS NULL""",
                (fingerprint, repo, now_iso()),
            )

    def github_created(self, fingerprint: str, repo: str, number: int) -> None:
        with self._tx() as db:
            db.execute(
                """INSERT INTO github(fingerprint, repo, number, state, updated) VALUES (?, ?, ?, 'open', ?)
                   ON CONFLICT(fingerprint) DO UPDATE SET number=excluded.number, state='open',
                   updated=excluded.updated""",
                (fingerprint, repo, number, now_iso()),
            )

    def github_issue(self, fingerprint: str) -> dict[str, Any] | None:
        row = self._db.execute(
            "SELECT fingerprint, repo, number, state, updated FROM github WHERE fingerprint=?", (fingerprint,)
        ).fetchone()
        return dict(zip(("fingerprint", "repo", "number", "state", "updated"), row)) if row else None

    def github_set_state(self, fingerprint: str, state: str) -> None:
        """Set the recorded state of a tracked issue (``open``, ``closed``); no-op when unknown."""
        with self._tx() as db:
            db.execute("UPDATE github SET state=?, updated=? WHERE fingerprint=?", (state, now_iso(), fingerprint))

    def github_issues(self, repo: str | None = None, state: str | None = None) -> list[dict[str, Any]]:
        """Tracked issues (fingerprint, repo, number, state, updated), optionally filtered."""
        q = "SELECT fingerprint, repo, number, state, updated FROM github WHERE 1=1"
        args: list[Any] = []
        if repo:
            q += " AND repo=?"
            args.append(repo)
        if state:
            q += " AND state=?"
            args.append(state)
        rows = self._db.execute(q + " ORDER BY updated", args).fetchall()
        return [dict(zip(("fingerprint", "repo", "number", "state", "updated"), r)) for r in rows]
