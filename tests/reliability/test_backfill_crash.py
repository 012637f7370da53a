"""Crash: a backfill survives worker processes SIGKILLed at random, mid-window.

Ten daily cron schedules in one SQLite file, each backfilled over the last 20 days (20
instants each, 200 in all); three worker processes (``crash_worker.py``, whose sink
appends each delivered occurrence id to a log with ``write`` + ``fsync`` before the
worker acknowledges; up to 20 ms before the write and 30 ms after it). Every 0.1-0.3 s
a random worker gets SIGKILL and is started again, 15 times, while instants of the
windows remain undelivered. Leases are 1.5 s.

Afterwards: no instant of any window is lost, and nothing outside the windows fired
(the rule's next instant is tomorrow); every repeated id was in flight at a kill (at
least once, never more); each schedule's instants were first delivered in the rule's
order; every row is back on its rule: pending at its first instant after now, not
leased, attempts 0, no backfill left.
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

import pytest

from hexeract_lite import OccurrenceId, SchedulerControl, ScheduleStatus
from hexeract_lite.store.sqlite import SqliteScheduleStore
from hexeract_lite.trigger import CronExpression

from .conftest import Processes, integrity_check, read_log, repeats_not_in_flight

SCHEDULES = 10
DAYS = 20
WORKERS = 3
MIN_KILLS = 8
MAX_KILLS = 15
LEASE_S = 1.5
BATCH = 5
DEADLINE_S = 90


def _instants(rule: CronExpression, start: datetime, end: datetime) -> list[datetime]:
    found: list[datetime] = []
    nxt = rule.next_occurrence(start - timedelta(milliseconds=1))
    while nxt is not None and nxt <= end:
        found.append(nxt)
        nxt = rule.next_occurrence(nxt)
    return found


@pytest.mark.slow
def test_sigkilled_workers_mid_backfill_lose_no_instant_and_repeat_only_in_flight(
    procs: Processes, tmp_path: Path
) -> None:
    seed = int(os.environ.get("HEXERACT_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    db, log = tmp_path / "backfill.db", tmp_path / "deliveries.log"
    now = datetime.now(UTC).replace(microsecond=0)
    start, end = now - timedelta(days=DAYS), now - timedelta(hours=1)
    expected: dict[str, list[str]] = {}  # schedule id -> the window's ids, in order
    rules: dict[str, CronExpression] = {}
    with SqliteScheduleStore.open(db) as store:
        control = SchedulerControl(store)
        for i in range(SCHEDULES):
            minute, hour = rng.randrange(60), rng.randrange(24)
            rule = f"{minute} {hour} * * *"
            control.ensure(f"crash.s{i}", cron=rule, event_type="backfill", max_attempts=25)
            sid = control.id_of(f"crash.s{i}")
            parsed = CronExpression.parse(rule)
            window = _instants(parsed, start, end)
            assert control.backfill(sid, start, end) == len(window)
            expected[str(sid)] = [str(OccurrenceId.derive(sid, t)) for t in window]
            rules[str(sid)] = parsed
    wanted = {oid for ids in expected.values() for oid in ids}
    assert len(wanted) >= SCHEDULES * (DAYS - 1)

    args = [str(db), str(log), "--lease", str(LEASE_S), "--batch", str(BATCH)]
    args += ["--dispatch-timeout", "0.3", "--before", "0.02", "--after", "0.03"]

    def start_worker() -> subprocess.Popen[bytes]:
        return procs.start("crash_worker.py", *args)

    def done() -> bool:
        return wanted <= {occurrence for occurrence, _ in read_log(log)}

    workers = [start_worker() for _ in range(WORKERS)]
    killed: set[int] = set()
    kills_during_run = 0
    started = time.monotonic()
    while not done():
        assert time.monotonic() - started < DEADLINE_S, f"seed {seed}: not done in {DEADLINE_S} s"
        time.sleep(rng.uniform(0.1, 0.3))
        if len(killed) >= MAX_KILLS:
            continue  # enough: let the workers finish the windows
        victim = rng.randrange(WORKERS)
        proc = workers[victim]
        if proc.poll() is not None:
            pytest.fail(f"worker {proc.pid} exited on its own: {procs.output(proc)}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        killed.add(proc.pid)
        kills_during_run += not done()
        workers[victim] = start_worker()
    elapsed = time.monotonic() - started

    # what the last kill left leased is settled once its lease runs out
    def settled(store: SqliteScheduleStore) -> bool:
        snaps = [store.inspect(uuid.UUID(sid)) for sid in expected]
        return all(
            s is not None and s.scheduled_for > now and s.leased_until is None for s in snaps
        )

    deadline = time.monotonic() + 10 * LEASE_S
    with SqliteScheduleStore.open(db) as store:
        while not settled(store) and time.monotonic() < deadline:
            time.sleep(0.1)
    for proc in workers:
        procs.wait_ready(proc)
    procs.stop(workers)
    assert [w.returncode for w in workers] == [0] * WORKERS

    deliveries = read_log(log)
    counts = Counter(occurrence for occurrence, _ in deliveries)
    lost = wanted - set(counts)
    extra = set(counts) - wanted
    repeats = sum(n - 1 for n in counts.values())
    print(
        f"\nbackfill crash: instants={len(wanted)} kills={len(killed)} (during the run:"
        f" {kills_during_run}) lost={len(lost)} repeats={repeats}"
        f" deliveries={len(deliveries)} in {elapsed:.1f} s, seed {seed}"
    )
    assert kills_during_run >= MIN_KILLS, "the run was too short: slow the sink down"
    assert lost == set(), f"seed {seed}: lost {len(lost)} instants"
    assert extra == set(), f"seed {seed}: ids outside the windows {sorted(extra)[:3]}"
    assert repeats_not_in_flight(deliveries, killed, BATCH) == [], f"seed {seed}"
    first_seen: dict[str, int] = {}
    for index, (occurrence, _) in enumerate(deliveries):
        first_seen.setdefault(occurrence, index)
    for key, ids in expected.items():
        order = [first_seen[oid] for oid in ids]
        assert order == sorted(order), f"seed {seed}: schedule {key} fired out of order"
    assert integrity_check(db) == ["ok"]
    with SqliteScheduleStore.open(db) as store:
        for key, cron in rules.items():
            snap = store.inspect(uuid.UUID(key))
            assert snap is not None
            assert snap.status is ScheduleStatus.PENDING, snap
            assert snap.backfill_until is None and snap.leased_until is None, snap
            assert snap.attempts == 0 and snap.last_error is None, snap
            after = cron.next_occurrence(now)
            assert after is not None and after <= snap.scheduled_for <= after + timedelta(days=1)
    for proc in procs.all():
        _, err = procs.output(proc)
        assert "Traceback" not in err and "store error" not in err, err
