"""SchedulerWorker: the poll cycle on a frozen clock, the retry policy, the thread loop.

Cycle tests drive ``run_once()`` on time-machine's frozen clock against every store of
the contract suite. Loop tests (``run``/``start``) use real time with short intervals.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hexeract_lite import (
    InMemoryScheduleStore,
    InvalidConfiguration,
    RetryPolicy,
    ScheduledMessage,
    SchedulerControl,
    SchedulerWorker,
    SchedulerWorkerConfig,
    ScheduleSnapshot,
    ScheduleStatus,
    ScheduleStore,
    SqliteScheduleStore,
    StoreError,
    Target,
)
from hexeract_lite.errors import InvalidArgument
from hexeract_lite.settle import error_summary, error_text
from hexeract_lite.settlement import Settlement
from hexeract_lite.sinks import CallableSink
from hexeract_lite.worker import MAX_ERROR_CHARS, CycleReport, DispatchOutcome

from .conftest import T0, TIGHT, FrozenTime

S = timedelta(seconds=1)
MS = timedelta(milliseconds=1)
NO_JITTER = SchedulerWorkerConfig(jitter=False)


class Recorder:
    """A sink that records what it gets and can run a side effect per message."""

    def __init__(self, effect: Callable[[ScheduledMessage], None] | None = None) -> None:
        self.messages: list[ScheduledMessage] = []
        self.effect = effect
        self.lock = threading.Lock()
        self.called = threading.Event()

    def dispatch(self, message: ScheduledMessage) -> None:
        with self.lock:
            self.messages.append(message)
        self.called.set()
        if self.effect is not None:
            self.effect(message)

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.messages)


def failing(text: str = "boom") -> Recorder:
    counter = iter(range(1, 1_000_000))

    def fail(_: ScheduledMessage) -> None:
        raise ValueError(f"{text} #{next(counter)}")

    return Recorder(fail)


def one_shot(at: datetime = T0, target: Target | None = None) -> ScheduledMessage:
    return ScheduledMessage.delay(target or Target.outbox(), at, "reminder", {"n": 1})


def snap(store: ScheduleStore, message: ScheduledMessage) -> ScheduleSnapshot:
    s = store.inspect(message.schedule_id)
    assert s is not None
    return s


# -- configuration -----------------------------------------------------------------------


def test_config_defaults_are_the_reference_ones_but_the_drain_pace() -> None:
    c = SchedulerWorkerConfig()
    # min_cycle_delay is 5 ms in the reference; 2 ms here: a backlog drains about twice
    # as fast, and other processes writing to the file still get the lock.
    assert c.poll_interval == timedelta(milliseconds=100)
    assert c.batch_size == 10
    assert c.lease == timedelta(seconds=300)
    assert c.retry_base_delay == timedelta(seconds=1)
    assert c.retry_max_delay == timedelta(seconds=300)
    assert c.jitter is True
    assert c.min_cycle_delay == timedelta(milliseconds=2)
    assert c.dispatch_timeout == timedelta(seconds=30)


@pytest.mark.parametrize(
    ("fields", "names"),
    [
        ({"poll_interval": timedelta(0)}, ["poll_interval", "0 s"]),
        ({"poll_interval": 0.1}, ["poll_interval", "0.1", "timedelta"]),
        ({"batch_size": 0}, ["batch_size", "0"]),
        ({"batch_size": True}, ["batch_size", "True"]),
        ({"lease": -S}, ["lease", "-1 s"]),
        ({"retry_base_delay": timedelta(0)}, ["retry_base_delay", "0 s"]),
        (
            {"retry_base_delay": 10 * S, "retry_max_delay": 5 * S},
            ["retry_max_delay", "5 s", "retry_base_delay", "10 s"],
        ),
        ({"jitter": 1}, ["jitter", "1"]),
        ({"min_cycle_delay": -MS}, ["min_cycle_delay", "-0.001 s"]),
        ({"dispatch_timeout": timedelta(0)}, ["dispatch_timeout", "0 s"]),
        (
            {"lease": 60 * S},  # 10 x 30 s = 300 s needed
            ["lease", "batch_size", "dispatch_timeout", "300 s", "60 s"],
        ),
        (
            {"batch_size": 4, "dispatch_timeout": 10 * S, "lease": 39 * S},
            ["lease", "4", "10 s", "40 s", "39 s"],
        ),
        (  # the product is past timedelta.max: no OverflowError
            {"batch_size": 2, "dispatch_timeout": timedelta.max},
            ["lease", "2", "more than timedelta.max", "300 s"],
        ),
    ],
)
def test_config_rejects_bad_values_naming_field_and_value(
    fields: dict[str, Any], names: list[str]
) -> None:
    with pytest.raises(InvalidConfiguration) as info:
        SchedulerWorkerConfig(**fields)
    for name in names:
        assert name in str(info.value)


def test_config_accepts_the_edges() -> None:
    SchedulerWorkerConfig(min_cycle_delay=timedelta(0), retry_max_delay=S, retry_base_delay=S)
    SchedulerWorkerConfig(batch_size=3, dispatch_timeout=10 * S, lease=30 * S)


def test_config_is_frozen_and_keyword_only() -> None:
    c = SchedulerWorkerConfig()
    with pytest.raises(AttributeError):
        c.batch_size = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        SchedulerWorkerConfig(timedelta(seconds=1))  # type: ignore[call-arg]


def test_worker_rejects_a_non_sink_and_a_bad_rng() -> None:
    store = InMemoryScheduleStore()
    with pytest.raises(InvalidConfiguration, match="sink"):
        SchedulerWorker(store, 42)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfiguration, match="rng"):
        SchedulerWorker(store, Recorder(), rng=object())  # type: ignore[arg-type]
    with pytest.raises(InvalidConfiguration, match="config"):
        SchedulerWorker(store, Recorder(), {"batch_size": 1})  # type: ignore[arg-type]


# -- the cycle -----------------------------------------------------------------------------


def test_a_due_one_shot_is_delivered_once(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    sink = Recorder()
    worker = SchedulerWorker(store, sink)
    assert worker.run_once() == CycleReport(claimed=1, delivered=1)
    assert [m.occurrence_id() for m in sink.messages] == [msg.occurrence_id()]
    s = snap(store, msg)
    assert s.status is ScheduleStatus.DELIVERED and s.delivered_at == T0
    assert worker.run_once() == CycleReport()
    assert sink.count == 1


def test_nothing_is_dispatched_before_it_is_due(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot(T0 + S)
    store.insert(msg, 3)
    sink = Recorder()
    worker = SchedulerWorker(store, sink)
    assert worker.run_once() == CycleReport()
    frozen.shift(S)
    assert worker.run_once().delivered == 1


def test_a_plain_function_is_a_sink(store: ScheduleStore, frozen: FrozenTime) -> None:
    got: list[ScheduledMessage] = []
    store.insert(one_shot(), 3)
    assert SchedulerWorker(store, got.append).run_once().delivered == 1
    assert len(got) == 1


def test_cron_is_rescheduled_to_its_next_instant(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = ScheduledMessage.cron(Target.bus("tick"), "*/10 * * * * *", T0, "tick", None)
    store.insert(msg, 3)
    sink = Recorder()
    worker = SchedulerWorker(store, sink)
    assert worker.run_once() == CycleReport(claimed=1, rescheduled=1)
    s = snap(store, msg)
    assert s.status is ScheduleStatus.PENDING
    assert s.scheduled_for == T0 + 10 * S and s.attempts == 0 and s.leased_until is None
    frozen.shift(10 * S)
    assert worker.run_once().rescheduled == 1
    assert [m.scheduled_for for m in sink.messages] == [T0, T0 + 10 * S]
    assert len({m.occurrence_id() for m in sink.messages}) == 2


def test_misfire_collapses_missed_ticks_into_one_catch_up(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = ScheduledMessage.cron(Target.outbox(), "* * * * *", T0, "tick", None)
    store.insert(msg, 3)
    sink = Recorder()
    worker = SchedulerWorker(store, sink)
    frozen.shift(10 * 60 * S + 30 * S)  # the worker was down for 10 ticks
    assert worker.run_once() == CycleReport(claimed=1, rescheduled=1)
    assert worker.run_once() == CycleReport()
    assert sink.count == 1, "exactly one catch-up firing"
    assert sink.messages[0].scheduled_for == T0
    assert snap(store, msg).scheduled_for == T0 + 11 * 60 * S, "back on the rule, in the future"
    frozen.move_to(T0 + 11 * 60 * S)
    assert worker.run_once().rescheduled == 1
    assert sink.count == 2


def test_a_cron_with_no_further_instant_is_delivered(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    # The last cron instant before the year 10000: there is no next one.
    end = datetime(9999, 12, 31, 23, 0, tzinfo=UTC)
    msg = ScheduledMessage.cron(Target.outbox(), "0 23 31 12 *", end, "last", None)
    store.insert(msg, 3)
    frozen.move_to(end)
    assert SchedulerWorker(store, Recorder()).run_once() == CycleReport(claimed=1, delivered=1)
    assert snap(store, msg).status is ScheduleStatus.DELIVERED


def test_retry_delays_double_and_cap_without_jitter(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = one_shot()
    store.insert(msg, 10)
    cfg = SchedulerWorkerConfig(jitter=False, retry_base_delay=S, retry_max_delay=10 * S)
    worker = SchedulerWorker(store, failing(), cfg)
    waits = []
    for attempt in range(1, 7):
        assert worker.run_once() == CycleReport(claimed=1, retried=1)
        s = snap(store, msg)
        assert s.attempts == attempt
        assert error_summary(s.last_error) == f"ValueError: boom #{attempt}"
        assert s.leased_until is not None
        waits.append(s.leased_until - frozen.now())
        frozen.shift(s.leased_until - frozen.now() - MS)
        assert worker.run_once() == CycleReport(), "not claimed before the retry deadline"
        frozen.shift(MS)
    assert waits == [2 * S, 4 * S, 8 * S, 10 * S, 10 * S, 10 * S]


def test_retry_delays_stay_within_bounds_with_jitter(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = one_shot()
    store.insert(msg, 10)
    cfg = SchedulerWorkerConfig(retry_base_delay=S, retry_max_delay=20 * S)
    worker = SchedulerWorker(store, failing(), cfg, rng=random.Random(7))
    expected = random.Random(7)
    for attempt in range(1, 8):
        assert worker.run_once().retried == 1
        s = snap(store, msg)
        assert s.leased_until is not None
        wait = s.leased_until - frozen.now()
        capped = min(2**attempt, 20)
        assert timedelta(0) <= wait <= capped * S
        draw = timedelta(seconds=expected.uniform(0, capped))
        assert abs(wait - draw) < 2 * MS  # the store keeps milliseconds
        frozen.shift(wait)


def test_retry_delay_formula_and_no_overflow() -> None:
    store = InMemoryScheduleStore()
    w = SchedulerWorker(store, Recorder(), NO_JITTER)
    assert [w.retry_delay(a).total_seconds() for a in (0, 1, 2, 3, 8, 9)] == [
        1,
        2,
        4,
        8,
        256,
        300,
    ]
    assert w.retry_delay(10_000) == timedelta(seconds=300)

    class Max:
        def uniform(self, a: float, b: float) -> float:
            return b

    j = SchedulerWorker(store, Recorder(), rng=Max())
    assert j.retry_delay(3) == 8 * S
    assert j.retry_delay(50) == 300 * S


def test_a_poison_occurrence_is_dead_lettered_with_its_last_error(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    sink = failing("poison")
    worker = SchedulerWorker(store, sink, NO_JITTER)
    reports = []
    for _ in range(3):
        reports.append(worker.run_once())
        frozen.shift(60 * S)
    assert reports == [
        CycleReport(claimed=1, retried=1),
        CycleReport(claimed=1, retried=1),
        CycleReport(claimed=1, dead_lettered=1),
    ]
    s = snap(store, msg)
    assert s.status is ScheduleStatus.DEAD_LETTERED
    assert error_summary(s.last_error) == "ValueError: poison #3"
    assert s.attempts == 3 and s.leased_until is None
    assert worker.run_once() == CycleReport()
    assert sink.count == 3
    assert [d.schedule_id for d in store.list_dead_letter()] == [msg.schedule_id]


def test_replay_then_delivery(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 1)
    broken = True

    def flaky(_: ScheduledMessage) -> None:
        if broken:
            raise ConnectionError("downstream is down")

    sink = Recorder(flaky)
    worker = SchedulerWorker(store, sink)
    assert worker.run_once().dead_lettered == 1
    assert error_summary(snap(store, msg).last_error) == "ConnectionError: downstream is down"
    broken = False
    frozen.shift(5 * S)
    SchedulerControl(store).replay(msg.schedule_id)
    s = snap(store, msg)
    assert s.status is ScheduleStatus.PENDING and s.attempts == 0 and s.last_error is None
    assert worker.run_once() == CycleReport(claimed=1, delivered=1)
    assert snap(store, msg).status is ScheduleStatus.DELIVERED
    # the replayed firing is due at the replay instant, so it has a new occurrence id
    assert sink.messages[-1].scheduled_for == T0 + 5 * S


def test_an_occurrence_whose_lease_expired_in_the_batch_is_skipped(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    first, second = one_shot(T0 - S), one_shot(T0)
    store.insert_many([first, second], 5)
    cfg = SchedulerWorkerConfig(lease=60 * S, dispatch_timeout=S)

    def slow(message: ScheduledMessage) -> None:
        if message.schedule_id == first.schedule_id:
            frozen.shift(61 * S)  # this dispatch "took" longer than the lease

    sink = Recorder(slow)
    worker = SchedulerWorker(store, sink, cfg)
    assert worker.run_once() == CycleReport(claimed=2, delivered=1, skipped=1)
    assert [m.schedule_id for m in sink.messages] == [first.schedule_id]
    # the first was still acknowledged: its lease was not taken over by anyone
    assert snap(store, first).status is ScheduleStatus.DELIVERED
    s = snap(store, second)
    assert s.status is ScheduleStatus.PENDING and s.attempts == 1
    assert worker.run_once() == CycleReport(claimed=1, delivered=1)
    assert snap(store, second).attempts == 2


def test_a_dispatch_timeout_is_a_failure_and_the_worker_goes_on(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    hung, fine = one_shot(T0 - S), one_shot(T0)
    store.insert_many([hung, fine], 3)
    release = threading.Event()

    def hang(message: ScheduledMessage) -> None:
        if message.schedule_id == hung.schedule_id:
            release.wait(10)  # a real wait: frozen wall clock, real monotonic timeout

    cfg = SchedulerWorkerConfig(dispatch_timeout=timedelta(milliseconds=200), jitter=False)
    sink = Recorder(hang)
    worker = SchedulerWorker(store, sink, cfg)
    started = time.monotonic()
    try:
        report = worker.run_once()
    finally:
        release.set()
    elapsed = time.monotonic() - started
    assert report == CycleReport(claimed=2, delivered=1, retried=1)
    assert 0.2 <= elapsed < 3
    s = snap(store, hung)
    assert error_summary(s.last_error) == (
        "TimeoutError: the sink did not return within dispatch_timeout (0.2 s); its thread"
        " was abandoned and keeps running until the sink returns"
    )
    assert snap(store, fine).status is ScheduleStatus.DELIVERED


class CountingStore(InMemoryScheduleStore):
    """Counts the acknowledgement calls: batched (settle) and single."""

    def __init__(self) -> None:
        super().__init__()
        self.settles: list[int] = []
        self.singles = 0
        self.fail_next_settle = False

    def settle(self, outcomes: Sequence[Settlement]) -> list[bool]:
        self.settles.append(len(outcomes))
        if self.fail_next_settle:
            self.fail_next_settle = False
            raise StoreError("disk I/O error")
        return super().settle(outcomes)

    def mark_delivered(self, schedule_id: uuid.UUID, lease: datetime) -> bool:
        self.singles += 1  # pragma: no cover - the worker settles in batches
        return super().mark_delivered(schedule_id, lease)


def test_a_batch_is_settled_in_one_store_call(frozen: FrozenTime) -> None:
    store = CountingStore()
    ok, bad, last = one_shot(T0 - 3 * S), one_shot(T0 - 2 * S), one_shot(T0 - S)
    tick = ScheduledMessage.cron(Target.outbox(), "* * * * *", T0, "tick", None)
    store.insert_many([ok, bad, tick], 3)
    store.insert(last, 1)
    failing_ids = {bad.schedule_id, last.schedule_id}

    def effect(message: ScheduledMessage) -> None:
        if message.schedule_id in failing_ids:
            raise ValueError("nope")

    worker = SchedulerWorker(store, Recorder(effect), NO_JITTER)
    assert worker.run_once() == CycleReport(
        claimed=4, delivered=1, retried=1, dead_lettered=1, rescheduled=1
    )
    assert store.settles == [4] and store.singles == 0
    assert snap(store, ok).status is ScheduleStatus.DELIVERED
    assert error_summary(snap(store, bad).last_error) == "ValueError: nope"
    assert snap(store, bad).leased_until == T0 + 2 * S, "retry_base_delay * 2**1, no jitter"
    assert snap(store, last).status is ScheduleStatus.DEAD_LETTERED
    assert snap(store, tick).scheduled_for == T0 + 60 * S


def test_a_failed_settlement_records_nothing_and_the_batch_is_redelivered(
    frozen: FrozenTime, caplog: pytest.LogCaptureFixture
) -> None:
    """A crash (here: a store error) between the dispatches and the batch's settlement
    only redelivers: every occurrence stays leased and comes back after its lease."""
    store = CountingStore()
    msgs = [one_shot(T0 - i * S) for i in range(3)]
    store.insert_many(msgs, 5)
    sink = Recorder()
    cfg = SchedulerWorkerConfig(lease=60 * S, dispatch_timeout=S)
    worker = SchedulerWorker(store, sink, cfg)
    store.fail_next_settle = True
    with (
        caplog.at_level(logging.WARNING, logger="hexeract_lite.worker"),
        pytest.raises(StoreError),
    ):
        worker.run_once()
    assert "3 claimed occurrence(s) left to lease expiry" in caplog.text
    for m in msgs:
        s = snap(store, m)
        assert s.status is ScheduleStatus.PENDING and s.leased_until == T0 + 60 * S
    assert worker.run_once() == CycleReport(), "still leased"
    frozen.shift(60 * S)
    assert worker.run_once() == CycleReport(claimed=3, delivered=3)
    ids = [m.occurrence_id() for m in sink.messages]
    assert sorted(ids[:3]) == sorted(ids[3:]) == sorted(m.occurrence_id() for m in msgs)


def test_each_dispatch_of_a_batch_has_its_own_timeout() -> None:
    """Three calls of 0.15 s under a 0.25 s timeout: the batch takes longer than one
    timeout, and no call is cut short."""
    store = InMemoryScheduleStore()
    # due a second ago or more: "now" rounds up to the next millisecond when stored
    msgs = [one_shot(now() - i * S) for i in range(1, 4)]
    store.insert_many(msgs, 3)
    sink = Recorder(lambda m: time.sleep(0.15))
    cfg = SchedulerWorkerConfig(dispatch_timeout=timedelta(milliseconds=250))
    started = time.monotonic()
    assert SchedulerWorker(store, sink, cfg).run_once() == CycleReport(claimed=3, delivered=3)
    assert time.monotonic() - started >= 0.45


def test_run_once_counts_dispatch_timeout_from_the_hand_over_to_the_sink() -> None:
    """The dispatch thread held up before it hands an occurrence to the sink (a slow
    log handler on its 'dispatching' record) is not a timed-out dispatch."""
    store = InMemoryScheduleStore()
    slow, other = one_shot(now() - 2 * S), one_shot(now() - S)
    store.insert_many([slow, other], 3)
    sink = Recorder()

    class SlowHandler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "dispatching" in record.getMessage() and str(slow.schedule_id) in (
                record.getMessage()
            ):
                time.sleep(0.4)  # past dispatch_timeout, before the sink is called

    logger = logging.getLogger("hexeract_lite.worker")
    handler, level = SlowHandler(logging.DEBUG), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    cfg = SchedulerWorkerConfig(dispatch_timeout=timedelta(milliseconds=200))
    try:
        with SchedulerWorker(store, sink, cfg) as worker:
            assert worker.run_once() == CycleReport(claimed=2, delivered=2)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert [m.schedule_id for m in sink.messages] == [slow.schedule_id, other.schedule_id]


def test_a_hung_dispatch_fails_alone_and_the_rest_of_its_batch_goes_on(
    quiet_threads: None,
) -> None:
    store = InMemoryScheduleStore()
    before, hung, after = (one_shot(now() - i * S) for i in (3, 2, 1))
    store.insert_many([before, hung, after], 3)
    release = threading.Event()

    def effect(message: ScheduledMessage) -> None:
        if message.schedule_id == hung.schedule_id:
            release.wait(10)

    sink = Recorder(effect)
    cfg = SchedulerWorkerConfig(dispatch_timeout=timedelta(milliseconds=200), jitter=False)
    worker = SchedulerWorker(store, sink, cfg)
    try:
        assert worker.run_once() == CycleReport(claimed=3, delivered=2, retried=1)
    finally:
        release.set()
    worker._runner.close()
    assert [m.schedule_id for m in sink.messages] == [
        before.schedule_id,
        hung.schedule_id,
        after.schedule_id,
    ]
    assert snap(store, hung).last_error is not None
    assert snap(store, hung).last_error.startswith("TimeoutError")  # type: ignore[union-attr]
    time.sleep(0.05)  # the abandoned thread, released, dispatches nothing more
    assert sink.count == 3


def test_a_worker_that_claimed_and_died_is_redelivered_after_its_lease(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = one_shot()
    store.insert(msg, 5)
    lease = 60 * S
    [zombie] = store.claim_due(frozen.now(), 10, lease)  # ... and the process dies
    sink = Recorder()
    worker = SchedulerWorker(store, sink, SchedulerWorkerConfig(lease=lease, dispatch_timeout=S))
    frozen.shift(lease - MS)
    assert worker.run_once() == CycleReport(), "no redelivery while the lease holds"
    frozen.shift(MS)
    assert worker.run_once() == CycleReport(claimed=1, delivered=1)
    assert sink.messages[0].occurrence_id() == zombie.occurrence_id(), "same occurrence id"
    after = snap(store, msg)
    assert after.attempts == 2, "the dead worker's attempt counts"
    # the zombie wakes up and acknowledges late: fenced out, nothing changes
    assert store.mark_delivered(msg.schedule_id, zombie.leased_until) is False
    assert store.mark_failed(msg.schedule_id, S, "late", zombie.leased_until) is False
    assert snap(store, msg) == after


def test_a_lost_lease_is_counted_not_retried(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 5)
    sink = Recorder(lambda m: (store.cancel(m.schedule_id), None)[1])  # cancelled mid-dispatch
    worker = SchedulerWorker(store, sink)
    assert worker.run_once() == CycleReport(claimed=1, lease_lost=1)
    assert snap(store, msg).status is ScheduleStatus.CANCELLED
    assert worker.run_once() == CycleReport()


def test_the_sweep_runs_first_and_is_counted(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 1)
    store.claim_due(frozen.now(), 10, 30 * S)  # a worker crashes on the last attempt
    frozen.shift(30 * S)
    assert SchedulerWorker(store, Recorder()).run_once() == CycleReport(swept=1)
    assert snap(store, msg).status is ScheduleStatus.DEAD_LETTERED


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (True, "DispatchError: sink "),
        ("ok", "DispatchError: sink "),
        (0, "DispatchError: sink "),
    ],
)
def test_a_sink_returning_garbage_is_a_failed_dispatch(
    store: ScheduleStore, frozen: FrozenTime, result: object, expected: str
) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    worker = SchedulerWorker(store, CallableSink(lambda m: result))  # type: ignore[arg-type,return-value]
    assert worker.run_once().retried == 1
    error = snap(store, msg).last_error
    assert error is not None and error.startswith(expected)
    assert f"returned {result!r}" in error


def test_a_sink_raising_system_exit_does_not_kill_the_worker(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = one_shot()
    store.insert(msg, 3)

    def exiting(_: ScheduledMessage) -> None:
        raise SystemExit(3)

    assert SchedulerWorker(store, exiting).run_once().retried == 1
    assert error_summary(snap(store, msg).last_error) == "SystemExit: 3"


def test_an_async_sink_works_with_the_sync_worker(store: ScheduleStore, frozen: FrozenTime) -> None:
    good, bad = one_shot(T0 - S), one_shot(T0)
    store.insert_many([good, bad], 3)
    seen: list[uuid.UUID] = []

    async def handler(message: ScheduledMessage) -> None:
        if message.schedule_id == bad.schedule_id:
            raise KeyError("nope")
        seen.append(message.schedule_id)

    worker = SchedulerWorker(store, CallableSink(handler))
    assert worker.run_once() == CycleReport(claimed=2, delivered=1, retried=1)
    assert seen == [good.schedule_id]
    assert error_summary(snap(store, bad).last_error) == "KeyError: 'nope'"


def test_error_text() -> None:
    assert error_text(ValueError("x")) == "ValueError: x"
    assert error_text(TimeoutError()) == "TimeoutError"
    assert error_text("plain") == "plain"
    long = error_text(RuntimeError("y" * 10_000))
    assert len(long) == MAX_ERROR_CHARS and long.endswith("…")


def test_on_failure_can_be_called_directly(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 2)
    worker = SchedulerWorker(store, Recorder(), NO_JITTER)
    [occ] = store.claim_due(frozen.now(), 1, 30 * S)
    assert worker.on_failure(occ, "gave up") is DispatchOutcome.RETRIED
    assert worker.on_failure(occ, "again") is DispatchOutcome.LEASE_LOST  # lease moved on
    frozen.shift(2 * S)
    [occ] = store.claim_due(frozen.now(), 1, 30 * S)
    assert worker.on_failure(occ, OSError("disk")) is DispatchOutcome.DEAD_LETTERED
    assert error_summary(snap(store, msg).last_error) == "OSError: disk"


def test_failures_are_logged_with_ids_attempt_and_lag(
    store: ScheduleStore, frozen: FrozenTime, caplog: pytest.LogCaptureFixture
) -> None:
    msg = one_shot(T0 - 2 * S)
    store.insert(msg, 1)
    with caplog.at_level(logging.DEBUG, logger="hexeract_lite.worker"):
        SchedulerWorker(store, failing()).run_once()
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.name == "hexeract_lite.worker"
    text = record.getMessage()
    assert str(msg.schedule_id) in text and str(msg.occurrence_id()) in text
    assert "attempt 1" in text and "lag 2.000s" in text and "ValueError: boom #1" in text
    assert record.occurrence_id == str(msg.occurrence_id())  # type: ignore[attr-defined]
    assert record.attempt == 1  # type: ignore[attr-defined]


# -- the loop (real time) --------------------------------------------------------------


def now() -> datetime:
    return datetime.now(UTC)


FAST = SchedulerWorkerConfig(poll_interval=timedelta(milliseconds=20))
SLOW_POLL = SchedulerWorkerConfig(poll_interval=timedelta(seconds=10))


def test_start_delivers_and_stop_ends_the_thread() -> None:
    store = InMemoryScheduleStore()
    sink = Recorder()
    handle = SchedulerWorker(store, sink, FAST).start()
    try:
        assert handle.is_alive
        msg = one_shot(now())
        store.insert(msg, 3)
        assert sink.called.wait(2)
    finally:
        assert handle.stop(timeout=2)
    assert not handle.is_alive
    assert snap(store, msg).status is ScheduleStatus.DELIVERED


def test_an_insert_wakes_a_sleeping_worker_and_stop_is_prompt() -> None:
    store = InMemoryScheduleStore()
    sink = Recorder()
    with SchedulerWorker(store, sink, SLOW_POLL).start() as handle:
        time.sleep(0.05)  # asleep, for up to 10 s
        inserted = time.monotonic()
        store.insert(one_shot(now()), 3)
        assert sink.called.wait(2)
        assert time.monotonic() - inserted < 0.5, "woken by store.changes, not by the poll"
        started = time.monotonic()
    assert not handle.is_alive
    assert time.monotonic() - started < 0.5


def test_a_future_occurrence_fires_on_time_not_on_the_poll() -> None:
    store = InMemoryScheduleStore()
    fired: list[float] = []
    sink = Recorder(lambda m: fired.append((now() - m.scheduled_for).total_seconds()))
    with SchedulerWorker(store, sink, SLOW_POLL).start():
        store.insert(one_shot(now() + timedelta(milliseconds=150)), 3)
        assert sink.called.wait(2)
    assert 0 <= fired[0] < 0.1, f"lag {fired[0]:.3f}s"


def test_a_user_stop_event_is_noticed_quickly() -> None:
    store = InMemoryScheduleStore()
    stop = threading.Event()
    worker = SchedulerWorker(store, Recorder(), SLOW_POLL)
    thread = threading.Thread(target=worker.run, args=(stop,))
    thread.start()
    time.sleep(0.05)
    stop.set()
    thread.join(1)
    assert not thread.is_alive()


def test_a_worker_runs_one_loop_at_a_time() -> None:
    worker = SchedulerWorker(InMemoryScheduleStore(), Recorder(), FAST)
    with worker.start():
        with pytest.raises(RuntimeError, match="already running"):
            worker.start()
        with pytest.raises(RuntimeError, match="already running"):
            worker.run(threading.Event())
    with worker.start():  # and again once stopped
        pass


def test_stopping_settles_the_occurrence_in_hand_and_releases_the_rest(
    frozen: FrozenTime,
) -> None:
    store = InMemoryScheduleStore()
    msgs = [one_shot(T0 - i * S) for i in range(3, 0, -1)]
    store.insert_many(msgs, 5)
    stop = threading.Event()
    sink = Recorder(lambda m: stop.set())  # the stop arrives during the first dispatch
    SchedulerWorker(store, sink).run(stop)
    assert [m.schedule_id for m in sink.messages] == [msgs[0].schedule_id]
    assert snap(store, msgs[0]).status is ScheduleStatus.DELIVERED
    for m in msgs[1:]:
        s = snap(store, m)
        assert s.status is ScheduleStatus.PENDING
        assert (s.attempts, s.leased_until, s.scheduled_for) == (0, None, m.scheduled_for)
    # claimable again at once, by the next worker
    assert SchedulerWorker(store, sink).run_once() == CycleReport(claimed=2, delivered=2)


def test_released_occurrences_are_counted(frozen: FrozenTime) -> None:
    store = InMemoryScheduleStore()
    store.insert_many([one_shot(T0 - S), one_shot(T0)], 5)
    stop = threading.Event()
    worker = SchedulerWorker(store, Recorder(lambda m: stop.set()))
    assert worker._run_cycle(stop.is_set) == CycleReport(claimed=2, delivered=1, released=1)


class FlakyStore(InMemoryScheduleStore):
    """Raises StoreError from claim_due a few times, then works."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.claims = 0

    def claim_due(self, now: datetime, batch_size: int, lease: timedelta) -> Any:
        self.claims += 1
        if self.failures > 0:
            self.failures -= 1
            raise StoreError("database is locked")
        return super().claim_due(now, batch_size, lease)


