"""Interval rules (hexeract_lite.interval): the grid, the misfire collapse, the stored text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hexeract_lite.errors import InvalidTrigger
from hexeract_lite.interval import Interval, format_duration, parse_duration
from hexeract_lite.trigger import CronExpression

ANCHOR = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MS = timedelta(milliseconds=1)

anchors = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
).map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000))
periods = st.integers(1, 400 * 86_400_000).map(lambda ms: timedelta(milliseconds=ms))
offsets = st.integers(-10 * 86_400_000, 10**12).map(lambda ms: timedelta(milliseconds=ms))


def test_fires_on_the_anchor_grid() -> None:
    rule = Interval.of(timedelta(minutes=90), ANCHOR)
    assert rule.next_after(ANCHOR - timedelta(days=3)) == ANCHOR
    assert rule.next_after(ANCHOR - MS) == ANCHOR
    assert rule.next_after(ANCHOR) == ANCHOR + timedelta(minutes=90)
    assert rule.next_after(ANCHOR + timedelta(minutes=89, seconds=59, milliseconds=999)) == (
        ANCHOR + timedelta(minutes=90)
    )
    assert rule.next_after(ANCHOR + timedelta(minutes=90)) == ANCHOR + timedelta(minutes=180)
    tokyo = timezone(timedelta(hours=9))
    assert rule.next_after(datetime(2026, 3, 1, 22, 0, tzinfo=tokyo)) == ANCHOR + timedelta(
        minutes=90
    )


@settings(max_examples=300)
@given(anchor=anchors, every=periods, offset=offsets)
def test_next_after_is_the_first_grid_instant_after(
    anchor: datetime, every: timedelta, offset: timedelta
) -> None:
    rule = Interval.of(every, anchor)
    after = anchor + offset
    nxt = rule.next_after(after)
    assert nxt is not None and nxt > after and nxt.tzinfo is UTC
    steps, rest = divmod(nxt - anchor, every)
    assert rest == timedelta(0) and steps >= 0  # on the grid, never before the anchor
    assert nxt == anchor or nxt - every <= after  # and the first such instant


def test_misfire_collapses_into_one_catch_up_then_back_on_the_grid() -> None:
    rule = Interval.of("90m", ANCHOR)
    due = ANCHOR + timedelta(minutes=90)
    # the worker was down for ten hours: one catch-up now, then the next grid instant
    now = due + timedelta(hours=10, minutes=7)
    assert rule.next_due(now, due) == ANCHOR + timedelta(minutes=90 * 8)
    # a delivery on time (or early) moves on by exactly one period
    assert rule.next_due(due, due) == due + timedelta(minutes=90)
    assert rule.next_due(due - timedelta(seconds=5), due) == due + timedelta(minutes=90)


@given(lateness=st.lists(st.integers(0, 3 * 3_600_000), min_size=1, max_size=40))
def test_late_deliveries_never_shift_the_grid(lateness: list[int]) -> None:
    """Deliver each firing some milliseconds late, reschedule with next_due: every firing
    stays on the anchor's grid and comes after the delivery that scheduled it."""
    every = timedelta(minutes=25)
    rule = Interval.of(every, ANCHOR)
    due = ANCHOR
    for late in lateness:
        now = due + timedelta(milliseconds=late)
        nxt = rule.next_due(now, due)
        assert nxt is not None and nxt > now
        assert (nxt - ANCHOR) % every == timedelta(0)
        assert nxt - every <= now  # nothing skipped beyond the collapse
        due = nxt


@pytest.mark.parametrize(
    ("every", "needle"),
    [
        (timedelta(0), "must be positive, got every=0 s"),
        (timedelta(minutes=-5), "must be positive, got every=-300 s"),
        (timedelta(microseconds=500), "at least 1 ms"),
        (timedelta(seconds=1, microseconds=500), "whole number of milliseconds"),
        ("0ms", "must be positive"),
        ("1.5h", "invalid duration '1.5h'"),
        ("90", "invalid duration '90'"),
        ("30m1h", "invalid duration '30m1h'"),
        ("", "invalid duration ''"),
        ("9" * 30 + "d", "too long"),
        (90, "every must be a timedelta"),
    ],
)
def test_bad_intervals_are_refused_naming_the_value(every: object, needle: str) -> None:
    with pytest.raises(InvalidTrigger) as info:
        Interval.of(every, ANCHOR)  # type: ignore[arg-type]
    assert needle in str(info.value)


def test_a_naive_anchor_is_refused() -> None:
    with pytest.raises(InvalidTrigger, match="anchor"):
        Interval.of("1h", datetime(2026, 3, 1))


def test_durations() -> None:
    assert parse_duration("90m") == timedelta(minutes=90)
    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration("2d") == timedelta(days=2)
    assert parse_duration("250ms") == timedelta(milliseconds=250)
    assert parse_duration("1m30s500ms") == timedelta(seconds=90.5)
    assert format_duration(timedelta(minutes=90)) == "1h30m"
    assert format_duration(timedelta(days=1, milliseconds=1)) == "1d1ms"


@given(every=periods)
def test_duration_text_round_trips(every: timedelta) -> None:
    assert parse_duration(format_duration(every)) == every


def test_stored_text_round_trips_and_a_cron_reader_refuses_it() -> None:
    rule = Interval.of(timedelta(minutes=90), ANCHOR + timedelta(milliseconds=7))
    text = str(rule)
    assert text == "@every 1h30m from 2026-03-01T12:00:00.007Z"
    assert Interval.parse(text) == rule
    with pytest.raises(InvalidTrigger, match="unknown macro"):
        CronExpression.parse(text)
    for bad in (
        "@every 1h30m",
        "@every 1h from yesterday",
        "@every 0s from 2026-03-01T12:00:00.000Z",
    ):
        with pytest.raises(InvalidTrigger):
            Interval.parse(bad)


def test_no_instant_after_year_9999_is_none() -> None:
    rule = Interval.of(timedelta(days=365), datetime(9999, 1, 1, tzinfo=UTC))
    assert rule.next_after(datetime(9999, 6, 1, tzinfo=UTC)) is None
    assert rule.next_after(datetime(9998, 6, 1, tzinfo=UTC)) == datetime(9999, 1, 1, tzinfo=UTC)


def test_an_interval_never_fires_before_its_anchor() -> None:
    """README: "a fraction of a millisecond rounded up (a message never fires before the
    instant you asked for)": an interval's anchor rounds up to the millisecond, as a delay's
    instant and a cron ``first`` do."""
    from datetime import timedelta

    from hexeract_lite import Interval, ScheduledMessage, Target

    anchor = datetime(2026, 3, 1, 12, 0, 0, 500, tzinfo=UTC)
    message = ScheduledMessage.every(Target.outbox(), timedelta(minutes=1), anchor, "e", None)
    assert message.scheduled_for == datetime(2026, 3, 1, 12, 0, 0, 1000, tzinfo=UTC)
    assert message.scheduled_for >= anchor
    assert Interval.of("1m", anchor).anchor >= anchor
    exact = datetime(2026, 3, 1, 12, 0, 0, 2000, tzinfo=UTC)
    assert Interval.of("1m", exact).anchor == exact  # whole milliseconds stay as they are
