"""A process that hits a failed sync on commit and then dies at once.

    python fault_child.py DB ioerr|full

It opens the store on the fault VFS, commits a few schedules, arms a sync fault on the
WAL, tries an ``insert_many`` of three schedules (which raises StoreError), prints::

    committed <ids>
    batch <ids>
    result StoreError: ...

and calls ``os._exit(0)`` straight away: no rollback of anything, no close, no
checkpoint; what SQLite had written to the WAL stays there for recovery to judge.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime

import apsw
from faultvfs import FaultVFS  # type: ignore[import-not-found]  # the script's folder

from hexeract_lite import ScheduledMessage, StoreError, Target
from hexeract_lite.store.sqlite import SqliteScheduleStore


def main() -> None:
    db, error = sys.argv[1], {"ioerr": apsw.IOError, "full": apsw.FullError}[sys.argv[2]]
    vfs = FaultVFS("faulty")
    store = SqliteScheduleStore.open(db, vfs="faulty")
    now = datetime.now(UTC)
    committed = [ScheduledMessage.delay(Target.outbox(), now, "ev", {"c": i}) for i in range(5)]
    store.insert_many(committed, 3)
    batch = [ScheduledMessage.delay(Target.outbox(), now, "ev", {"b": i}) for i in range(3)]
    vfs.switch.arm(error, ops=["sync"], files=["wal"])
    try:
        store.insert_many(batch, 3)
        result = "inserted (no error!)"
    except StoreError as exc:
        result = f"StoreError: {exc}"
    print("committed", " ".join(str(m.schedule_id) for m in committed))
    print("batch", " ".join(str(m.schedule_id) for m in batch))
    print("result", result, flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
