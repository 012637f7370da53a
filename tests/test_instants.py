"""Instants at millisecond precision: a requested firing instant rounds up (never early),
an instant read as "now" truncates (a claim is never early either), and an instant with
no UTC equivalent is the package's own error naming it."""

from __future__ import annotations

import argparse
import threading
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
from hexeract_lite._time import format_now, format_ts, to_utc_ms
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


def _plain_format_ts(value: datetime) -> str:
    """``format_ts`` written plainly with %-formatting: what the day-prefix cached one must
    equal."""
    if value.tzinfo is not UTC and value.utcoffset() != timedelta(0):
        raise ValueError(f"format_ts needs a UTC datetime, got {value!r}")
    return "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ" % (  # noqa: UP031 - the old text
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond // 1000,
    )


def _outcome(fn: Any, *args: Any) -> tuple[str, str]:
    try:
        return "ok", fn(*args)
    except Exception as exc:
        return type(exc).__name__, str(exc)


_UTC_LIKE = [UTC, timezone(timedelta(0)), ZoneInfo("UTC"), ZoneInfo("Europe/London")]


_ZONES = [*_UTC_LIKE, None, timezone(timedelta(hours=5, minutes=30)), ZoneInfo("America/New_York")]


instants = st.datetimes(
    min_value=datetime(1, 1, 1),
    max_value=datetime(9999, 12, 31, 23, 59, 59, 999999),
)


@settings(max_examples=2000, deadline=None, derandomize=True, database=None)
@given(instants, st.sampled_from(_ZONES))
def test_format_ts_is_the_plain_formatting_for_every_instant(naive: datetime, zone: Any) -> None:
    value = naive if zone is None else naive.replace(tzinfo=zone)
    assert _outcome(format_ts, value) == _outcome(_plain_format_ts, value)


@settings(max_examples=2000, deadline=None, derandomize=True, database=None)
@given(instants, st.sampled_from(_ZONES))
def test_format_now_is_the_plain_formatting_for_every_instant(naive: datetime, zone: Any) -> None:
    value = naive if zone is None else naive.replace(tzinfo=zone)
    old = _outcome(lambda v: _plain_format_ts(to_utc_ms(v, "clock.now()")), value)
    assert _outcome(format_now, value) == old


@pytest.mark.parametrize("value", [None, "2030-01-01T00:00:00Z", 5, datetime(2030, 1, 1)])
def test_format_now_refuses_what_to_utc_ms_refuses(value: object) -> None:
    with pytest.raises(InvalidConfiguration) as got:
        format_now(value)
    with pytest.raises(InvalidConfiguration) as want:
        to_utc_ms(value, "clock.now()")
    assert str(got.value) == str(want.value)


def test_format_ts_is_right_across_many_days_and_threads() -> None:
    """Far more days than the day-prefix cache holds, from several threads at once (it is
    cleared while others read it): every text is the plain formatting's."""
    start = datetime(1999, 12, 25, 23, 59, 59, 999999, tzinfo=UTC)
    days = [start + timedelta(days=d, microseconds=d * 7919) for d in range(0, 4000, 3)]
    bad: list[datetime] = []

    def work(offset: int) -> None:
        for _ in range(3):
            for value in days[offset::4] + days[::-7]:
                if format_ts(value) != _plain_format_ts(value):
                    bad.append(value)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert bad == []
