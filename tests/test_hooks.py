"""Failures keep their story, hooks, and the test mode (propagate_errors).

Hooks and the test mode on the three ways a worker runs: run_once (sync), the thread
loop (run / start) and run_async.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest

from hexeract_lite import (
    InMemoryScheduleStore,
    ScheduledMessage,
    ScheduleStatus,
    ScheduleStore,
    SqliteScheduleStore,
    Target,
)
from hexeract_lite.cli import format_inspect
from hexeract_lite.errors import InvalidConfiguration, StoreError
from hexeract_lite.hooks import (
    DeadLettered,
    Delivered,
    Failed,
    LeaseLost,
    MalformedDeadLettered,
    Missed,
    Released,
    StoreErrorBackedOff,
    Swept,
    WorkerEvent,
)
from hexeract_lite.settle import MAX_ERROR_CHARS, TRACEBACK_HEADER, error_summary, error_text
from hexeract_lite.snapshot import ScheduleSnapshot
from hexeract_lite.worker import SchedulerWorker, SchedulerWorkerConfig

from .conftest import TIGHT

FAST = SchedulerWorkerConfig(poll_interval=timedelta(milliseconds=20), jitter=False)
SECRET = "payload-secret-4f2a"


def now() -> datetime:
    return datetime.now(UTC)


def due(store: ScheduleStore, max_attempts: int = 3, event: str = "reminder") -> ScheduledMessage:
    msg = ScheduledMessage.delay(
        Target.outbox(), now() - timedelta(seconds=1), event, {"s": SECRET}
    )
    store.insert(msg, max_attempts)
    return msg


def snap(store: ScheduleStore, msg: ScheduledMessage) -> ScheduleSnapshot:
    s = store.inspect(msg.schedule_id)
    assert s is not None
    return s


def handler_that_asserts(message: ScheduledMessage) -> None:
    secret = message.payload  # a local holding the payload: never in last_error
    assert secret == {"s": "something else"}, "the handler's assertion"


# -- failures keep their story -------------------------------------------------------------


def _recurse(depth: int) -> None:
    if depth == 0:
        raise RuntimeError("cannot handle fail.me")
    _recurse_too(depth - 1)  # two functions in turn: frames Python cannot fold together


def _recurse_too(depth: int) -> None:
    _recurse(depth)


def test_last_error_keeps_the_traceback_but_never_the_payload_and_inspect_shows_it() -> None:
    """last_error holds the assertion's whole story, not only 'RuntimeError: cannot
    handle fail.me'."""
    store = InMemoryScheduleStore()
    msg = due(store)
    SchedulerWorker(store, handler_that_asserts, FAST).run_once()
    text = snap(store, msg).last_error
    assert text is not None
    lines = text.split("\n")
    assert lines[0].startswith("AssertionError: the handler's assertion")
    assert lines[1] == TRACEBACK_HEADER
    assert "in handler_that_asserts" in text and "assert secret ==" in text
    assert SECRET not in text, "locals (the payload) are never recorded"
    assert "hexeract_lite" not in text, "the worker's own frames are left out"
    shown = format_inspect(snap(store, msg))
    assert "last error        AssertionError: the handler's assertion" in shown
    assert "\ntraceback\n" in shown and "in handler_that_asserts" in shown


def test_a_deep_traceback_is_cut_at_a_frame_boundary_keeping_the_innermost() -> None:
    try:
        _recurse(400)
    except RuntimeError as exc:
        text = error_text(exc)
    assert len(text) <= MAX_ERROR_CHARS
    assert text.startswith("RuntimeError: cannot handle fail.me\n" + TRACEBACK_HEADER + "\n")
    assert "outer frame(s) left out" in text.split("\n")[2]
    assert text.endswith('raise RuntimeError("cannot handle fail.me")'), "innermost kept"
    frames = text.split("\n")[3:]
    assert frames[0].startswith("  File "), "starts at a frame, not within one"


def test_a_long_message_with_a_traceback_is_still_bounded() -> None:
    try:
        raise ValueError("x" * 50_000)
    except ValueError as exc:
        text = error_text(exc)
    assert len(text) <= MAX_ERROR_CHARS
    assert error_summary(text) is not None and error_summary(text).endswith("…")  # type: ignore[union-attr]
    assert "raise ValueError" in text


