"""Crash: worker processes SIGKILLed at random, again and again, lose nothing.

600 due occurrences (one-shot and cron mixed) in one SQLite file; three worker
processes (``crash_worker.py``) whose sink appends each delivered occurrence id to a log
with ``write`` + ``fsync`` on an ``O_APPEND`` descriptor *before* the worker
acknowledges (each dispatch takes up to 12 ms before the write and 20 ms after it, so
that kills land in every phase). At random moments (every 0.05-0.3 s) a random worker
gets SIGKILL and is started again, at least 20 times while occurrences remain
undelivered. Leases are 1.5 s, so what a killed worker held is claimed again 1.5 s
later. Once every occurrence is in the log the killing stops and the workers get the
time to settle what the last kill left leased.

What "the occurrence" of a schedule is:

- a one-shot (delay) schedule has one occurrence, due in the last minute;
- a cron schedule's *first* occurrence is its ``first_occurrence``, an instant of its
  expression in the past (so it is due): daily ``S M H * * *`` and ``M H * * *`` rules
  whose time of day was 2-3 h ago, and ``@yearly`` from 1 January of this year. Its id
  is ``OccurrenceId.derive(schedule_id, first_occurrence)``. After that occurrence is
  delivered the schedule is rescheduled to its next instant (one day, or one year,
  later: in the future, so it cannot fire again during the test), with attempts reset.

Afterwards:

- lost = expected occurrence ids never logged: must be 0; no id is logged that was not
  expected (no second tick of a cron schedule, nothing invented);
- duplicates: every repeated id was first delivered by a process that was then killed,
  as the last line that process ever wrote (it was in flight: delivered, not yet
  acknowledged); deduplicating the log on the occurrence id leaves exactly the expected
  set;
- ``PRAGMA integrity_check`` is ``ok``;
- nothing is stuck: each one-shot row is delivered; each cron row is pending, unleased,
  with attempts 0, at exactly its next instant; a dead-lettered row would have to carry
  its reason (there are none with a budget of 25 attempts);
- no worker wrote a traceback or a store error to stderr.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

from hexeract_lite import OccurrenceId, ScheduledMessage, ScheduleStatus, Target
from hexeract_lite._time import format_ts
from hexeract_lite.store.sqlite import SqliteScheduleStore

from .conftest import TABLE, Processes, integrity_check, read_log, repeats_not_in_flight

N = 600
WORKERS = 3
MIN_KILLS = 20
LEASE_S = 1.5
BATCH = 5
"""Occurrences a worker claims, dispatches and then settles together."""
MAX_ATTEMPTS = 25
DEADLINE_S = 90


def _schedules(
    now: datetime, rng: random.Random
) -> tuple[list[ScheduledMessage], dict[uuid.UUID, datetime]]:
    """N messages, about a third cron; and for each cron schedule its expected next instant."""
    messages: list[ScheduledMessage] = []
    next_due: dict[uuid.UUID, datetime] = {}
    target = Target.bus("crash.test")
    for i in range(N):
        kind = rng.choice(["delay", "delay", "cron6", "cron5", "yearly"])
        if kind == "delay":
            at = now - timedelta(milliseconds=rng.randrange(0, 60_000))
            messages.append(ScheduledMessage.delay(target, at, "crash", {"i": i}))
            continue
        if kind == "yearly":
            first = datetime(now.year, 1, 1, tzinfo=UTC)
            expression, following = "@yearly", datetime(now.year + 1, 1, 1, tzinfo=UTC)
        else:
            first = (now - timedelta(hours=2, seconds=rng.randrange(0, 3600))).replace(
                microsecond=0
            )
            if kind == "cron5":
                first = first.replace(second=0)
                expression = f"{first.minute} {first.hour} * * *"
            else:
                expression = f"{first.second} {first.minute} {first.hour} * * *"
            following = first + timedelta(days=1)
        message = ScheduledMessage.cron(target, expression, first, "crash", {"i": i})
        messages.append(message)
        next_due[message.schedule_id] = following
    return messages, next_due


def _unsettled(db: Path) -> int:
    """Rows not yet in their final state: an undelivered one-shot, or a cron row not yet
    rescheduled into the future, or anything still leased (and not dead-lettered)."""
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(10_000)  # a SIGKILLed writer may leave recovery to this reader
    try:
        ((count,),) = conn.execute(
            f"SELECT count(*) FROM {TABLE} WHERE delivered_at IS NULL"
            " AND dead_lettered_at IS NULL AND (trigger_kind = 'delay'"
            " OR scheduled_for <= ? OR leased_until IS NOT NULL)",
            (format_ts(datetime.now(UTC)),),
        ).fetchall()
    finally:
        conn.close()
    return int(count)  # type: ignore[arg-type]


@pytest.mark.slow
def test_sigkilled_workers_lose_nothing_and_duplicate_only_what_was_in_flight(
    procs: Processes, tmp_path: Path
) -> None:
    seed = int(os.environ.get("HEXERACT_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    db, log = tmp_path / "crash.db", tmp_path / "deliveries.log"
    now = datetime.now(UTC)
    messages, next_due = _schedules(now, rng)
    expected = {str(m.occurrence_id()) for m in messages}
    assert len(expected) == N
    with SqliteScheduleStore.open(db) as store:
        store.insert_many(messages, MAX_ATTEMPTS)

    args = [str(db), str(log), "--lease", str(LEASE_S), "--batch", str(BATCH)]
    args += ["--dispatch-timeout", "0.3", "--before", "0.012", "--after", "0.02"]

    def start() -> subprocess.Popen[bytes]:
        return procs.start("crash_worker.py", *args)

    workers = [start() for _ in range(WORKERS)]
    killed: dict[int, float] = {}
    kills_during_run = 0
    started = time.monotonic()
    while not expected <= {occurrence for occurrence, _ in read_log(log)}:
        assert time.monotonic() - started < DEADLINE_S, f"seed {seed}: not done in {DEADLINE_S} s"
        if _unsettled(db) == 0:
            break  # the store holds nothing more to deliver: what is missing now is lost
        time.sleep(rng.uniform(0.05, 0.3))
        victim = rng.randrange(WORKERS)
        proc = workers[victim]
        if proc.poll() is not None:
            pytest.fail(f"worker {proc.pid} exited on its own: {procs.output(proc)}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        killed[proc.pid] = time.monotonic()
        kills_during_run += not expected <= {occurrence for occurrence, _ in read_log(log)}
        workers[victim] = start()
    elapsed = time.monotonic() - started
    # The last kill may have caught an occurrence delivered but not acknowledged: the
    # workers, no longer killed, settle it once its lease runs out. Wait for that.
    settle_deadline = time.monotonic() + 10 * LEASE_S
    while (unsettled := _unsettled(db)) and time.monotonic() < settle_deadline:
        time.sleep(0.1)
    settled_after = time.monotonic() - started - elapsed
    for proc in workers:  # a worker restarted by the last kill may still be starting
        procs.wait_ready(proc)
    procs.stop(workers)
    assert [w.returncode for w in workers] == [0] * WORKERS  # SIGTERM: a clean stop

    deliveries = read_log(log)
    counts = Counter(occurrence for occurrence, _ in deliveries)
    lost = expected - set(counts)
    extra = set(counts) - expected
    duplicates = {occurrence: n for occurrence, n in counts.items() if n > 1}

    not_in_flight = repeats_not_in_flight(deliveries, killed, BATCH)

    print(
        f"\ncrash: n={N} kills={len(killed)} (during the run: {kills_during_run})"
        f" lost={len(lost)} duplicates={sum(n - 1 for n in duplicates.values())}"
        f" (occurrences repeated: {len(duplicates)}) deliveries={len(deliveries)}"
        f" in {elapsed:.1f} s (all rows settled {settled_after:.1f} s later), seed {seed}"
    )
    assert kills_during_run >= MIN_KILLS, "the run was too short: slow the sink down"
    assert lost == set(), f"seed {seed}: lost {len(lost)}"
    assert extra == set(), f"seed {seed}: unexpected ids {sorted(extra)[:5]}"
    assert not_in_flight == [], f"seed {seed}: repeats not explained by a kill"
    # at most one batch in flight per killed process
    assert len(duplicates) <= BATCH * len(killed)
    assert {occurrence for occurrence, _ in deliveries} == expected  # dedup = exactly once

    assert unsettled == 0, f"seed {seed}: {unsettled} rows never settled"
    assert integrity_check(db) == ["ok"]
    stuck = []
    with SqliteScheduleStore.open(db) as store:
        for message in messages:
            snap = store.inspect(message.schedule_id)
            assert snap is not None
            if snap.status is ScheduleStatus.DEAD_LETTERED:
                ok = bool(snap.last_error)
            elif message.trigger.kind == "delay":
                ok = snap.status is ScheduleStatus.DELIVERED and snap.leased_until is None
            else:
                ok = (
                    snap.status is ScheduleStatus.PENDING
                    and snap.scheduled_for == next_due[message.schedule_id]
                    and snap.scheduled_for > datetime.now(UTC)
                    and snap.attempts == 0
                    and snap.leased_until is None
                    and snap.last_error is None
                )
            if not ok:
                stuck.append(snap)
        dead = store.list_dead_letter(10)
    assert stuck == [], f"seed {seed}: {len(stuck)} stuck, e.g. {stuck[:1]}"
    assert dead == []
    for proc in procs.all():
        _, err = procs.output(proc)
        assert "Traceback" not in err and "store error" not in err, err
    # Cron rows fired their first occurrence only: the second one was never due.
    for message in messages:
        if message.trigger.kind == "cron":
            second = OccurrenceId.derive(message.schedule_id, next_due[message.schedule_id])
            assert str(second) not in counts


@pytest.mark.slow
def test_sigkilled_inserters_leave_whole_batches_or_none(procs: Processes, tmp_path: Path) -> None:
    """An inserting process killed at random moments (10 times) while it writes batches
    of up to 50 schedules: every batch in the file is whole (``insert_many`` is one
    transaction), every batch the process was told had committed is there, and the file
    is sound."""
    rng = random.Random()
    db, ids = tmp_path / "insert.db", tmp_path / "ids.txt"
    SqliteScheduleStore.open(db).close()
    kills = 0
    for seed in range(10):
        proc = procs.start(
            "inserter.py",
            *(str(db), str(ids), "--seconds", "30", "--seed", str(seed)),
            *("--pause", "0", "--max-batch", "50"),
        )
        procs.wait_ready(proc)
        time.sleep(rng.uniform(0.02, 0.2))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
    assert integrity_check(db) == ["ok"]
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(10_000)  # a SIGKILLed writer may leave recovery to this reader
    try:
        rows = conn.execute(
            f"SELECT json_extract(payload, '$.seed'), json_extract(payload, '$.batch'),"
            f" json_extract(payload, '$.size'), count(*) FROM {TABLE}"
            " GROUP BY 1, 2"
        ).fetchall()
        stored = {
            str(uuid.UUID(hex=h))
            for (h,) in conn.execute(f"SELECT lower(hex(schedule_id)) FROM {TABLE}")
        }
    finally:
        conn.close()
    partial = [row for row in rows if row[3] != row[2]]
    # (a kill can cut the last line of the ids file short: whole ids only)
    reported = {i for i in ids.read_text().split() if len(i) == 36} if ids.exists() else set()
    print(f"\nkilled inserters: {kills} kills, {len(rows)} batches ({len(stored)} rows) stored")
    assert partial == []
    assert reported <= stored, f"{len(reported - stored)} reported inserts missing"
    assert len(rows) >= kills  # each process got some batches in before its kill
