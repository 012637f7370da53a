"""Named schedules with zones, intervals and misfire grace, on
every store: ensure passes them through and compares them (a changed zone, period or
grace is an update; the same is unchanged), update accepts a zoned rule and a grace,
and a recurring interval schedule in flight follows the lease rule like a cron one."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from hexeract_lite import (
    InvalidArgument,
    ScheduledMessage,
    SchedulerControl,
    ScheduleSnapshot,
    ScheduleStore,
    Target,
)
from hexeract_lite.errors import NotChangeable
from hexeract_lite.store.base import EnsureResult
from hexeract_lite.trigger import CronExpression

from .conftest import T0, FrozenTime

LEASE = timedelta(seconds=30)
RULE = "0 9 * * *"


def snap_of(store: ScheduleStore, sid: uuid.UUID) -> ScheduleSnapshot:
    snap = store.inspect(sid)
    assert isinstance(snap, ScheduleSnapshot)
    return snap


def _zoned_next(tz: str | None) -> object:
    return CronExpression.parse(RULE, tz=tz).next_occurrence(T0)


def test_a_cron_first_firing_defaults_to_the_zoned_rules_next_instant(
    frozen: FrozenTime,
) -> None:
    paris = ScheduledMessage.cron(Target.mediator(), RULE, event_type="e", tz="Europe/Paris")
    utc = ScheduledMessage.cron(Target.mediator(), RULE, event_type="e")
    assert paris.scheduled_for == _zoned_next("Europe/Paris") != utc.scheduled_for
    assert paris.trigger.expression == f"CRON_TZ=Europe/Paris {RULE}"


def test_ensure_compares_the_zone(store: ScheduleStore, frozen: FrozenTime) -> None:
    control = SchedulerControl(store)
    name = "app.report"
    assert control.ensure(name, cron=RULE, tz="Europe/Paris", event_type="r") == "created"
    sid = control.id_of(name)
    assert snap_of(store, sid).scheduled_for == _zoned_next("Europe/Paris")
    assert control.ensure(name, cron=RULE, tz="Europe/Paris", event_type="r") == "unchanged"
    assert control.ensure(name, cron=RULE, tz="America/New_York", event_type="r") == "updated"
    snap = snap_of(store, sid)
    assert snap.trigger.expression == f"CRON_TZ=America/New_York {RULE}"
    assert snap.scheduled_for == _zoned_next("America/New_York")
    again = control.ensure(name, cron=RULE, tz="America/New_York", event_type="r")
    assert again is EnsureResult.UNCHANGED
    # the prefix form is the same rule as tz=
    prefixed = f"CRON_TZ=America/New_York {RULE}"
    assert control.ensure(name, cron=prefixed, event_type="r") is EnsureResult.UNCHANGED
    assert control.ensure(name, cron=RULE, event_type="r") is EnsureResult.UPDATED  # UTC


def test_ensure_compares_the_misfire_grace(store: ScheduleStore, frozen: FrozenTime) -> None:
    control = SchedulerControl(store)
    ten, five = timedelta(minutes=10), timedelta(minutes=5)
    name = "app.sync"
    assert control.ensure(name, cron=RULE, event_type="s", misfire_grace=ten) == "created"
    sid = control.id_of(name)
    assert snap_of(store, sid).misfire_grace == ten
    assert control.ensure(name, cron=RULE, event_type="s", misfire_grace=ten) == "unchanged"
    assert control.ensure(name, cron=RULE, event_type="s", misfire_grace=five) == "updated"
    assert snap_of(store, sid).misfire_grace == five
    assert control.ensure(name, cron=RULE, event_type="s") == "updated"
    assert snap_of(store, sid).misfire_grace is None
    at = T0 + timedelta(hours=1)
    assert control.ensure("app.once", at=at, event_type="o", misfire_grace=ten) == "created"
    assert snap_of(store, control.id_of("app.once")).misfire_grace == ten


def test_ensure_of_an_interval_keeps_its_grid_across_starts(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    control = SchedulerControl(store)
    name = "app.refresh"
    assert control.ensure(name, every="90m", event_type="c") == "created"
    sid = control.id_of(name)
    first = snap_of(store, sid)
    assert first.trigger.kind == "interval" and first.scheduled_for > T0
    frozen.shift(timedelta(minutes=7))  # a later start: same period, same grid
    assert control.ensure(name, every=timedelta(minutes=90), event_type="c") == "unchanged"
    assert snap_of(store, sid) == first, "nothing written"
    assert control.ensure(name, every="1h", event_type="c") == "updated"
    assert snap_of(store, sid).trigger.expression != first.trigger.expression
    with pytest.raises(NotChangeable, match="interval schedule, declared as cron"):
        control.ensure(name, cron=RULE, event_type="c")


def test_update_accepts_a_zoned_rule_and_a_grace(store: ScheduleStore, frozen: FrozenTime) -> None:
    control = SchedulerControl(store)
    control.ensure("app.r", cron=RULE, event_type="r")
    sid = control.id_of("app.r")
    assert control.update("app.r", cron=RULE, tz="Europe/Paris")
    snap = snap_of(store, sid)
    assert snap.trigger.expression == f"CRON_TZ=Europe/Paris {RULE}"
    assert snap.scheduled_for == _zoned_next("Europe/Paris")
    assert not control.update("app.r", cron=f"CRON_TZ=Europe/Paris {RULE}")
    assert control.update("app.r", misfire_grace=timedelta(minutes=3))
    assert snap_of(store, sid).misfire_grace == timedelta(minutes=3)
    assert not control.update("app.r", misfire_grace=timedelta(minutes=3))
    assert control.update("app.r", misfire_grace=None)
    assert snap_of(store, sid).misfire_grace is None
    with pytest.raises(InvalidArgument, match="tz= goes with cron="):
        control.update("app.r", tz="Europe/Paris")


def test_an_interval_in_flight_follows_the_lease_rule(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """An interval schedule is recurring: a change or run-now while a firing is in
    flight goes to the firing after it (not refused as a one-shot's is)."""
    msg = ScheduledMessage.every(Target.mediator(), "1h", T0, "c", {}, name="app.tick")
    store.ensure(msg, 3)
    [occ] = store.claim_due(T0, 5, LEASE)
    assert store.run_now(msg.schedule_id)
    assert store.move(msg.schedule_id, T0 + timedelta(hours=5))
    assert snap_of(store, msg.schedule_id).leased_until == occ.leased_until


def test_ensure_refuses_tz_without_cron_and_two_triggers(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    control = SchedulerControl(store)
    with pytest.raises(InvalidArgument, match="tz= goes with cron="):
        control.ensure("app.x", every="1h", tz="Europe/Paris", event_type="x")
    with pytest.raises(InvalidArgument, match="exactly one"):
        control.ensure("app.x", every="1h", cron=RULE, event_type="x")
    assert store.list_pending() == []
