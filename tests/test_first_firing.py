"""The first firing of a cron message built without ``first_occurrence`` is taken from
the clock of the store it is scheduled on (insert, insert_many, schedule, ensure), not
from the clock the message was built with: a test frozen on a ManualClock gets its first
firing on the frozen date, on every store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from hexeract_lite import ManualClock, ScheduledMessage, SchedulerControl, ScheduleStore, Target
from hexeract_lite.store.memory import InMemoryScheduleStore
from hexeract_lite.store.sqlite import SqliteScheduleStore
from hexeract_lite.worker import SchedulerWorker

from .conftest import T0, FrozenTime

ELSEWHERE = ManualClock(T0 + timedelta(days=100, minutes=7))
"""A clock other than the store's (a message built on the real date, say)."""
HOURLY_AFTER_T0 = T0 + timedelta(hours=1)


def built(name: str | None = None) -> ScheduledMessage:
    return ScheduledMessage.cron(
        Target.outbox(), "0 * * * *", None, "e", {}, clock=ELSEWHERE, name=name
    )


def first(store: ScheduleStore, msg: ScheduledMessage) -> datetime:
    snap = store.inspect(msg.schedule_id)
    assert snap is not None
    return snap.scheduled_for


def test_insert_and_insert_many_place_the_first_firing_on_the_store_clock(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    one, two, three = built(), built(), built()
    assert one.scheduled_for == T0 + timedelta(days=100, hours=1)  # the builder's clock
    store.insert(one, 3)
    store.insert_many([two, three], 3)
    assert [first(store, m) for m in (one, two, three)] == [HOURLY_AFTER_T0] * 3


def test_schedule_and_ensure_place_it_on_the_store_clock(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    control = SchedulerControl(store)
    scheduled = built()
    control.schedule(scheduled)
    named = built(name="jobs.hourly")
    store.ensure(named, 3)
    assert first(store, scheduled) == first(store, named) == HOURLY_AFTER_T0
    frozen.move_to(HOURLY_AFTER_T0)
    assert SchedulerWorker(store, lambda m: None).run_once().rescheduled == 2


def test_a_given_first_occurrence_is_kept(store: ScheduleStore, frozen: FrozenTime) -> None:
    at = T0 + timedelta(days=3, minutes=30)
    msg = ScheduledMessage.cron(Target.outbox(), "0 * * * *", at, "e", {}, clock=ELSEWHERE)
    store.insert(msg, 3)
    assert first(store, msg) == at


def test_a_store_on_a_manual_clock_and_a_message_on_the_default_clock(tmp_path: Path) -> None:
    """The trap as a new user meets it: no clock given to the message at all."""
    frozen_on = datetime(2026, 3, 27, 8, 30, tzinfo=UTC)
    for store in (
        InMemoryScheduleStore(clock=ManualClock(frozen_on)),
        SqliteScheduleStore.open(tmp_path / "manual.db", clock=ManualClock(frozen_on)),
    ):
        msg = ScheduledMessage.cron(Target.outbox(), "0 9 * * *", event_type="e")
        SchedulerControl(store).schedule(msg)
        assert first(store, msg) == datetime(2026, 3, 27, 9, 0, tzinfo=UTC)
        store.close()
