"""The physical floor: the simplest durable SQLite queue that does the scheduler's job.

One table ``(id BLOB PRIMARY KEY, due TEXT, leased_until TEXT, attempts INT, done_at
TEXT, payload TEXT)`` with one partial index on ``due WHERE done_at IS NULL``; WAL,
``synchronous=FULL`` (every commit fsynced), as the store's ``durability="full"``.
Unlike ``_floor`` (the store's own table, indexes and statement shapes), nothing here
is this project's schema: the ratios to these rows show what the schema itself costs,
not only what the Python on top of it costs (issue 17).

Parameters are built before the clock starts; rows come back as plain tuples; the
handler is a no-op. The drain works on the same 10k due rows as the drain group (ids,
instants and payloads copied, untimed, from the store-schema file it is given).
"""

from __future__ import annotations

import os
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import apsw
from _common import connect, ts, utcnow

TABLE = "physical"

DDL = f"""
CREATE TABLE {TABLE} (
    id BLOB PRIMARY KEY,
    due TEXT,
    leased_until TEXT,
    attempts INT,
    done_at TEXT,
    payload TEXT
);
CREATE INDEX {TABLE}_due ON {TABLE} (due) WHERE done_at IS NULL;
"""

INSERT = f"INSERT INTO {TABLE} (id, due, attempts, payload) VALUES (?, ?, 0, ?)"

# A claim of n as one statement: the n soonest due rows that are not done and not under a
# live lease, leased and counted, returned.
CLAIM = f"""
UPDATE {TABLE} SET leased_until = ?, attempts = attempts + 1
WHERE id IN (
    SELECT id FROM {TABLE}
    WHERE done_at IS NULL AND due <= ? AND (leased_until IS NULL OR leased_until <= ?)
    ORDER BY due LIMIT ?)
RETURNING id, due, leased_until, attempts, payload
"""

# The acknowledgement, fenced on the lease the claim handed out.
ACK = f"UPDATE {TABLE} SET done_at = ? WHERE id = ? AND leased_until = ?"

LEASE = timedelta(seconds=300)


def _open(path: str | os.PathLike[str]) -> apsw.Connection:
    """The physical table in ``path`` (created if missing), WAL, synchronous=FULL."""
    conn = connect(path)
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)
    ).fetchall()
    if not exists:
        conn.execute(DDL)
    return conn


def _params(n: int) -> list[tuple[Any, ...]]:
    """``n`` rows due in an hour, as ``_floor._params`` builds them: UUIDv7-shaped ids
    increasing with ``due``, a small JSON payload."""
    now = utcnow()
    base_ms = int(now.timestamp() * 1000)
    rows = []
    for i in range(n):
        due = now + timedelta(hours=1, milliseconds=i)
        rand = int.from_bytes(os.urandom(10), "big")
        sid = uuid.UUID(
            int=((base_ms + i) << 80)
            | (0x7 << 76)
            | ((rand >> 62) & 0xFFF) << 64
            | (0b10 << 62)
            | (rand & 0x3FFF_FFFF_FFFF_FFFF)
        )
        rows.append((sid.bytes, ts(due), f'{{"i":{i}}}'))
    return rows


def enqueue(directory: str, n: int) -> dict[str, object]:
    """One INSERT per transaction (autocommit) with prebuilt parameters."""
    conn = _open(Path(directory) / "physical.db")
    rows = _params(n)
    t0 = time.perf_counter()
    for row in rows:
        conn.execute(INSERT, row)
    elapsed = time.perf_counter() - t0
    conn.close()
    return {"value": n / elapsed, "unit": "rows/s", "n": n, "seconds": elapsed}


def insert_many(directory: str, n: int, per_txn: int) -> dict[str, object]:
    """``executemany`` of ``per_txn`` rows inside BEGIN IMMEDIATE ... COMMIT."""
    conn = _open(Path(directory) / "physical.db")
    rows = _params(n)
    t0 = time.perf_counter()
    for start in range(0, n, per_txn):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(INSERT, rows[start : start + per_txn])
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return {"value": n / elapsed, "unit": "rows/s", "n": n, "seconds": elapsed}


def _copy_due_rows(source: str, dest: Path) -> int:
    """The live rows of the store-schema file ``source`` into a new physical file (not
    timed); closing the connection checkpoints the WAL, as the templates are."""
    conn = _open(dest)
    conn.execute("ATTACH DATABASE ? AS src", (source,))
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(
        f"INSERT INTO main.{TABLE} (id, due, leased_until, attempts, done_at, payload)"
        " SELECT schedule_id, scheduled_for, leased_until, attempts, NULL, payload"
        " FROM src.scheduled_messages"
        " WHERE delivered_at IS NULL AND dead_lettered_at IS NULL AND cancelled_at IS NULL"
    )
    conn.execute("COMMIT")
    conn.execute("DETACH DATABASE src")
    count = int(str(conn.execute(f"SELECT count(*) FROM {TABLE}").fetchall()[0][0]))
    conn.execute("PRAGMA optimize")
    conn.close()
    return count


def _noop(row: tuple[object, ...]) -> None:
    return None


def drain(path: str, n: int, batch: int) -> dict[str, object]:
    """Claim ``batch`` (one statement, its own transaction), the no-op handler per row,
    then ``batch`` fenced acknowledgements in one transaction; until ``n`` rows are done.

    ``path`` is a copy of the drain group's store-schema file; its due rows are copied
    into a physical file next to it first, untimed.
    """
    phys = Path(path).with_name("physical.db")
    rows_in = _copy_due_rows(path, phys)
    conn = _open(phys)
    plan = " | ".join(
        str(r[-1])
        for r in conn.execute("EXPLAIN QUERY PLAN " + CLAIM, ("x", "x", "x", batch)).fetchall()
    )
    done = 0
    cycles = 0
    t0 = time.perf_counter()
    while done < n:
        now = utcnow()
        at = ts(now)
        rows = conn.execute(CLAIM, (ts(now + LEASE), at, at, batch)).fetchall()
        if not rows:
            break
        for row in rows:
            _noop(row)
        finished = ts(utcnow())
        acks = [(finished, row[0], row[2]) for row in rows]
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(ACK, acks)
        conn.execute("COMMIT")
        done += len(rows)
        cycles += 1
    elapsed = time.perf_counter() - t0
    left = conn.execute(f"SELECT count(*) FROM {TABLE} WHERE done_at IS NULL").fetchall()[0][0]
    conn.close()
    return {
        "value": done / elapsed,
        "unit": "rows/s",
        "n": done,
        "rows": rows_in,
        "cycles": cycles,
        "left": left,
        "seconds": elapsed,
        "plan": plan,
    }
