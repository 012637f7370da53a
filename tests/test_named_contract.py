"""The store contract for named schedules and changes in place, on every
store: ensure, update, move (reschedule), run_now, list_named, and the lease rule
(a change during a firing in flight: that firing completes under the old values, the
next follows the new rule)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest

from hexeract_lite import (
    EnsureResult,
    InvalidArgument,
    InvalidMessage,
    ScheduledMessage,
    ScheduleNotFound,
    SchedulerControl,
    SchedulerWorker,
    ScheduleSnapshot,
    ScheduleStatus,
    ScheduleStore,
    Target,
    name_id,
)
from hexeract_lite.errors import NotChangeable
from hexeract_lite.store.base import Change
from hexeract_lite.trigger import CronExpression

from .conftest import T0, FrozenTime

LEASE = timedelta(seconds=30)
S = timedelta(seconds=1)
HOUR = timedelta(hours=1)


def daily(
    name: str = "app.backup", rule: str = "0 3 * * *", payload: object = None
) -> ScheduledMessage:
    return ScheduledMessage.cron(
        Target.mediator(), rule, event_type="backup", payload=payload or {"k": 1}, name=name
    )


def once(name: str = "app.remind", at: datetime = T0 + HOUR) -> ScheduledMessage:
    return ScheduledMessage.delay(Target.outbox(), at, "remind", {"n": 1}, name=name)


def snap_of(store: ScheduleStore, sid: uuid.UUID):  # type: ignore[no-untyped-def]
    snap = store.inspect(sid)
    assert snap is not None
    return snap


def _next(rule: str, after: datetime) -> datetime:
    nxt = CronExpression.parse(rule).next_occurrence(after)
    assert nxt is not None
    return nxt


# -- ensure ----------------------------------------------------------------------------


def test_ensure_creates_then_leaves_alone(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = daily()
    assert msg.schedule_id == name_id("app.backup")
    assert store.ensure(msg, 3) is EnsureResult.CREATED
    snap = snap_of(store, msg.schedule_id)
    assert snap.name == "app.backup" and snap.scheduled_for == _next("0 3 * * *", T0)
    frozen.shift(HOUR)  # a later start: the first firing computed then differs
    again = daily(payload={"k": 1})
    assert store.ensure(again, 3) is EnsureResult.UNCHANGED
    assert snap_of(store, msg.schedule_id) == snap, "nothing written"
    assert len(store.list_pending()) == 1


def test_ensure_creates_afresh_a_cancelled_row_pruned_under_it(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """The insert meets the cancelled row, a prune deletes it before ensure reads it
    back: the schedule is created afresh, no ScheduleNotFound."""
    msg = daily()
    store.ensure(msg, 3)
    assert store.cancel(msg.schedule_id)
    frozen.shift(2 * HOUR)
    modify = store.modify_record
    pruned: list[int] = []

    def prune_first(sid: uuid.UUID, plan: Any) -> Any:
        if not pruned:
            pruned.append(store.prune(HOUR))
        return modify(sid, plan)

    store.modify_record = prune_first  # type: ignore[method-assign,assignment]
    assert store.ensure(msg, 3) is EnsureResult.CREATED
    assert pruned == [1]
    snap = snap_of(store, msg.schedule_id)
    assert snap.status is ScheduleStatus.PENDING and snap.name == msg.name


def test_ensure_compares_payloads_as_json_values(store: ScheduleStore, frozen: FrozenTime) -> None:
    store.ensure(daily(payload={"a": 1, "b": [1, 2]}), 3)
    assert store.ensure(daily(payload={"b": [1, 2], "a": 1}), 3) is EnsureResult.UNCHANGED


@pytest.mark.parametrize("what", ["rule", "payload", "event_type", "target", "budget"])
def test_ensure_updates_in_place(store: ScheduleStore, frozen: FrozenTime, what: str) -> None:
    store.ensure(daily(), 3)
    msg, budget = daily(), 3
    if what == "rule":
        msg = daily(rule="0 4 * * *")
    elif what == "payload":
        msg = daily(payload={"k": 2})
    elif what == "event_type":
        msg = ScheduledMessage.cron(
            Target.mediator(), "0 3 * * *", event_type="other", payload={"k": 1}, name="app.backup"
        )
    elif what == "target":
        msg = ScheduledMessage.cron(
            Target.bus("x.y"), "0 3 * * *", event_type="backup", payload={"k": 1}, name="app.backup"
        )
    else:
        budget = 7
    assert store.ensure(msg, budget) is EnsureResult.UPDATED
    snap = snap_of(store, msg.schedule_id)
    assert snap.event_type == msg.event_type and snap.target == msg.target
    assert snap.payload_json.replace(" ", "") == msg.payload_json
    assert snap.max_attempts == budget and snap.trigger == msg.trigger
    rule = "0 4 * * *" if what == "rule" else "0 3 * * *"
    assert snap.scheduled_for == _next(rule, T0)
    assert store.ensure(msg, budget) is EnsureResult.UNCHANGED
    assert len(store.list_pending()) == 1


def test_ensure_during_a_live_lease_defers_the_new_rule(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    first = T0 + S
    old = ScheduledMessage.cron(
        Target.mediator(), "0 3 * * *", first, "backup", {"v": "old"}, name="app.backup"
    )
    store.ensure(old, 3)
    now = frozen.shift(2 * S)
    [occ] = store.claim_due(now, 5, LEASE)
    assert store.ensure(daily(rule="0 4 * * *", payload={"v": "new"}), 3) is EnsureResult.UPDATED
    snap = snap_of(store, old.schedule_id)
    assert snap.leased_until == occ.leased_until, "the lease is untouched"
    assert snap.scheduled_for == first, "the firing in flight keeps its instant"
    assert occ.message.payload == {"v": "old"}, "it was handed out with the old values"
    # the worker acknowledges with the old rule's next instant: the new rule wins
    assert store.reschedule(old.schedule_id, _next("0 3 * * *", now), occ.leased_until)
    snap = snap_of(store, old.schedule_id)
    assert snap.scheduled_for == _next("0 4 * * *", now) and snap.leased_until is None
    assert snap.payload_json.replace(" ", "") == '{"v":"new"}'


def test_ensure_during_a_live_lease_then_delivered_rearms(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    old = ScheduledMessage.cron(Target.mediator(), "0 3 * * *", T0, "b", 1, name="app.b")
    store.ensure(old, 3)
    [occ] = store.claim_due(T0, 5, LEASE)
    store.ensure(ScheduledMessage.cron(Target.mediator(), "0 4 * * *", T0, "b", 1, name="app.b"), 3)
    assert store.mark_delivered(old.schedule_id, occ.leased_until)
    snap = snap_of(store, old.schedule_id)
    assert snap.status is ScheduleStatus.PENDING and snap.scheduled_for == _next("0 4 * * *", T0)


def test_ensure_brings_back_a_cancelled_schedule(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = daily()
    store.ensure(msg, 3)
    assert store.cancel(msg.schedule_id)
    assert store.ensure(msg, 3) is EnsureResult.CREATED
    snap = snap_of(store, msg.schedule_id)
    assert snap.status is ScheduleStatus.PENDING and snap.cancelled_at is None


def test_ensure_refuses_another_trigger_kind(store: ScheduleStore, frozen: FrozenTime) -> None:
    store.ensure(daily(), 3)
    before = snap_of(store, name_id("app.backup"))
    with pytest.raises(NotChangeable, match=r"app\.backup.*cron schedule, declared as delay"):
        store.ensure(once("app.backup"), 3)
    assert snap_of(store, name_id("app.backup")) == before


def test_ensure_needs_a_name(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = ScheduledMessage.delay(Target.outbox(), T0, "ev", 1)
    with pytest.raises(InvalidArgument, match="named"):
        store.ensure(msg, 3)
    assert store.inspect(msg.schedule_id) is None


@pytest.mark.parametrize("bad", ["", " lead", "x" * 201, "tab\there", "nl\n"])
def test_bad_names_are_refused(bad: str) -> None:
    with pytest.raises(InvalidMessage, match="name"):
        daily(name=bad)


def test_a_named_message_has_its_names_id() -> None:
    with pytest.raises(InvalidMessage, match="not the id of name"):
        ScheduledMessage.delay(Target.outbox(), T0, "e", 1, name="a.b", schedule_id=uuid.uuid4())
    assert name_id("a.b") == uuid.uuid5(uuid.UUID("5d0c6f3e-8a3b-4f1e-9c7a-6b2e1d4f8a90"), "a.b")


# -- update ------------------------------------------------------------------------------


def test_update_changes_the_given_fields(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = daily()
    store.ensure(msg, 3)
    change = Change(payload_json='{"k":9}', max_attempts=4, cron=CronExpression.parse("0 5 * * *"))
    assert store.update_schedule(msg.schedule_id, change)
    snap = snap_of(store, msg.schedule_id)
    assert snap.max_attempts == 4 and snap.payload_json.replace(" ", "") == '{"k":9}'
    assert snap.scheduled_for == _next("0 5 * * *", T0) and snap.event_type == "backup"
    assert not store.update_schedule(msg.schedule_id, change), "the same again: no change"


@pytest.mark.parametrize("state", ["cancelled", "delivered", "dead-lettered"])
def test_changes_refuse_terminal_schedules(
    store: ScheduleStore, frozen: FrozenTime, state: str
) -> None:
    msg = once(at=T0)
    store.ensure(msg, 1)
    if state == "cancelled":
        store.cancel(msg.schedule_id)
    else:
        [occ] = store.claim_due(T0, 1, LEASE)
        if state == "delivered":
            store.mark_delivered(msg.schedule_id, occ.leased_until)
        else:
            store.mark_dead_lettered(msg.schedule_id, "boom", occ.leased_until)
    before = snap_of(store, msg.schedule_id)
    with pytest.raises(NotChangeable, match=f"{msg.schedule_id} is {state}"):
        store.update_schedule(msg.schedule_id, Change(max_attempts=3))
    with pytest.raises(NotChangeable, match=state):
        store.move(msg.schedule_id, T0 + HOUR)
    with pytest.raises(NotChangeable, match=state):
        store.run_now(msg.schedule_id)
    assert snap_of(store, msg.schedule_id) == before


def test_update_of_a_one_shot_rule_is_refused(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = once()
    store.ensure(msg, 1)
    with pytest.raises(NotChangeable, match="delay schedule"):
        store.update_schedule(msg.schedule_id, Change(cron=CronExpression.parse("* * * * *")))
    with pytest.raises(InvalidArgument, match="nothing to change"):
        store.update_schedule(msg.schedule_id, Change())


def test_changes_of_an_unknown_id_are_not_found(store: ScheduleStore, frozen: FrozenTime) -> None:
    sid = uuid.uuid4()
    with pytest.raises(ScheduleNotFound):
        store.update_schedule(sid, Change(max_attempts=2))
    with pytest.raises(ScheduleNotFound):
        store.move(sid, T0)
    with pytest.raises(ScheduleNotFound):
        store.run_now(sid)


# -- move (reschedule) and run_now --------------------------------------------------------


def test_move_sets_the_next_firing(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = once()
    store.ensure(msg, 2)
    assert store.move(msg.schedule_id, T0 + 2 * HOUR)
    snap = snap_of(store, msg.schedule_id)
    assert snap.scheduled_for == T0 + 2 * HOUR and snap.trigger.at == T0 + 2 * HOUR
    assert not store.move(msg.schedule_id, T0 + 2 * HOUR), "already there"


def test_move_to_a_naive_instant_is_refused(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = once()
    store.ensure(msg, 2)
    with pytest.raises(InvalidArgument, match="at"):
        store.move(msg.schedule_id, datetime(2030, 1, 1))
    assert snap_of(store, msg.schedule_id).scheduled_for == T0 + HOUR


def test_a_one_shot_in_flight_cannot_move(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = once(at=T0)
    store.ensure(msg, 2)
    [occ] = store.claim_due(T0, 1, LEASE)
    with pytest.raises(NotChangeable, match="its one firing is in flight or waiting out a retry"):
        store.move(msg.schedule_id, T0 + HOUR)
    assert not store.run_now(msg.schedule_id), "its firing is under way"
    assert store.mark_delivered(msg.schedule_id, occ.leased_until), "the ack still applies"


def test_run_now_makes_a_cron_schedule_due_then_it_follows_its_rule(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = daily()
    store.ensure(msg, 3)
    assert store.run_now(msg.schedule_id)
    [occ] = store.claim_due(T0, 5, LEASE)
    assert occ.message.schedule_id == msg.schedule_id and occ.message.name == "app.backup"
    assert store.reschedule(msg.schedule_id, _next("0 3 * * *", T0), occ.leased_until)
    assert snap_of(store, msg.schedule_id).scheduled_for == _next("0 3 * * *", T0)


def test_run_now_of_a_cron_in_flight_fires_again_after(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = ScheduledMessage.cron(Target.mediator(), "0 3 * * *", T0, "b", 1, name="app.b")
    store.ensure(msg, 3)
    [occ] = store.claim_due(T0, 5, LEASE)
    assert store.run_now(msg.schedule_id)
    now = frozen.shift(S)
    assert store.reschedule(msg.schedule_id, _next("0 3 * * *", now), occ.leased_until)
    [again] = store.claim_due(now, 5, LEASE)
    assert again.message.scheduled_for == T0 and again.attempts == 1


def test_run_now_refuses_a_paused_schedule(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = daily()
    store.ensure(msg, 3)
    store.set_paused(msg.schedule_id, True)
    with pytest.raises(NotChangeable, match="paused"):
        store.run_now(msg.schedule_id)


# -- list_named ----------------------------------------------------------------------------


def test_list_named_lists_a_groups_live_schedules_by_name(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    for name in ("app.b", "app.a", "apple.x", "other.a", "app%.z", "app_.y"):
        store.ensure(daily(name=name), 3)
    store.insert(ScheduledMessage.delay(Target.outbox(), T0, "ev", 1), 3)  # no name
    store.cancel(name_id("app.b"))
    assert [s.name for s in store.list_named("app.")] == ["app.a"]
    assert [s.name for s in store.list_named("app%.")] == ["app%.z"]
    assert [s.name for s in store.list_named("app_.")] == ["app_.y"]


@pytest.mark.parametrize("prefix", [123, None, b"app."])
def test_a_group_prefix_that_is_not_text_is_refused_naming_it(
    store: ScheduleStore, frozen: FrozenTime, prefix: object
) -> None:
    store.ensure(daily(name="app.a"), 3)
    with pytest.raises(InvalidArgument, match=f"prefix must be a str, got {prefix!r}"):
        store.list_named(prefix)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match=f"prefix must be a str, got {prefix!r}"):
        store.modify_named(prefix, lambda row, now: (None, None))  # type: ignore[arg-type]


def _snap(store: ScheduleStore, sid: uuid.UUID) -> ScheduleSnapshot:
    snap = store.inspect(sid)
    assert isinstance(snap, ScheduleSnapshot)
    return snap


def test_a_delivered_one_shot_declared_with_another_instant_is_unchanged_at_every_start(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """A delivered one-shot keeps its status and its instant (its history): declared again with
    another ``at`` it is UNCHANGED at every start, nothing written; its other values are
    still updated, once."""
    from datetime import timedelta

    from hexeract_lite.store.base import EnsureResult

    control = SchedulerControl(store)
    at = frozen.now() + timedelta(minutes=1)
    assert control.ensure("app.welcome", at=at, event_type="e") is EnsureResult.CREATED
    frozen.shift(timedelta(minutes=2))
    assert SchedulerWorker(store, lambda m: None).run_once().delivered == 1
    sid = control.id_of("app.welcome")
    later = frozen.now() + timedelta(days=1)
    for _ in range(3):
        assert control.ensure("app.welcome", at=later, event_type="e") is EnsureResult.UNCHANGED
    snap = _snap(store, sid)
    assert snap.status.value == "delivered" and snap.scheduled_for == at
    # its other values are still updated, once
    assert control.ensure("app.welcome", at=later, event_type="e", payload=1) is (
        EnsureResult.UPDATED
    )
    assert control.ensure("app.welcome", at=later, event_type="e", payload=1) is (
        EnsureResult.UNCHANGED
    )
    assert _snap(store, sid).status.value == "delivered"


def _bad_entries(control: SchedulerControl) -> list[object]:
    bad = control.declare("app.bad", cron="0 4 * * *", event_type="e")
    return [(bad, 0), (bad, "3"), (bad,), (bad, 3, 4)]


@pytest.mark.parametrize("which", range(4))
def test_reconcile_with_a_bad_entry_writes_nothing(
    store: ScheduleStore, frozen: FrozenTime, which: int
) -> None:
    """reconcile checks every entry (a bad budget, a malformed pair) before it writes: one bad
    entry after good ones is InvalidArgument, and nothing is created."""
    from hexeract_lite import InvalidArgument

    control = SchedulerControl(store)
    good = control.declare("app.good", cron="0 3 * * *", event_type="e")
    with pytest.raises(InvalidArgument):
        control.reconcile("app", [good, _bad_entries(control)[which]])  # type: ignore[list-item]
    assert store.inspect(control.id_of("app.good")) is None
    assert store.inspect(control.id_of("app.bad")) is None


def test_reconcile_declaring_another_trigger_kind_writes_none_of_it(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """A declared entry whose stored schedule has another trigger kind is NotChangeable,
    found before anything is written: the entries before it keep their stored values and
    the group's undeclared schedules are not cancelled."""
    from hexeract_lite import NotChangeable

    control = SchedulerControl(store)
    first = [
        control.declare("app.a", cron="0 9 * * *", event_type="e", payload={"v": 1}),
        control.declare("app.b", every=timedelta(hours=1), event_type="e"),
        control.declare("app.c", cron="0 5 * * *", event_type="e"),
    ]
    control.reconcile("app", first)
    before = {n: _snap(store, control.id_of(n)) for n in ("app.a", "app.b", "app.c")}
    again = [
        control.declare("app.a", cron="0 10 * * *", event_type="e", payload={"v": 2}),
        control.declare("app.b", cron="0 * * * *", event_type="e"),  # was an interval
    ]
    with pytest.raises(NotChangeable, match=r"app\.b"):
        control.reconcile("app", again)
    assert {n: _snap(store, control.id_of(n)) for n in before} == before


