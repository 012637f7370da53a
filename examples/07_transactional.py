"""Orders and their reminders in one transaction; each reminder's effect exactly once.

An order app keeps its own tables in the scheduler's SQLite file:

1. each order is created on the app's own connection to the file, and its reminder
   is scheduled in the same transaction (``store.insert(..., connection=conn)``): one
   order's transaction fails and rolls back, and no reminder of it exists;
2. a worker with a :class:`~hexeract_lite.TransactionalSink` delivers the reminders:
   the handler records "reminder sent" for the order inside the transaction that
   acknowledges the occurrence, so the record and the acknowledgement commit
   together. A first handler crashes half-way through one reminder: its write is
   rolled back with the acknowledgement, and the retry applies it once;
3. every committed order has exactly one "reminder sent", the failed order none.

``--driver sqlite3``: the app uses the standard library's ``sqlite3`` (most apps do),
so the store is opened with ``driver="sqlite3"`` and the handler gets a
``sqlite3.Connection``; the default ``--driver apsw`` uses ``apsw`` throughout. One
process uses one SQLite library per file: apsw bundles its own copy of SQLite, and
two copies in one process break each other's locks.

Run it with ``--db PATH`` (default: a temporary file). It prints each step and exits
0 on success, 1 with the reason on a failure. It takes a few seconds.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw

from hexeract_lite import (
    ScheduledMessage,
    SchedulerWorker,
    SchedulerWorkerConfig,
    ScheduleStatus,
    SqliteScheduleStore,
    Target,
    TransactionalSink,
)

ORDERS = ["book", "lamp", "kettle", "chair"]
FAILING = "kettle"  # its transaction fails after the reminder was scheduled


def connect(db: Path, driver: str) -> Any:
    """The app's own connection: sqlite3 (a transaction opens before the first write)
    or apsw. Either is a context manager: commit at the end, roll back on an error."""
    if driver == "sqlite3":
        return sqlite3.connect(db, timeout=5)
    conn = apsw.Connection(str(db))
    conn.set_busy_timeout(5000)
    return conn


def create_order(
    store: SqliteScheduleStore, db: Path, item: str
) -> tuple[int, ScheduledMessage] | None:
    """One transaction: the order row and its reminder; the order's id and its
    reminder, or None when it rolled back (the reminder does not exist then)."""
    conn = connect(db, store.driver)
    try:
        with conn:  # BEGIN ... COMMIT, or ROLLBACK on an exception
            [(order_id,)] = conn.execute(
                "INSERT INTO orders (item) VALUES (?) RETURNING id", (item,)
            ).fetchall()
            reminder = ScheduledMessage.delay(
                Target.mediator(),
                datetime.now(UTC) + timedelta(milliseconds=200),
                "order.remind",
                {"order_id": order_id, "item": item},
            )
            store.insert(reminder, max_attempts=5, connection=conn)
            if item == FAILING:
                raise RuntimeError(f"payment for {item} declined")
        return order_id, reminder
    except RuntimeError as exc:
        print(f"  order {item!r} rolled back: {exc}")
        return None
    finally:
        conn.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--driver", choices=["apsw", "sqlite3"], default="apsw")
    args = parser.parse_args()
    db = args.db or Path(tempfile.mkdtemp()) / "orders.db"

    with SqliteScheduleStore.open(db, driver=args.driver) as store:
        print(f"(the app and the store use {args.driver})")
        setup = connect(db, args.driver)
        with setup:
            setup.execute(
                "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)"
            )
            setup.execute(
                "CREATE TABLE IF NOT EXISTS reminders_sent (order_id INTEGER NOT NULL,"
                " occurrence TEXT NOT NULL, sent_at TEXT NOT NULL)"
            )
        setup.close()

        print("1. creating orders, each with its reminder in the same transaction")
        # This run's orders and reminders (the file may hold earlier runs' too).
        made = {item: create_order(store, db, item) for item in ORDERS}
        committed = [item for item, order in made.items() if order is not None]
        order_ids = [order[0] for order in made.values() if order is not None]
        reminders = [order[1].schedule_id for order in made.values() if order is not None]
        pending = [sid for sid in reminders if store.inspect(sid) is not None]
        print(f"  {len(committed)} orders committed, {len(pending)} reminders scheduled")
        if len(pending) != len(committed):
            print("FAILED: a reminder exists without its order (or the reverse)")
            return 1

        def waiting() -> bool:
            return any(
                (snap := store.inspect(sid)) is not None and snap.status is ScheduleStatus.PENDING
                for sid in reminders
            )

        crashed: list[str] = []

        def send_reminder(message: ScheduledMessage, conn: Any) -> None:
            order = message.payload["order_id"]
            conn.execute(
                "INSERT INTO reminders_sent (order_id, occurrence, sent_at) VALUES (?, ?, ?)",
                (order, str(message.occurrence_id()), datetime.now(UTC).isoformat()),
            )
            if not crashed:  # the first delivery fails after its write
                crashed.append(message.payload["item"])
                raise RuntimeError("the handler crashed half-way")

        print("2. delivering the reminders with a transactional sink")
        config = SchedulerWorkerConfig(
            poll_interval=timedelta(milliseconds=50),
            retry_base_delay=timedelta(milliseconds=100),
            dispatch_timeout=timedelta(seconds=1),
            lease=timedelta(seconds=120),
        )
        worker = SchedulerWorker(store, TransactionalSink(send_reminder), config)
        deadline = time.monotonic() + 20
        while waiting() and time.monotonic() < deadline:
            worker.run_once()
            time.sleep(0.05)
        print(f"  the handler crashed once (reminder for {crashed[0]!r}) and was retried")

        print("3. checking: every committed order has exactly one reminder sent")
        check = connect(db, args.driver)
        rows = check.execute(
            "SELECT o.item, count(r.order_id) FROM orders o"
            " LEFT JOIN reminders_sent r ON r.order_id = o.id"
            f" WHERE o.id IN ({', '.join('?' * len(order_ids))}) GROUP BY o.id ORDER BY o.id",
            order_ids,
        ).fetchall()
        check.close()
        for item, sent in rows:
            print(f"  {item}: {sent} reminder(s) sent")
        if sorted(str(item) for item, _ in rows) != sorted(committed):
            print(f"FAILED: orders {rows} do not match the committed ones {committed}")
            return 1
        if any(sent != 1 for _, sent in rows):
            print("FAILED: a reminder's effect was lost or repeated")
            return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
