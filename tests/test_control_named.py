"""SchedulerControl's named-schedule API: ensure, reconcile by group, reschedule,
update and run_now by id or name, and the cron first firing's default."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hexeract_lite import (
    EnsureResult,
    InMemoryScheduleStore,
    InvalidArgument,
    ManualClock,
    NotChangeable,
    ScheduledMessage,
    ScheduleNotFound,
    SchedulerControl,
    ScheduleStatus,
    Target,
    name_id,
)

NOON = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def control() -> SchedulerControl:
    return SchedulerControl(InMemoryScheduleStore(clock=ManualClock(NOON)))


def test_a_cron_first_firing_defaults_to_the_rules_next_instant(control: SchedulerControl) -> None:
    """The issue's bug: a 03:00 backup registered at noon must not fire at noon."""
    clock = ManualClock(NOON)
    msg = ScheduledMessage.cron(Target.mediator(), "0 3 * * *", event_type="b", clock=clock)
    assert msg.scheduled_for == datetime(2026, 3, 3, 3, 0, tzinfo=UTC)
    control.ensure("app.backup", cron="0 3 * * *", event_type="b")
    assert control.inspect(name_id("app.backup")).scheduled_for == msg.scheduled_for
    explicit = ScheduledMessage.cron(Target.mediator(), "0 3 * * *", NOON, "b", None)
    assert explicit.scheduled_for == NOON, "an explicit first firing keeps its meaning"
    with pytest.raises(InvalidArgument, match="event_type"):
        ScheduledMessage.cron(Target.mediator(), "0 3 * * *")


def test_reconcile_touches_only_its_group(control: SchedulerControl) -> None:
    unnamed = control.schedule(
        ScheduledMessage.delay(Target.outbox(), NOON + timedelta(hours=1), "shell", {})
    )
    control.ensure("other.job", cron="0 1 * * *", event_type="o")
    control.ensure("app.old", cron="0 1 * * *", event_type="o")
    report = control.reconcile(
        "app", [control.declare("app.new", cron="0 2 * * *", event_type="n")]
    )
    assert report.ensured == {"app.new": EnsureResult.CREATED}
    assert report.cancelled == ["app.old"]
    assert control.inspect(unnamed).status is ScheduleStatus.PENDING
    assert control.inspect(name_id("other.job")).status is ScheduleStatus.PENDING
    assert control.inspect(name_id("app.old")).status is ScheduleStatus.CANCELLED


def test_reconcile_takes_message_and_budget_pairs(control: SchedulerControl) -> None:
    # mypy --strict checks this call's types (the annotation accepts pairs)
    report = control.reconcile(
        "app",
        [
            (control.declare("app.a", cron="0 2 * * *", event_type="a"), 3),
            control.declare("app.b", cron="0 3 * * *", event_type="b"),
        ],
    )
    assert report.ensured == {"app.a": EnsureResult.CREATED, "app.b": EnsureResult.CREATED}
    assert control.inspect(name_id("app.a")).max_attempts == 3


@pytest.mark.parametrize(
    ("group", "names", "match"),
    [
        ("app", ["other.x"], "not in group 'app'"),
        ("app", ["app.x", "app.x"], "declares a name twice"),
        ("a.b", ["a.b.c"], "before its first dot"),
        ("", [], "a group must not be empty"),
    ],
)
def test_reconcile_refuses_bad_input_before_writing(
    control: SchedulerControl, group: str, names: list[str], match: str
) -> None:
    control.ensure("app.keep", cron="0 1 * * *", event_type="k")
    declared = [control.declare(n, cron="0 2 * * *", event_type="n") for n in names]
    with pytest.raises(InvalidArgument, match=match):
        control.reconcile(group, declared)
    assert [getattr(s, "name", None) for s in control.list_pending()] == ["app.keep"]


def test_changes_by_name_or_id(control: SchedulerControl) -> None:
    control.ensure("app.job", cron="0 1 * * *", event_type="j", payload={"a": 1})
    sid = name_id("app.job")
    assert control.update("app.job", cron="0 5 * * *", payload={"a": 2})
    snap = control.inspect(sid)
    assert snap.trigger.expression == "0 5 * * *" and snap.payload_json == '{"a":2}'
    assert control.reschedule(str(sid), NOON + timedelta(minutes=5))
    assert control.inspect(sid).scheduled_for == NOON + timedelta(minutes=5)
    assert control.run_now(sid)
    assert control.inspect(sid).scheduled_for == NOON
    with pytest.raises(ScheduleNotFound, match=r"no schedule named 'app\.nope'"):
        control.run_now("app.nope")
    with pytest.raises(InvalidArgument, match="at"):
        control.reschedule("app.job", datetime(2030, 1, 1))
    control.cancel(sid)
    with pytest.raises(NotChangeable, match="is cancelled"):
        control.update("app.job", max_attempts=2)
    with pytest.raises(InvalidArgument, match="exactly one of cron=, every= or at="):
        control.ensure("app.x", event_type="x")


def test_inspect_cancel_and_replay_take_a_name_as_the_other_calls_do(
    control: SchedulerControl,
) -> None:
    control.ensure("app.job", at=NOON - timedelta(minutes=1), event_type="j")
    assert control.inspect("app.job").name == "app.job"
    for call in (control.inspect, control.cancel, control.replay):
        with pytest.raises(ScheduleNotFound, match=r"no schedule named 'app\.nope'"):
            call("app.nope")
    [occ] = control.store.claim_due(NOON, 1, timedelta(seconds=30))
    assert control.store.mark_dead_lettered(occ.message.schedule_id, "boom", occ.leased_until)
    control.replay("app.job")
    assert control.inspect("app.job").status is ScheduleStatus.PENDING
    assert control.cancel("app.job") is True
    assert control.inspect("app.job").status is ScheduleStatus.CANCELLED
    with pytest.raises(InvalidArgument, match="expected a schedule id or name, got 7"):
        control.inspect(7)  # type: ignore[arg-type]