def test_reconcile_of_something_not_iterable_is_invalid_argument(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    from hexeract_lite import InvalidArgument

    with pytest.raises(InvalidArgument, match="reconcile"):
        SchedulerControl(store).reconcile("app", 5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("stored", "declared"),
    [
        ("@daily", "0 0 * * *"),
        ("0 0 * * *", "@midnight"),
        ("0 0 * * 0", "0 0 * * 7"),
        ("0 0 * * *", "0 0 0 * * *"),
        ("CRON_TZ=Europe/Paris 0 3 * * *", "CRON_TZ=Europe/Paris  0  3 * * *"),
    ],
)
def test_ensure_of_the_same_cron_rule_in_other_words_is_unchanged(
    store: ScheduleStore, frozen: FrozenTime, stored: str, declared: str
) -> None:
    """ensure compares a cron rule's meaning, not its text: the same rule in other words is
    UNCHANGED, nothing written (no next firing placed again, no attempts reset)."""
    control = SchedulerControl(store)
    assert control.ensure("app.daily", cron=stored, event_type="t.x") is EnsureResult.CREATED
    before = control.inspect(name_id("app.daily"))
    assert control.ensure("app.daily", cron=declared, event_type="t.x") is EnsureResult.UNCHANGED
    assert control.inspect(name_id("app.daily")) == before, "nothing written"


@pytest.mark.parametrize(
    ("stored", "declared"),
    [
        ("@daily", "0 0 * * 1"),
        ("0 * * * *", "0 0-23 * * *"),  # the same hours, another daylight saving rule
        ("@daily", "CRON_TZ=Europe/Paris @daily"),
        ("0 0 1 * *", "0 0 1 * 1"),  # day of month OR day of week
    ],
)
def test_ensure_of_another_cron_meaning_is_updated(
    store: ScheduleStore, frozen: FrozenTime, stored: str, declared: str
) -> None:
    control = SchedulerControl(store)
    control.ensure("app.rule", cron=stored, event_type="t.x")
    assert control.ensure("app.rule", cron=declared, event_type="t.x") is EnsureResult.UPDATED


def test_ensure_keeps_a_cron_schedules_first_firing_once_it_exists(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """``first=`` of a cron rule is its first firing when the schedule is created; a
    later ensure with another ``first=`` (one computed from now at each start, say) is
    UNCHANGED and moves nothing (``reschedule`` moves the next firing)."""
    control = SchedulerControl(store)
    first = frozen.now() + timedelta(days=2)
    control.ensure("app.first", cron="0 * * * *", first=first, event_type="t.x")
    again = control.ensure(
        "app.first", cron="0 * * * *", first=first + timedelta(hours=5), event_type="t.x"
    )
    assert again is EnsureResult.UNCHANGED
    assert control.inspect(name_id("app.first")).scheduled_for == first
