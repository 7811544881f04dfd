"""The audit log: every call one row in SQLite (WAL), hash-chained so edits are detectable.

row_hash = sha256(prev_hash || canonical JSON of the row's fields). `append` only puts the row
on a deque; a background thread wakes every 20 ms and writes what has gathered in one
transaction, so the request path never waits on the disk nor wakes a thread per call (a
queue.put per request costs a GIL hand-off each; docs/gateway.md, "The hot path"). `close()`
drains it, so a clean shutdown loses nothing. One gateway process writes a log: it holds an
flock on LOG.lock, and a second gateway on the same log is refused (two writers would fork the
chain).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from collections import deque
import sqlite3
import threading
import time
from dataclasses import dataclass

FIELDS = ("ts", "kind", "key_hash", "route", "variant", "backend", "weights_version", "seed",
          "tokens_in", "tokens_out", "latency_ms", "status", "cost_usd", "session", "request",
          "output", "detail")
GENESIS = "0" * 64
SCHEMA = (f"CREATE TABLE IF NOT EXISTS calls (id INTEGER PRIMARY KEY, {', '.join(FIELDS)}, "
          "prev_hash TEXT NOT NULL, row_hash TEXT NOT NULL)")
BATCH_WAIT_S = 0.02


def row_digest(prev_hash: str, values: tuple) -> str:
    payload = json.dumps(list(values), separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256((prev_hash + payload).encode()).hexdigest()


def connect(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(SCHEMA)
    db.commit()
    return db


class AuditLocked(RuntimeError):
    pass


def lock(path: str):
    """An exclusive flock on PATH.lock, held while the returned file stays open."""
    f = open(f"{path}.lock", "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise AuditLocked(f"audit log {path} is in use by another gateway (two writers would break its "
                          "hash chain): stop that one or set another audit_db") from None
    return f


class AuditLog:
    """`append(**fields)` from any thread; rows land in order, chained, a few ms later."""

    def __init__(self, path: str):
        self.path = path
        self.lock = lock(path)
        self.db = connect(path)
        last = self.db.execute("SELECT row_hash FROM calls ORDER BY id DESC LIMIT 1").fetchone()
        self.head = last[0] if last else GENESIS
        self.pending: deque[tuple] = deque()  # append and popleft are thread-safe
        self.stopping = threading.Event()
        self.written = 0
        self.thread = threading.Thread(target=self._run, name="audit-writer", daemon=True)
        self.thread.start()

    def append(self, **fields) -> None:
        fields.setdefault("ts", time.time())
        self.pending.append(tuple(fields.get(f) for f in FIELDS))

    def spent_by_key(self) -> dict[str, float]:
        rows = self.db.execute("SELECT key_hash, SUM(cost_usd) FROM calls WHERE cost_usd IS NOT NULL "
                               "GROUP BY key_hash").fetchall()
        return {k: v for k, v in rows if k}

    def _run(self) -> None:
        while True:
            stop = self.stopping.wait(BATCH_WAIT_S)
            batch = []
            while self.pending:
                batch.append(self.pending.popleft())
            self._write(batch)
            if stop:
                return

    def _write(self, batch: list[tuple]) -> None:
        rows = []
        for values in batch:
            digest = row_digest(self.head, values)
            rows.append((*values, self.head, digest))
            self.head = digest
        if rows:
            marks = ", ".join("?" * (len(FIELDS) + 2))
            with self.db:
                self.db.executemany(f"INSERT INTO calls ({', '.join(FIELDS)}, prev_hash, row_hash) "
                                    f"VALUES ({marks})", rows)
            self.written += len(rows)

    def close(self) -> None:
        """Write everything pending, then close (call once, at shutdown)."""
        self.stopping.set()
        self.thread.join()
        self.db.close()
        self.lock.close()


@dataclass
class Verdict:
    ok: bool
    rows: int
    head: str
    first_bad_id: int | None = None
    reason: str = ""


def verify(path: str) -> Verdict:
    """Walk the chain from the start; the first row whose hash or link does not match fails it."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    prev, n = GENESIS, 0
    cols = ", ".join(FIELDS)
    for row in db.execute(f"SELECT id, {cols}, prev_hash, row_hash FROM calls ORDER BY id"):
        rid, values, prev_hash, row_hash = row[0], row[1:-2], row[-2], row[-1]
        if prev_hash != prev:
            return Verdict(False, n, prev, rid, "link to the previous row broken (row deleted or inserted)")
        if row_digest(prev, values) != row_hash:
            return Verdict(False, n, prev, rid, "row content does not match its hash (row modified)")
        prev, n = row_hash, n + 1
    db.close()
    return Verdict(True, n, prev)