def test_a_store_error_is_logged_backed_off_and_survived(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = FlakyStore(failures=3)
    store.insert(one_shot(now()), 3)
    sink = Recorder()
    with caplog.at_level(logging.WARNING, logger="hexeract_lite.worker"):
        started = time.monotonic()
        with SchedulerWorker(store, sink, FAST).start():
            assert sink.called.wait(3)
        elapsed = time.monotonic() - started
    # backoff 20 + 40 + 80 ms before the fourth try
    assert elapsed >= 0.14
    warnings = [r for r in caplog.records if "store error" in r.getMessage()]
    assert len(warnings) == 3
    assert "StoreError: database is locked" in warnings[0].getMessage()


class OtherProcessStore(InMemoryScheduleStore):
    """Pretends some rows come from another process: no ChangeSignal, only data_version."""

    def __init__(self) -> None:
        super().__init__()
        self.version = 0
        self.claims = 0

    def data_version(self) -> int:
        return self.version

    def claim_due(self, now: datetime, batch_size: int, lease: timedelta) -> Any:
        self.claims += 1
        return super().claim_due(now, batch_size, lease)

    def insert_from_elsewhere(self, message: ScheduledMessage) -> None:
        from hexeract_lite.store.record import ScheduleRecord

        with self._lock:
            self._rows[message.schedule_id] = ScheduleRecord.new(message, 3, self._now())
        self.version += 1  # what another connection's commit does to PRAGMA data_version


def test_data_version_spares_idle_cycles_and_notices_other_processes() -> None:
    store = OtherProcessStore()
    sink = Recorder()
    poll = SchedulerWorkerConfig(poll_interval=timedelta(milliseconds=50))
    with SchedulerWorker(store, sink, poll).start():
        time.sleep(0.4)
        assert store.claims <= 2, "idle: no full cycle while nothing changed"
        inserted = time.monotonic()
        store.insert_from_elsewhere(one_shot(now()))
        assert sink.called.wait(2)
        assert time.monotonic() - inserted < 0.3, "noticed within about one poll_interval"


def test_another_process_commit_is_noticed_within_half_the_poll() -> None:
    store = OtherProcessStore()
    sink = Recorder()
    poll = SchedulerWorkerConfig(poll_interval=timedelta(seconds=1))
    with SchedulerWorker(store, sink, poll).start():
        time.sleep(0.1)
        inserted = time.monotonic()
        store.insert_from_elsewhere(one_shot(now()))
        assert sink.called.wait(2)
        assert time.monotonic() - inserted < 0.8, "data_version checked every 500 ms"


@pytest.fixture
def quiet_threads() -> Iterator[None]:
    before = {t.ident for t in threading.enumerate()}
    yield
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        extra = [t for t in threading.enumerate() if t.ident not in before and t.daemon]
        if not extra:
            return
        time.sleep(0.02)
    raise AssertionError(f"threads left running: {extra}")


def test_run_leaves_no_helper_thread_behind(quiet_threads: None) -> None:
    store = InMemoryScheduleStore()
    sink = Recorder()
    with SchedulerWorker(store, sink, FAST).start():
        store.insert(one_shot(now()), 3)
        assert sink.called.wait(2)


def test_an_insert_during_a_cycle_is_neither_missed_nor_held_back() -> None:
    store = InMemoryScheduleStore()
    second = one_shot(now())
    delivered: dict[uuid.UUID, float] = {}
    done = threading.Event()

    def sink_effect(message: ScheduledMessage) -> None:
        delivered[message.schedule_id] = time.monotonic()
        if len(delivered) == 1:
            store.insert(second, 3)  # arrives while the worker is mid-cycle
        else:
            done.set()

    cfg = SchedulerWorkerConfig(
        poll_interval=timedelta(seconds=10), min_cycle_delay=timedelta(seconds=2)
    )
    with SchedulerWorker(store, Recorder(sink_effect), cfg).start():
        store.insert(one_shot(now()), 3)
        assert done.wait(3)
    first_at, second_at = sorted(delivered.values())
    assert second_at - first_at < 0.5, "not held back by min_cycle_delay after a partial batch"


def test_min_cycle_delay_paces_full_batches() -> None:
    store = InMemoryScheduleStore()
    store.insert_many([one_shot(now() - i * S) for i in range(5)], 3)
    sink = Recorder()
    cfg = SchedulerWorkerConfig(
        batch_size=2,
        poll_interval=timedelta(milliseconds=20),
        min_cycle_delay=timedelta(milliseconds=150),
    )
    started = time.monotonic()
    with SchedulerWorker(store, sink, cfg).start():
        while sink.count < 5 and time.monotonic() - started < 3:
            time.sleep(0.01)
    assert sink.count == 5
    assert time.monotonic() - started >= 0.3, "a pause after each of the two full batches"


def test_sqlite_commits_from_another_connection_are_noticed_within_the_poll(
    tmp_path: Any,
) -> None:

    db = tmp_path / "shared.db"
    sink = Recorder()
    cfg = SchedulerWorkerConfig(poll_interval=timedelta(milliseconds=50))
    with (
        SqliteScheduleStore.open(db) as mine,
        SqliteScheduleStore.open(db) as theirs,
        SchedulerWorker(mine, sink, cfg).start(),
    ):
        time.sleep(0.1)
        inserted = time.monotonic()
        theirs.insert(one_shot(now()), 3)  # no ChangeSignal reaches `mine`
        assert sink.called.wait(2)
        assert time.monotonic() - inserted < 0.5


# -- the worker's clock --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_the_worker_reads_the_stores_clock_by_default(kind: str, tmp_path: Any) -> None:
    from hexeract_lite import ManualClock

    later = datetime(2100, 1, 1, tzinfo=UTC)  # far past the system clock
    clock = ManualClock(later)
    store: ScheduleStore = (
        InMemoryScheduleStore(clock=clock)
        if kind == "memory"
        else SqliteScheduleStore.open(tmp_path / "clock.db", clock=clock)
    )
    try:
        msg = one_shot(later - S)  # due by the store's clock, not by the system's
        store.insert(msg, 3)
        worker = SchedulerWorker(store, Recorder())
        assert worker.clock is clock
        assert worker.run_once() == CycleReport(claimed=1, delivered=1)
        assert snap(store, msg).status is ScheduleStatus.DELIVERED
        # a clock given to the worker still wins
        other = ManualClock(later - 10 * S)
        assert SchedulerWorker(store, Recorder(), clock=other).clock is other
    finally:
        store.close()


# -- abort, and KeyboardInterrupt in the waiting thread -------------------------------------


def test_abort_abandons_the_dispatch_in_flight_and_releases_the_rest(quiet_threads: None) -> None:
    store = InMemoryScheduleStore()
    msgs = [one_shot(now() - i * S) for i in (3, 2, 1)]
    store.insert_many(msgs, 3)
    release = threading.Event()
    sink = Recorder(lambda m: (release.wait(10), None)[1])
    worker = SchedulerWorker(store, sink, FAST)
    handle = worker.start()
    try:
        assert sink.called.wait(2)
        worker.abort()
        handle.thread.join(2)
        assert not handle.is_alive, "abort does not wait for the hung sink"
    finally:
        release.set()
    assert [m.schedule_id for m in sink.messages] == [msgs[0].schedule_id]
    first = snap(store, msgs[0])
    assert first.status is ScheduleStatus.PENDING and first.attempts == 1
    assert error_summary(first.last_error) == (
        "DispatchError: the worker was aborted while the sink ran; the dispatch was abandoned"
    )
    for m in msgs[1:]:
        s = snap(store, m)
        assert (s.status, s.attempts, s.leased_until) == (ScheduleStatus.PENDING, 0, None)
    [run] = store.runs(msgs[0].schedule_id)  # the sink was called: its start and length
    assert run.outcome.value == "failed" and run.started is not None
    assert run.duration is not None and run.duration > timedelta(0)
    time.sleep(0.05)  # the abandoned call returns: nothing more is recorded or dispatched
    assert sink.count == 1 and snap(store, msgs[0]).attempts == 1
    # the stop event was set, the abort flag cleared: the worker starts again normally
    assert handle.stop(timeout=1)
    with worker.start() as again:
        assert again.is_alive


def test_abort_while_idle_stops_the_loop_at_once() -> None:
    worker = SchedulerWorker(InMemoryScheduleStore(), Recorder(), SLOW_POLL)
    handle = worker.start()
    time.sleep(0.05)  # asleep for up to 10 s
    worker.abort()
    handle.thread.join(1)
    assert not handle.is_alive


def test_abort_before_the_loop_starts_makes_it_return_at_once() -> None:
    store = InMemoryScheduleStore()
    msg = one_shot(now() - S)
    store.insert(msg, 3)
    sink = Recorder()
    worker = SchedulerWorker(store, sink, SLOW_POLL)
    worker.abort()
    worker.run()  # returns without claiming
    assert sink.count == 0 and snap(store, msg).attempts == 0
    assert worker.run_once() == CycleReport(claimed=1, delivered=1)  # the flag is cleared


def test_keyboard_interrupt_in_run_settles_the_batch_then_propagates(quiet_threads: None) -> None:
    import signal

    store = InMemoryScheduleStore()
    msgs = [one_shot(now() - i * S) for i in (3, 2, 1)]
    store.insert_many(msgs, 3)
    release = threading.Event()
    main = threading.main_thread().ident
    assert main == threading.get_ident()

    def interrupt(_: ScheduledMessage) -> None:
        time.sleep(0.05)  # the main thread waits for this call by now
        assert main is not None
        signal.pthread_kill(main, signal.SIGINT)  # Ctrl-C, delivered to the main thread
        release.wait(10)

    sink = Recorder(interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            SchedulerWorker(store, sink, FAST).run()
    finally:
        release.set()
    first = snap(store, msgs[0])
    assert (first.attempts, first.last_error) == (1, "KeyboardInterrupt")
    assert first.leased_until is not None and first.leased_until <= now() + 2 * S  # retry wait
    for m in msgs[1:]:
        s = snap(store, m)
        assert (s.status, s.attempts, s.leased_until) == (ScheduleStatus.PENDING, 0, None)


def test_a_worker_refuses_a_clock_without_now() -> None:
    """A clock without ``now`` is InvalidConfiguration when the worker is built, as the SQLite
    and PostgreSQL stores refuse it."""
    from hexeract_lite import InMemoryScheduleStore, InvalidConfiguration, SchedulerWorker

    with pytest.raises(InvalidConfiguration, match="clock"):
        SchedulerWorker(InMemoryScheduleStore(), lambda m: None, clock=5)  # type: ignore[arg-type]


def test_stop_names_a_bad_timeout() -> None:
    from hexeract_lite import InMemoryScheduleStore, InvalidArgument, SchedulerWorker

    handle = SchedulerWorker(InMemoryScheduleStore(), lambda m: None).start()
    try:
        with pytest.raises(InvalidArgument, match="timeout"):
            handle.stop("x")  # type: ignore[arg-type]
        assert handle.is_alive  # a refused stop stops nothing
    finally:
        assert handle.stop(10)


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("this exception cannot be shown")


def test_an_exception_that_cannot_be_shown_is_still_a_failed_dispatch() -> None:
    """A sink exception whose __str__ raises is still a failed dispatch, recorded with a
    placeholder text; its batch-mates are settled."""
    store = InMemoryScheduleStore()
    due = datetime.now(UTC) - timedelta(seconds=1)
    ok = ScheduledMessage.delay(Target.outbox(), due, "ok", {})
    bad = ScheduledMessage.delay(Target.outbox(), due, "bad", {})
    store.insert_many([ok, bad], 3)

    def sink(message: ScheduledMessage) -> None:
        if message.event_type == "bad":
            raise Unprintable

    report = SchedulerWorker(store, sink, TIGHT).run_once()
    assert (report.delivered, report.retried) == (1, 1)
    snap = store.inspect(bad.schedule_id)
    assert snap is not None and snap.leased_until is not None  # waiting out its retry
    assert snap.last_error is not None
    assert snap.last_error.startswith("Unprintable: <exception str() failed>\n")
    assert error_text(Unprintable()) == "Unprintable: <exception str() failed>"


def test_a_worker_config_refuses_a_lease_under_a_millisecond() -> None:
    from hexeract_lite import InvalidConfiguration
    from hexeract_lite.worker import SchedulerWorkerConfig

    with pytest.raises(InvalidConfiguration, match="lease must be at least 1 ms"):
        SchedulerWorkerConfig(
            batch_size=1,
            dispatch_timeout=timedelta(microseconds=100),
            lease=timedelta(microseconds=500),
        )
    assert SchedulerWorkerConfig(
        batch_size=1, dispatch_timeout=timedelta(microseconds=100), lease=timedelta(milliseconds=1)
    ).lease == timedelta(milliseconds=1)


@pytest.mark.parametrize(
    "field",
    ["poll_interval", "lease", "retry_base_delay", "retry_max_delay", "min_cycle_delay"],
)
def test_config_refuses_a_duration_past_the_year_9999_naming_it(field: str) -> None:
    huge = timedelta(days=9999999)
    fields = {field: huge}
    if field == "retry_base_delay":
        fields["retry_max_delay"] = huge
    with pytest.raises(InvalidArgument, match=rf"{field} .*9999999 days"):
        SchedulerWorkerConfig(**fields)  # type: ignore[arg-type]


def test_config_takes_the_longest_setting_exactly() -> None:
    longest = timedelta(days=36500)
    config = SchedulerWorkerConfig(lease=longest, retry_max_delay=longest, poll_interval=longest)
    assert config.lease == longest
    with pytest.raises(InvalidArgument, match="lease"):
        SchedulerWorkerConfig(lease=longest + timedelta(milliseconds=1))


def test_retry_policy_and_retention_refuse_a_duration_past_the_year_9999() -> None:
    huge = timedelta(days=9999999)
    with pytest.raises(InvalidArgument, match=r"max_delay.*9999999 days"):
        RetryPolicy(max_delay=huge)
    with pytest.raises(InvalidArgument, match=r"retention.*9999999 days"):
        SchedulerWorker(InMemoryScheduleStore(), CallableSink(lambda m: None), retention=huge)
