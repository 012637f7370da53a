"""Long handlers: heartbeats that extend the lease, snoozes that give the attempt back,
aborts of the dispatch in flight (in this process, and from another one)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest

from hexeract_lite import (
    InMemoryScheduleStore,
    InvalidArgument,
    InvalidConfiguration,
    ManualClock,
    ScheduledMessage,
    ScheduleNotFound,
    SchedulerControl,
    SchedulerWorker,
    SchedulerWorkerConfig,
    ScheduleStatus,
    ScheduleStore,
    Snooze,
    Target,
    current_dispatch,
)
from hexeract_lite.hooks import Aborted, HeartbeatLost, LeaseExtended, Snoozed, WorkerEvent
from hexeract_lite.runlog import RunOutcome
from hexeract_lite.store.sqlite import SqliteScheduleStore

WORKER = Path(__file__).resolve().parent / "longrun_worker.py"

LEASE = timedelta(milliseconds=200)
BEAT = SchedulerWorkerConfig(
    batch_size=1,
    lease=LEASE,
    heartbeat=timedelta(milliseconds=50),
    dispatch_timeout=timedelta(seconds=5),
    poll_interval=timedelta(milliseconds=20),
    retry_base_delay=timedelta(milliseconds=10),
    retry_max_delay=timedelta(milliseconds=10),
    jitter=False,
)
"""A worker whose heartbeat keeps a 200 ms lease alive every 50 ms."""


def due_now(
    store: ScheduleStore, max_attempts: int = 3, name: str | None = None
) -> ScheduledMessage:
    at = datetime.now(UTC) - timedelta(seconds=1)
    msg = ScheduledMessage.delay(Target.outbox(), at, "job", {"n": 1}, name=name)
    store.insert(msg, max_attempts)
    return msg


def snap(store: ScheduleStore, msg: ScheduledMessage) -> Any:
    got = store.inspect(msg.schedule_id)
    assert got is not None
    return got


# -- heartbeats ------------------------------------------------------------------------


def test_the_worker_heartbeat_keeps_a_handler_running_past_its_lease() -> None:
    """A handler that runs 4x the lease is delivered once, its lease extended meanwhile
    (the hooks are told), and settled on the last lease."""
    store = InMemoryScheduleStore()
    msg = due_now(store)
    leases: list[datetime] = []
    events: list[WorkerEvent] = []

    def handler(message: ScheduledMessage) -> None:
        handle = current_dispatch()
        assert handle.occurrence.message.schedule_id == message.schedule_id
        for _ in range(8):
            time.sleep(0.1)
            leases.append(handle.lease)
            assert not handle.should_abort()

    with SchedulerWorker(store, handler, BEAT, hooks=[events.append]) as worker:
        report = worker.run_once()
    assert report.delivered == 1 and report.lease_lost == 0
    assert len(set(leases)) >= 4  # moved on every heartbeat
    assert sum(isinstance(e, LeaseExtended) for e in events) >= 4
    assert snap(store, msg).status is ScheduleStatus.DELIVERED


def test_a_long_handler_after_a_stream_of_short_ones_is_heartbeaten() -> None:
    """The heartbeat thread keeps its deadlines while short batches come and go; a long
    handler that then begins is still extended within one period and delivered once."""
    store = InMemoryScheduleStore()
    base = datetime.now(UTC) - timedelta(minutes=1)
    for i in range(40):
        at = base + timedelta(seconds=i)
        store.insert(ScheduledMessage.delay(Target.outbox(), at, "short", {"i": i}), 3)
    long = ScheduledMessage.delay(Target.outbox(), base + timedelta(seconds=50), "long", {})
    store.insert(long, 3)
    events: list[WorkerEvent] = []
    done = threading.Event()

    def handler(message: ScheduledMessage) -> None:
        if message.event_type == "long":
            time.sleep(4 * LEASE.total_seconds())
            assert not current_dispatch().should_abort()
            done.set()

    stop = threading.Event()
    with SchedulerWorker(store, handler, BEAT, hooks=[events.append]) as worker:
        thread = threading.Thread(target=worker.run, args=(stop,))
        thread.start()
        assert done.wait(10)
        stop.set()
        thread.join(10)
    extended = [e for e in events if isinstance(e, LeaseExtended)]
    assert sum(e.message.event_type == "long" for e in extended) >= 4
    assert not any(isinstance(e, HeartbeatLost) for e in events)
    assert snap(store, long).status is ScheduleStatus.DELIVERED
    assert snap(store, long).attempts == 1


def test_a_manual_heartbeat_extends_the_lease_and_is_fenced() -> None:
    """``heartbeat(extend)`` moves the lease to now + extend; once another claim took
    the occurrence it returns False (and ever after), ``should_abort()`` turns True,
    the hooks hear ``HeartbeatLost`` and the settlement is fenced out."""
    store = InMemoryScheduleStore()
    due_now(store)
    seen: dict[str, Any] = {}
    events: list[WorkerEvent] = []
    config = SchedulerWorkerConfig(
        batch_size=1, lease=LEASE, dispatch_timeout=LEASE, poll_interval=timedelta(seconds=1)
    )

    def handler(message: ScheduledMessage) -> None:
        handle = current_dispatch()
        before = handle.lease
        seen["extended"] = handle.heartbeat(timedelta(seconds=60))
        seen["moved"] = handle.lease - before
        # another worker takes it over: its lease is now the row's
        store.extend_lease(message.schedule_id, handle.lease, handle.lease + timedelta(seconds=1))
        seen["lost"] = handle.heartbeat()
        seen["again"] = handle.heartbeat(5)
        seen["abort"] = handle.should_abort()

    with SchedulerWorker(store, handler, config, hooks=[events.append]) as worker:
        report = worker.run_once()
    assert seen["extended"] is True and seen["moved"] > timedelta(seconds=50)
    assert seen["lost"] is False and seen["again"] is False and seen["abort"] is True
    assert [type(e) for e in events if isinstance(e, LeaseExtended | HeartbeatLost)] == [
        LeaseExtended,
        HeartbeatLost,
    ]
    assert report.lease_lost == 1


def test_dispatch_timeout_still_bounds_a_heartbeating_dispatch() -> None:
    """Past ``dispatch_timeout`` the dispatch fails as timed out even though its lease is
    kept alive; its handle is ended at once, so the abandoned handler sees
    ``should_abort()`` and stops, its heartbeats return False and the lease is no longer
    extended."""
    store = InMemoryScheduleStore()
    msg = due_now(store)
    config = attrs.evolve(BEAT, dispatch_timeout=timedelta(milliseconds=300))
    late: list[bool] = []
    done = threading.Event()

    def handler(message: ScheduledMessage) -> None:
        handle = current_dispatch()
        give_up = time.monotonic() + 10
        while not handle.should_abort() and time.monotonic() < give_up:
            time.sleep(0.02)
        late.extend([handle.should_abort(), handle.heartbeat()])
        done.set()

    with SchedulerWorker(store, handler, config) as worker:
        report = worker.run_once()
        assert report.retried == 1
        held = snap(store, msg).leased_until  # the retry's backoff deadline
        assert done.wait(5), "the handler was told to stop"
    assert late == [True, False]
    assert snap(store, msg).leased_until == held
    [run] = store.runs(msg.schedule_id)
    assert run.outcome is RunOutcome.TIMED_OUT


def test_under_run_a_timed_out_dispatch_is_told_to_stop_before_the_rest_of_its_batch() -> None:
    """As under ``run_once()``: the handle of a call given up on is ended at once, not when
    the rest of its batch is done."""
    store = InMemoryScheduleStore()
    first = due_now(store)
    later = first.scheduled_for + timedelta(milliseconds=1)  # dispatched second
    store.insert(ScheduledMessage.delay(Target.outbox(), later, "job", {"n": 2}), 3)
    config = attrs.evolve(BEAT, batch_size=2, dispatch_timeout=timedelta(seconds=1))
    told, seen, second = threading.Event(), threading.Event(), threading.Event()

    def handler(message: ScheduledMessage) -> None:
        handle = current_dispatch()
        if message.schedule_id == first.schedule_id:
            give_up = time.monotonic() + 10
            while not handle.should_abort() and time.monotonic() < give_up:
                time.sleep(0.01)
            told.set()
            return
        if told.wait(0.9):  # the next, within its own timeout, while the first is abandoned
            seen.set()
        second.set()

    worker = SchedulerWorker(store, handler, config)
    with worker.start():
        assert told.wait(5)
        assert second.wait(5), "the rest of the batch was dispatched"  # before the stop
    assert seen.is_set(), "the abandoned handler was told only once the batch was over"


def test_a_worker_abort_tells_the_handler_in_flight_to_stop() -> None:
    store = InMemoryScheduleStore()
    due_now(store)
    started, stopped = threading.Event(), threading.Event()

    def handler(message: ScheduledMessage) -> None:
        handle = current_dispatch()
        started.set()
        give_up = time.monotonic() + 10
        while not handle.should_abort() and time.monotonic() < give_up:
            time.sleep(0.02)
        if handle.should_abort():
            stopped.set()

    worker = SchedulerWorker(store, handler, BEAT)
    with worker.start():
        assert started.wait(5)
        worker.abort()
        assert stopped.wait(5), "should_abort() turned True"


@pytest.mark.parametrize("bad", [0, -1, timedelta(0), "5", True, float("nan")])
def test_heartbeat_refuses_a_bad_extend(bad: object) -> None:
    store = InMemoryScheduleStore()
    due_now(store)
    raised: list[BaseException] = []

    def handler(message: ScheduledMessage) -> None:
        try:
            current_dispatch().heartbeat(bad)  # type: ignore[arg-type]
        except InvalidArgument as exc:
            raised.append(exc)

    with SchedulerWorker(store, handler, BEAT) as worker:
        worker.run_once()
    assert len(raised) == 1 and "extend" in str(raised[0])


def test_current_dispatch_outside_a_dispatch_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="outside a dispatch"):
        current_dispatch()


def test_an_async_handler_and_what_it_spawns_see_its_dispatch() -> None:
    store = InMemoryScheduleStore()
    msg = due_now(store)
    seen: list[bool] = []

    async def handler(message: ScheduledMessage) -> None:
        async def child() -> bool:
            return current_dispatch().heartbeat()

        seen.append(await asyncio.create_task(child()))
        seen.append(current_dispatch().occurrence.message == message)

    async def main() -> None:
        stop = asyncio.Event()
        worker = SchedulerWorker(store, handler, BEAT)
        task = asyncio.create_task(worker.run_async(stop))
        while snap(store, msg).status is not ScheduleStatus.DELIVERED:
            await asyncio.sleep(0.01)
        stop.set()
        await task

    asyncio.run(asyncio.wait_for(main(), 10))
    assert seen == [True, True]


def test_the_heartbeat_config_is_checked() -> None:
    with pytest.raises(InvalidConfiguration, match="heartbeat must be shorter"):
        SchedulerWorkerConfig(lease=LEASE, heartbeat=LEASE, dispatch_timeout=LEASE)
    with pytest.raises(InvalidConfiguration, match="heartbeat"):
        SchedulerWorkerConfig(heartbeat=timedelta(0))
    with pytest.raises(InvalidConfiguration, match="max_snoozes"):
        SchedulerWorkerConfig(max_snoozes=-1)
    # with a heartbeat the lease need not cover a batch at the timeout
    config = SchedulerWorkerConfig(
        lease=LEASE, heartbeat=timedelta(milliseconds=50), dispatch_timeout=timedelta(hours=1)
    )
    assert config.dispatch_timeout > config.lease * config.batch_size


# -- snoozes ---------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["raise", "return", "async-raise", "async-return"])
def test_a_snooze_gives_the_attempt_back_and_is_counted(how: str) -> None:
    """Raised or returned, from a sync or an async handler: the attempt is given back,
    ``snoozes`` counts it, the occurrence (same id) is due again after the delay, and
    the run log and the hooks say ``snoozed``."""
    store = InMemoryScheduleStore()
    msg = due_now(store, max_attempts=1)
    calls: list[int] = []
    events: list[WorkerEvent] = []

    def sync(message: ScheduledMessage) -> Snooze | None:
        calls.append(current_dispatch().occurrence.snoozes)
        if len(calls) < 3:
            if how == "raise":
                raise Snooze(0.05)
            return Snooze(timedelta(milliseconds=50))
        return None

    async def asynchronous(message: ScheduledMessage) -> Snooze | None:
        if how == "async-return":
            return sync(message)
        _raising(sync, message)
        return None

    handler = sync if how in ("raise", "return") else asynchronous
    with SchedulerWorker(store, handler, BEAT, hooks=[events.append]) as worker:
        first = worker.run_once()
        assert first.snoozed == 1 and first.claimed == 1
        after = snap(store, msg)
        assert after.attempts == 0 and after.snoozes == 1 and after.status is ScheduleStatus.PENDING
        assert worker.run_once().claimed == 0  # not before the delay
        deadline = time.monotonic() + 5
        while snap(store, msg).status is not ScheduleStatus.DELIVERED:
            assert time.monotonic() < deadline
            worker.run_once()
            time.sleep(0.01)
    assert calls == [0, 1, 2]  # max_attempts=1: snoozes never spent it
    runs = [r.outcome for r in reversed(store.runs(msg.schedule_id))]
    assert runs == [RunOutcome.SNOOZED, RunOutcome.SNOOZED, RunOutcome.DELIVERED]
    snoozed = [e for e in events if isinstance(e, Snoozed)]
    assert [e.snoozes for e in snoozed] == [1, 2] and snoozed[0].delay == timedelta(milliseconds=50)


def _raising(sync: Callable[[ScheduledMessage], Snooze | None], message: ScheduledMessage) -> None:
    result = sync(message)
    if result is not None:
        raise result


def test_max_snoozes_dead_letters_a_schedule_that_snoozes_for_ever() -> None:
    store = InMemoryScheduleStore()
    msg = due_now(store)
    config = SchedulerWorkerConfig(max_snoozes=2, poll_interval=timedelta(milliseconds=10))

    def handler(message: ScheduledMessage) -> None:
        raise Snooze(timedelta(milliseconds=1))

    with SchedulerWorker(store, handler, config) as worker:
        for _ in range(200):
            if snap(store, msg).status is ScheduleStatus.DEAD_LETTERED:
                break
            worker.run_once()
            time.sleep(0.005)
    dead = snap(store, msg)
    assert dead.status is ScheduleStatus.DEAD_LETTERED and dead.snoozes == 2
    assert "max_snoozes (2)" in (dead.last_error or "")
    outcomes = [r.outcome for r in reversed(store.runs(msg.schedule_id))]
    assert outcomes == [RunOutcome.SNOOZED, RunOutcome.SNOOZED, RunOutcome.DEAD_LETTERED]


@pytest.mark.parametrize("bad", [0, -1, timedelta(seconds=-1), "1s", None])
def test_snooze_refuses_a_bad_delay(bad: object) -> None:
    with pytest.raises(InvalidArgument, match="delay"):
        Snooze(bad)  # type: ignore[arg-type]


def test_a_snoozed_occurrence_is_not_missed_past_its_misfire_grace() -> None:
    """A snooze is late on purpose, like a retry: the grace does not skip it."""
    clock = ManualClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    store = InMemoryScheduleStore(clock=clock)
    grace = timedelta(seconds=1)
    msg = ScheduledMessage.delay(Target.outbox(), clock.now(), "job", {}, misfire_grace=grace)
    store.insert(msg, 3)
    calls: list[int] = []

    def handler(message: ScheduledMessage) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise Snooze(timedelta(minutes=1))

    with SchedulerWorker(store, handler, BEAT) as worker:
        assert worker.run_once().snoozed == 1
        clock.advance(timedelta(minutes=1))  # a minute past due: far beyond the grace
        report = worker.run_once()
    assert report.delivered == 1 and len(calls) == 2


# -- aborts in this process ------------------------------------------------------------


def test_abort_reaches_a_sync_handler_and_counts_as_a_failed_attempt() -> None:
    store = InMemoryScheduleStore()
    msg = due_now(store, name="ops.render")
    control = SchedulerControl(store)
    seen = threading.Event()
    events: list[WorkerEvent] = []

    def handler(message: ScheduledMessage) -> None:
        handle = current_dispatch()
        deadline = time.monotonic() + 5
        while not handle.should_abort() and time.monotonic() < deadline:
            time.sleep(0.005)
        seen.set()

    with SchedulerWorker(store, handler, BEAT, hooks=[events.append]) as worker:
        thread = threading.Thread(target=worker.run_once)
        thread.start()
        while snap(store, msg).leased_until is None:
            time.sleep(0.005)
        asked = time.monotonic()
        assert control.abort("ops.render") is True
        assert seen.wait(5)
        took = time.monotonic() - asked
        thread.join(5)
    assert took < 2 * BEAT.poll_interval.total_seconds() + 0.2
    after = snap(store, msg)
    assert after.status is ScheduleStatus.PENDING and after.attempts == 1
    assert "aborted" in (after.last_error or "")
    [run] = store.runs(msg.schedule_id)
    assert run.outcome is RunOutcome.ABORTED
    [aborted] = [e for e in events if isinstance(e, Aborted)]
    assert aborted.cancelled is False and aborted.retry_in is not None


def test_abort_with_cancel_cancels_an_async_handler_and_the_schedule() -> None:
    store = InMemoryScheduleStore()
    msg = due_now(store)
    control = SchedulerControl(store)
    cancelled = threading.Event()

    async def handler(message: ScheduledMessage) -> None:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def main() -> float:
        stop = asyncio.Event()
        worker = SchedulerWorker(store, handler, BEAT)
        task = asyncio.create_task(worker.run_async(stop))
        while snap(store, msg).leased_until is None:
            await asyncio.sleep(0.005)
        asked = time.monotonic()
        assert await asyncio.to_thread(control.abort, msg.schedule_id, cancel=True)
        while not cancelled.is_set():
            await asyncio.sleep(0.002)
        took = time.monotonic() - asked
        while snap(store, msg).status is not ScheduleStatus.CANCELLED:
            await asyncio.sleep(0.005)
        stop.set()
        await task
        return took

    took = asyncio.run(asyncio.wait_for(main(), 10))
    assert took < BEAT.poll_interval.total_seconds() + 0.2
    [run] = store.runs(msg.schedule_id)
    assert run.outcome is RunOutcome.ABORTED


def test_abort_with_nothing_in_flight_is_a_no_op_returning_false() -> None:
    store = InMemoryScheduleStore()
    msg = due_now(store)
    control = SchedulerControl(store)
    assert control.abort(msg.schedule_id) is False
    assert snap(store, msg).status is ScheduleStatus.PENDING
    with pytest.raises(ScheduleNotFound):
        control.abort("ops.nothing-by-this-name")
    with pytest.raises(InvalidArgument, match="cancel"):
        control.abort(msg.schedule_id, cancel="yes")  # type: ignore[arg-type]


# -- real processes --------------------------------------------------------------------


def _start(db: Path, log: Path, *extra: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), str(db), str(log), *extra],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    ready = proc.stdout.readline().strip()
    proc.stdout.close()  # the worker prints nothing more
    assert ready == "ready"
    return proc


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    """SIGTERM each worker and wait for it; one still running 15 s later is made to
    print its threads' stacks (to stderr), then killed, and the test fails."""
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    stuck = []
    for proc in procs:
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)
            time.sleep(0.5)
            proc.kill()
            proc.wait(5)
            stuck.append(proc.pid)
    assert not stuck, f"workers {stuck} did not stop on SIGTERM (their stacks: stderr)"


