"""PostgreSQL rows: drains by worker processes, a claim among held rows, the dispatch lag.

The server is ``HEXERACT_TEST_POSTGRES_URL`` (CI's throwaway server, or
``scripts/pg-test-server``); ``run.py`` skips these rows when it is not set. Every
measurement works in a fresh table (or, for Procrastinate, a fresh schema reached by
``search_path``) that is dropped afterwards, so runs do not see each other's rows.

- ``drain``: ``n`` due one-shot rows (written untimed by one ``INSERT ... SELECT``), then
  ``workers`` processes take them (``_multi``): hexeract_lite's default-config worker,
  the raw ``FOR UPDATE SKIP LOCKED`` floor (the reference's claim of 10, then 10 fenced
  acknowledgements, with psycopg), or Procrastinate's worker draining ``n`` no-op jobs
  deferred untimed by ``batch_defer``.
- ``claim_latency``: a claim of 10 among ``fresh`` due rows, with ``held`` rows leased for
  an hour more (in flight or in backoff) scheduled before every fresh one, so a walk of
  the pending index in claim order meets them all first. Each claimed row is moved back
  to now outside the timer, so every claim finds the same work; the same claim by the
  reference's one statement over its pending index alone is timed for contrast (rolled
  back each time).
- ``dispatch_lag``: an idle default-config worker; another process inserts one due row
  every 50-100 ms, writing ``time.time()`` into the payload just before the insert; the
  sink records ``time.time() - payload["t"]``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import percentile

ROOT = Path(__file__).resolve().parents[1]
LEASE = timedelta(minutes=5)

FILL = """
INSERT INTO {t} (schedule_id, event_type, payload, trigger_kind, scheduled_for, target_kind,
                 attempts, max_attempts, leased_until, last_error, created_at)
SELECT gen_random_uuid(), 'bench', '{{"n":1}}', 'delay',
       %(base)s::timestamptz + g * %(step)s::interval, 'outbox',
       %(attempts)s, 5, %(until)s, %(error)s, %(created)s
FROM generate_series(1, %(n)s) AS g
"""
ELIGIBLE = (
    "scheduled_for <= %(now)s AND delivered_at IS NULL AND cancelled_at IS NULL"
    " AND dead_lettered_at IS NULL AND paused = FALSE AND attempts < max_attempts"
)
REFERENCE_CLAIM = f"""
UPDATE {{t}} SET leased_until = %(until)s, attempts = attempts + 1
WHERE schedule_id IN (
  SELECT schedule_id FROM {{t}}
  WHERE {ELIGIBLE} AND (leased_until IS NULL OR leased_until <= %(now)s)
  ORDER BY scheduled_for LIMIT 10 FOR UPDATE SKIP LOCKED)
RETURNING schedule_id, leased_until
"""
ACK = """
UPDATE {t} SET delivered_at = %(now)s, leased_until = NULL
WHERE schedule_id = %(id)s AND leased_until = %(lease)s
  AND delivered_at IS NULL AND cancelled_at IS NULL AND dead_lettered_at IS NULL
"""
LEFT = f"SELECT count(*) FROM {{t}} WHERE {ELIGIBLE}"


def url() -> str:
    """The server, or ``ImportError`` (reported as skipped) when none is given."""
    value = os.environ.get("HEXERACT_TEST_POSTGRES_URL")
    if not value:
        raise ImportError("no PostgreSQL server (HEXERACT_TEST_POSTGRES_URL is not set)")
    return value


def _q(table: str) -> str:
    return f'"{table}"'


@contextmanager
def fresh_table(prefix: str) -> Iterator[tuple[str, str]]:
    """(url, table): a new table with the store's schema, dropped afterwards."""
    import psycopg

    from hexeract_lite.store.postgres import PostgresScheduleStore

    server, table = url(), f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        PostgresScheduleStore.open(server, table=table).close()
        yield server, table
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            for name in (table, f"{table}_runs"):  # the run log's table too
                conn.execute(f"DROP TABLE IF EXISTS {_q(name)}".encode())
            conn.execute(b"DELETE FROM hexeract_lite_schema WHERE table_name = %s", [table])


def fill(server: str, table: str, fresh: int, held: int = 0) -> datetime:
    """``fresh`` due rows over the hour before now; ``held`` rows leased for an hour
    more, scheduled in the hour before the fresh ones. Returns the ``now`` used."""
    import psycopg

    now = datetime.now(UTC).replace(microsecond=0)
    common = {"created": now - timedelta(hours=3)}
    with psycopg.connect(server, autocommit=True) as conn:
        sql = FILL.format(t=_q(table)).encode()
        base = now - timedelta(hours=1)
        conn.execute(sql, {**common, "base": base, "step": timedelta(hours=1) / max(fresh, 1),
                           "attempts": 0, "until": None, "error": None, "n": fresh})  # fmt: skip
        if held:
            conn.execute(sql, {**common, "base": now - timedelta(hours=2),
                               "step": timedelta(hours=1) / held, "attempts": 1,
                               "until": now + timedelta(hours=1), "error": "Timeout",
                               "n": held})  # fmt: skip
        conn.execute(f"VACUUM ANALYZE {_q(table)}".encode())
    return now


def _left(server: str, table: str) -> Callable[[], int]:
    import psycopg

    conn = psycopg.connect(server, autocommit=True)
    sql = LEFT.format(t=_q(table)).encode()
    return lambda: int(conn.execute(sql, {"now": datetime.now(UTC)}).fetchall()[0][0])


# -- drains ------------------------------------------------------------------------------


