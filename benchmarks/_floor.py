"""The floor: raw apsw doing the store's job with the store's table, and nothing else.

Same file settings as the store's ``durability="full"`` (WAL, synchronous=FULL), the same
table and indexes (``hexeract_lite.store.schema.sqlite_ddl``), statements of the same
shape as the store's: one INSERT per row; for the drains, the store's own claim and
acknowledgement statements (``SqliteStatements``); for the claim latencies, a claim that
is one ``UPDATE ... RETURNING`` honouring every eligibility rule. Parameters are built
before the clock starts; rows come back as plain tuples. What hexeract_lite adds on top
(validation, value objects, the worker's loop) is what the ratios to this floor show.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta
from typing import Any

import apsw
from _common import COLUMNS, EVENT_TYPE, LIVE, MAX_ATTEMPTS, TABLE, connect, ts, utcnow

INSERT = f"INSERT INTO {TABLE} ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

RETURNING = (
    "RETURNING schedule_id, event_type, payload, trigger_kind, cron_expr, scheduled_for,"
    " target_kind, target_routing_key, attempts, max_attempts, leased_until"
)

ELIGIBLE = f"{LIVE} AND paused = 0 AND scheduled_for <= :now AND attempts < max_attempts"

# One statement, the reference's rules, for a schema with only the reference's indexes:
# walk idx_<table>_pending in scheduled_for order, skipping leased rows.
CLAIM_REFERENCE = f"""
UPDATE {TABLE} SET attempts = attempts + 1, leased_until = :until
WHERE schedule_id IN (
    SELECT schedule_id FROM {TABLE}
    WHERE {ELIGIBLE} AND (leased_until IS NULL OR leased_until <= :now)
    ORDER BY scheduled_for, schedule_id LIMIT :n)
{RETURNING}
"""

# The same rules for hexeract_lite's schema (the store's claim shape): up to n fresh rows
# from idx_<t>_due in claim order, up to n rows whose lease or backoff has expired from
# idx_<t>_leased, merged, the first n leased.
CLAIM_SPLIT = f"""
UPDATE {TABLE} SET attempts = attempts + 1, leased_until = :until
WHERE schedule_id IN (
    SELECT schedule_id FROM (
        SELECT * FROM (
            SELECT schedule_id, scheduled_for FROM {TABLE} INDEXED BY idx_{TABLE}_due
            WHERE {ELIGIBLE} AND leased_until IS NULL
            ORDER BY scheduled_for, schedule_id LIMIT :n)
        UNION ALL
        SELECT * FROM (
            SELECT schedule_id, scheduled_for FROM {TABLE} INDEXED BY idx_{TABLE}_leased
            WHERE {ELIGIBLE} AND leased_until IS NOT NULL AND leased_until <= :now
            ORDER BY scheduled_for, schedule_id LIMIT :n))
    ORDER BY scheduled_for, schedule_id LIMIT :n)
{RETURNING}
"""

ACK = f"""
UPDATE {TABLE} SET delivered_at = ?, leased_until = NULL
WHERE schedule_id = ? AND leased_until = ? AND {LIVE}
"""

LEASE = timedelta(seconds=300)


def claim_sql(conn: apsw.Connection) -> str:
    """The claim statement that fits the schema in the file."""
    split = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", (f"idx_{TABLE}_due",)
    ).fetchall()
    return CLAIM_SPLIT if split else CLAIM_REFERENCE


def _params(n: int) -> list[tuple[Any, ...]]:
    """``n`` rows due in an hour, as ``insert`` would write them (ids UUIDv7-shaped)."""
    import os
    import uuid

    now = utcnow()
    created = ts(now)
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
        rows.append(
            (
                sid.bytes,
                EVENT_TYPE,
                f'{{"i":{i}}}',
                "delay",
                None,
                ts(due),
                "mediator",
                None,
                0,
                MAX_ATTEMPTS,
                None,
                0,
                None,
                created,
            )
        )
    return rows


def enqueue(path: str, n: int) -> dict[str, object]:
    """One INSERT per transaction (autocommit): the cheapest durable enqueue."""
    conn = connect(path)
    rows = _params(n)
    t0 = time.perf_counter()
    for row in rows:
        conn.execute(INSERT, row)
    elapsed = time.perf_counter() - t0
    conn.close()
    return {"value": n / elapsed, "unit": "rows/s", "n": n, "seconds": elapsed}


def insert_many(path: str, n: int, per_txn: int) -> dict[str, object]:
    """``executemany`` of ``per_txn`` rows inside BEGIN IMMEDIATE ... COMMIT."""
    conn = connect(path)
    rows = _params(n)
    t0 = time.perf_counter()
    for start in range(0, n, per_txn):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(INSERT, rows[start : start + per_txn])
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return {"value": n / elapsed, "unit": "rows/s", "n": n, "seconds": elapsed}


def _ms(stored: str) -> int:
    """A stored instant in milliseconds since the Unix epoch."""
    return int(datetime.fromisoformat(stored).timestamp() * 1000)


def _noop(row: tuple[object, ...]) -> None:
    return None


def drain(path: str, n: int, batch: int) -> dict[str, object]:
    """What ``run_once()`` does, in raw apsw with the store's own statements: a claim of
    ``batch`` in its own transaction, a no-op handler per row, then the batch's fenced
    acknowledgements in one transaction. Until ``n`` rows are delivered."""
    return _drain(path, n, batch, fused=False)


def drain_fused(path: str, n: int, batch: int, runs: bool = False) -> dict[str, object]:
    """The default worker's shape: each transaction holds the previous batch's
    acknowledgements and the next claim, so one commit (one fsync) per batch. The
    ceiling for the store's fused drain on this table. ``runs``: each transaction also
    writes the acknowledged rows' runs with the store's run-log insert (one
    ``executemany``), the least a run log written with its settlement can cost."""
    return _drain(path, n, batch, fused=True, runs=runs)


def _drain(path: str, n: int, batch: int, *, fused: bool, runs: bool = False) -> dict[str, object]:
    """The store's statements (``SqliteStatements``: the normalising ``UPDATE``, the
    probe, the rowids from the due index, the leasing ``UPDATE ... RETURNING``, the
    fenced ``mark_delivered`` by ``executemany``), rows as tuples, a no-op handler."""
    from hexeract_lite.store.sqlite.codec import COLUMN_INDEX
    from hexeract_lite.store.sqlite.runs import run_statements
    from hexeract_lite.store.sqlite.schema import SCHEMA_VERSION
    from hexeract_lite.store.sqlite.statements import SqliteStatements, claim_rows

    sql = SqliteStatements(TABLE)
    run_insert = run_statements(TABLE, SCHEMA_VERSION).insert
    sid, lease = COLUMN_INDEX["schedule_id"], COLUMN_INDEX["leased_until"]
    due = COLUMN_INDEX["scheduled_for"]
    pid = os.getpid()
    conn = connect(path)
    cur = conn.cursor()
    done = 0
    cycles = 0
    held: list[tuple[Any, ...]] = []

    def acknowledge(rows: list[tuple[Any, ...]]) -> None:
        at = utcnow()
        now = ts(at)
        cur.executemany(
            sql.mark_delivered,
            [{"id": r[sid], "lease": r[lease], "now": now, "counted": False} for r in rows],
        )
        if runs:  # a delivered run per row: the row's due instant, now, in milliseconds
            ms = int(at.timestamp() * 1000)
            cur.executemany(
                run_insert,
                [
                    (
                        r[sid],
                        (d := _ms(r[due])),
                        1,
                        ms,
                        ms,
                        "delivered",
                        ms - d,
                        0.0,
                        "floor",
                        pid,
                        None,
                    )
                    for r in rows
                ],
            )

    t0 = time.perf_counter()
    while True:
        now = utcnow()
        params = {"now": ts(now), "until": ts(now + LEASE), "n": batch}
        cur.execute("BEGIN IMMEDIATE")
        if held:
            acknowledge(held)
            done += len(held)
        cur.execute(sql.normalise)
        held = claim_rows(cur, sql, params) if done < n else []
        cur.execute("COMMIT")
        if not held:
            break
        for row in held:
            _noop(row)
        cycles += 1
        if not fused:
            cur.execute("BEGIN IMMEDIATE")
            acknowledge(held)
            cur.execute("COMMIT")
            done += len(held)
            held = []
    elapsed = time.perf_counter() - t0
    left = conn.execute(f"SELECT count(*) FROM {TABLE} WHERE delivered_at IS NULL").fetchall()[0][0]
    conn.close()
    return {
        "value": done / elapsed,
        "unit": "rows/s",
        "n": done,
        "cycles": cycles,
        "left": left,
        "seconds": elapsed,
    }


def claim_latency(
    path: str, claims: int, batch: int = 10, durability: str = "full", statement: str = "store"
) -> dict[str, object]:
    """Time ``claims`` claims of ``batch`` (fresh ``now`` each); acknowledge each batch
    outside the timer so every claim sees the same queue shape.

    ``durability="normal"`` (``synchronous=NORMAL``: no fsync per commit) leaves the index
    work alone in the figure. ``statement="reference"`` runs the one-statement claim over
    the reference's pending index only, for contrast with the store's two-index claim.
    """
    conn = connect(path)
    if durability == "normal":
        conn.execute("PRAGMA synchronous=NORMAL")
    claim = CLAIM_REFERENCE if statement == "reference" else claim_sql(conn)
    samples = []
    claimed = 0
    for _ in range(claims):
        now = utcnow()
        params = {"now": ts(now), "until": ts(now + LEASE), "n": batch}
        t0 = time.perf_counter()
        rows = conn.execute(claim, params).fetchall()
        samples.append(time.perf_counter() - t0)
        claimed += len(rows)
        if rows:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(ACK, [(ts(now), row[0], row[10]) for row in rows])
            conn.execute("COMMIT")
    conn.close()
    samples.sort()
    return {
        "value": samples[len(samples) // 2] * 1e6,
        "unit": "µs/claim",
        "mean_us": sum(samples) / len(samples) * 1e6,
        "p99_us": samples[int(len(samples) * 0.99) - 1] * 1e6,
        "claimed": claimed,
        "claims": claims,
    }
