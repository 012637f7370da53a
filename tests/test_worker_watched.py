"""The thread loop on its own thread, watched from run()'s caller (hexeract_lite.engine).

run() dispatches on its loop thread (no hand-off per batch); the calling thread sleeps
until the deadline of the call in flight. These tests hold the promises that the helper
thread used to keep: a hung call times out and the rest of its batch and the loop go on
(on a new loop thread), the abandoned thread records nothing when its call returns, a
stop waits for the call in hand at most dispatch_timeout, and no thread is left behind.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from hexeract_lite import (
    InMemoryScheduleStore,
    ScheduledMessage,
    SchedulerWorker,
    SchedulerWorkerConfig,
    ScheduleStatus,
    Target,
)
from hexeract_lite.hooks import Delivered, WorkerEvent
from hexeract_lite.settle import error_summary

S = timedelta(seconds=1)
TIMEOUT = SchedulerWorkerConfig(
    dispatch_timeout=timedelta(milliseconds=200),
    poll_interval=timedelta(milliseconds=20),
    jitter=False,
)


def due(seconds_ago: float) -> ScheduledMessage:
    at = datetime.now(UTC) - timedelta(seconds=seconds_ago)
    return ScheduledMessage.delay(Target.outbox(), at, "e", {"ago": seconds_ago})


class ThreadRecorder:
    """Records each message with the thread that dispatched it; ``hang`` ids wait for
    ``release``."""

    def __init__(self, hang: set[object] | None = None) -> None:
        self.calls: list[tuple[object, str]] = []
        self.hang = hang or set()
        self.release = threading.Event()
        self.lock = threading.Lock()

    def dispatch(self, message: ScheduledMessage) -> None:
        with self.lock:
            self.calls.append((message.schedule_id, threading.current_thread().name))
        if message.schedule_id in self.hang:
            self.release.wait(10)

    def ids(self) -> list[object]:
        with self.lock:
            return [sid for sid, _ in self.calls]


def wait_for(condition: object, seconds: float = 5) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


@pytest.fixture
def quiet_threads() -> Iterator[None]:
    before = {t.ident for t in threading.enumerate()}
    yield
    deadline = time.monotonic() + 3
    while True:
        extra = [t for t in threading.enumerate() if t.ident not in before and t.daemon]
        if not extra:
            return
        assert time.monotonic() < deadline, f"threads left running: {extra}"
        time.sleep(0.02)


def test_the_sink_runs_on_one_loop_thread_not_the_callers(quiet_threads: None) -> None:
    store = InMemoryScheduleStore()
    msgs = [due(i) for i in range(25, 0, -1)]  # three batches of the default 10
    store.insert_many(msgs, 3)
    sink = ThreadRecorder()
    with SchedulerWorker(store, sink, TIMEOUT).start(name="app-worker") as handle:
        wait_for(lambda: len(sink.calls) == 25)
        assert handle.is_alive
    assert sink.ids() == [m.schedule_id for m in msgs]
    assert {name for _, name in sink.calls} == {"app-worker-loop"}


def test_a_hung_call_times_out_and_its_batch_and_the_loop_go_on(quiet_threads: None) -> None:
    store = InMemoryScheduleStore()
    before, hung, after = due(3), due(2), due(1)
    store.insert_many([before, hung, after], 3)
    sink = ThreadRecorder(hang={hung.schedule_id})
    worker = SchedulerWorker(store, sink, TIMEOUT)
    started = time.monotonic()
    with worker.start() as handle:
        wait_for(lambda: after.schedule_id in sink.ids())
        assert time.monotonic() - started >= 0.2  # the rest waited for the timeout
        later = due(0)
        store.insert(later, 3)  # the loop goes on, on its new thread
        wait_for(lambda: later.schedule_id in sink.ids())
        threads = dict(sink.calls)
        assert threads[before.schedule_id] == threads[hung.schedule_id]
        assert threads[after.schedule_id] == threads[later.schedule_id]
        assert threading.current_thread() is not handle.thread
        hung_snap = store.inspect(hung.schedule_id)
        assert hung_snap is not None and hung_snap.attempts == 1
        assert error_summary(hung_snap.last_error) == (
            "TimeoutError: the sink did not return within dispatch_timeout (0.2 s); its"
            " thread was abandoned and keeps running until the sink returns"
        )
        for m in (before, after, later):
            snap = store.inspect(m.schedule_id)
            assert snap is not None and snap.status is ScheduleStatus.DELIVERED
        sink.release.set()  # the abandoned call returns: it records nothing
        time.sleep(0.1)
        again = store.inspect(hung.schedule_id)
        assert again is not None and again.last_error == hung_snap.last_error
        assert again.status is ScheduleStatus.PENDING  # waits for its retry, not delivered
    assert not handle.is_alive


def test_a_stop_during_a_hung_call_waits_for_its_timeout_then_releases_the_rest(
    quiet_threads: None,
) -> None:
    store = InMemoryScheduleStore()
    hung, rest = due(2), due(1)
    store.insert_many([hung, rest], 3)
    sink = ThreadRecorder(hang={hung.schedule_id})
    handle = SchedulerWorker(store, sink, TIMEOUT).start()
    try:
        wait_for(lambda: len(sink.calls) == 1)
        stopped = time.monotonic()
        assert handle.stop(timeout=3)
        assert 0.1 <= time.monotonic() - stopped < 2  # up to dispatch_timeout, not forever
    finally:
        sink.release.set()
    assert sink.ids() == [hung.schedule_id]
    left = store.inspect(rest.schedule_id)
    assert left is not None and (left.attempts, left.leased_until) == (0, None)  # released
    failed = store.inspect(hung.schedule_id)
    assert failed is not None and failed.attempts == 1
    assert (failed.last_error or "").startswith("TimeoutError")


def test_hooks_run_on_the_loop_thread(quiet_threads: None) -> None:
    store = InMemoryScheduleStore()
    store.insert(due(1), 3)
    seen: list[str] = []

    def hook(event: WorkerEvent) -> None:
        if isinstance(event, Delivered):
            seen.append(threading.current_thread().name)

    sink = ThreadRecorder()
    with SchedulerWorker(store, sink, TIMEOUT, hooks=[hook]).start(name="w"):
        wait_for(lambda: seen)
    assert seen == ["w-loop"] and [name for _, name in sink.calls] == ["w-loop"]


def test_an_error_the_loop_raises_propagates_from_run() -> None:
    store = InMemoryScheduleStore()
    store.insert(due(1), 3)

    def boom(message: ScheduledMessage) -> None:
        raise ValueError("from the sink")

    worker = SchedulerWorker(store, boom, TIMEOUT, propagate_errors=True)
    with pytest.raises(ValueError, match="from the sink"):
        worker.run(threading.Event())
    snap = store.list_schedules()[0]
    assert snap.attempts == 1 and (snap.last_error or "").startswith("ValueError")  # type: ignore[union-attr]
    worker.run_once()  # usable again: the loop's state was left clean


def test_keyboard_interrupt_while_idle_ends_the_loop_thread_and_propagates(
    quiet_threads: None,
) -> None:
    import signal

    main = threading.main_thread().ident
    assert main == threading.get_ident()
    store = InMemoryScheduleStore()
    sink = ThreadRecorder()
    timer = threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT))
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            SchedulerWorker(store, sink, TIMEOUT).run(threading.Event())
    finally:
        timer.cancel()
    assert time.monotonic() - started < 2  # not held until a dispatch deadline


class SweepCountingStore(InMemoryScheduleStore):
    def __init__(self) -> None:
        super().__init__()
        self.sweeps = 0

    def dead_letter_exhausted(self) -> int:
        self.sweeps += 1
        return super().dead_letter_exhausted()


def test_a_busy_loop_sweeps_once_per_poll_interval_run_once_every_time() -> None:
    store = SweepCountingStore()
    msgs = [due(i / 1000) for i in range(200, 0, -1)]
    store.insert_many(msgs, 3)
    sink = ThreadRecorder()
    config = SchedulerWorkerConfig(
        poll_interval=timedelta(seconds=30), min_cycle_delay=timedelta(0)
    )
    with SchedulerWorker(store, sink, config).start():
        wait_for(lambda: len(sink.calls) == 200)
    assert store.sweeps == 1  # 20 full cycles (and an empty one): one sweep
    worker = SchedulerWorker(store, sink, config)
    for _ in range(3):
        worker.run_once()
    assert store.sweeps == 4
