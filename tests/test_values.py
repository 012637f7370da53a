"""Triggers, cron expressions, targets and messages: building and validation."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from hexeract_lite import (
    MAX_PAYLOAD_BYTES,
    CronExpression,
    InvalidMessage,
    InvalidTrigger,
    ScheduledMessage,
    SchedulerError,
    ScheduleStatus,
    Target,
    Trigger,
)

UTC = UTC
T = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("61 * * * *", "bad minute"),
        ("* * * *", "4 fields"),
        ("*/0 * * * *", "bad minute"),
        ("", "empty"),
        ("   ", "empty"),
        ("1 2 3 4 5 6 7", "7 fields"),
        ("@every 5m", "unknown macro"),
        ("0 0 31 2 *", "can never fire"),
        ("0 0 30 2 *", "can never fire"),
        ("* 25 * * *", "bad hour"),
        ("* * * 13 *", "bad month"),
        ("60 * * * * *", "bad second"),
        ("a b c d e", "bad"),
    ],
)
def test_invalid_cron_expressions_quote_the_expression_and_the_reason(
    expression: str, reason: str
) -> None:
    with pytest.raises(InvalidTrigger) as info:
        CronExpression.parse(expression)
    assert repr(expression) in str(info.value)
    assert reason in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, SchedulerError)
    with pytest.raises(InvalidTrigger):
        Trigger.cron(expression)


def test_cron_expression_must_be_text() -> None:
    with pytest.raises(InvalidTrigger, match="string"):
        CronExpression.parse(5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("*/15 * * * *", T, T + timedelta(minutes=15)),
        ("*/15 * * * *", T + timedelta(seconds=1), T + timedelta(minutes=15)),
        ("*/2 * * * * *", T, T + timedelta(seconds=2)),
        ("*/2 * * * * *", T + timedelta(milliseconds=500), T + timedelta(seconds=2)),
        ("30 * * * * *", T, T + timedelta(seconds=30)),
        ("@hourly", T, T + timedelta(hours=1)),
        ("@daily", T, datetime(2026, 3, 2, tzinfo=UTC)),
        ("@midnight", T, datetime(2026, 3, 2, tzinfo=UTC)),
        ("@weekly", T, datetime(2026, 3, 8, tzinfo=UTC)),  # Sunday
        ("@monthly", T, datetime(2026, 4, 1, tzinfo=UTC)),
        ("@yearly", T, datetime(2027, 1, 1, tzinfo=UTC)),
        ("@annually", T, datetime(2027, 1, 1, tzinfo=UTC)),
        ("0 0 29 2 *", T, datetime(2028, 2, 29, tzinfo=UTC)),
        ("0 9 * * MON-FRI", T, datetime(2026, 3, 2, 9, tzinfo=UTC)),
    ],
)
def test_next_occurrence_is_strictly_after_in_utc(
    expression: str, after: datetime, expected: datetime
) -> None:
    got = CronExpression.parse(expression).next_occurrence(after)
    assert got == expected
    assert got is not None and got.utcoffset() == timedelta(0)


def test_next_occurrence_evaluates_fields_in_utc_whatever_the_input_zone() -> None:
    expr = CronExpression.parse("0 12 * * *")
    tokyo = T.astimezone(timezone(timedelta(hours=9)))
    assert expr.next_occurrence(tokyo) == T + timedelta(days=1)


def test_next_occurrence_none_near_the_end_of_time() -> None:
    assert (
        CronExpression.parse("0 0 1 1 *").next_occurrence(datetime(9999, 6, 1, tzinfo=UTC)) is None
    )


def test_next_due_collapses_missed_ticks() -> None:
    expr = CronExpression.parse("* * * * *")
    previous = T
    now = T + timedelta(minutes=10, seconds=5)
    assert expr.next_due(now, previous) == T + timedelta(minutes=11)
    assert expr.next_due(T - timedelta(hours=1), previous) == T + timedelta(minutes=1)


def test_next_occurrence_rejects_naive() -> None:
    with pytest.raises(InvalidTrigger, match="naive"):
        CronExpression.parse("* * * * *").next_occurrence(datetime(2026, 1, 1))


def test_triggers() -> None:
    d = Trigger.delay(T)
    assert d.kind == "delay" and not d.is_recurring and d.at == T and d.expression is None
    assert d.label() == "delay"
    c = Trigger.cron("*/5 * * * *")
    assert c.kind == "cron" and c.is_recurring and c.expression == "*/5 * * * *"
    assert c.label() == "cron:*/5 * * * *"
    assert Trigger.cron(CronExpression.parse("@daily")) == Trigger.cron("@daily")
    with pytest.raises(InvalidTrigger, match="naive"):
        Trigger.delay(datetime(2026, 1, 1))


def test_targets() -> None:
    assert Target.mediator().kind == "mediator" and Target.mediator().routing_key is None
    assert Target.outbox().kind == "outbox"
    bus = Target.bus("orders.created")
    assert bus.kind == "bus" and bus.routing_key == "orders.created"
    assert bus.label() == "bus:orders.created"
    with pytest.raises(InvalidMessage, match="routing_key"):
        Target.bus("")
    with pytest.raises(InvalidMessage):
        Target("mediator", "x")
    with pytest.raises(InvalidMessage, match="'pigeon'"):
        Target("pigeon")  # type: ignore[arg-type]


def test_delay_message() -> None:
    at = datetime(2026, 3, 1, 14, 0, 0, 123_456, tzinfo=timezone(timedelta(hours=2)))
    msg = ScheduledMessage.delay(
        target=Target.outbox(), at=at, event_type="e", payload={"k": (1, 2)}
    )
    assert msg.scheduled_for == datetime(2026, 3, 1, 12, 0, 0, 124_000, tzinfo=UTC)  # rounded up
    assert msg.trigger == Trigger.delay(msg.scheduled_for)
    assert msg.payload == {"k": [1, 2]}, "the payload is the JSON value it is stored as"
    assert json.loads(msg.payload_json) == {"k": [1, 2]}
    assert msg.schedule_id.version == 7
    assert msg.occurrence_id() == msg.occurrence_id()


def test_cron_message_keywords() -> None:
    msg = ScheduledMessage.cron(
        target=Target.bus("r"),
        expression="*/2 * * * * *",
        first_occurrence=T,
        event_type="tick",
        payload=None,
    )
    assert msg.trigger.is_recurring and msg.scheduled_for == T and msg.payload is None


def test_schedule_ids_are_time_ordered_uuidv7() -> None:
    ids = [ScheduledMessage.delay(Target.outbox(), T, "e", 1).schedule_id for _ in range(50)]
    assert len(set(ids)) == 50
    assert all(i.version == 7 and i.variant == uuid.RFC_4122 for i in ids)


def test_explicit_schedule_id() -> None:
    sid = uuid.uuid4()
    assert ScheduledMessage.delay(Target.outbox(), T, "e", 1, schedule_id=sid).schedule_id == sid
    with pytest.raises(InvalidMessage, match="schedule_id"):
        ScheduledMessage.delay(Target.outbox(), T, "e", 1, schedule_id="nope")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"at": datetime(2026, 1, 1)}, "'at'|at must"),
        ({"event_type": ""}, "event_type"),
        ({"event_type": "x" * 65}, "65 characters"),
        ({"event_type": 7}, "event_type"),
        ({"payload": {1, 2}}, "not JSON"),
        ({"payload": object()}, "not JSON"),
        ({"payload": float("nan")}, "not JSON"),
        ({"payload": "x" * (MAX_PAYLOAD_BYTES + 1)}, "limit"),
        ({"target": "bus"}, "target"),
    ],
)
def test_bad_messages_are_refused_at_build_time(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"target": Target.outbox(), "at": T, "event_type": "e", "payload": 1}
    args.update(kwargs)
    with pytest.raises(InvalidMessage, match=match):
        ScheduledMessage.delay(**args)  # type: ignore[arg-type]


def test_naive_first_occurrence_names_the_argument() -> None:
    with pytest.raises(InvalidMessage, match="first_occurrence"):
        ScheduledMessage.cron(Target.outbox(), "@daily", datetime(2026, 1, 1), "e", 1)


def test_event_type_of_64_characters_is_fine() -> None:
    assert ScheduledMessage.delay(Target.outbox(), T, "x" * 64, 1).event_type == "x" * 64


def test_status_labels() -> None:
    assert ScheduleStatus.DEAD_LETTERED.value == "dead-lettered"
    assert str(ScheduleStatus.PAUSED) == "paused"
    assert ScheduleStatus("cancelled").is_terminal and not ScheduleStatus.PAUSED.is_terminal


def test_validate_message_accepts_built_messages() -> None:
    from hexeract_lite.message import validate_message

    msg = ScheduledMessage.cron(Target.bus("a.b"), "@daily", T, "e", {"k": [1, 2]})
    assert validate_message(msg) is msg


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"scheduled_for": datetime(2026, 1, 1)}, "scheduled_for"),
        ({"scheduled_for": T.astimezone(timezone(timedelta(hours=1)))}, "scheduled_for"),
        ({"scheduled_for": T + timedelta(microseconds=1)}, "millisecond"),
        ({"event_type": "x" * 100}, "event_type"),
        ({"event_type": "bad\nname"}, "printable"),
        ({"payload_json": "not json"}, "not JSON"),
        ({"payload_json": "NaN", "payload": None}, "not JSON"),
        ({"payload_json": "[1]"}, "disagree"),
        ({"schedule_id": "nope"}, "schedule_id"),
        ({"target": "bus"}, "target"),
    ],
)
def test_validate_message_refuses_hand_built_bad_values(
    changes: dict[str, object], match: str
) -> None:
    """A message built field by field (attrs.evolve) is checked before a store writes it."""
    import attrs

    from hexeract_lite.message import validate_message

    msg = attrs.evolve(ScheduledMessage.delay(Target.outbox(), T, "e", {"k": 1}), **changes)  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage, match=match):
        validate_message(msg)


def test_at_normalises_the_new_instant() -> None:
    msg = ScheduledMessage.delay(Target.outbox(), T, "e", 1)
    moved = msg.at(datetime(2026, 3, 1, 13, 0, 0, 999_999, tzinfo=timezone(timedelta(hours=1))))
    assert moved.scheduled_for == datetime(2026, 3, 1, 12, 0, 1, tzinfo=UTC)  # rounded up
    assert moved.trigger == Trigger.delay(moved.scheduled_for)
    with pytest.raises(InvalidMessage, match="naive"):
        msg.at(datetime(2026, 1, 1))


def test_payload_and_event_type_with_lone_surrogates_are_refused() -> None:
    with pytest.raises(InvalidMessage, match="Unicode"):
        ScheduledMessage.delay(Target.outbox(), T, "e", "\ud800")
    with pytest.raises(InvalidMessage, match="event_type"):
        ScheduledMessage.delay(Target.outbox(), T, "e\ud800", 1)
    with pytest.raises(InvalidMessage, match="routing_key"):
        Target.bus("a\x00b")


def test_next_due_rejects_naive_arguments() -> None:
    expr = CronExpression.parse("@hourly")
    with pytest.raises(InvalidTrigger, match="now"):
        expr.next_due(datetime(2026, 1, 1), T)
