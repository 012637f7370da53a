"""The reference floor: the reference's own table, driven by the reference's own statements.

The table is the reference's 17 columns with its two indexes (``idx_<t>_pending`` and
``idx_<t>_dead_letter``, as REFERENCE.md writes them), nothing of hexeract_lite's own
schema; the statements are the reference's SQLite statements, read verbatim from
``shared/vectors/reference_sqlite_statements.tsv`` (``HEXERACT_REFERENCE_STATEMENTS``
names another copy): ``insert``, ``claim`` and ``mark_delivered``. That is the fastest a
store that keeps the reference's table and occurrence rules can be; the ratio to it is
what hexeract_lite's Python and its extensions cost, and the ratio of this floor to the
physical one (``_physical``) is what the reference's table costs.

Same file settings as everywhere (WAL, ``synchronous=FULL``); parameters built before
the clock starts; the handler is a no-op. The statements read SQLite's own clock: that
is the reference's choice, measured as it is. When the statements file is missing the
rows are skipped (``ImportError``, which ``run.py`` reports as ``n/a``).
"""

from __future__ import annotations

import os
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import apsw
from _common import EVENT_TYPE, MAX_ATTEMPTS, TABLE, connect, fill, ts, utcnow

HERE = Path(__file__).resolve().parent
STATEMENTS = HERE.parents[1] / "shared" / "vectors" / "reference_sqlite_statements.tsv"
LEASE = "+300 seconds"  # the reference's lease modifier for its claim

DDL = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    schedule_id         BLOB    NOT NULL PRIMARY KEY,
    event_type          TEXT    NOT NULL,
    payload             TEXT    NOT NULL,
    trigger_kind        TEXT    NOT NULL,
    cron_expr           TEXT,
    scheduled_for       TEXT    NOT NULL,
    target_kind         TEXT    NOT NULL,
    target_routing_key  TEXT,
    attempts            INTEGER NOT NULL DEFAULT 0,
    max_attempts        INTEGER NOT NULL,
    leased_until        TEXT,
    paused              INTEGER NOT NULL DEFAULT 0,
    last_error          TEXT,
    created_at          TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    delivered_at        TEXT,
    cancelled_at        TEXT,
    dead_lettered_at    TEXT
);
CREATE INDEX IF NOT EXISTS idx_{TABLE}_pending
    ON {TABLE} (scheduled_for)
    WHERE delivered_at IS NULL AND dead_lettered_at IS NULL AND cancelled_at IS NULL
      AND paused = 0;
CREATE INDEX IF NOT EXISTS idx_{TABLE}_dead_letter
    ON {TABLE} (dead_lettered_at)
    WHERE dead_lettered_at IS NOT NULL;
"""


def statements() -> dict[str, str]:
    """The reference's statements by name (``name<TAB>sql`` per line)."""
    path = Path(os.environ.get("HEXERACT_REFERENCE_STATEMENTS") or STATEMENTS)
    if not path.exists():
        raise ImportError(f"the reference's statements are not at {path}")
    lines = path.read_text().splitlines()
    return dict(line.split("\t", 1) for line in lines if line.strip())


def _open(directory: str) -> apsw.Connection:
    """A new file in ``directory`` holding the reference's table and indexes."""
    conn = connect(Path(directory) / "reference.db")
    conn.execute(DDL)
    return conn


def _params(n: int) -> list[tuple[Any, ...]]:
    """``n`` rows due in an hour, the insert's 9 parameters (ids UUIDv7-shaped)."""
    now = utcnow()
    base_ms = int(now.timestamp() * 1000)
    rows = []
    for i in range(n):
        rand = int.from_bytes(os.urandom(10), "big")
        sid = uuid.UUID(
            int=((base_ms + i) << 80)
            | (0x7 << 76)
            | ((rand >> 62) & 0xFFF) << 64
            | (0b10 << 62)
            | (rand & 0x3FFF_FFFF_FFFF_FFFF)
        )
        due = ts(now + timedelta(hours=1, milliseconds=i))
        rows.append((sid.bytes, EVENT_TYPE, f'{{"i":{i}}}', "delay", None, due, "mediator",
                     None, MAX_ATTEMPTS))  # fmt: skip
    return rows


def enqueue(directory: str, n: int) -> dict[str, object]:
    """The reference's ``insert``, one row per transaction (autocommit)."""
    sql = statements()["insert"]
    conn = _open(directory)
    rows = _params(n)
    t0 = time.perf_counter()
    for row in rows:
        conn.execute(sql, row)
    elapsed = time.perf_counter() - t0
    conn.close()
    return {"value": n / elapsed, "unit": "rows/s", "n": n, "seconds": elapsed}


def insert_many(directory: str, n: int, per_txn: int) -> dict[str, object]:
    """``executemany`` of the reference's ``insert``, ``per_txn`` rows per
    ``BEGIN IMMEDIATE ... COMMIT``."""
    sql = statements()["insert"]
    conn = _open(directory)
    rows = _params(n)
    t0 = time.perf_counter()
    for start in range(0, n, per_txn):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(sql, rows[start : start + per_txn])
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return {"value": n / elapsed, "unit": "rows/s", "n": n, "seconds": elapsed}


def drain(directory: str, n: int, batch: int, fused: bool = False) -> dict[str, object]:
    """10k due rows (``n`` if more), written untimed, then until ``n`` are delivered: the
    reference's ``claim`` of ``batch`` (its own transaction), a no-op handler per row,
    the batch's fenced ``mark_delivered`` by ``executemany`` in one transaction.
    ``fused``: each transaction holds the previous batch's acknowledgements and the next
    claim, one commit per batch (the default worker's shape)."""
    sql = statements()
    claim, ack = sql["claim"], sql["mark_delivered"]
    conn = _open(directory)
    conn.close()
    fill(Path(directory) / "reference.db", max(n, 10_000), due=True)
    conn = connect(Path(directory) / "reference.db")
    cur = conn.cursor()
    done = cycles = 0
    held: list[tuple[Any, ...]] = []
    t0 = time.perf_counter()
    while True:
        if fused:
            cur.execute("BEGIN IMMEDIATE")
            if held:
                cur.executemany(ack, [(r[0], r[10]) for r in held])
                done += len(held)
            held = cur.execute(claim, (LEASE, batch)).fetchall() if done < n else []
            cur.execute("COMMIT")
        else:
            held = cur.execute(claim, (LEASE, batch)).fetchall() if done < n else []
        if not held:
            break
        for row in held:
            _noop(row)
        cycles += 1
        if not fused:
            cur.execute("BEGIN IMMEDIATE")
            cur.executemany(ack, [(r[0], r[10]) for r in held])
            cur.execute("COMMIT")
            done += len(held)
            held = []
    elapsed = time.perf_counter() - t0
    conn.close()
    return {"value": done / elapsed, "unit": "rows/s", "n": done, "cycles": cycles,
            "seconds": elapsed}  # fmt: skip


def _noop(row: tuple[object, ...]) -> None:
    return None
