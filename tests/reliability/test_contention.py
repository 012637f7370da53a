"""Contention: four worker processes and two inserting processes on one file.

For about 5 s two ``inserter.py`` processes insert one-shot messages (single inserts and
batches, due now or within a second) as fast as they can with short random pauses,
while four ``crash_worker.py`` processes claim and deliver them, each delivery appended
to a shared log. Nobody is killed and leases are long (60 s), so nothing may be
delivered twice. Then the workers drain what is left and are stopped with SIGTERM.

Checked: every schedule an inserter was told was inserted is delivered (0 lost), once
(0 delivered twice); nothing else is delivered; every row in the file is delivered;
the inserters never saw an exception and the workers logged nothing at WARNING or above
(no busy/locked StoreError reached the application, no lease lost, no skip); all exit 0;
``PRAGMA integrity_check`` is ``ok``. The throughput is printed.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

from hexeract_lite import ScheduledMessage, StoreError, Target
from hexeract_lite._time import parse_ts
from hexeract_lite.store.sqlite import SqliteScheduleStore

from .conftest import TABLE, Processes, integrity_check, log_entries

INSERT_SECONDS = 5.0
DRAIN_DEADLINE_S = 8.0


@pytest.mark.slow
def test_four_workers_and_two_inserters_lose_nothing_and_repeat_nothing(
    procs: Processes, tmp_path: Path
) -> None:
    db, log = tmp_path / "contention.db", tmp_path / "deliveries.log"
    SqliteScheduleStore.open(db).close()
    workers = [
        procs.start(
            "crash_worker.py",
            *(str(db), str(log), "--lease", "60", "--batch", "10"),
            *("--dispatch-timeout", "5", "--poll", "0.05"),
            name=f"worker-{i}",
        )
        for i in range(4)
    ]
    ids_files = [tmp_path / f"ids-{i}.txt" for i in range(2)]
    started = time.monotonic()
    inserters = [
        procs.start(
            "inserter.py",
            *(str(db), str(ids_files[i]), "--seconds", str(INSERT_SECONDS)),
            *("--seed", str(i + 1), "--pause", "0.02", "--max-batch", "8"),
            name=f"inserter-{i}",
        )
        for i in range(2)
    ]
    for proc in inserters:
        assert proc.wait(INSERT_SECONDS + 30) == 0, procs.output(proc)
    inserted = [line for f in ids_files for line in f.read_text().splitlines()]
    wanted = set(inserted)
    deadline = time.monotonic() + DRAIN_DEADLINE_S
    while time.monotonic() < deadline:
        if {schedule for _, schedule, _ in log_entries(log)} >= wanted:
            break
        time.sleep(0.05)
    elapsed = time.monotonic() - started
    for proc in workers:
        procs.wait_ready(proc)
    procs.stop(workers)

    deliveries = log_entries(log)
    by_occurrence = Counter(occurrence for occurrence, _, _ in deliveries)
    delivered = {schedule for _, schedule, _ in deliveries}
    lost = wanted - delivered
    twice = {o: n for o, n in by_occurrence.items() if n > 1}
    per_worker = Counter(pid for _, _, pid in deliveries)

    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = conn.execute(f"SELECT count(*), count(delivered_at) FROM {TABLE}").fetchall()[0]
        lags = [
            (parse_ts(d) - parse_ts(s)).total_seconds()
            for s, d in conn.execute(f"SELECT scheduled_for, delivered_at FROM {TABLE}")
            if d is not None
        ]
    finally:
        conn.close()
    lag_p50 = statistics.median(lags) if lags else float("nan")
    lag_p99 = statistics.quantiles(lags, n=100)[98] if len(lags) > 1 else float("nan")
    print(
        f"\ncontention: 4 workers + 2 inserters, {len(inserted)} inserted"
        f" ({len(inserted) / INSERT_SECONDS:.0f}/s), {len(deliveries)} delivered in"
        f" {elapsed:.1f} s ({len(deliveries) / elapsed:.0f} deliveries/s),"
        f" lost={len(lost)} twice={len(twice)}, per worker {sorted(per_worker.values())},"
        f" lag after due p50={lag_p50 * 1000:.0f} ms p99={lag_p99 * 1000:.0f} ms"
    )

    assert len(inserted) == len(wanted) >= 1000, len(inserted)
    assert lost == set(), f"{len(lost)} lost"
    assert twice == {}, f"{len(twice)} delivered twice"
    assert delivered == wanted
    assert rows == (len(wanted), len(wanted)), rows
    assert len(per_worker) == 4, per_worker  # every worker took part
    for proc in workers + inserters:
        _, err = procs.output(proc)
        assert proc.returncode == 0, (proc.returncode, err)
        assert err == "", f"{proc.name} wrote to stderr:\n{err}"  # type: ignore[attr-defined]
    assert integrity_check(db) == ["ok"]


# -- several processes creating the same new file ------------------------------------------

OPEN_ROUNDS, OPENERS = 12, 6


@pytest.mark.slow
def test_processes_creating_the_same_new_file_all_succeed_and_lose_nothing(
    procs: Processes, tmp_path: Path
) -> None:
    """Six processes open a database that does not exist yet at the same instant (12
    rounds, a new file each round) and insert one schedule each, as a fleet of workers
    and the application do on a fresh install. Every open must succeed (waiting its turn
    within the busy timeout) and every insert that returned must be in the file."""
    start = time.time() + 2.0  # after every process has started
    openers = [
        procs.start("opener.py", str(tmp_path), str(OPEN_ROUNDS), str(start), "0.25")
        for _ in range(OPENERS)
    ]
    ok: Counter[int] = Counter()
    errors: list[str] = []
    for proc in openers:
        assert proc.wait(60) == 0, procs.output(proc)
        out, err = procs.output(proc)
        assert err == "", err
        for line in out.splitlines():
            number, status = line.split(" ", 1)
            if status == "ok":
                ok[int(number)] += 1
            else:
                errors.append(f"round {number}: {status}")
    lost: dict[int, tuple[int, int]] = {}
    for r in range(OPEN_ROUNDS):
        db = tmp_path / f"r{r}.db"
        rows = 0
        if db.exists():
            conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
            try:
                rows = int(conn.execute(f"SELECT count(*) FROM {TABLE}").fetchall()[0][0])  # type: ignore[arg-type]
            finally:
                conn.close()
        if rows != ok[r]:
            lost[r] = (ok[r], rows)
    print(f"\nconcurrent creation: {len(errors)} failed opens, rounds losing rows: {lost}")
    assert errors == [], errors[:3]
    assert lost == {}, "inserts that returned are not in the file (round: reported, found)"


def test_a_failed_open_never_deletes_a_file_another_store_committed_to(tmp_path: Path) -> None:
    """Exact interleaving: process A creates the new file; before A's connection opens
    it, process B opens the (empty) file, inserts a schedule and holds the write lock for
    longer than A's busy timeout, so A's open fails with StoreError. A must leave the
    file alone: B's schedule is in it."""
    from .faultvfs import FaultVFS

    db = tmp_path / "new.db"
    message = ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), "e", {})
    held: list[SqliteScheduleStore | apsw.Connection] = []

    def b_gets_there_first(kind: str) -> None:
        if kind == "db" and not held:
            other = SqliteScheduleStore.open(db)  # the default VFS: another "process"
            other.insert(message, 3)
            blocker = apsw.Connection(str(db))
            blocker.execute("BEGIN IMMEDIATE")
            held.extend([other, blocker])

    vfs = FaultVFS("faulty")
    vfs.on_open = b_gets_there_first
    try:
        with pytest.raises(StoreError, match="locked"):
            SqliteScheduleStore.open(
                db, table="a_table", vfs="faulty", busy_timeout=timedelta(milliseconds=200)
            )
    finally:
        for thing in reversed(held):
            if isinstance(thing, apsw.Connection):
                thing.execute("ROLLBACK")
            thing.close()
        vfs.unregister()
    assert db.exists(), "the failed open deleted the database"
    with SqliteScheduleStore.open(db, create=False) as store:
        assert store.inspect(message.schedule_id) is not None
