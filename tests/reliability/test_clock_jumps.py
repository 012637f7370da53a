"""Clock jumps: a laptop that sleeps for 8 hours, a clock stepped back by an hour.

Frozen wall clock (time-machine, ``tick=False``), so every instant is exact; the real
worker and both real stores (in-memory and SQLite on a file). Checked:

- after an 8 h sleep each recurring schedule fires once (one catch-up), not once per
  missed tick, and then resumes on its rule; a one-shot that fell due during the sleep
  fires once; occurrences whose lease expired during the sleep (their worker died before
  the laptop slept) are claimed again and delivered;
- the worker's memory does not grow over hundreds of cycles with repeated sleeps;
- the clock stepped back 1 h: nothing fires twice, nothing fires before its time,
  nothing crashes, no delay or lease computed by the worker is negative, and when the
  clock catches up the schedules fire on their rule again;
- the worker's own loop (``run`` on a thread) goes through both jumps unharmed.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import hexeract_lite
from hexeract_lite import (
    InMemoryScheduleStore,
    ScheduledMessage,
    ScheduleStatus,
    ScheduleStore,
    Target,
)
from hexeract_lite.store.sqlite import SqliteScheduleStore
from hexeract_lite.worker import SchedulerWorker, SchedulerWorkerConfig

from .. import background
from ..conftest import T0, FrozenTime

S = timedelta(seconds=1)
CONFIG = SchedulerWorkerConfig(
    poll_interval=timedelta(milliseconds=10),
    batch_size=10,
    lease=timedelta(minutes=5),
    retry_base_delay=timedelta(seconds=1),
    retry_max_delay=timedelta(seconds=60),
    jitter=False,
    min_cycle_delay=timedelta(0),
    dispatch_timeout=timedelta(seconds=5),
)
RULES = {
    "*/2 * * * * *": timedelta(seconds=2),
    "* * * * *": timedelta(minutes=1),
    "*/15 * * * *": timedelta(minutes=15),
    "@hourly": timedelta(hours=1),
}


@pytest.fixture(params=["memory", "sqlite"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, frozen: FrozenTime
) -> Iterator[ScheduleStore]:
    if request.param == "memory":
        s: ScheduleStore = InMemoryScheduleStore()
    else:
        s = SqliteScheduleStore.open(tmp_path / "clock.db", durability="normal")
    try:
        yield s
    finally:
        s.close()


class Recorder:
    """A sink: records each delivery (occurrence id, schedule id, scheduled_for, clock at
    dispatch) in ``calls``; a schedule in ``fail`` raises instead (kept in ``failed``)."""

    def __init__(self, fail: set[uuid.UUID] | None = None) -> None:
        self.calls: list[tuple[str, uuid.UUID, datetime, datetime]] = []
        self.failed: list[tuple[str, uuid.UUID, datetime, datetime]] = []
        self.fail = fail or set()
        self._lock = threading.Lock()

    def __call__(self, message: ScheduledMessage) -> None:
        call = (
            str(message.occurrence_id()),
            message.schedule_id,
            message.scheduled_for,
            datetime.now(UTC),
        )
        with self._lock:
            if message.schedule_id in self.fail:
                self.failed.append(call)
                raise RuntimeError("downstream unavailable")
            self.calls.append(call)

    def for_schedule(self, sid: uuid.UUID) -> list[datetime]:
        return [when for _, s, when, _ in self.calls if s == sid]


def _cron(expression: str, first: datetime = T0) -> ScheduledMessage:
    return ScheduledMessage.cron(Target.bus("clock.test"), expression, first, "tick", {})


def _drain(worker: SchedulerWorker, cycles: int = 50) -> int:
    """Run cycles until one claims nothing; return how many claimed something."""
    for busy in range(cycles):
        if not worker.run_once().claimed:
            return busy
    raise AssertionError(f"still claiming after {cycles} cycles")


# -- the laptop sleeps for 8 hours -----------------------------------------------------


def test_after_an_8_hour_sleep_each_schedule_fires_once(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    crons = {expr: _cron(expr) for expr in RULES}
    later = ScheduledMessage.delay(Target.outbox(), T0 + timedelta(hours=1), "once", {})
    orphans = [
        ScheduledMessage.delay(Target.outbox(), T0 - timedelta(minutes=1), "orphan", {"i": i})
        for i in range(3)
    ]
    store.insert_many([*crons.values(), later, *orphans], 5)
    # A worker claims the orphans and dies before acknowledging them (5 min leases).
    dead_claim = store.claim_due(T0, 3, timedelta(minutes=5))
    assert {o.message.schedule_id for o in dead_claim} == {m.schedule_id for m in orphans}

    sink = Recorder()
    worker = SchedulerWorker(store, sink, CONFIG)
    _drain(worker)
    assert len(sink.calls) == len(crons)  # each cron's first occurrence; orphans leased

    frozen.shift(timedelta(hours=8))  # the lid closes; it opens 8 h later
    wake = frozen.now()
    before = len(sink.calls)
    _drain(worker)
    after_wake = sink.calls[before:]

    fired = [sid for _, sid, _, _ in after_wake]
    for expr, message in crons.items():
        assert fired.count(message.schedule_id) == 1, (expr, fired.count(message.schedule_id))
        snap = store.inspect(message.schedule_id)
        assert snap is not None and snap.status is ScheduleStatus.PENDING
        # Rescheduled to the first instant of its rule after now: within one period.
        assert wake < snap.scheduled_for <= wake + RULES[expr], (expr, snap.scheduled_for)
        assert snap.attempts == 0 and snap.leased_until is None
    assert fired.count(later.schedule_id) == 1
    for orphan in orphans:
        assert fired.count(orphan.schedule_id) == 1
        snap = store.inspect(orphan.schedule_id)
        assert snap is not None and snap.status is ScheduleStatus.DELIVERED
        assert snap.attempts == 2  # the dead worker's attempt counts
    assert len(after_wake) == len(crons) + 1 + len(orphans)

    # And then each resumes on its rule: two seconds later only the 2 s rule fires.
    frozen.shift(2 * S)
    before = len(sink.calls)
    _drain(worker)
    assert [sid for _, sid, _, _ in sink.calls[before:]] == [crons["*/2 * * * * *"].schedule_id]
    occurrence_ids = [oid for oid, _, _, _ in sink.calls]
    assert len(occurrence_ids) == len(set(occurrence_ids))


def test_memory_does_not_grow_over_many_cycles_and_sleeps(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """600 cycles, each delivering 4 cron occurrences, with an 8 h sleep every 50 cycles.
    Traced memory after the first 100 cycles and after the last must stay within 64 KiB
    (about 100 bytes per cycle): nothing accumulates per cycle or per sleep."""
    logging.getLogger("hexeract_lite").setLevel(logging.WARNING)  # no log records kept
    store.insert_many([_cron("*/2 * * * * *") for _ in range(4)], 5)
    delivered = 0

    def count(_: ScheduledMessage) -> None:
        nonlocal delivered
        delivered += 1

    worker = SchedulerWorker(store, count, CONFIG)

    def cycles(n: int, start: int) -> None:
        for i in range(start, start + n):
            frozen.shift(timedelta(hours=8) if i % 50 == 49 else 2 * S)
            assert worker.run_once().claimed == 4

    # Only what the worker, its store and this test's sink allocate counts: the suite's
    # background runs allocate in threads of their own meanwhile.
    ours = [
        tracemalloc.Filter(True, str(Path(hexeract_lite.__file__).parent / "*"), all_frames=True),
        tracemalloc.Filter(True, __file__, all_frames=True),
        tracemalloc.Filter(False, background.__file__, all_frames=True),
    ]

    def traced() -> int:
        snapshot = tracemalloc.take_snapshot().filter_traces(ours)
        return sum(stat.size for stat in snapshot.statistics("filename"))

    tracemalloc.start(8)
    try:
        cycles(100, 0)
        gc.collect()
        base = traced()
        cycles(500, 100)
        gc.collect()
        grown = traced() - base
    finally:
        tracemalloc.stop()
    assert delivered == 600 * 4
    print(f"\nmemory: {grown / 1024:+.1f} KiB traced after 500 more cycles (10 sleeps of 8 h)")
    assert grown < 64 * 1024, f"grew by {grown} bytes over 500 cycles"


# -- the clock steps back an hour -------------------------------------------------------


def test_a_clock_stepped_back_an_hour_fires_nothing_twice_and_nothing_early(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    crons = {expr: _cron(expr) for expr in RULES}
    shot = ScheduledMessage.delay(Target.outbox(), T0, "once", {})
    flaky = ScheduledMessage.delay(Target.outbox(), T0, "flaky", {})
    store.insert_many([*crons.values(), shot, flaky], 5)
    sink = Recorder(fail={flaky.schedule_id})
    worker = SchedulerWorker(store, sink, CONFIG)
    _drain(worker)
    assert len(sink.calls) == len(crons) + 1 and len(sink.failed) == 1
    flaky_snap = store.inspect(flaky.schedule_id)
    assert flaky_snap is not None and flaky_snap.leased_until == T0 + 2 * S  # base * 2**1

    frozen.shift(-timedelta(hours=1))  # NTP steps the clock back
    sink.fail.clear()
    # Walk the clock from T0 - 1 h back to T0 + 1 min in 20 s steps, a cycle at each.
    while frozen.now() <= T0 + timedelta(minutes=1):
        _drain(worker)
        for _, sid, _, _ in sink.calls[len(crons) + 1 :]:
            assert frozen.now() >= T0, f"{sid} fired at {frozen.now()} before T0"
        for message in [*crons.values(), flaky]:
            snap = store.inspect(message.schedule_id)
            assert snap is not None
            if snap.leased_until is not None:  # a lease or retry wait is never in the past
                assert snap.leased_until > frozen.now() or snap.scheduled_for > frozen.now()
        frozen.shift(20 * S)

    occurrence_ids = [oid for oid, _, _, _ in sink.calls]
    assert len(occurrence_ids) == len(set(occurrence_ids)), "an occurrence fired twice"
    for _, _, scheduled_for, at in sink.calls:
        assert at >= scheduled_for, "fired before its time"
    assert sink.for_schedule(shot.schedule_id) == [T0]
    # Failed at T0; its retry wait (T0 + 2 s) was not cut short by the step back.
    assert sink.for_schedule(flaky.schedule_id) == [T0]
    assert next(at for _, s, _, at in sink.calls if s == flaky.schedule_id) >= T0 + 2 * S
    # Back on the rule: the 2 s rule fired at every 20 s step after T0, the others at
    # their own instants (T0 + 1 min for the minute rule).
    assert sink.for_schedule(crons["* * * * *"].schedule_id) == [T0, T0 + timedelta(minutes=1)]
    assert sink.for_schedule(crons["@hourly"].schedule_id) == [T0]
    assert sink.for_schedule(crons["*/2 * * * * *"].schedule_id) == [
        T0,
        T0 + 2 * S,  # due before the step back: fires (once) when the clock passes it
        T0 + 22 * S,
        T0 + 42 * S,
    ]


# -- the worker's own loop through both jumps --------------------------------------------


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


@pytest.mark.slow
def test_the_running_worker_loop_survives_both_jumps(
    store: ScheduleStore,
    frozen: FrozenTime,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``run()`` on a thread (real sleeps, frozen wall clock): the clock jumps 8 h
    forward, then 1 h back. Each cron fires once per jump forward, not at all after the
    step back; the loop never logs an error, and every wait it asks for is >= 0."""
    caplog.set_level(logging.INFO, logger="hexeract_lite")
    waits: list[float] = []
    original_wait = store.changes.wait

    def recording_wait(since: int, timeout: float) -> bool:
        waits.append(timeout)
        return original_wait(since, timeout)

    monkeypatch.setattr(store.changes, "wait", recording_wait)
    crons = [_cron(expr) for expr in RULES]
    store.insert_many(crons, 5)
    sink = Recorder()
    handle = SchedulerWorker(store, sink, CONFIG).start()
    try:
        assert _wait_for(lambda: len(sink.calls) == len(crons))
        time.sleep(0.2)
        assert len(sink.calls) == len(crons)  # the frozen clock does not move: no more

        frozen.shift(timedelta(hours=8))
        assert _wait_for(lambda: len(sink.calls) == 2 * len(crons))
        time.sleep(0.3)
        assert len(sink.calls) == 2 * len(crons)  # one catch-up each, no more

        frozen.shift(-timedelta(hours=1))
        time.sleep(0.5)
        assert len(sink.calls) == 2 * len(crons)  # nothing fires again
        assert handle.is_alive
    finally:
        assert handle.stop(10)
    occurrence_ids = [oid for oid, _, _, _ in sink.calls]
    assert len(occurrence_ids) == len(set(occurrence_ids))
    assert waits and min(waits) >= 0, min(waits)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