def _lines(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_three_workers_killed_at_random_never_run_one_occurrence_twice_at_once(
    tmp_path: Path,
) -> None:
    """3 worker processes, handlers running 5x the lease kept by heartbeats, a worker
    SIGKILLed (and replaced) every ~0.6 s: no occurrence is in two live workers'
    handlers at once while their heartbeats succeed, and every one is delivered."""
    db, log = tmp_path / "shared.db", tmp_path / "dispatches.log"
    lease_ms, handler_s = 200, 1.0  # 5x the lease: 20 heartbeats per handler
    with SqliteScheduleStore.open(db) as store:
        msgs = [
            ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), "job", {"i": i})
            for i in range(6)
        ]
        store.insert_many(msgs, 20)
    args = ("--handler-s", str(handler_s), "--lease-ms", str(lease_ms), "--heartbeat-ms", "50")
    procs = [_start(db, log, *args) for _ in range(3)]
    killed: dict[int, float] = {}  # pid -> when it was dead for sure
    rng = random.Random(28)
    try:
        for _ in range(4):  # 4 kills, 0.4 to 0.8 s apart, however slow a start is
            time.sleep(rng.uniform(0.4, 0.8))
            victim = procs.pop(rng.randrange(len(procs)))
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait(10)
            killed[victim.pid] = time.time()
            procs.append(_start(db, log, *args))
        with SqliteScheduleStore.open(db) as store:
            finish = time.monotonic() + 20
            while time.monotonic() < finish:
                statuses = [snap(store, m).status for m in msgs]
                if statuses == [ScheduleStatus.DELIVERED] * len(msgs):
                    break
                time.sleep(0.1)
    finally:
        _stop(procs)
    lines = _lines(log)
    spans: dict[str, list[tuple[float, float, int, str]]] = defaultdict(list)
    open_: dict[tuple[int, str], float] = {}
    for line in lines:
        key = (line["pid"], line["sid"])
        if line["kind"] == "start":
            open_[key] = line["t"]
        else:
            spans[line["sid"]].append((open_.pop(key), line["t"], line["pid"], line["kind"]))
    for (pid, sid), began in open_.items():  # in a handler when its worker was killed
        assert pid in killed, f"worker {pid} left a dispatch unfinished without being killed"
        spans[sid].append((began, killed[pid], pid, "killed"))
    overlaps = []
    for sid, runs in spans.items():
        runs.sort()
        for (_, end, pid, how), (start, _, other, _) in itertools.pairwise(runs):
            if start < end and how != "lost":  # the earlier one's heartbeats succeeded
                overlaps.append((sid, pid, other, end - start))
    assert overlaps == []
    assert statuses == [ScheduleStatus.DELIVERED] * len(msgs)
    assert {sid for sid, runs in spans.items() if any(r[3] == "end" for r in runs)} == {
        str(m.schedule_id) for m in msgs
    }


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sleep", "async"])
def test_an_abort_from_another_process_reaches_the_handler_in_time(
    tmp_path: Path, mode: str
) -> None:
    """This process asks; the worker process's handler sees it within 2x the heartbeat
    (sync) or poll_interval (async, cancelled), and the run is recorded as aborted."""
    db, log = tmp_path / "shared.db", tmp_path / "dispatches.log"
    heartbeat_ms, poll_ms = 200, 100
    with SqliteScheduleStore.open(db) as store:
        msg = due_now(store)
    proc = _start(
        db, log, "--mode", mode, "--handler-s", "20", "--lease-ms", "1000",
        "--heartbeat-ms", str(heartbeat_ms), "--poll-ms", str(poll_ms),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while not any(line["kind"] == "start" for line in _lines(log)):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with SqliteScheduleStore.open(db) as store:
            asked = time.time()
            assert SchedulerControl(store).abort(msg.schedule_id) is True
            while not any(line["kind"] == "abort" for line in _lines(log)):
                assert time.monotonic() < deadline
                time.sleep(0.005)
            [seen] = [line["t"] for line in _lines(log) if line["kind"] == "abort"]
            while not store.runs(msg.schedule_id):
                assert time.monotonic() < deadline
                time.sleep(0.01)
            [run] = store.runs(msg.schedule_id)
    finally:
        _stop([proc])
    bound = 2 * heartbeat_ms if mode == "sleep" else poll_ms
    assert (seen - asked) * 1000 < bound + 100  # + the handler's own look and the machine
    assert run.outcome is RunOutcome.ABORTED
