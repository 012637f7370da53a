"""The SQLite store against the in-memory reference: same random operations, same results.

A Hypothesis ``RuleBasedStateMachine`` drives an :class:`InMemoryScheduleStore` and a
:class:`SqliteScheduleStore` sharing one :class:`ManualClock` with the same operations:
inserts (single and batched, with duplicates), named schedules (ensure, update, move,
run now, the named listing), claims, acknowledgements with current,
stale and made-up leases, failures, dead-letters, sweeps, pause, resume, cancel, replay
and clock moves. After every step both must have returned the same value (or raised the
same type of error) and must show the same snapshots, listings and wake-up hint.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    rule,
)

from hexeract_lite import (
    InMemoryScheduleStore,
    ManualClock,
    ScheduledMessage,
    ScheduleStore,
    Target,
)
from hexeract_lite.store.base import Change
from hexeract_lite.store.sqlite import SqliteScheduleStore
from hexeract_lite.trigger import CronExpression
from tests.conftest import examples

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
MS = timedelta(milliseconds=1)

# Few distinct offsets, so ties on scheduled_for (broken by schedule id) are common.
offsets_ms = st.sampled_from([-3000, -1000, -1, 0, 0, 1, 500, 1000, 2000, 5000])
cron_rules = st.sampled_from(["*/2 * * * * *", "* * * * *", "0 * * * * *"])
# Ids from a small pool collide now and then, so duplicate inserts get exercised too.
names = st.sampled_from(["app.a", "app.b", "x.c"])
ids = st.one_of(
    st.uuids(),
    st.sampled_from([uuid.UUID(int=n) for n in (1, 2, 3, 2**127, 2**128 - 1)]),
)


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", value) or ("error", (type, schedule_id or None))."""
    try:
        return ("ok", call())
    except Exception as exc:  # the comparison is the assertion
        return ("error", (type(exc), getattr(exc, "schedule_id", None)))