def test_a_failed_dispatch_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryScheduleStore()
    due(store)
    with caplog.at_level(logging.WARNING, logger="hexeract_lite.worker"):
        SchedulerWorker(store, handler_that_asserts, FAST).run_once()
    [record] = [r for r in caplog.records if "dispatch failed" in r.getMessage()]
    assert record.exc_info is not None and record.exc_info[0] is AssertionError
    assert "AssertionError: the handler's assertion" in record.getMessage()
    assert "Traceback" not in record.getMessage(), "the traceback goes to exc_info, once"


def test_a_timeout_says_the_thread_was_abandoned() -> None:
    store = InMemoryScheduleStore()
    msg = due(store)
    release = threading.Event()
    cfg = SchedulerWorkerConfig(dispatch_timeout=timedelta(milliseconds=100), jitter=False)
    try:
        SchedulerWorker(store, lambda _: release.wait(5) and None, cfg).run_once()
    finally:
        release.set()
    assert snap(store, msg).last_error == (
        "TimeoutError: the sink did not return within dispatch_timeout (0.1 s); its thread"
        " was abandoned and keeps running until the sink returns"
    )


# -- hooks ---------------------------------------------------------------------------------


class Events:
    def __init__(self) -> None:
        self.got: list[WorkerEvent] = []
        self.lock = threading.Lock()

    def __call__(self, event: WorkerEvent) -> None:
        with self.lock:
            self.got.append(event)

    def of(self, kind: type[Any]) -> list[Any]:
        with self.lock:
            return [e for e in self.got if isinstance(e, kind)]


def raising_hook(event: WorkerEvent) -> None:
    raise RuntimeError(f"hook broke on {type(event).__name__}")


def slow_hook(event: WorkerEvent) -> None:
    time.sleep(0.05)


def mixed_sink(message: ScheduledMessage) -> None:
    if message.event_type == "bad":
        raise ValueError("bad one")
    time.sleep(0.01)


def check_batch_events(
    store: ScheduleStore,
    events: Events,
    ok: ScheduledMessage,
    bad: ScheduledMessage,
    last: ScheduledMessage,
) -> None:
    [delivered] = events.of(Delivered)
    assert delivered.message.schedule_id == ok.schedule_id and delivered.attempt == 1
    assert delivered.lag >= timedelta(seconds=1) and delivered.next is None
    assert delivered.duration >= timedelta(milliseconds=10)
    [failed] = events.of(Failed)
    assert failed.message.schedule_id == bad.schedule_id
    assert isinstance(failed.error, ValueError) and failed.retry_in > timedelta(0)
    assert failed.error_text == snap(store, bad).last_error
    [dead] = events.of(DeadLettered)
    assert dead.message.schedule_id == last.schedule_id and dead.attempt == 1
    # a raising and a slow hook changed nothing that was settled
    assert snap(store, ok).status is ScheduleStatus.DELIVERED
    assert snap(store, bad).status is ScheduleStatus.PENDING
    assert snap(store, last).status is ScheduleStatus.DEAD_LETTERED


def batch(store: ScheduleStore) -> tuple[ScheduledMessage, ...]:
    ok = due(store)
    bad = due(store, 3, "bad")
    last = due(store, 1, "bad")
    return ok, bad, last


