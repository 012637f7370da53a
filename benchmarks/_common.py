"""Helpers shared by the benchmark children: tables, timestamps, memory, the machine.

Nothing here is timed. The children (``_floor``, ``_peers``, ``_hexeract``) import it
to build their inputs the same way, so every system works on the same rows.
"""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw

TABLE = "scheduled_messages"
EVENT_TYPE = "bench.noop"
MAX_ATTEMPTS = 5

COLUMNS = (
    "schedule_id, event_type, payload, trigger_kind, cron_expr, scheduled_for, target_kind,"
    " target_routing_key, attempts, max_attempts, leased_until, paused, last_error, created_at"
)
LIVE = "delivered_at IS NULL AND dead_lettered_at IS NULL AND cancelled_at IS NULL"

# -- time ----------------------------------------------------------------------------


def utcnow() -> datetime:
    return datetime.now(UTC)


def ts(value: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ``, the store's text layout."""
    return (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d}T"
        f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}."
        f"{value.microsecond // 1000:03d}Z"
    )


def now_ts() -> str:
    return ts(utcnow())


# -- schema --------------------------------------------------------------------------


def _reference_ddl(table: str) -> str:
    """The reference's table and two indexes (used until ``sqlite_ddl`` exists)."""
    return f"""
CREATE TABLE IF NOT EXISTS {table} (
    schedule_id BLOB PRIMARY KEY NOT NULL,
    event_type TEXT NOT NULL,
    payload TEXT NOT NULL,
    trigger_kind TEXT NOT NULL,
    cron_expr TEXT,
    scheduled_for TEXT NOT NULL,
    target_kind TEXT NOT NULL,
    target_routing_key TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    leased_until TEXT,
    paused INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    created_at TEXT NOT NULL,
    delivered_at TEXT,
    cancelled_at TEXT,
    dead_lettered_at TEXT
);
CREATE INDEX IF NOT EXISTS idx_{table}_pending ON {table} (scheduled_for)
    WHERE {LIVE} AND paused = 0;
CREATE INDEX IF NOT EXISTS idx_{table}_dead_letter ON {table} (dead_lettered_at)
    WHERE dead_lettered_at IS NOT NULL;
"""


def schema_ddl(table: str = TABLE) -> tuple[str, str]:
    """The store's DDL and where it came from (``sqlite_ddl`` once it exists)."""
    try:
        from hexeract_lite.store.schema import sqlite_ddl
    except ImportError:
        return _reference_ddl(
            table
        ), "reference DDL (hexeract_lite.store.schema.sqlite_ddl missing)"
    return sqlite_ddl(table), "hexeract_lite.store.schema.sqlite_ddl"


def connect(path: str | os.PathLike[str]) -> apsw.Connection:
    """A connection set up like the store's ``durability="full"``: WAL, synchronous=FULL."""
    conn = apsw.Connection(str(path))
    conn.set_busy_timeout(5000)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    return conn


def create_schema(path: str | os.PathLike[str], table: str = TABLE) -> str:
    """Create the store's schema in a new file, through the store itself when it exists
    (so its ``user_version`` and settings are there too). Returns how."""
    try:
        from hexeract_lite.store.sqlite import SqliteScheduleStore
    except ImportError:
        pass
    else:
        store = SqliteScheduleStore.open(str(path), table=table)
        store.close()
        return "SqliteScheduleStore.open"
    ddl, how = schema_ddl(table)
    conn = connect(path)
    conn.execute(ddl)
    conn.close()
    return how


def fill(
    path: str | os.PathLike[str],
    rows: int,
    *,
    due: bool = True,
    backoff: int = 0,
    table: str = TABLE,
    first: int = 0,
) -> None:
    """Add ``rows`` one-shot rows (plus ``backoff`` older rows in retry backoff).

    Due rows are scheduled a millisecond apart, ending an hour ago; rows that are not due
    start in a day. Backoff rows are the oldest (the head of the pending index): attempts
    1, ``leased_until`` a day ahead, ``last_error`` set, as ``mark_failed`` leaves them.
    Ids are UUIDv7-shaped and increase with ``scheduled_for``.
    """
    now = utcnow()
    total = rows + backoff
    if due:
        base = now - timedelta(hours=1) - timedelta(milliseconds=total)
    else:
        base = now + timedelta(days=1)
    conn = connect(path)
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("PRAGMA cache_size=-262144")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(
        f"""
        WITH RECURSIVE seq(i) AS (SELECT :first UNION ALL SELECT i + 1 FROM seq WHERE i < :last)
        INSERT INTO {table} ({COLUMNS})
        SELECT unhex(printf('%012x70008%015x', :base_ms + i - :first, i)), :event, '{{"i":' || i || '}}',
               'delay', NULL,
               strftime('%Y-%m-%dT%H:%M:%fZ', :base + (i - :first) / 1000.0, 'unixepoch'),
               'mediator', NULL,
               CASE WHEN i - :first < :backoff THEN 1 ELSE 0 END, :max_attempts,
               CASE WHEN i - :first < :backoff THEN :lease ELSE NULL END, 0,
               CASE WHEN i - :first < :backoff THEN 'boom' ELSE NULL END, :created
        FROM seq
        """,
        {
            "first": first,
            "last": first + total - 1,
            "event": EVENT_TYPE,
            "base": base.timestamp(),
            "base_ms": int(base.timestamp() * 1000),
            "backoff": backoff,
            "max_attempts": MAX_ATTEMPTS,
            "lease": ts(now + timedelta(days=1)),
            "created": ts(now),
        },
    )
    conn.execute("COMMIT")
    conn.execute("PRAGMA optimize")
    conn.close()


# -- measuring -----------------------------------------------------------------------


def rss_mb() -> float:
    """Resident set size of this process, MiB (VmRSS)."""
    with contextlib.suppress(OSError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    import psutil

    return float(psutil.Process().memory_info().rss) / (1024 * 1024)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) by linear interpolation."""
    if not values:
        return float("nan")
    data = sorted(values)
    pos = (len(data) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def fsync_us(directory: str | os.PathLike[str], samples: int = 50) -> float:
    """Median cost of ``write(4 KiB) + fsync`` on ``directory``, in microseconds."""
    path = Path(directory) / "fsync.probe"
    block = os.urandom(4096)
    times = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for i in range(samples):
            os.pwrite(fd, block, (i % 16) * 4096)
            t0 = time.perf_counter()
            os.fsync(fd)
            times.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink()
    return statistics.median(times) * 1e6


def cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine(directory: str | os.PathLike[str]) -> dict[str, object]:
    """What the figures were taken on."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "sqlite": apsw.sqlite_lib_version(),
        "apsw": apsw.apsw_version(),
        "os": f"{platform.system()} {platform.release()}",
        "fsync_us": round(fsync_us(directory), 1),
        "loadavg_1m": round(load[0], 2),
    }