class StoresAgree(RuleBasedStateMachine):
    """Both stores see the same operations and must agree on everything."""

    schedules = Bundle("schedules")
    leases = Bundle("leases")

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(T0)
        self.tmp = Path(tempfile.mkdtemp(prefix="hexeract-sm-"))
        self.memory = InMemoryScheduleStore(clock=self.clock)
        self.store = self.open_store()
        self.known: set[uuid.UUID] = set()

    def open_store(self) -> ScheduleStore:
        """The store under test, compared with the in-memory reference."""
        return SqliteScheduleStore.open(self.tmp / "sm.db", clock=self.clock, durability="normal")

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def both(self, op: Callable[[ScheduleStore], Any]) -> Any:
        expected = _outcome(lambda: op(self.memory))
        actual = _outcome(lambda: op(self.store))
        assert actual == expected
        return expected[1] if expected[0] == "ok" else None

    def message(self, sid: uuid.UUID, offset: int, cron: str | None, bus: bool) -> ScheduledMessage:
        at = self.clock.now() + offset * MS
        target = Target.bus("a.b") if bus else Target.mediator()
        if cron is None:
            return ScheduledMessage.delay(target, at, "ev", {"o": offset}, schedule_id=sid)
        return ScheduledMessage.cron(target, cron, at, "tick", [offset], schedule_id=sid)

    # -- inserts -----------------------------------------------------------------

    @initialize(target=schedules, sid=ids, offset=offsets_ms)
    def first(self, sid: uuid.UUID, offset: int) -> uuid.UUID:
        msg = self.message(sid, offset, None, False)
        self.both(lambda s: s.insert(msg, 2))
        self.known.add(sid)
        return sid

    @rule(
        target=schedules,
        sid=ids,
        offset=offsets_ms,
        cron=st.none() | cron_rules,
        bus=st.booleans(),
        max_attempts=st.integers(1, 3),
    )
    def insert(
        self, sid: uuid.UUID, offset: int, cron: str | None, bus: bool, max_attempts: int
    ) -> uuid.UUID:
        msg = self.message(sid, offset, cron, bus)
        self.both(lambda s: s.insert(msg, max_attempts))
        self.known.add(sid)
        return sid

    @rule(sid=schedules, offset=offsets_ms)
    def insert_existing(self, sid: uuid.UUID, offset: int) -> None:
        msg = self.message(sid, offset, None, False)
        self.both(lambda s: s.insert(msg, 3))

    @rule(
        target=schedules,
        batch=st.lists(st.tuples(ids, offsets_ms, st.none() | cron_rules), max_size=5),
        max_attempts=st.integers(1, 3),
    )
    def insert_many(self, batch: list[tuple[uuid.UUID, int, str | None]], max_attempts: int) -> Any:
        msgs = [self.message(sid, off, cron, False) for sid, off, cron in batch]
        self.both(lambda s: s.insert_many(msgs, max_attempts))
        self.known.update(sid for sid, _, _ in batch)
        return multiple(*(sid for sid, _, _ in batch))

    # -- the worker's side ---------------------------------------------------------

    @rule(
        target=leases,
        batch_size=st.integers(1, 4),
        lease_ms=st.sampled_from([1, 999, 1000, 3000, 10_000]),
        skew=st.sampled_from([-1000, 0, 0, 1, 2000]),
    )
    def claim(self, batch_size: int, lease_ms: int, skew: int) -> Any:
        now = self.clock.now() + skew * MS
        claimed = self.both(lambda s: s.claim_due(now, batch_size, lease_ms * MS))
        return multiple(*((c.message.schedule_id, c.leased_until) for c in claimed or []))

    @rule(target=leases, ahead_ms=st.sampled_from([0, 1000, 3000]))
    def claim_one(self, ahead_ms: int) -> Any:
        """Claims are most of a worker's life (and one from a clock running ahead leaves
        rows whose lease ends before their scheduled_for: the wake-up hint's hard case)."""
        now = self.clock.now() + ahead_ms * MS
        claimed = self.both(lambda s: s.claim_due(now, 1, 1000 * MS))
        return multiple(*((c.message.schedule_id, c.leased_until) for c in claimed or []))

    @rule(
        held=leases,
        ack=st.sampled_from(["delivered", "reschedule", "failed", "dead_lettered"]),
        amount_ms=st.sampled_from([0, 1, 1500, 60_000]),
    )
    def acknowledge(self, held: tuple[uuid.UUID, datetime], ack: str, amount_ms: int) -> None:
        sid, lease = held
        self._ack(sid, lease, ack, amount_ms)

    @rule(held=leases, retry_ms=st.sampled_from([0, 500]))
    def fail_soon(self, held: tuple[uuid.UUID, datetime], retry_ms: int) -> None:
        """A quick retry after a claim made ahead of the clock: the row's lease now ends
        before its scheduled_for."""
        sid, lease = held
        self._ack(sid, lease, "failed", retry_ms)

    @rule(
        held=consumes(leases),
        ack=st.sampled_from(["delivered", "reschedule", "failed", "dead_lettered"]),
    )
    def acknowledge_once(self, held: tuple[uuid.UUID, datetime], ack: str) -> None:
        sid, lease = held
        self._ack(sid, lease, ack, 1000)

    @rule(
        sid=schedules,
        token=st.sampled_from([T0, T0 + 1000 * MS, T0 + 500 * MS + timedelta(microseconds=1)]),
        ack=st.sampled_from(["delivered", "reschedule", "failed", "dead_lettered"]),
    )
    def acknowledge_with_a_made_up_lease(self, sid: uuid.UUID, token: datetime, ack: str) -> None:
        self._ack(sid, token, ack, 0)

    def _ack(self, sid: uuid.UUID, lease: datetime, ack: str, amount_ms: int) -> None:
        amount = amount_ms * MS
        if ack == "delivered":
            self.both(lambda s: s.mark_delivered(sid, lease))
        elif ack == "reschedule":
            nxt = self.clock.now() + amount
            self.both(lambda s: s.reschedule(sid, nxt, lease))
        elif ack == "failed":
            self.both(lambda s: s.mark_failed(sid, amount, "Boom: é", lease))
        else:
            self.both(lambda s: s.mark_dead_lettered(sid, "poison", lease))

    @rule()
    def sweep(self) -> None:
        self.both(lambda s: s.dead_letter_exhausted())

    # -- control ----------------------------------------------------------------

    @rule(sid=schedules | ids, paused=st.booleans())
    def set_paused(self, sid: uuid.UUID, paused: bool) -> None:
        self.both(lambda s: s.set_paused(sid, paused))

    @rule(sid=schedules | ids, next_ms=st.none() | offsets_ms)
    def resume(self, sid: uuid.UUID, next_ms: int | None) -> None:
        nxt = None if next_ms is None else self.clock.now() + next_ms * MS
        self.both(lambda s: s.resume(sid, nxt))

    @rule(sid=schedules | ids)
    def cancel(self, sid: uuid.UUID) -> None:
        self.both(lambda s: s.cancel(sid))

    @rule(sid=schedules | ids)
    def replay(self, sid: uuid.UUID) -> None:
        self.both(lambda s: s.replay(sid))

    # -- named schedules and changes in place -------------------------------------

    @rule(
        target=schedules,
        name=names,
        cron=st.none() | cron_rules,
        payload=st.integers(0, 1),
        max_attempts=st.integers(1, 3),
    )
    def ensure(self, name: str, cron: str | None, payload: int, max_attempts: int) -> uuid.UUID:
        if cron is None:
            at = self.clock.now() + 1000 * MS
            msg = ScheduledMessage.delay(Target.mediator(), at, "ev", payload, name=name)
        else:
            msg = ScheduledMessage.cron(
                Target.mediator(),
                cron,
                event_type="tick",
                payload=payload,
                name=name,
                clock=self.clock,
            )
        self.both(lambda s: s.ensure(msg, max_attempts))
        self.known.add(msg.schedule_id)
        return msg.schedule_id

    @rule(
        sid=schedules | ids,
        cron=st.none() | cron_rules,
        payload=st.none() | st.integers(0, 1),
        max_attempts=st.none() | st.integers(1, 3),
    )
    def update(
        self, sid: uuid.UUID, cron: str | None, payload: int | None, max_attempts: int | None
    ) -> None:
        change = Change(
            cron=None if cron is None else CronExpression.parse(cron),
            payload_json=None if payload is None else str(payload),
            max_attempts=max_attempts,
        )
        self.both(lambda s: s.update_schedule(sid, change))

    @rule(sid=schedules | ids, offset=offsets_ms)
    def move(self, sid: uuid.UUID, offset: int) -> None:
        at = self.clock.now() + offset * MS
        self.both(lambda s: s.move(sid, at))

    @rule(sid=schedules | ids)
    def run_now(self, sid: uuid.UUID) -> None:
        self.both(lambda s: s.run_now(sid))

    @rule(prefix=st.sampled_from(["app.", "x.", ""]))
    def list_named(self, prefix: str) -> None:
        self.both(lambda s: s.list_named(prefix))

    @rule(sid=schedules | ids)
    def inspect(self, sid: uuid.UUID) -> None:
        self.both(lambda s: s.inspect(sid))

    @rule(limit=st.integers(1, 4))
    def listings(self, limit: int) -> None:
        self.both(lambda s: s.list_pending(limit))
        self.both(lambda s: s.list_dead_letter(limit))

    # -- time ----------------------------------------------------------------

    @rule(step_ms=st.sampled_from([1, 499, 1000, 1001, 2000, 10_000, 120_000]))
    def advance(self, step_ms: int) -> None:
        self.clock.advance(step_ms * MS)

    # -- after every step ----------------------------------------------------

    @invariant()
    def same_state(self) -> None:
        for sid in self.known:
            assert self.store.inspect(sid) == self.memory.inspect(sid)
        assert self.store.list_pending(1000) == self.memory.list_pending(1000)
        assert self.store.list_dead_letter(1000) == self.memory.list_dead_letter(1000)
        assert self.store.next_wakeup() == self.memory.next_wakeup()


StoresAgree.TestCase.settings = settings(
    max_examples=examples(75),
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
StoresAgree.TestCase.pytestmark = [pytest.mark.slow]  # type: ignore[attr-defined]  # ~5 s
test_sqlite_store_agrees_with_the_memory_store = StoresAgree.TestCase
