"""SchedulerWorker.run_async: the same loop for asyncio applications (real time, short)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import pytest

from hexeract_lite import (
    InMemoryScheduleStore,
    ScheduledMessage,
    ScheduleSnapshot,
    ScheduleStatus,
    ScheduleStore,
    Target,
)
from hexeract_lite.settle import error_summary
from hexeract_lite.sinks import CallableSink
from hexeract_lite.worker import SchedulerWorker, SchedulerWorkerConfig

T = TypeVar("T")

FAST = SchedulerWorkerConfig(poll_interval=timedelta(milliseconds=20))
SLOW_POLL = SchedulerWorkerConfig(poll_interval=timedelta(seconds=10))


def now() -> datetime:
    return datetime.now(UTC)


def due_now(store: ScheduleStore, max_attempts: int = 3) -> ScheduledMessage:
    msg = ScheduledMessage.delay(Target.outbox(), now(), "reminder", {"n": 1})
    store.insert(msg, max_attempts)
    return msg


def status(store: ScheduleStore, msg: ScheduledMessage) -> ScheduleStatus:
    snap = store.inspect(msg.schedule_id)
    assert snap is not None
    return snap.status


def run(main: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(main(), 10))


async def until(predicate: Callable[[], bool], timeout: float = 3) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


def test_an_async_sink_is_awaited_and_the_loop_stops_on_its_event() -> None:
    store = InMemoryScheduleStore()
    got: list[ScheduledMessage] = []

    async def handler(message: ScheduledMessage) -> None:
        await asyncio.sleep(0)
        got.append(message)

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(
            SchedulerWorker(store, CallableSink(handler), FAST).run_async(stop)
        )
        msg = due_now(store)
        await until(lambda: len(got) == 1)
        await until(lambda: status(store, msg) is ScheduleStatus.DELIVERED)
        stop.set()
        await asyncio.wait_for(task, 1)
        assert got[0].occurrence_id() == msg.occurrence_id()

    run(main)


def test_a_sync_sink_runs_off_the_loop() -> None:
    store = InMemoryScheduleStore()
    threads: list[str] = []

    def handler(message: ScheduledMessage) -> None:
        import threading

        threads.append(threading.current_thread().name)

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(SchedulerWorker(store, handler, FAST).run_async(stop))
        msg = due_now(store)
        await until(lambda: status(store, msg) is ScheduleStatus.DELIVERED)
        stop.set()
        await task

    run(main)
    assert threads and threads[0] != "MainThread"


def test_an_insert_wakes_the_async_worker_and_stop_is_prompt() -> None:
    store = InMemoryScheduleStore()
    delivered = asyncio.Event

    async def main() -> None:
        done = delivered()

        async def handler(_: ScheduledMessage) -> None:
            done.set()

        stop = asyncio.Event()
        task = asyncio.create_task(
            SchedulerWorker(store, CallableSink(handler), SLOW_POLL).run_async(stop)
        )
        await asyncio.sleep(0.05)  # asleep for up to 10 s
        inserted = time.monotonic()
        due_now(store)
        await asyncio.wait_for(done.wait(), 2)
        assert time.monotonic() - inserted < 0.5
        stopped = time.monotonic()
        stop.set()
        await asyncio.wait_for(task, 1)
        assert time.monotonic() - stopped < 0.5

    run(main)


def test_an_async_sink_past_the_timeout_is_cancelled_and_fails() -> None:
    store = InMemoryScheduleStore()
    cancelled: list[bool] = []

    async def hang(_: ScheduledMessage) -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    cfg = SchedulerWorkerConfig(  # its retry comes after the stop
        poll_interval=timedelta(milliseconds=20),
        dispatch_timeout=timedelta(milliseconds=100),
        retry_base_delay=timedelta(minutes=1),
    )

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(SchedulerWorker(store, CallableSink(hang), cfg).run_async(stop))
        msg = due_now(store)

        def failed() -> bool:
            snap = store.inspect(msg.schedule_id)
            return snap is not None and snap.last_error is not None

        await until(failed)
        stop.set()
        await task
        snap = store.inspect(msg.schedule_id)
        assert snap is not None
        assert error_summary(snap.last_error) == (
            "TimeoutError: the sink did not return within dispatch_timeout (0.1 s); it was"
            " cancelled"
        )
        assert snap.status is ScheduleStatus.PENDING and snap.attempts == 1

    run(main)
    assert cancelled == [True]


def test_a_sink_raising_its_own_timeout_error_is_reported_as_such() -> None:
    store = InMemoryScheduleStore()

    async def own_timeout(_: ScheduledMessage) -> None:
        raise TimeoutError("upstream took too long")

    async def main() -> None:
        stop = asyncio.Event()
        worker = SchedulerWorker(store, CallableSink(own_timeout), FAST)
        task = asyncio.create_task(worker.run_async(stop))
        msg = due_now(store)
        await until(lambda: (s := store.inspect(msg.schedule_id)) is not None and s.attempts > 0)
        await until(
            lambda: (s := store.inspect(msg.schedule_id)) is not None and bool(s.last_error)
        )
        stop.set()
        await task
        snap = store.inspect(msg.schedule_id)
        assert (
            snap is not None
            and error_summary(snap.last_error) == "TimeoutError: upstream took too long"
        )

    run(main)


@pytest.mark.parametrize("kind", ["async", "sync-returning-coroutine"])
def test_async_garbage_is_a_failed_dispatch(kind: str) -> None:
    store = InMemoryScheduleStore()

    async def returns_value(_: ScheduledMessage) -> int:
        return 42

    sink: object
    if kind == "async":
        sink = CallableSink(returns_value)  # type: ignore[arg-type]
    else:

        class Sync:
            is_async = False

            def dispatch(self, message: ScheduledMessage) -> Awaitable[int]:
                return returns_value(message)

        sink = Sync()

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(SchedulerWorker(store, sink, FAST).run_async(stop))  # type: ignore[arg-type]
        msg = due_now(store)
        await until(
            lambda: (s := store.inspect(msg.schedule_id)) is not None and bool(s.last_error)
        )
        stop.set()
        await task
        snap = store.inspect(msg.schedule_id)
        assert snap is not None and snap.last_error is not None
        assert (
            snap.last_error.startswith("DispatchError: sink") and "returned 42" in snap.last_error
        )

    run(main)


def test_cancelling_the_task_settles_the_occurrence_in_hand() -> None:
    store = InMemoryScheduleStore()
    started = asyncio.Event
    msgs = [
        ScheduledMessage.delay(Target.outbox(), now() - timedelta(seconds=i), "r", i)
        for i in (2, 1)
    ]
    store.insert_many(msgs, 5)

    async def main() -> None:
        in_dispatch = started()

        async def slow(_: ScheduledMessage) -> None:
            in_dispatch.set()
            await asyncio.sleep(0.1)

        task = asyncio.create_task(SchedulerWorker(store, CallableSink(slow), FAST).run_async())
        await asyncio.wait_for(in_dispatch.wait(), 2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main)
    first, second = (store.inspect(m.schedule_id) for m in msgs)
    assert first is not None and first.status is ScheduleStatus.DELIVERED
    assert second is not None and second.status is ScheduleStatus.PENDING
    assert second.attempts == 0 and second.leased_until is None, "released, not left leased"


def test_a_store_error_is_survived_in_async_mode() -> None:
    from hexeract_lite import StoreError

    class Flaky(InMemoryScheduleStore):
        failures = 2

        def dead_letter_exhausted(self) -> int:
            if self.failures:
                self.failures -= 1
                raise StoreError("disk I/O error")
            return super().dead_letter_exhausted()

    store = Flaky()
    got: list[ScheduledMessage] = []

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(SchedulerWorker(store, got.append, FAST).run_async(stop))
        due_now(store)
        await until(lambda: len(got) == 1)
        stop.set()
        await task

    run(main)
    assert store.failures == 0


def test_a_worker_runs_one_async_loop_at_a_time() -> None:
    async def main() -> None:
        worker = SchedulerWorker(InMemoryScheduleStore(), lambda m: None, FAST)
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run_async(stop))
        await asyncio.sleep(0.01)
        with pytest.raises(RuntimeError, match="already running"):
            await worker.run_async(stop)
        stop.set()
        await task

    run(main)


def test_a_hung_sync_sink_times_out_in_async_mode_too() -> None:
    import threading

    store = InMemoryScheduleStore()
    release = threading.Event()
    cfg = SchedulerWorkerConfig(
        poll_interval=timedelta(milliseconds=20), dispatch_timeout=timedelta(milliseconds=100)
    )

    async def main() -> None:
        stop = asyncio.Event()
        worker = SchedulerWorker(store, lambda m: release.wait(5) and None, cfg)
        task = asyncio.create_task(worker.run_async(stop))
        msg = due_now(store)
        try:
            await until(
                lambda: (s := store.inspect(msg.schedule_id)) is not None and bool(s.last_error)
            )
        finally:
            release.set()
        stop.set()
        await task
        snap = store.inspect(msg.schedule_id)
        assert snap is not None and snap.last_error is not None
        assert snap.last_error.startswith("TimeoutError: the sink did not return")

    run(main)


def test_the_async_worker_settles_each_batch_in_one_store_call() -> None:
    from hexeract_lite.settlement import Settlement

    class Counting(InMemoryScheduleStore):
        def __init__(self) -> None:
            super().__init__()
            self.settles: list[int] = []

        def settle(self, outcomes: Sequence[Settlement]) -> list[bool]:
            self.settles.append(len(outcomes))
            return super().settle(outcomes)

    store = Counting()
    msgs = [
        # due a second ago or more: "now" rounds up to the next millisecond when stored
        ScheduledMessage.delay(Target.outbox(), now() - timedelta(seconds=i), "r", {"i": i})
        for i in range(1, 4)
    ]
    store.insert_many(msgs, 3)

    async def sink(message: ScheduledMessage) -> None:
        if message.schedule_id == msgs[1].schedule_id:
            raise ValueError("nope")

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(SchedulerWorker(store, CallableSink(sink), FAST).run_async(stop))
        await until(lambda: bool(store.settles))
        stop.set()
        await task

    run(main)
    assert store.settles[0] == 3
    snaps = [store.inspect(m.schedule_id) for m in msgs]
    assert snaps[0] is not None and snaps[0].status is ScheduleStatus.DELIVERED
    assert snaps[1] is not None and error_summary(snaps[1].last_error) == "ValueError: nope"
    assert snaps[2] is not None and snaps[2].status is ScheduleStatus.DELIVERED


# -- BaseException from a sink, a blocked loop, abort ----------------------------------------


def snapshot(store: ScheduleStore, msg: ScheduledMessage) -> ScheduleSnapshot:
    snap = store.inspect(msg.schedule_id)
    assert snap is not None
    return snap


def batch_of(store: ScheduleStore, n: int, max_attempts: int = 3) -> list[ScheduledMessage]:
    msgs = [
        ScheduledMessage.delay(Target.outbox(), now() - timedelta(seconds=n - i), "r", i)
        for i in range(n)
    ]
    store.insert_many(msgs, max_attempts)
    return msgs


def test_an_async_sink_raising_cancelled_error_is_a_failed_dispatch() -> None:
    store = InMemoryScheduleStore()
    first, second = batch_of(store, 2)

    async def sink(message: ScheduledMessage) -> None:
        if message.schedule_id == first.schedule_id:
            raise asyncio.CancelledError("the sink's own")

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(SchedulerWorker(store, CallableSink(sink), FAST).run_async(stop))
        await until(lambda: status(store, second) is ScheduleStatus.DELIVERED)
        assert not task.done(), "run_async goes on"
        stop.set()
        await task

    run(main)
    snap = snapshot(store, first)
    assert (snap.status, snap.attempts) == (ScheduleStatus.PENDING, 1)
    assert error_summary(snap.last_error) == "CancelledError: the sink's own"


@pytest.mark.parametrize("kind", ["async", "sync"])
@pytest.mark.parametrize(
    ("error", "text"),
    [(KeyboardInterrupt(), "KeyboardInterrupt"), (SystemExit(3), "SystemExit: 3")],
)
def test_keyboard_interrupt_or_system_exit_from_a_sink_settles_then_propagates(
    error: BaseException, text: str, kind: str
) -> None:
    """Under run_async, from an async sink or a sync one (on the dispatch thread) alike:
    the call fails, the rest of the batch is released, then the exception propagates."""
    store = InMemoryScheduleStore()
    msgs = batch_of(store, 3)
    calls: list[ScheduledMessage] = []

    def sync_sink(message: ScheduledMessage) -> None:
        calls.append(message)
        raise error

    async def async_sink(message: ScheduledMessage) -> None:
        sync_sink(message)

    sink = async_sink if kind == "async" else sync_sink

    async def main() -> None:
        await SchedulerWorker(store, CallableSink(sink), FAST).run_async()

    with pytest.raises(type(error)):
        asyncio.run(main())
    first = snapshot(store, msgs[0])
    summary = error_summary(first.last_error)
    assert (first.status, first.attempts, summary) == (ScheduleStatus.PENDING, 1, text)
    for msg in msgs[1:]:
        snap = snapshot(store, msg)
        assert (snap.status, snap.attempts, snap.leased_until) == (ScheduleStatus.PENDING, 0, None)
    assert len(calls) == 1


def test_an_async_sink_blocking_the_loop_past_the_timeout_is_not_counted_as_delivered() -> None:
    store = InMemoryScheduleStore()
    cfg = SchedulerWorkerConfig(
        poll_interval=timedelta(milliseconds=20), dispatch_timeout=timedelta(milliseconds=100)
    )

    async def blocking(_: ScheduledMessage) -> None:
        time.sleep(0.3)  # never yields: the timeout cannot cancel it

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(
            SchedulerWorker(store, CallableSink(blocking), cfg).run_async(stop)
        )
        msg = due_now(store)
        await until(lambda: snapshot(store, msg).last_error is not None)
        stop.set()
        await task
        snap = snapshot(store, msg)
        assert (snap.status, snap.attempts) == (ScheduleStatus.PENDING, 1)
        assert snap.last_error is not None
        assert snap.last_error.startswith("TimeoutError: the sink blocked the event loop for 0.")
        assert "past dispatch_timeout (0.1 s)" in snap.last_error

    run(main)


def test_abort_cancels_the_async_dispatch_in_flight_and_releases_the_rest() -> None:
    store = InMemoryScheduleStore()
    first, second = batch_of(store, 2)
    cancelled: list[bool] = []

    async def main() -> None:
        in_dispatch = asyncio.Event()

        async def hang(_: ScheduledMessage) -> None:
            in_dispatch.set()
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                cancelled.append(True)
                raise

        worker = SchedulerWorker(store, CallableSink(hang), FAST)
        task = asyncio.create_task(worker.run_async())
        await asyncio.wait_for(in_dispatch.wait(), 2)
        await asyncio.to_thread(worker.abort)  # from another thread, as a signal handler would
        await asyncio.wait_for(task, 2)

    run(main)
    assert cancelled == [True]
    snap = snapshot(store, first)
    assert (snap.status, snap.attempts) == (ScheduleStatus.PENDING, 1)
    assert snap.last_error is not None and snap.last_error.startswith("DispatchError: the worker")
    released = snapshot(store, second)
    assert (released.attempts, released.leased_until) == (0, None)


def test_abort_abandons_a_sync_sink_on_the_helper_thread_in_async_mode() -> None:
    import threading

    store = InMemoryScheduleStore()
    first, second = batch_of(store, 2)
    called, release = threading.Event(), threading.Event()

    def hang(_: ScheduledMessage) -> None:
        called.set()
        release.wait(10)

    async def main() -> None:
        worker = SchedulerWorker(store, hang, FAST)
        task = asyncio.create_task(worker.run_async())
        assert await asyncio.to_thread(called.wait, 2)
        worker.abort()  # from the loop's own thread this time
        await asyncio.wait_for(task, 2)

    try:
        run(main)
    finally:
        release.set()
    snap = snapshot(store, first)
    assert snap.attempts == 1
    assert snap.last_error is not None and "the dispatch was abandoned" in snap.last_error
    released = snapshot(store, second)
    assert (released.attempts, released.leased_until) == (0, None)


_RUN_ASYNC_WITH_A_THREADING_EVENT = """
import asyncio, threading
from hexeract_lite import InMemoryScheduleStore, InvalidArgument, SchedulerWorker

async def main():
    worker = SchedulerWorker(InMemoryScheduleStore(), lambda m: None)
    try:
        await asyncio.wait_for(worker.run_async(threading.Event()), 5)
    except InvalidArgument as exc:
        print("refused:", exc)
    except TimeoutError:
        print("ran")

asyncio.run(main())
"""


def test_run_async_with_a_threading_event_is_refused_not_a_blocked_loop() -> None:
    """run_async refuses the threading.Event run() takes: waiting on it would block the event
    loop for good, past wait_for's reach. Run in a child process, so a blocked loop fails by
    the timeout."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _RUN_ASYNC_WITH_A_THREADING_EVENT],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert "refused: run_async's stop must be an asyncio.Event" in done.stdout


@pytest.mark.parametrize("stop", [5, "x"])
def test_run_async_names_a_stop_that_is_not_an_event(stop: object) -> None:
    import asyncio

    from hexeract_lite import InMemoryScheduleStore, InvalidArgument, SchedulerWorker

    worker = SchedulerWorker(InMemoryScheduleStore(), lambda m: None)
    with pytest.raises(InvalidArgument, match=r"asyncio\.Event"):
        asyncio.run(worker.run_async(stop))  # type: ignore[arg-type]