def test_hooks_on_run_once(caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryScheduleStore()
    msgs = batch(store)
    events = Events()
    worker = SchedulerWorker(store, mixed_sink, FAST, hooks=[raising_hook, slow_hook, events])
    with caplog.at_level(logging.ERROR, logger="hexeract_lite.worker"):
        report = worker.run_once()
    assert (report.delivered, report.retried, report.dead_lettered) == (1, 1, 1)
    check_batch_events(store, events, *msgs)
    broke = [r for r in caplog.records if "hook" in r.getMessage() and "raised" in r.getMessage()]
    assert len(broke) == 3 and all(r.exc_info is not None for r in broke)


def test_hooks_on_the_thread_loop() -> None:
    store = InMemoryScheduleStore()
    msgs = batch(store)
    events = Events()
    worker = SchedulerWorker(store, mixed_sink, FAST, hooks=[raising_hook, events])
    with worker.start():
        deadline = time.monotonic() + 5
        while not events.of(DeadLettered) and time.monotonic() < deadline:
            time.sleep(0.01)
    check_batch_events(store, events, *msgs)


def test_hooks_on_run_async() -> None:
    store = InMemoryScheduleStore()
    msgs = batch(store)
    events = Events()

    async def async_sink(message: ScheduledMessage) -> None:
        await asyncio.sleep(0.01)
        if message.event_type == "bad":
            raise ValueError("bad one")

    async def main() -> None:
        stop = asyncio.Event()
        worker = SchedulerWorker(store, async_sink, FAST, hooks=[raising_hook, events])
        task = asyncio.create_task(worker.run_async(stop))
        deadline = time.monotonic() + 5
        while not events.of(DeadLettered) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        stop.set()
        await task

    asyncio.run(asyncio.wait_for(main(), 10))
    check_batch_events(store, events, *msgs)


def test_released_at_stop_is_a_hook_event() -> None:
    store = InMemoryScheduleStore()
    first, second = due(store), due(store)
    events = Events()
    worker: SchedulerWorker

    def stop_after_first(message: ScheduledMessage) -> None:
        worker.abort()

    worker = SchedulerWorker(store, stop_after_first, FAST, hooks=[events])
    worker.run_once()
    kinds = sorted(type(e).__name__ for e in events.got)
    assert "Released" in kinds
    [released] = events.of(Released)
    assert released.message.schedule_id in {first.schedule_id, second.schedule_id}


def test_swept_is_a_hook_event(tmp_path: Path) -> None:
    store = InMemoryScheduleStore()
    msg = due(store, max_attempts=1)
    [claimed] = store.claim_due(now(), 1, timedelta(milliseconds=1))  # a "crashed" worker
    assert claimed.message.schedule_id == msg.schedule_id
    time.sleep(0.01)
    events = Events()
    SchedulerWorker(store, lambda _: None, FAST, hooks=[events]).run_once()
    assert events.of(Swept) == [Swept(count=1)]


def test_a_malformed_row_dead_lettered_is_a_hook_event(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with SqliteScheduleStore.open(db) as store:
        bad = due(store)
        conn = apsw.Connection(str(db))
        conn.execute(
            "UPDATE scheduled_messages SET target_kind = 'email' WHERE schedule_id = ?",
            (bad.schedule_id.bytes,),
        )
        conn.close()
        events = Events()
        SchedulerWorker(store, lambda _: None, FAST, hooks=[events]).run_once()
        [event] = events.of(MalformedDeadLettered)
        assert event.schedule == str(bad.schedule_id) and "target_kind" in event.reason


class FlakyStore(InMemoryScheduleStore):
    def __init__(self) -> None:
        super().__init__()
        self.failures = 1

    def claim_due(self, now: datetime, batch_size: int, lease: timedelta) -> Any:
        if self.failures > 0:
            self.failures -= 1
            raise StoreError("database is locked")
        return super().claim_due(now, batch_size, lease)


def test_a_store_error_backed_off_is_a_hook_event() -> None:
    store = FlakyStore()
    due(store)
    events = Events()
    with SchedulerWorker(store, lambda _: None, FAST, hooks=[events]).start():
        deadline = time.monotonic() + 5
        while not events.of(Delivered) and time.monotonic() < deadline:
            time.sleep(0.01)
    [backoff] = events.of(StoreErrorBackedOff)
    assert isinstance(backoff.error, StoreError) and backoff.backoff == timedelta(milliseconds=20)
    assert events.of(Delivered)


@pytest.mark.parametrize("hooks", [print, "abc", [1], 3])
def test_bad_hooks_are_refused(hooks: Any) -> None:
    with pytest.raises(InvalidConfiguration, match="hook"):
        SchedulerWorker(InMemoryScheduleStore(), lambda _: None, hooks=hooks)


# -- the test mode ---------------------------------------------------------------------------


def test_propagate_errors_off_by_default_a_failing_assert_is_a_retry() -> None:
    store = InMemoryScheduleStore()
    due(store)
    report = SchedulerWorker(store, handler_that_asserts, FAST).run_once()
    assert report.retried == 1


def check_settled_then_raised(store: ScheduleStore, msg: ScheduledMessage) -> None:
    s = snap(store, msg)
    assert s.status is ScheduleStatus.PENDING and s.attempts == 1
    assert error_summary(s.last_error) == "AssertionError: the handler's assertion …"


def test_propagate_errors_run_once() -> None:
    store = InMemoryScheduleStore()
    msg = due(store)
    worker = SchedulerWorker(store, handler_that_asserts, FAST, propagate_errors=True)
    with pytest.raises(AssertionError, match="the handler's assertion"):
        worker.run_once()
    check_settled_then_raised(store, msg)


def test_propagate_errors_run() -> None:
    store = InMemoryScheduleStore()
    msg = due(store)
    worker = SchedulerWorker(store, handler_that_asserts, FAST, propagate_errors=True)
    done: list[BaseException] = []

    def main() -> None:
        try:
            worker.run()
        except AssertionError as exc:
            done.append(exc)

    thread = threading.Thread(target=main)
    thread.start()
    thread.join(5)
    assert not thread.is_alive() and len(done) == 1
    check_settled_then_raised(store, msg)


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_propagate_errors_run_async(kind: str) -> None:
    store = InMemoryScheduleStore()
    msg = due(store)

    async def async_handler(message: ScheduledMessage) -> None:
        handler_that_asserts(message)

    sink: Callable[[ScheduledMessage], Any] = (
        async_handler if kind == "async" else handler_that_asserts
    )

    async def main() -> None:
        await SchedulerWorker(store, sink, FAST, propagate_errors=True).run_async()

    with pytest.raises(AssertionError, match="the handler's assertion"):
        asyncio.run(asyncio.wait_for(main(), 10))
    check_settled_then_raised(store, msg)


def test_propagate_errors_must_be_a_bool() -> None:
    with pytest.raises(InvalidConfiguration, match="propagate_errors"):
        SchedulerWorker(InMemoryScheduleStore(), lambda _: None, propagate_errors=1)  # type: ignore[arg-type]


PAUSE_S = 0.9
"""A pause half as long again as :data:`tests.conftest.TIGHT`'s lease."""


class SlowOnce:
    """A hook that pauses :data:`PAUSE_S` at the first Delivered event, and counts them."""

    def __init__(self) -> None:
        self.delivered = 0
        self.lock = threading.Lock()

    def __call__(self, event: WorkerEvent) -> None:
        if isinstance(event, Delivered):
            with self.lock:
                self.delivered += 1
                first = self.delivered == 1
            if first:
                time.sleep(PAUSE_S)


def _four_due(store: SqliteScheduleStore) -> list[ScheduledMessage]:
    due = datetime.now(UTC) - timedelta(seconds=1)
    msgs = [ScheduledMessage.delay(Target.outbox(), due, "e", {"n": n}) for n in range(4)]
    for msg in msgs:
        store.insert(msg, 1)
    return msgs


def _all_delivered(store: SqliteScheduleStore, msgs: list[ScheduledMessage]) -> None:
    for msg in msgs:
        snap = store.inspect(msg.schedule_id)
        assert snap is not None
        assert snap.status is ScheduleStatus.DELIVERED, (snap.status, snap.last_error)


def test_a_slow_hook_in_the_loop_never_lets_a_claimed_lease_run_out(tmp_path: Path) -> None:
    """The loop calls the hooks while no claimed batch waits on its lease: a hook slower than
    the lease costs no occurrence its dispatch (nor, on its last attempt, a dead letter from
    the sweep)."""
    with SqliteScheduleStore.open(tmp_path / "h.db") as store:
        msgs = _four_due(store)
        hook, seen = SlowOnce(), []
        worker = SchedulerWorker(store, lambda m: seen.append(m), TIGHT, hooks=[hook])
        with worker.start():
            deadline = time.monotonic() + 10
            while hook.delivered < 4 and time.monotonic() < deadline:
                time.sleep(0.02)
        _all_delivered(store, msgs)
        assert len(seen) == 4


def test_a_slow_hook_under_run_async_never_lets_a_claimed_lease_run_out(tmp_path: Path) -> None:
    with SqliteScheduleStore.open(tmp_path / "a.db") as store:
        msgs = _four_due(store)
        hook = SlowOnce()

        async def sink(message: ScheduledMessage) -> None:
            return None

        async def main() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(
                SchedulerWorker(store, sink, TIGHT, hooks=[hook]).run_async(stop)
            )
            deadline = time.monotonic() + 10
            while hook.delivered < 4 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            stop.set()
            await task

        asyncio.run(asyncio.wait_for(main(), 20))
        _all_delivered(store, msgs)


def test_a_slow_hook_on_a_malformed_row_never_lets_its_batch_mates_lease_run_out(
    tmp_path: Path,
) -> None:
    """The MalformedDeadLettered event is told once the rest of its batch is dispatched: a slow
    hook on it lets no batch-mate's lease run out, and the events keep their order."""
    db = tmp_path / "m.db"
    with SqliteScheduleStore.open(db) as store:
        due = datetime.now(UTC) - timedelta(seconds=1)
        bad = ScheduledMessage.delay(Target.outbox(), due - timedelta(seconds=1), "bad", {})
        good = ScheduledMessage.delay(Target.outbox(), due, "good", {})
        store.insert(bad, 1)
        store.insert(good, 1)
        conn = apsw.Connection(str(db))
        conn.execute(
            "UPDATE scheduled_messages SET target_kind = 'email' WHERE schedule_id = ?",
            (bad.schedule_id.bytes,),
        )
        conn.close()
        events: list[WorkerEvent] = []

        def slow_on_malformed(event: WorkerEvent) -> None:
            events.append(event)
            if isinstance(event, MalformedDeadLettered):
                time.sleep(PAUSE_S)

        report = SchedulerWorker(store, lambda _: None, TIGHT, hooks=[slow_on_malformed]).run_once()
        assert report.delivered == 1, report
        _all_delivered(store, [good])
        assert [type(e) for e in events] == [MalformedDeadLettered, Delivered], "order kept"


def test_propagate_errors_on_a_start_thread_settles_then_ends_the_thread_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """README 'Guarantees': propagate_errors re-raises after settling, on a start() thread too:
    the thread ends with the sink's error, the occurrence settled as a retry."""
    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    store = InMemoryScheduleStore()
    msg = ScheduledMessage.delay(
        Target.outbox(), datetime.now(UTC) - timedelta(seconds=1), "e", {"amount": -5}
    )
    store.insert(msg, 3)

    def charge(message: ScheduledMessage) -> None:
        assert message.payload["amount"] > 0, "amounts are positive"

    handle = SchedulerWorker(store, charge, TIGHT, propagate_errors=True).start()
    deadline = time.monotonic() + 5
    while handle.is_alive and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not handle.is_alive
    [error] = raised
    assert isinstance(error, AssertionError) and "amounts are positive" in str(error)
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.status is ScheduleStatus.PENDING and snap.attempts == 1
    assert snap.last_error is not None and snap.last_error.startswith("AssertionError")


class FailingOnceStore(InMemoryScheduleStore):
    """An in-memory store whose first claim raises a StoreError (a locked file, say)."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 1

    def claim_due(self, now: datetime, batch_size: int, lease: timedelta) -> Any:
        if self.failures > 0:
            self.failures -= 1
            raise StoreError("database is locked")
        return super().claim_due(now, batch_size, lease)


def test_a_store_error_hook_under_run_async_runs_off_the_event_loop() -> None:
    """Under run_async every hook runs on an asyncio.to_thread worker thread, as the README
    says, StoreErrorBackedOff included: a slow hook never blocks the application's event
    loop."""
    store = FailingOnceStore()
    threads: dict[str, threading.Thread] = {}

    def hook(event: WorkerEvent) -> None:
        threads.setdefault(type(event).__name__, threading.current_thread())

    async def sink(message: ScheduledMessage) -> None:
        return None

    async def main() -> threading.Thread:
        stop = asyncio.Event()
        store.insert(
            ScheduledMessage.delay(
                Target.outbox(), datetime.now(UTC) - timedelta(seconds=1), "e", {}
            ),
            3,
        )
        task = asyncio.create_task(
            SchedulerWorker(store, sink, TIGHT, hooks=[hook]).run_async(stop)
        )
        deadline = time.monotonic() + 5
        while "Delivered" not in threads and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        stop.set()
        await task
        return threading.current_thread()

    loop_thread = asyncio.run(asyncio.wait_for(main(), 10))
    assert set(threads) == {"StoreErrorBackedOff", "Delivered"}
    assert threads["Delivered"] is not loop_thread
    assert threads["StoreErrorBackedOff"] is not loop_thread


def test_a_fenced_settlement_reaches_the_hooks_as_lease_lost() -> None:
    """A settlement fenced out (the schedule cancelled mid-dispatch, as another process could)
    reaches the hooks as LeaseLost, the batch-mates as Delivered."""
    store = InMemoryScheduleStore()
    due = datetime.now(UTC) - timedelta(seconds=1)
    msgs = [ScheduledMessage.delay(Target.outbox(), due, "e", {"n": n}) for n in range(4)]
    store.insert_many(msgs, 3)
    events: list[WorkerEvent] = []

    def sink(message: ScheduledMessage) -> None:
        if message.schedule_id == msgs[1].schedule_id:
            store.cancel(message.schedule_id)  # as another process could, mid-dispatch

    with SchedulerWorker(store, sink, TIGHT, hooks=[events.append]).start():
        deadline = time.monotonic() + 5
        while len(events) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
    lost = [e for e in events if isinstance(e, LeaseLost)]
    assert [e.message.schedule_id for e in lost] == [msgs[1].schedule_id]
    assert len([e for e in events if isinstance(e, Delivered)]) == 3


@pytest.mark.parametrize("how", ["stop", "with"])
def test_a_blocked_hook_is_given_up_on_when_the_worker_stops(
    store: ScheduleStore, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A hook that blocks holds a stop no longer than dispatch_timeout, as a hung sink
    does: stop() and leaving ``with worker.start()`` return, the hook's thread is left
    to it and ends when it returns, calling no other hook."""
    config = SchedulerWorkerConfig(
        poll_interval=timedelta(milliseconds=20),
        jitter=False,
        dispatch_timeout=timedelta(milliseconds=150),
    )
    entered, release = threading.Event(), threading.Event()
    seen: list[object] = []

    def blocking(event: object) -> None:
        seen.append(event)
        if isinstance(event, Delivered) and len(seen) == 1:
            entered.set()
            release.wait(30)

    msgs = [due(store) for _ in range(2)]
    worker = SchedulerWorker(store, lambda _: None, config, hooks=[blocking])
    handle = worker.start()
    try:
        assert entered.wait(10), "the hook was called"
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="hexeract_lite.worker"):
            if how == "stop":
                assert handle.stop() is True
            else:
                handle.__exit__(None, None, None)
        took = time.monotonic() - started
        assert not handle.is_alive
        assert 0.12 <= took < 5, took
        assert "a hook did not return within dispatch_timeout (0.15 s)" in caplog.text
        assert all(snap(store, m).status is ScheduleStatus.DELIVERED for m in msgs)
    finally:
        release.set()
    time.sleep(0.1)  # five poll intervals
    assert len(seen) == 1, "the abandoned thread calls no other hook"


def test_a_firing_the_policy_ends_is_missed_not_delivered() -> None:
    from hexeract_lite import ManualClock, SchedulerControl

    clock = ManualClock(datetime(2026, 3, 2, 8, 59, tzinfo=UTC))
    store = InMemoryScheduleStore(clock=clock)
    control = SchedulerControl(store)
    control.ensure("app.h", event_type="e", cron="0 * * * *")
    events: list[WorkerEvent] = []
    got: list[ScheduledMessage] = []
    worker = SchedulerWorker(store, got.append, hooks=[events.append], clock=clock)
    clock.set(datetime(2026, 3, 2, 9, 0, tzinfo=UTC))
    assert worker.run_once().rescheduled == 1
    control.update("app.h", max_firings=1)
    clock.set(datetime(2026, 3, 2, 10, 0, tzinfo=UTC))
    report = worker.run_once()
    assert (report.claimed, report.missed, report.delivered, report.rescheduled) == (1, 1, 0, 0)
    assert len(got) == 1 and [type(e) for e in events] == [Delivered, Missed]
    missed = events[1]
    assert isinstance(missed, Missed) and missed.next is None
    assert "completed: 1 firings of at most 1" in missed.reason
    assert control.inspect(control.id_of("app.h")).status is ScheduleStatus.DELIVERED
