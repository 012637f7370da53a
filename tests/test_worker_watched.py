"""The thread loop on its own thread, watched from run()'s caller (hexeract_lite.engine).

run() dispatches on its loop thread (no hand-off per batch); the calling thread sleeps
until the deadline of the call in flight. A hung call times out and the rest of its
batch and the loop go on (on a new loop thread), the abandoned thread records nothing
when its call returns, a stop waits for the call in hand at most dispatch_timeout, and
no thread is left behind.
"""

from __future__ import annotations

import logging
import signal
import sys
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
from hexeract_lite.worker import WorkerHandle

S = timedelta(seconds=1)
TIMEOUT = SchedulerWorkerConfig(
    dispatch_timeout=timedelta(milliseconds=200),
    poll_interval=timedelta(milliseconds=20),
    jitter=False,
)
# For tests whose sink never hangs: a loaded machine must not turn a quick call into a timeout.
CALM = SchedulerWorkerConfig(
    dispatch_timeout=timedelta(seconds=30),
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
    with SchedulerWorker(store, sink, CALM).start(name="app-worker") as handle:
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


@pytest.mark.parametrize("how", ["timeout", "abort", "abort request", "run_once timeout"])
def test_an_async_sink_under_the_thread_loop_is_cancelled_when_given_up_on(
    quiet_threads: None, how: str
) -> None:
    """An async sink run by run()/start() or run_once() (on a private event loop) is
    cancelled on dispatch_timeout, on abort() and on an abort request, as under run_async:
    its coroutine sees CancelledError and never finishes its work."""
    import asyncio

    from hexeract_lite import current_dispatch

    store = InMemoryScheduleStore()
    msg = due(1)
    store.insert(msg, 3)
    started, seen = threading.Event(), {"cancelled": False, "finished": False}

    async def sink(message: ScheduledMessage) -> None:
        started.set()
        if how == "abort request":
            current_dispatch().request_abort("abort")
        try:
            await asyncio.sleep(2)
            seen["finished"] = True
        except asyncio.CancelledError:
            seen["cancelled"] = True
            raise

    slow = SchedulerWorkerConfig(
        dispatch_timeout=timedelta(milliseconds=200 if "timeout" in how else 10_000),
        poll_interval=timedelta(milliseconds=20),
        jitter=False,
    )
    worker = SchedulerWorker(store, sink, slow)
    if how == "run_once timeout":
        with worker:
            assert worker.run_once().retried == 1
    else:
        with worker.start():
            assert started.wait(5)
            if how == "abort":
                worker.abort()
            wait_for(lambda: getattr(store.inspect(msg.schedule_id), "last_error", None))
    wait_for(lambda: seen["cancelled"])
    time.sleep(0.1)
    assert not seen["finished"]
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.attempts == 1 and snap.status is ScheduleStatus.PENDING
    if "timeout" in how:
        assert error_summary(snap.last_error) == (
            "TimeoutError: the sink did not return within dispatch_timeout (0.2 s); it was"
            " cancelled"
        )


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
    with SchedulerWorker(store, sink, CALM, hooks=[hook]).start(name="w"):
        wait_for(lambda: seen)
    assert seen == ["w-loop"] and [name for _, name in sink.calls] == ["w-loop"]


def test_an_error_the_loop_raises_propagates_from_run() -> None:
    store = InMemoryScheduleStore()
    store.insert(due(1), 3)

    def boom(message: ScheduledMessage) -> None:
        raise ValueError("from the sink")

    worker = SchedulerWorker(store, boom, CALM, propagate_errors=True)
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


class Hanging:
    """A sink whose ``hang`` messages wait for ``release`` (at most 10 s)."""

    def __init__(self, *hang: ScheduledMessage) -> None:
        self.hang = {m.schedule_id for m in hang}
        self.release = threading.Event()
        self.calls: list[object] = []

    def dispatch(self, message: ScheduledMessage) -> None:
        self.calls.append(message.schedule_id)
        if message.schedule_id in self.hang:
            self.release.wait(10)


@pytest.fixture
def main_thread_only() -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")


@pytest.fixture
def ctrl_c_while_logging_abandoned(main_thread_only: None) -> Iterator[None]:
    """A real SIGINT raised while the watcher (the main thread) logs the call it has
    just given up on: the KeyboardInterrupt lands outside its wait."""

    class CtrlC(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if threading.current_thread() is threading.main_thread() and (
                "abandoned" in record.getMessage()
            ):
                signal.raise_signal(signal.SIGINT)

    logger = logging.getLogger("hexeract_lite.worker")
    handler = CtrlC(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def test_ctrl_c_while_the_watcher_hands_a_timed_out_batch_over_still_settles_it(
    ctrl_c_while_logging_abandoned: None,
) -> None:
    store = InMemoryScheduleStore()
    hung, rest = due(2), due(1)
    store.insert_many([hung, rest], 3)
    sink = Hanging(hung)
    try:
        with pytest.raises(KeyboardInterrupt):
            SchedulerWorker(store, sink, TIMEOUT).run()
    finally:
        sink.release.set()
    failed, released = store.inspect(hung.schedule_id), store.inspect(rest.schedule_id)
    assert failed is not None and released is not None
    assert failed.attempts == 1  # settled (retry), not left leased to lease expiry:
    assert (failed.last_error or "").startswith("TimeoutError")
    assert (released.attempts, released.leased_until) == (0, None)  # released
    assert sink.calls == [hung.schedule_id]


@pytest.mark.parametrize("where", ["start", "wait"])
def test_ctrl_c_while_the_watcher_starts_the_next_loop_thread_still_settles_once(
    main_thread_only: None, where: str
) -> None:
    """A real SIGINT raised as the watcher starts the loop thread that goes on with a
    timed-out batch: in Thread.start before the thread runs ("start"), or while start
    waits for it to run ("wait"). The rest of the batch is settled, once."""
    store = InMemoryScheduleStore()
    hung, rest = due(2), due(1)
    store.insert_many([hung, rest], 3)
    sink = Hanging(hung)
    starts: list[str] = []

    def profile(frame: object, event: str, arg: object) -> None:
        if event != "call" or starts:
            return
        code = frame.f_code  # type: ignore[attr-defined]
        caller = frame.f_back  # type: ignore[attr-defined]
        if where == "start" and code.co_name == "start" and "threading" in code.co_filename:
            thread = frame.f_locals.get("self")  # type: ignore[attr-defined]
            if isinstance(thread, threading.Thread) and sink.calls:  # the successor
                starts.append(thread.name)
                signal.raise_signal(signal.SIGINT)
        elif (
            where == "wait"
            and code.co_name == "wait"
            and caller is not None
            and caller.f_code.co_name == "start"
            and sink.calls
        ):
            starts.append("wait")
            signal.raise_signal(signal.SIGINT)

    sys.setprofile(profile)
    try:
        with pytest.raises(KeyboardInterrupt):
            SchedulerWorker(store, sink, TIMEOUT).run()
    finally:
        sys.setprofile(None)
        sink.release.set()
    assert starts  # the signal was raised where meant
    failed, other = store.inspect(hung.schedule_id), store.inspect(rest.schedule_id)
    assert failed is not None and other is not None
    assert failed.attempts == 1 and (failed.last_error or "").startswith("TimeoutError")
    assert sink.calls.count(rest.schedule_id) <= 1
    if rest.schedule_id in sink.calls:
        assert other.status.value == "delivered"
    else:
        assert (other.attempts, other.leased_until) == (0, None)  # released


_ABORT_IN_HANDLER = r"""
import signal, sys, threading, time
from datetime import UTC, datetime, timedelta
from hexeract_lite import InMemoryScheduleStore, ScheduledMessage, SchedulerWorker
from hexeract_lite import SchedulerWorkerConfig, Target

store = InMemoryScheduleStore()
store.insert(ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), "e", {}), 3)
release = threading.Event()
config = SchedulerWorkerConfig(dispatch_timeout=timedelta(milliseconds=200))
worker = SchedulerWorker(store, lambda message: release.wait(5), config)
signal.signal(signal.SIGUSR1, lambda signum, frame: worker.abort())
raised = []

def profile(frame, event, arg):
    # the signal arrives while the watcher (this thread) looks at the deadline of
    # the call in flight, inside the run's lock
    if event == "c_call" and frame.f_code.co_name == "give_up" and not raised:
        raised.append(1)
        signal.raise_signal(signal.SIGUSR1)

sys.setprofile(profile)
worker.run()
sys.setprofile(None)
release.set()
snap = store.list_schedules()[0]
print("returned", bool(raised), snap.attempts, (snap.last_error or "").split(":")[0])
"""


def test_abort_from_a_signal_handler_while_run_in_the_main_thread_checks_a_deadline() -> None:
    """README: abort() is safe from a signal handler. With run() in the main thread the
    handler runs on the watcher, which may be inside a run's lock at that moment."""
    import subprocess

    try:
        done = subprocess.run(
            [sys.executable, "-c", _ABORT_IN_HANDLER],
            capture_output=True,
            text=True,
            timeout=8,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("run() deadlocked: abort() from the signal handler never returned")
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    assert words[:3] == ["returned", "True", "1"]  # the signal came; the call failed once
    assert words[3] in ("DispatchError", "TimeoutError")  # abandoned or timed out: settled


def test_a_loop_thread_slow_before_it_calls_the_sink_is_not_a_timed_out_dispatch() -> None:
    """dispatch_timeout bounds the sink's call only: a loop thread held up before it hands the
    occurrence to the sink (here a slow log handler on its 'dispatching' record) is not a
    timed-out dispatch, and no attempt is spent on it."""
    store = InMemoryScheduleStore()
    slow, other = due(2), due(1)
    store.insert_many([slow, other], 3)
    sink = Hanging()
    held: list[str] = []

    class SlowHandler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "dispatching" in record.getMessage() and str(slow.schedule_id) in (
                record.getMessage()
            ):
                held.append(threading.current_thread().name)
                time.sleep(0.5)  # past dispatch_timeout (0.2 s), before the sink is called

    logger = logging.getLogger("hexeract_lite.worker")
    handler, level = SlowHandler(logging.DEBUG), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        with SchedulerWorker(store, sink, TIMEOUT).start() as handle:
            deadline = time.monotonic() + 5
            while len(sink.calls) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert not handle.is_alive and held
    snap = store.inspect(slow.schedule_id)
    assert snap is not None
    assert (snap.status.value, snap.attempts, snap.last_error) == ("delivered", 1, None)
    assert sorted(map(str, sink.calls)) == sorted([str(slow.schedule_id), str(other.schedule_id)])


@pytest.mark.parametrize("where", ["hook", "sink"])
def test_handle_stop_from_the_workers_own_hook_or_sink_returns_and_the_worker_stops(
    where: str,
) -> None:
    """stop() from the worker's own hook or sink (both run on the loop thread) returns False at
    once, never waiting for itself, and the worker stops."""
    store = InMemoryScheduleStore()
    first, second = due(2), due(1)
    store.insert_many([first, second], 3)
    handles: list[WorkerHandle] = []
    returned: list[bool] = []
    ready = threading.Event()

    def stop_here() -> None:
        ready.wait(2)
        if not returned:
            returned.append(handles[0].stop())

    def hook(event: WorkerEvent) -> None:
        if where == "hook" and isinstance(event, Delivered):
            stop_here()

    def sink(message: ScheduledMessage) -> None:
        if where == "sink":
            stop_here()

    config = SchedulerWorkerConfig(batch_size=1, dispatch_timeout=timedelta(seconds=5))
    handles.append(SchedulerWorker(store, sink, config, hooks=[hook]).start())
    ready.set()
    handles[0].thread.join(3)
    alive = handles[0].is_alive
    if alive:  # unblock the test process: the stop that waits cannot be undone
        handles[0].worker.abort()
    assert not alive and returned == [False]
    snap = store.inspect(first.schedule_id)
    assert snap is not None and snap.status.value == "delivered"  # the call in hand finished
    rest = store.inspect(second.schedule_id)
    assert rest is not None and rest.attempts == 0  # never claimed, or released


def test_hooks_and_the_loop_see_the_context_of_the_thread_that_called_run() -> None:
    """Hooks and the sink run on the loop thread in the contextvars context of the thread that
    called run() (a tracing span, structlog's bound values), as run_async's hooks do on
    asyncio.to_thread."""
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")
    store = InMemoryScheduleStore()
    store.insert(due(1), 3)
    seen: list[tuple[str, str]] = []
    stop = threading.Event()

    def hook(event: WorkerEvent) -> None:
        if isinstance(event, Delivered):
            seen.append(("hook", var.get()))
            stop.set()

    def sink(message: ScheduledMessage) -> None:
        seen.append(("sink", var.get()))

    token = var.set("caller")
    try:
        SchedulerWorker(store, sink, CALM, hooks=[hook]).run(stop)
    finally:
        var.reset(token)
    assert seen == [("sink", "caller"), ("hook", "caller")]
