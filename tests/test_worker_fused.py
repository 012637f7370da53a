"""The thread loop's fused cycle: a full batch's settlement written with the next claim.

``store.settle_and_claim`` (one transaction on the memory, SQLite and PostgreSQL stores) replaces
the settle of a full batch and the claim after it; these tests check that nothing of a
batch is lost or doubled when that call fails, when the loop stops in between, when the
lease is lost in between, and that a store on the contract's default (settle, then claim)
is driven by the same calls.
Also: the pacing of a drain (``min_cycle_delay`` only while others write).
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hexeract_lite import (
    InMemoryScheduleStore,
    ScheduledMessage,
    ScheduleStatus,
    ScheduleStore,
    SqliteScheduleStore,
    StoreError,
    Target,
)
from hexeract_lite.clock import SYSTEM_CLOCK
from hexeract_lite.idle import SHARED_FOR_S, Pacer
from hexeract_lite.settlement import Settlement
from hexeract_lite.snapshot import LeasedOccurrence
from hexeract_lite.worker import SchedulerWorker, SchedulerWorkerConfig

S = timedelta(seconds=1)
MS = timedelta(milliseconds=1)
BATCH = SchedulerWorkerConfig(
    batch_size=10, poll_interval=timedelta(milliseconds=20), min_cycle_delay=timedelta(0)
)


def now() -> datetime:
    return datetime.now(UTC)


def backlog(n: int) -> list[ScheduledMessage]:
    start = now() - timedelta(minutes=1)
    return [
        ScheduledMessage.delay(Target.outbox(), start + i * MS, "reminder", {"i": i})
        for i in range(n)
    ]


class Seen:
    """A sink that counts each schedule id it gets (and can stop or act on a count)."""

    def __init__(self, total: int) -> None:
        self.ids: list[uuid.UUID] = []
        self.lock = threading.Lock()
        self.total = total
        self.all_seen = threading.Event()

    def dispatch(self, message: ScheduledMessage) -> None:
        with self.lock:
            self.ids.append(message.schedule_id)
            if len(set(self.ids)) >= self.total:
                self.all_seen.set()


class Recording(InMemoryScheduleStore):
    """The memory store, recording which worker calls it gets; ``fail_fused`` makes
    that many ``settle_and_claim`` calls raise StoreError first (nothing of a failed
    call is applied)."""

    def __init__(self, fail_fused: int = 0) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.fail_fused = fail_fused

    def claim_due(self, now: datetime, batch_size: int, lease: timedelta) -> Any:
        self.calls.append("claim_due")
        return super().claim_due(now, batch_size, lease)

    def settle(self, outcomes: Sequence[Settlement]) -> list[bool]:
        self.calls.append(f"settle {len(outcomes)}")
        return super().settle(outcomes)

    def settle_and_claim(
        self, outcomes: Sequence[Settlement], now: datetime, batch_size: int, lease: timedelta
    ) -> tuple[list[bool], list[LeasedOccurrence]]:
        self.calls.append(f"settle_and_claim {len(outcomes)}")
        if self.fail_fused > 0:
            self.fail_fused -= 1
            raise StoreError("disk I/O error (fused)")
        return super().settle_and_claim(outcomes, now, batch_size, lease)


class Unfused(Recording):
    """A store without the fused call: the contract's default implementation."""

    settle_and_claim = ScheduleStore.settle_and_claim


def statuses(store: ScheduleStore, messages: Sequence[ScheduledMessage]) -> list[ScheduleStatus]:
    out = []
    for m in messages:
        snap = store.inspect(m.schedule_id)
        assert snap is not None
        out.append(snap.status)
    return out


def drain(store: ScheduleStore, msgs: list[ScheduledMessage], **kwargs: Any) -> Seen:
    store.insert_many(msgs, 3)
    sink = Seen(len(msgs))
    with SchedulerWorker(store, sink, BATCH, **kwargs).start():
        assert sink.all_seen.wait(10)
        deadline = time.monotonic() + 5
        while ScheduleStatus.PENDING in statuses(store, msgs) and time.monotonic() < deadline:
            time.sleep(0.01)
    return sink


def test_the_loop_settles_each_full_batch_with_the_next_claim() -> None:
    store = Recording()
    msgs = backlog(25)
    sink = drain(store, msgs)
    assert sorted(sink.ids) == sorted(m.schedule_id for m in msgs), "each once"
    assert statuses(store, msgs) == [ScheduleStatus.DELIVERED] * 25
    assert store.calls[:4] == [
        "claim_due",  # 10: full, its settlement carried
        "settle_and_claim 10",  # 10 more: full again
        "settle_and_claim 10",  # the last 5: not full, settled on their own
        "settle 5",
    ]
    assert all(call == "claim_due" for call in store.calls[4:]), "then idle"