def drain(target: str, n: int, workers: int, system: str) -> dict[str, object]:
    """``workers`` processes of ``system`` (hexeract, floor, procrastinate) take ``n``
    due rows (see the module docstring)."""
    import _multi

    if system == "procrastinate":
        return _procrastinate_drain(n, workers)
    with fresh_table("bench_drain") as (server, table):
        fill(server, table, n)
        if system == "hexeract":
            spec = {"url": server, "table": table}
            kind = "hexeract-pg"
        elif system == "floor":
            spec = {
                "url": server,
                "claim": REFERENCE_CLAIM.format(t=_q(table)),
                "ack": ACK.format(t=_q(table)),
            }
            kind = "floor-pg"
        else:
            raise ValueError(f"system {system!r}")
        return _multi.drain(kind, spec, workers, n, _left(server, table))


def _procrastinate_drain(n: int, workers: int) -> dict[str, object]:
    import _multi
    import procrastinate
    import psycopg
    from psycopg.conninfo import make_conninfo

    server = url()
    schema = f"bench_procrastinate_{uuid.uuid4().hex[:12]}"
    conninfo = make_conninfo(server, options=f"-c search_path={schema}")
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"'.encode())
    try:
        app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(conninfo=conninfo))

        @app.task(name="noop")
        def noop(i: int) -> None:
            return None

        with app.open():
            app.schema_manager.apply_schema()
            for start in range(0, n, 1000):
                jobs: list[dict[str, Any]] = [{"i": i} for i in range(start, min(n, start + 1000))]
                noop.batch_defer(*jobs)
        conn = psycopg.connect(conninfo, autocommit=True)
        sql = b"SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"

        def left() -> int:
            return int(conn.execute(sql).fetchall()[0][0])

        result = _multi.drain("procrastinate", {"conninfo": conninfo}, workers, n, left)
        conn.close()
        return {**result, "procrastinate": procrastinate.__version__}
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())


# -- the claim among held rows ---------------------------------------------------------------


def claim_latency(target: str, claims: int, fresh: int, held: int) -> dict[str, object]:
    """µs per claim of 10 among ``fresh`` due rows and ``held`` leased ones (median)."""
    import psycopg

    from hexeract_lite import Settlement
    from hexeract_lite.store.postgres import PostgresScheduleStore

    with fresh_table("bench_claim") as (server, table):
        now = fill(server, table, fresh, held)
        with PostgresScheduleStore.open(server, table=table, create=False) as store:

            def once() -> float:
                t0 = time.perf_counter()
                got = store.claim_due(now, 10, LEASE)
                elapsed = time.perf_counter() - t0
                if len(got) != 10:
                    raise RuntimeError("the scenario ran out of due rows")
                store.settle(
                    [Settlement.reschedule(o.message.schedule_id, now, o.leased_until) for o in got]
                )  # back of the queue, outside the timer
                return elapsed

            for _ in range(30):  # the pool, the plan cache, the buffers
                once()
            samples = [once() for _ in range(claims)]
        reference = []
        params = {"now": now, "until": now + LEASE}
        with psycopg.connect(server) as conn:
            sql = REFERENCE_CLAIM.format(t=_q(table)).encode()
            for _ in range(min(claims, 50)):
                t0 = time.perf_counter()
                conn.execute(sql, params).fetchall()
                conn.rollback()
                reference.append(time.perf_counter() - t0)
    return {
        "value": statistics.median(samples) * 1e6,
        "unit": "µs/claim",
        "p99_us": percentile([s * 1e6 for s in samples], 0.99),
        "reference_statement_us": statistics.median(reference) * 1e6,
        "claims": claims,
        "fresh": fresh,
        "held": held,
    }


# -- the dispatch lag ----------------------------------------------------------------------


_INSERTER = """
import sys, time, random
sys.path.insert(0, sys.argv[3])
from datetime import UTC, datetime
from hexeract_lite import ScheduledMessage, Target
from hexeract_lite.store.postgres import PostgresScheduleStore
url, table, n = sys.argv[1], sys.argv[2], int(sys.argv[4])
with PostgresScheduleStore.open(url, table=table, create=False) as store:
    for _ in range(n):
        time.sleep(random.uniform(0.05, 0.1))
        now = datetime.now(UTC)
        store.insert(ScheduledMessage.delay(Target.outbox(), now, "lag", {"t": time.time()}), 3)
"""


def dispatch_lag(target: str, count: int) -> dict[str, object]:
    """Milliseconds from another process's insert to the sink, an idle default-config worker."""
    from hexeract_lite import ScheduledMessage, SchedulerWorker
    from hexeract_lite.store.postgres import PostgresScheduleStore

    lags: list[float] = []
    done = threading.Event()

    def sink(message: ScheduledMessage) -> None:
        lags.append((time.time() - message.payload["t"]) * 1000)
        if len(lags) >= count:
            done.set()

    with (
        fresh_table("bench_lag") as (server, table),
        PostgresScheduleStore.open(server, table=table, create=False) as store,
    ):
        worker = SchedulerWorker(store, sink)
        stop = threading.Event()
        thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
        thread.start()
        time.sleep(0.5)  # idle
        child = subprocess.Popen(
            [sys.executable, "-c", _INSERTER, server, table, str(ROOT), str(count)]
        )
        done.wait(count * 0.2 + 30)
        child.wait(30)
        stop.set()
        thread.join(10)
    return {
        "value": percentile(lags, 0.99),
        "unit": "ms p99",
        "p50_ms": percentile(lags, 0.5),
        "p99_ms": percentile(lags, 0.99),
        "max_ms": max(lags) if lags else float("nan"),
        "delivered": len(lags),
        "expected": count,
    }
