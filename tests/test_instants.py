"""Instants at millisecond precision: a requested firing instant rounds up (never early),
an instant read as "now" truncates (a claim is never early either), and an instant with
no UTC equivalent is the package's own error naming it."""

from __future__ import annotations

import argparse
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from hexeract_lite import (
    InMemoryScheduleStore,
    InvalidConfiguration,
    InvalidMessage,
    InvalidTrigger,
    OccurrenceId,
    ScheduledMessage,
    ScheduleStore,
    Target,
    Trigger,
)
from hexeract_lite._time import to_utc_ms
from hexeract_lite.cli import parse_instant

from .conftest import T0, FrozenTime

MS = timedelta(milliseconds=1)
US = timedelta(microseconds=1)
LEASE = timedelta(seconds=30)
PLUS_2 = timezone(timedelta(hours=2))


@pytest.mark.parametrize(
    ("value", "truncated", "rounded_up"),
    [
        (T0, T0, T0),
        (T0 + 500 * US, T0, T0 + MS),
        (T0 + 1 * US, T0, T0 + MS),
        (T0 + 999 * US, T0, T0 + MS),
        (T0 + MS, T0 + MS, T0 + MS),
        ((T0 + 500 * US).astimezone(PLUS_2), T0, T0 + MS),
        (
            datetime(1969, 12, 31, 23, 59, 59, 999_500, UTC),
            datetime(1969, 12, 31, 23, 59, 59, 999_000, UTC),
            datetime(1970, 1, 1, tzinfo=UTC),
        ),
    ],
)
def test_to_utc_ms_truncates_by_default_and_rounds_up_when_asked(
    value: datetime, truncated: datetime, rounded_up: datetime
) -> None:
    assert to_utc_ms(value, "x") == truncated
    assert to_utc_ms(value, "x", round_up=True) == rounded_up
    assert to_utc_ms(value, "x", round_up=True).tzinfo is UTC


def test_to_utc_ms_names_a_naive_value_with_the_package_error() -> None:
    with pytest.raises(InvalidConfiguration, match=r"clock\.now\(\).*naive '2026-03-01T12:00:00'"):
        to_utc_ms(datetime(2026, 3, 1, 12), "clock.now()")


@pytest.mark.parametrize(
    "value",
    [
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
        datetime(9999, 12, 31, 12, tzinfo=timezone(timedelta(hours=-14))),
    ],
)
def test_to_utc_ms_out_of_range_is_the_package_error_naming_the_value(value: datetime) -> None:
    with pytest.raises(InvalidConfiguration, match="out of range") as info:
        to_utc_ms(value, "at")
    assert value.isoformat() in str(info.value)


def test_rounding_up_past_year_9999_is_refused() -> None:
    last = datetime(9999, 12, 31, 23, 59, 59, 999_001, UTC)
    assert to_utc_ms(last, "at") == last.replace(microsecond=999_000)
    with pytest.raises(InvalidMessage, match=r"9999-12-31T23:59:59\.999001"):
        ScheduledMessage.delay(Target.outbox(), last, "e", {})


def test_every_way_of_requesting_an_instant_rounds_up() -> None:
    odd = T0 + 500 * US
    assert ScheduledMessage.delay(Target.outbox(), odd, "e", {}).scheduled_for == T0 + MS
    cron = ScheduledMessage.cron(Target.outbox(), "@daily", odd, "e", {})
    assert cron.scheduled_for == T0 + MS
    moved = cron.at(odd + timedelta(days=1))
    assert moved.scheduled_for == T0 + timedelta(days=1) + MS
    delay = ScheduledMessage.delay(Target.outbox(), T0, "e", {}).at(odd)
    assert delay.scheduled_for == T0 + MS and delay.trigger == Trigger.delay(T0 + MS)
    assert Trigger.delay(odd).at == T0 + MS
    assert parse_instant("2026-03-01T12:00:00.0005Z") == T0 + MS
    assert parse_instant("2026-03-01T14:00:00.000001+02:00") == T0 + MS


def test_a_naive_requested_instant_is_still_refused() -> None:
    with pytest.raises(InvalidTrigger, match="naive"):
        Trigger.delay(datetime(2026, 3, 1))
    with pytest.raises(InvalidMessage, match="naive"):
        ScheduledMessage.delay(Target.outbox(), datetime(2026, 3, 1), "e", {})


def test_a_sub_millisecond_delay_is_stored_rounded_up_and_never_claimed_early(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    at = T0 + 500 * US  # 12:00:00.000500
    message = ScheduledMessage.delay(Target.outbox(), at, "e", {"k": 1})
    assert message.scheduled_for == T0 + MS
    store.insert(message, 3)
    snapshot = store.inspect(message.schedule_id)
    assert snapshot is not None and snapshot.scheduled_for == T0 + MS  # 12:00:00.001
    assert store.claim_due(T0 + 999 * US, 10, LEASE) == []  # 12:00:00.000999: not yet
    [leased] = store.claim_due(T0 + MS, 10, LEASE)
    assert leased.message.scheduled_for == T0 + MS
    # the id derived before storing is the id after claiming
    assert leased.occurrence_id() == message.occurrence_id()
    assert leased.occurrence_id() == OccurrenceId.derive(message.schedule_id, T0 + MS)


def test_a_claims_now_truncates_so_a_claim_is_never_early(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    message = ScheduledMessage.delay(Target.outbox(), T0 + 2 * MS, "e", {})
    store.insert(message, 3)
    assert store.claim_due(T0 + 2 * MS - US, 10, LEASE) == []  # 12:00:00.001999
    assert len(store.claim_due(T0 + 2 * MS + 999 * US, 10, LEASE)) == 1


class _NaiveClock:
    def now(self) -> datetime:
        return datetime(2026, 3, 1, 12, 0, 0)


def test_a_clock_returning_naive_datetimes_is_named_at_insert() -> None:
    store = InMemoryScheduleStore(clock=_NaiveClock())
    message = ScheduledMessage.delay(Target.outbox(), T0, "e", {})
    with pytest.raises(InvalidConfiguration, match=r"clock\.now\(\).*naive"):
        store.insert(message, 3)
    assert store.inspect(message.schedule_id) is None


def test_parse_instant_out_of_range_is_an_argument_error_naming_it() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"0001-01-01T00:00:00\+14:00"):
        parse_instant("0001-01-01T00:00:00+14:00")


def test_occurrence_ids_of_instants_near_the_ends_of_time_derive() -> None:
    sid = uuid.UUID("01890000-0000-7000-8000-000000000001")
    early = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))
    late = datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-14)))
    assert OccurrenceId.derive(sid, early) != OccurrenceId.derive(sid, late)