def test_the_loop_drives_a_store_on_the_contracts_settle_then_claim() -> None:
    store = Unfused()
    assert not store.fuses_settle_and_claim and Recording().fuses_settle_and_claim
    msgs = backlog(25)
    drain(store, msgs)
    assert statuses(store, msgs) == [ScheduleStatus.DELIVERED] * 25
    assert store.calls[:6] == [
        "claim_due",
        "settle 10",
        "claim_due",
        "settle 10",
        "claim_due",
        "settle 5",
    ]


def test_a_failed_settle_and_claim_leaves_the_batch_to_be_redelivered_after_its_lease(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Nothing of a failed call is recorded. At least once: the batch keeps its lease,
    is claimed again once it runs out and delivered again under the same ids; the loop
    backs off and goes on."""
    store = Recording(fail_fused=1)
    msgs = backlog(4)
    store.insert_many(msgs, 3)
    sink = Seen(len(msgs))
    cfg = SchedulerWorkerConfig(
        batch_size=2,
        lease=timedelta(milliseconds=300),
        dispatch_timeout=timedelta(milliseconds=100),
        poll_interval=timedelta(milliseconds=20),
        min_cycle_delay=timedelta(0),
    )
    with (
        caplog.at_level(logging.WARNING, logger="hexeract_lite.worker"),
        SchedulerWorker(store, sink, cfg).start(),
    ):
        deadline = time.monotonic() + 10
        while (
            time.monotonic() < deadline and statuses(store, msgs) != [ScheduleStatus.DELIVERED] * 4
        ):
            time.sleep(0.02)
    assert statuses(store, msgs) == [ScheduleStatus.DELIVERED] * 4
    first = {m.schedule_id for m in msgs[:2]}
    assert sorted(i for i in sink.ids if i in first) == sorted([*first, *first]), "twice"
    assert any("left to lease expiry" in r.getMessage() for r in caplog.records)


def test_a_lease_lost_before_the_fused_settlement_is_fenced_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The sink's own side effect cancels its occurrence (as another process could)
    between its dispatch and the fused settlement: that item is answered False and
    logged as lease lost; the rest of the batch is delivered. (Seen in the log: a
    worker with hooks does not fuse.)"""
    store = InMemoryScheduleStore()
    msgs = backlog(20)

    class Cancelling(Seen):
        def dispatch(self, message: ScheduledMessage) -> None:
            super().dispatch(message)
            if message.schedule_id == msgs[3].schedule_id:
                store.cancel(message.schedule_id)

    store.insert_many(msgs, 3)
    sink = Cancelling(len(msgs))
    with (
        caplog.at_level(logging.WARNING, logger="hexeract_lite.worker"),
        SchedulerWorker(store, sink, BATCH).start(),
    ):
        assert sink.all_seen.wait(10)
        deadline = time.monotonic() + 5
        while ScheduleStatus.PENDING in statuses(store, msgs) and time.monotonic() < deadline:
            time.sleep(0.01)
    expected = [ScheduleStatus.DELIVERED] * 20
    expected[3] = ScheduleStatus.CANCELLED
    assert statuses(store, msgs) == expected
    lost = [r.getMessage() for r in caplog.records if "lease lost" in r.getMessage()]
    assert len(lost) == 1 and str(msgs[3].schedule_id) in lost[0]


def test_a_stop_while_a_batch_is_carried_settles_it() -> None:
    """Stopped in the pause after a full batch (its settlement not written yet): the
    loop writes it on its own before returning; nothing is left leased."""
    store = InMemoryScheduleStore()  # no data_version(): every full batch pauses
    msgs = backlog(15)
    store.insert_many(msgs, 3)
    sink = Seen(10)
    cfg = SchedulerWorkerConfig(
        batch_size=10,
        poll_interval=timedelta(milliseconds=20),
        min_cycle_delay=timedelta(seconds=5),
    )
    handle = SchedulerWorker(store, sink, cfg).start()
    assert sink.all_seen.wait(5)
    time.sleep(0.05)  # into the pause
    assert handle.stop(5)
    assert statuses(store, msgs) == [ScheduleStatus.DELIVERED] * 10 + [ScheduleStatus.PENDING] * 5
    for m in msgs:
        snap = store.inspect(m.schedule_id)
        assert snap is not None and snap.leased_until is None


def test_the_sqlite_store_drains_with_the_fused_call(tmp_path: Any) -> None:
    msgs = backlog(35)
    with SqliteScheduleStore.open(tmp_path / "fused.db") as store:
        assert store.fuses_settle_and_claim
        sink = drain(store, msgs)
        assert sorted(sink.ids) == sorted(m.schedule_id for m in msgs)
        assert statuses(store, msgs) == [ScheduleStatus.DELIVERED] * 35


def test_the_postgres_store_drains_with_the_fused_call(tmp_path: Any) -> None:
    from tests.pg import postgres_store_factory

    factory = postgres_store_factory()
    if factory is None:
        pytest.skip("no PostgreSQL server (HEXERACT_TEST_POSTGRES_URL)")
    msgs = backlog(35)
    store = factory(tmp_path)
    try:
        assert store.fuses_settle_and_claim
        sink = drain(store, msgs)
        assert sorted(sink.ids) == sorted(m.schedule_id for m in msgs)
        assert statuses(store, msgs) == [ScheduleStatus.DELIVERED] * 35
    finally:
        store.close()


def test_a_fused_call_that_fails_on_sqlite_records_nothing(tmp_path: Any) -> None:
    """Another connection holds the write lock past the busy timeout: the fused call
    raises StoreError, and neither the settlement nor the claim happened."""
    db = tmp_path / "locked.db"
    with SqliteScheduleStore.open(db, busy_timeout=timedelta(milliseconds=50)) as store:
        msgs = backlog(3)
        store.insert_many(msgs, 3)
        [occ] = store.claim_due(SYSTEM_CLOCK.now(), 1, 30 * S)
        done = Settlement.delivered(occ.message.schedule_id, occ.leased_until)
        with SqliteScheduleStore.open(db) as other:
            blocker = other._conn  # the other connection's own transaction
            assert blocker is not None
            blocker.execute("BEGIN IMMEDIATE")
            try:
                with pytest.raises(StoreError, match="busy timeout"):
                    store.settle_and_claim([done], SYSTEM_CLOCK.now(), 10, 30 * S)
            finally:
                blocker.execute("ROLLBACK")
        assert statuses(store, msgs) == [ScheduleStatus.PENDING] * 3
        assert [store.inspect(m.schedule_id).attempts for m in msgs] == [1, 0, 0]  # type: ignore[union-attr]
        assert store.settle([done]) == [True], "the lease is still the claim's"


# -- pacing a drain ------------------------------------------------------------------------


def test_a_drain_pauses_only_while_other_connections_write() -> None:
    cfg = SchedulerWorkerConfig(batch_size=10, min_cycle_delay=timedelta(milliseconds=2))
    pacer = Pacer(SYSTEM_CLOCK, cfg, True)
    pacer.observe(7)
    assert pacer.tracks_commits, "data_version() told a number"
    assert pacer.after_cycle(9) is None, "not a full batch: idle"
    assert pacer.after_cycle(10) == 0.0, "nobody else writes: at once"
    pacer.observe(8)  # another connection committed
    assert pacer.after_cycle(10) == 0.002
    pacer.observe(8)
    assert pacer.after_cycle(10) == 0.002, f"for {SHARED_FOR_S} s after their last commit"


def test_a_store_without_data_version_pauses_after_every_full_batch() -> None:
    cfg = SchedulerWorkerConfig(batch_size=10, min_cycle_delay=timedelta(milliseconds=2))
    pacer = Pacer(SYSTEM_CLOCK, cfg, True)
    pacer.observe(None)
    assert not pacer.tracks_commits
    assert pacer.after_cycle(10) == 0.002
    zero = SchedulerWorkerConfig(batch_size=10, min_cycle_delay=timedelta(0))
    shared = Pacer(SYSTEM_CLOCK, zero, True)
    shared.observe(1)
    shared.observe(2)
    assert shared.after_cycle(10) == 0.0
    assert math.isfinite(SHARED_FOR_S) and SHARED_FOR_S > 0


def test_a_store_whose_writers_do_not_take_turns_never_pauses() -> None:
    """Row locks (PostgreSQL, MySQL): nothing waits for the drain's lock, so a full
    batch is followed by the next at once, whoever else writes."""
    cfg = SchedulerWorkerConfig(batch_size=10, min_cycle_delay=timedelta(milliseconds=2))
    pacer = Pacer(SYSTEM_CLOCK, cfg, False)
    pacer.observe(None)
    assert pacer.after_cycle(10) == 0.0
    pacer.observe(1)
    pacer.observe(2)  # another connection committed
    assert pacer.after_cycle(10) == 0.0
    assert pacer.after_cycle(9) is None, "not a full batch: idle"


class SharedStore(InMemoryScheduleStore):
    """A store whose ``data_version()`` moves at every look: another connection
    commits all the time."""

    def __init__(self) -> None:
        super().__init__()
        self.version = 0

    def data_version(self) -> int:
        self.version += 1
        return self.version


def test_a_shared_store_is_drained_at_the_min_cycle_delay_pace() -> None:
    store = SharedStore()
    store.insert_many(backlog(7), 3)
    sink = Seen(7)
    cfg = SchedulerWorkerConfig(
        batch_size=2,
        poll_interval=timedelta(milliseconds=20),
        min_cycle_delay=timedelta(milliseconds=150),
    )
    started = time.monotonic()
    with SchedulerWorker(store, sink, cfg).start():
        assert sink.all_seen.wait(5)
    # three full batches; the version is first compared after the first one
    assert time.monotonic() - started >= 0.3, "a pause after the second and third"


class RowLocked(SharedStore):
    """The same, with writers that do not wait for one lock (as on PostgreSQL)."""

    @property
    def writers_take_turns(self) -> bool:
        return False


def test_a_store_whose_writers_do_not_take_turns_is_drained_without_pauses() -> None:
    store = RowLocked()
    store.insert_many(backlog(7), 3)
    sink = Seen(7)
    cfg = SchedulerWorkerConfig(
        batch_size=2, poll_interval=timedelta(milliseconds=20), min_cycle_delay=timedelta(5)
    )
    with SchedulerWorker(store, sink, cfg).start():
        assert sink.all_seen.wait(4), "no pause of 5 s after a full batch"


# -- the asyncio loop ------------------------------------------------------------------------


async def _until(check: Any, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


def test_run_async_settles_each_full_batch_with_the_next_claim() -> None:
    store = Recording()
    msgs = backlog(25)
    store.insert_many(msgs, 3)
    sink = Seen(len(msgs))

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(SchedulerWorker(store, sink, BATCH).run_async(stop))
        await _until(lambda: ScheduleStatus.PENDING not in statuses(store, msgs))
        stop.set()
        await task

    asyncio.run(main())
    assert sorted(sink.ids) == sorted(m.schedule_id for m in msgs), "each once"
    assert statuses(store, msgs) == [ScheduleStatus.DELIVERED] * 25
    assert store.calls[:4] == [
        "claim_due",
        "settle_and_claim 10",
        "settle_and_claim 10",
        "settle 5",
    ]


def test_cancelling_run_async_while_a_batch_is_carried_settles_it() -> None:
    store = InMemoryScheduleStore()  # no data_version(): every full batch pauses
    msgs = backlog(15)
    store.insert_many(msgs, 3)
    sink = Seen(10)
    cfg = SchedulerWorkerConfig(
        batch_size=10,
        poll_interval=timedelta(milliseconds=20),
        min_cycle_delay=timedelta(seconds=5),
    )

    async def main() -> None:
        task = asyncio.create_task(SchedulerWorker(store, sink, cfg).run_async())
        await _until(sink.all_seen.is_set)
        await asyncio.sleep(0.05)  # into the pause
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert statuses(store, msgs) == [ScheduleStatus.DELIVERED] * 10 + [ScheduleStatus.PENDING] * 5
    for m in msgs:
        snap = store.inspect(m.schedule_id)
        assert snap is not None and snap.leased_until is None


@pytest.mark.parametrize("mode", ["thread", "async"])
def test_a_pause_longer_than_the_held_leases_settles_the_batch_first(mode: str) -> None:
    """A full batch's settlement is held for the next claim; a min_cycle_delay that
    outlasts its leases must not leave it unwritten meanwhile (at its last attempt the
    sweep would dead-letter a delivered occurrence as if its worker had crashed)."""
    store = InMemoryScheduleStore()  # no data_version: it pauses after every full batch
    now = datetime.now(UTC)
    messages = [
        ScheduledMessage.delay(Target.mediator(), now - timedelta(seconds=1), "x", {"i": i})
        for i in range(2)
    ]
    for message in messages:
        store.insert(message, 1)
    delivered: list[Any] = []
    config = SchedulerWorkerConfig(
        batch_size=2,
        dispatch_timeout=timedelta(milliseconds=200),
        lease=timedelta(milliseconds=400),
        min_cycle_delay=timedelta(milliseconds=900),
    )
    worker = SchedulerWorker(store, delivered.append, config)
    if mode == "thread":
        handle = worker.start()
        time.sleep(0.7)  # inside the pause, past the leases
        statuses = [store.inspect(m.schedule_id) for m in messages]
        assert handle.stop(10)
    else:

        async def main() -> list[Any]:
            stop = asyncio.Event()
            task = asyncio.create_task(worker.run_async(stop))
            await asyncio.sleep(0.7)
            found = [store.inspect(m.schedule_id) for m in messages]
            stop.set()
            await asyncio.wait_for(task, 10)
            return found

        statuses = asyncio.run(main())
    assert len(delivered) == 2
    assert [s.status.value if s else None for s in statuses] == ["delivered", "delivered"]
    final = [store.inspect(m.schedule_id) for m in messages]
    assert [s.status.value if s else None for s in final] == ["delivered", "delivered"]
