"""A scheduler worker process whose sink writes one effect row per delivery.

Used by the transactional crash tests::

    python tx_worker.py WHERE TABLE MODE [--lease 1.0] [--before 0.005] [--after 0.02]
                        [--driver apsw|sqlite3]

WHERE is a SQLite file or a PostgreSQL URL; effects go to ``<TABLE>_effects``
(occurrence id, pid), a table with no unique key so that a duplicate shows. MODE
``tx``: a :class:`~hexeract_lite.transactional.TransactionalSink` whose handler
inserts the row inside the acknowledging transaction, then sleeps up to ``--after``
seconds (still inside it). MODE ``plain``: a plain sink that inserts the row through
a connection of its own (committed at once), then sleeps up to ``--after`` seconds
before the worker acknowledges: a kill in that window duplicates the effect.
``--driver`` (SQLite): the store's library, and that of the plain sink's connection
(so a ``sqlite3`` worker has no apsw connection on the file). SIGTERM stops the
worker cleanly.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import sys
import threading
import time
from datetime import timedelta
from typing import Any

from hexeract_lite import ScheduledMessage
from hexeract_lite.store.base import ScheduleStore
from hexeract_lite.transactional import TransactionalSink
from hexeract_lite.worker import SchedulerWorker, SchedulerWorkerConfig


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("where")
    parser.add_argument("table")
    parser.add_argument("mode", choices=["tx", "plain"])
    parser.add_argument("--lease", type=float, default=1.0)
    parser.add_argument("--before", type=float, default=0.005)
    parser.add_argument("--after", type=float, default=0.02)
    parser.add_argument("--driver", choices=["apsw", "sqlite3"], default="apsw")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    pid = os.getpid()
    rng = random.Random()
    postgres = args.where.startswith("postgres")
    insert = f"INSERT INTO {args.table}_effects (occurrence, pid) VALUES ({{0}}, {{0}})".format(
        "%s" if postgres else "?"
    )

    store: ScheduleStore
    if postgres:
        import psycopg

        from hexeract_lite.store.postgres import PostgresScheduleStore

        store = PostgresScheduleStore.open(args.where, table=args.table)
        own: Any = psycopg.connect(args.where, autocommit=True)
    else:
        from hexeract_lite.store.sqlite import SqliteScheduleStore

        store = SqliteScheduleStore.open(args.where, table=args.table, driver=args.driver)
        if args.driver == "sqlite3":
            import sqlite3

            own = sqlite3.connect(args.where, timeout=10, isolation_level=None)
        else:
            import apsw

            own = apsw.Connection(args.where)
            own.set_busy_timeout(10_000)

    def handler(message: ScheduledMessage, conn: Any) -> None:
        time.sleep(rng.uniform(0, args.before))
        conn.execute(insert, (str(message.occurrence_id()), pid))
        time.sleep(rng.uniform(0, args.after))

    def plain(message: ScheduledMessage) -> None:
        handler(message, own)

    sink: Any = TransactionalSink(handler) if args.mode == "tx" else plain
    config = SchedulerWorkerConfig(
        poll_interval=timedelta(milliseconds=20),
        batch_size=1,
        lease=timedelta(seconds=args.lease),
        retry_base_delay=timedelta(milliseconds=50),
        retry_max_delay=timedelta(milliseconds=200),
        min_cycle_delay=timedelta(0),
        dispatch_timeout=timedelta(seconds=args.lease / 2),
    )
    with store:
        worker = SchedulerWorker(store, sink, config)
        print("ready", flush=True)
        worker.run(stop)
    own.close()
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
