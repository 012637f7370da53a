"""The peers: huey's SqliteHuey, APScheduler 3 on SQLAlchemy/SQLite, persist-queue.

Every peer gets the durability the store has by default: SQLite in WAL mode with
``synchronous=FULL`` (huey ``fsync=True``; an SQLAlchemy connect hook for APScheduler;
persist-queue's own connection is already WAL with SQLite's default FULL). Each uses
its public API the way its documentation shows; prefilling for the drains goes through
the peer's own serialisation but is batched into one transaction and is not timed.

What each drain counts as "acknowledged" differs, and the table says so: huey deletes a
task when it dequeues it and APScheduler deletes a date job before running it (a crash
then loses it); persist-queue marks the row unacked on ``get`` and acked on ``ack``.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

logging.getLogger("apscheduler").setLevel(logging.WARNING)
logging.getLogger("huey").setLevel(logging.WARNING)

# -- huey ------------------------------------------------------------------------------


def _huey(directory: str):  # type: ignore[no-untyped-def]
    from huey import SqliteHuey

    huey = SqliteHuey("bench", filename=str(Path(directory) / "huey.db"), fsync=True, results=False)

    @huey.task()
    def noop(i: int) -> None:
        return None

    return huey, noop


def huey_enqueue(directory: str, n: int) -> dict[str, object]:
    """``noop(i)`` on a huey task: serialise and INSERT, one transaction each."""
    huey, noop = _huey(directory)
    t0 = time.perf_counter()
    for i in range(n):
        noop(i)
    elapsed = time.perf_counter() - t0
    assert huey.pending_count() == n
    return {"value": n / elapsed, "unit": "rows/s", "n": n, "seconds": elapsed}


def huey_drain(directory: str, n: int) -> dict[str, object]:
    """What one consumer worker thread does, in-process: ``dequeue`` (select + delete in
    one exclusive transaction) then ``execute`` (revocation check, run, signals)."""
    huey, noop = _huey(directory)
    blobs = [huey.serialize_task(noop.s(i)) for i in range(n)]
    with huey.storage.db(commit=True) as curs:
        curs.executemany(
            "insert into task (queue, data, priority) values (?, ?, ?)",
            [(huey.storage.name, blob, 0) for blob in blobs],
        )
    assert huey.pending_count() == n
    done = 0
    t0 = time.perf_counter()
    while done < n:
        task = huey.dequeue()
        if task is None:
            break
        huey.execute(task)
        done += 1
    elapsed = time.perf_counter() - t0
    return {"value": done / elapsed, "unit": "rows/s", "n": done, "seconds": elapsed}


# -- APScheduler 3 ---------------------------------------------------------------------

_APS_DONE = threading.Event()
_APS_COUNT = [0, 0]  # count, target


def aps_noop(i: int) -> None:
    """The job APScheduler runs (module-level so its job state pickles by reference)."""
    _APS_COUNT[0] += 1
    if _APS_COUNT[0] >= _APS_COUNT[1]:
        _APS_DONE.set()


def _aps(directory: str):  # type: ignore[no-untyped-def]
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler
    from sqlalchemy import create_engine, event

    engine = create_engine(f"sqlite:///{Path(directory) / 'aps.db'}")

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn, _record):  # type: ignore[no-untyped-def]
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=FULL")
        cur.close()

    store = SQLAlchemyJobStore(engine=engine)
    scheduler = BackgroundScheduler(
        jobstores={"default": store},
        executors={"default": ThreadPoolExecutor(1)},
        job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 1},
        timezone=UTC,
    )
    scheduler.start(paused=True)
    return scheduler, store, engine


def aps_enqueue(directory: str, n: int) -> dict[str, object]:
    """``add_job(func, "date", run_date=...)`` on a started (paused) scheduler: one
    pickled job INSERT per call, each its own transaction."""
    scheduler, _store, _engine = _aps(directory)
    base = datetime.now(UTC) + timedelta(hours=1)
    t0 = time.perf_counter()
    for i in range(n):
        scheduler.add_job(
            aps_noop, "date", run_date=base + timedelta(milliseconds=i), args=(i,), id=f"j{i}"
        )
    elapsed = time.perf_counter() - t0
    count = len(scheduler.get_jobs())
    scheduler.shutdown(wait=False)
    assert count == n, count
    return {"value": n / elapsed, "unit": "rows/s", "n": n, "seconds": elapsed}


def aps_drain(directory: str, n: int, timeout: float = 300.0) -> dict[str, object]:
    """``n`` date jobs already due; resume the scheduler and wait until the (one-thread)
    executor has run them all. APScheduler deletes each job as it submits it."""
    import pickle

    from apscheduler.util import datetime_to_utc_timestamp

    scheduler, store, engine = _aps(directory)
    rows: list[dict[str, object]] = []

    def collect(job) -> None:  # type: ignore[no-untyped-def]
        rows.append(
            {
                "id": job.id,
                "next_run_time": datetime_to_utc_timestamp(job.next_run_time),
                "job_state": pickle.dumps(job.__getstate__(), store.pickle_protocol),
            }
        )

    base = datetime.now(UTC) - timedelta(minutes=5)
    real_add = store.add_job
    store.add_job = collect
    for i in range(n):
        scheduler.add_job(
            aps_noop, "date", run_date=base + timedelta(milliseconds=i), args=(i,), id=f"j{i}"
        )
    store.add_job = real_add
    with engine.begin() as conn:
        conn.execute(store.jobs_t.insert(), rows)
    _APS_COUNT[:] = [0, n]
    _APS_DONE.clear()
    t0 = time.perf_counter()
    scheduler.resume()
    finished = _APS_DONE.wait(timeout)
    elapsed = time.perf_counter() - t0
    done = _APS_COUNT[0]
    scheduler.shutdown(wait=False)
    return {
        "value": done / elapsed,
        "unit": "rows/s",
        "n": done,
        "finished": finished,
        "seconds": elapsed,
    }


# -- persist-queue ---------------------------------------------------------------------


def _pq(directory: str):  # type: ignore[no-untyped-def]
    from persistqueue import SQLiteAckQueue

    return SQLiteAckQueue(str(Path(directory) / "pq"), multithreading=True)


def pq_enqueue(directory: str, n: int) -> dict[str, object]:
    """``SQLiteAckQueue.put(item)``: pickle and INSERT, one transaction each."""
    queue = _pq(directory)
    t0 = time.perf_counter()
    for i in range(n):
        queue.put({"i": i})
    elapsed = time.perf_counter() - t0
    return {"value": n / elapsed, "unit": "rows/s", "n": n, "seconds": elapsed}


def pq_drain(directory: str, n: int) -> dict[str, object]:
    """``get`` (marks the row unacked), no-op handler, ``ack`` (marks it acked)."""
    queue = _pq(directory)
    queue._putter.execute("PRAGMA synchronous=OFF")  # prefill only, not timed
    for i in range(n):
        queue.put({"i": i})
    queue._putter.execute("PRAGMA synchronous=FULL")
    done = 0
    t0 = time.perf_counter()
    while done < n:
        item = queue.get(block=False)
        queue.ack(item)
        done += 1
    elapsed = time.perf_counter() - t0
    return {"value": done / elapsed, "unit": "rows/s", "n": done, "seconds": elapsed}
