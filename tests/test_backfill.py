"""Backfill (hexeract_lite.backfill, SchedulerControl.backfill), on every store: the
window's rule instants fire in order with the occurrence ids the rule gives them, then
the schedule goes on on its rule; a backfill run twice delivers nothing new to a
deduplicating consumer; bad windows and schedules are refused, nothing written."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hexeract_lite import (
    InvalidArgument,
    ManualClock,
    OccurrenceId,
    ScheduledMessage,
    SchedulerControl,
    SchedulerWorker,
    ScheduleSnapshot,
    ScheduleStore,
    SqliteScheduleStore,
    Target,
)
from hexeract_lite._time import format_ts, parse_ts
from hexeract_lite.errors import NotChangeable
from hexeract_lite.settlement import Settlement
from hexeract_lite.trigger import CronExpression

from .conftest import T0, FrozenTime
from .test_dst import MINUTE_RULES, instant, minute_windows, oracle

HOUR = timedelta(hours=1)
LEASE = timedelta(seconds=30)
DAY0 = datetime(2026, 3, 1, 0, 0, tzinfo=T0.tzinfo)
"""Midnight of T0's day: T0 (12:00) is twelve hourly instants later."""


def hourly(store: ScheduleStore, name: str = "app.report", **kw: object) -> uuid.UUID:
    control = SchedulerControl(store)
    control.ensure(name, cron="0 * * * *", event_type="report", **kw)  # type: ignore[arg-type]
    return control.id_of(name)


def snap(store: ScheduleStore, sid: uuid.UUID) -> ScheduleSnapshot:
    found = store.inspect(sid)
    assert found is not None
    return found


def rule_instants(
    rule: str, start: datetime, end: datetime, tz: str | None = None
) -> list[datetime]:
    """The oracle: the rule's instants in [start, end], one next_occurrence at a time."""
    expr = CronExpression.parse(rule, tz=tz)
    found: list[datetime] = []
    nxt = expr.next_occurrence(start - timedelta(milliseconds=1))
    while nxt is not None and nxt <= end:
        found.append(nxt)
        nxt = expr.next_occurrence(nxt)
    return found


def drain(store: ScheduleStore, seen: list[ScheduledMessage], cycles: int = 50) -> None:
    """Run a worker's cycles on the frozen clock until nothing is due."""
    worker = SchedulerWorker(store, seen.append)
    for _ in range(cycles):
        if worker.run_once().claimed == 0:
            return
    raise AssertionError("still claiming after the cycles given")


def test_window_fires_in_order_with_the_rules_ids_then_goes_on(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    sid = hourly(store)
    control = SchedulerControl(store)
    end = DAY0 + 5 * HOUR
    assert control.backfill("app.report", DAY0, end) == 6
    s = snap(store, sid)
    assert s.scheduled_for == DAY0 and s.backfill_until == end
    seen: list[ScheduledMessage] = []
    drain(store, seen)
    expected = rule_instants("0 * * * *", DAY0, end)
    assert [m.scheduled_for for m in seen] == expected
    assert [m.occurrence_id() for m in seen] == [OccurrenceId.derive(sid, t) for t in expected]
    s = snap(store, sid)
    assert s.scheduled_for == T0 + HOUR  # on its rule again: the first instant after now
    assert s.backfill_until is None and s.status.value == "pending"


def test_backfill_run_twice_gives_a_deduplicating_consumer_nothing_new(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    sid = hourly(store)
    control = SchedulerControl(store)
    dedup: set[OccurrenceId] = set()
    fresh: list[list[OccurrenceId]] = []
    for _ in range(2):
        control.backfill(sid, DAY0 + 2 * HOUR, DAY0 + 4 * HOUR)
        seen: list[ScheduledMessage] = []
        drain(store, seen)
        ids = [m.occurrence_id() for m in seen]
        assert len(ids) == 3
        fresh.append([i for i in ids if i not in dedup])
        dedup.update(ids)
    assert len(fresh[0]) == 3 and fresh[1] == []


def test_a_window_reaching_into_the_future_follows_the_rule_then_ends(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    sid = hourly(store)
    control = SchedulerControl(store)
    assert control.backfill(sid, T0 - 2 * HOUR, T0 + 2 * HOUR) == 5
    seen: list[ScheduledMessage] = []
    drain(store, seen)
    assert [m.scheduled_for for m in seen] == [T0 - 2 * HOUR, T0 - HOUR, T0]
    assert snap(store, sid).scheduled_for == T0 + HOUR
    assert snap(store, sid).backfill_until == T0 + 2 * HOUR  # still inside the window
    for _ in range(2):
        frozen.shift(HOUR)
        drain(store, seen)
    assert [m.scheduled_for for m in seen][3:] == [T0 + HOUR, T0 + 2 * HOUR]
    s = snap(store, sid)
    assert s.scheduled_for == T0 + 3 * HOUR and s.backfill_until is None


def test_misfire_grace_never_skips_a_window_instant(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    sid = hourly(store, misfire_grace=timedelta(minutes=1))
    SchedulerControl(store).backfill(sid, DAY0, DAY0 + 2 * HOUR)
    seen: list[ScheduledMessage] = []
    drain(store, seen)
    assert [m.scheduled_for for m in seen] == [DAY0, DAY0 + HOUR, DAY0 + 2 * HOUR]


def test_a_window_stops_at_the_policys_max_firings_and_end(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    capped = hourly(store, "app.capped", max_firings=3)
    ended = hourly(store, "app.ended", end_at=T0 + HOUR)
    control = SchedulerControl(store)
    for sid in (capped, ended):
        assert control.backfill(sid, T0 - 2 * HOUR, T0 + 3 * HOUR) == 6
    window = [T0 - 2 * HOUR, T0 - HOUR, T0, T0 + HOUR]
    assert control.upcoming(capped, count=10) == window[:3]
    assert control.upcoming(ended, count=10) == window
    seen: list[ScheduledMessage] = []
    drain(store, seen)
    frozen.shift(HOUR)
    drain(store, seen)
    fired = {
        sid: [m.scheduled_for for m in seen if m.schedule_id == sid] for sid in (capped, ended)
    }
    assert fired == {capped: window[:3], ended: window}
    for sid in (capped, ended):
        s = snap(store, sid)
        assert s.status.value == "delivered" and s.backfill_until is None


def test_upcoming_lists_the_window_first(store: ScheduleStore, frozen: FrozenTime) -> None:
    sid = hourly(store)
    control = SchedulerControl(store)
    control.backfill(sid, DAY0, DAY0 + 2 * HOUR)
    assert control.upcoming(sid, count=5) == [
        DAY0,
        DAY0 + HOUR,
        DAY0 + 2 * HOUR,
        T0 + HOUR,
        T0 + 2 * HOUR,
    ]


def test_pause_mid_window_then_resume_goes_on_where_it_stopped(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    sid = hourly(store)
    control = SchedulerControl(store)
    control.backfill(sid, DAY0, DAY0 + 3 * HOUR)
    seen: list[ScheduledMessage] = []
    SchedulerWorker(store, seen.append).run_once()
    assert control.pause(sid)
    assert SchedulerWorker(store, seen.append).run_once().claimed == 0
    frozen.shift(HOUR)
    assert control.resume(sid)
    drain(store, seen)
    assert [m.scheduled_for for m in seen] == [DAY0 + i * HOUR for i in range(4)]


def test_reschedule_ends_a_backfill(store: ScheduleStore, frozen: FrozenTime) -> None:
    sid = hourly(store)
    control = SchedulerControl(store)
    control.backfill(sid, DAY0, DAY0 + 3 * HOUR)
    control.reschedule(sid, DAY0 + HOUR)
    s = snap(store, sid)
    assert s.scheduled_for == DAY0 + HOUR and s.backfill_until is None


def test_a_schedule_in_flight_starts_the_window_at_its_acknowledgement(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    sid = hourly(store)
    frozen.shift(HOUR)  # the 13:00 firing is due
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    control = SchedulerControl(store)
    assert control.backfill(sid, DAY0, DAY0 + HOUR) == 2
    assert snap(store, sid).scheduled_for == T0 + HOUR  # the firing in flight is untouched
    assert store.settle([Settlement.reschedule(sid, T0 + 2 * HOUR, occ.leased_until)]) == [True]
    s = snap(store, sid)
    assert s.scheduled_for == DAY0 and s.backfill_until == DAY0 + HOUR
    seen: list[ScheduledMessage] = []
    drain(store, seen)
    assert [m.scheduled_for for m in seen] == [DAY0, DAY0 + HOUR]
    assert snap(store, sid).scheduled_for == T0 + 2 * HOUR


def test_zoned_rule_across_a_dst_change_fires_the_rules_instants(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    rule, tz = "30 * * * *", "Europe/Paris"  # clocks jump 02:00 -> 03:00 on 2026-03-29
    frozen.move_to(datetime(2026, 4, 1, tzinfo=T0.tzinfo))
    control = SchedulerControl(store)
    control.ensure("app.zoned", cron=rule, tz=tz, event_type="z")
    sid = control.id_of("app.zoned")
    start = datetime(2026, 3, 28, 22, 0, tzinfo=T0.tzinfo)
    end = datetime(2026, 3, 29, 3, 0, tzinfo=T0.tzinfo)
    expected = rule_instants(rule, start, end, tz)
    assert control.backfill(sid, start, end) == len(expected) == 5
    seen: list[ScheduledMessage] = []
    drain(store, seen)
    assert [m.scheduled_for for m in seen] == expected
    assert [m.occurrence_id() for m in seen] == [OccurrenceId.derive(sid, t) for t in expected]


# -- refusals: a clear error, nothing written -------------------------------------------


def test_more_instants_than_the_limit_names_both_and_writes_nothing(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    sid = hourly(store)
    before = snap(store, sid)
    control = SchedulerControl(store)
    with pytest.raises(InvalidArgument, match=r"covers 25 instants .* limit of 24"):
        control.backfill(sid, DAY0 - 12 * HOUR, T0, limit=24)
    with pytest.raises(InvalidArgument, match=r"covers 1001 instants .* limit of 1000"):
        control.backfill(sid, T0 - 1000 * HOUR, T0)
    assert snap(store, sid) == before


@pytest.mark.parametrize(
    ("start", "end", "match"),
    [
        (T0, T0 - HOUR, "backfill end 2026-03-01T11:00:00.000Z is before its start"),
        (T0.replace(tzinfo=None), T0, "backfill start must be a timezone-aware"),
        (T0 - HOUR, T0.replace(tzinfo=None), "backfill end must be a timezone-aware"),
        (T0 + timedelta(minutes=1), T0 + timedelta(minutes=59), "has no instant in"),
    ],
)
def test_a_bad_window_is_refused_naming_it(
    store: ScheduleStore, frozen: FrozenTime, start: datetime, end: datetime, match: str
) -> None:
    sid = hourly(store)
    before = snap(store, sid)
    with pytest.raises(InvalidArgument, match=match):
        SchedulerControl(store).backfill(sid, start, end)
    assert snap(store, sid) == before


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, 100_001])
def test_a_bad_limit_is_refused_naming_it(
    store: ScheduleStore, frozen: FrozenTime, limit: object
) -> None:
    sid = hourly(store)
    with pytest.raises(InvalidArgument, match=f"backfill limit .* got {limit!r}"):
        SchedulerControl(store).backfill(sid, DAY0, T0, limit=limit)  # type: ignore[arg-type]


@pytest.mark.parametrize("state", ["one-shot", "paused", "cancelled", "dead-lettered"])
def test_backfill_of_a_schedule_without_a_rule_to_follow_is_refused(
    store: ScheduleStore, frozen: FrozenTime, state: str
) -> None:
    control = SchedulerControl(store)
    if state == "one-shot":
        control.ensure("app.once", at=T0 + HOUR, event_type="once")
        sid = control.id_of("app.once")
    else:
        sid = hourly(store)
        if state == "paused":
            control.pause(sid)
        elif state == "cancelled":
            control.cancel(sid)
        else:
            frozen.shift(HOUR)
            [occ] = store.claim_due(frozen.now(), 1, LEASE)
            store.settle([Settlement.dead_lettered(sid, "boom", occ.leased_until)])
    before = snap(store, sid)
    with pytest.raises(NotChangeable, match="one-shot" if state == "one-shot" else state):
        control.backfill(sid, DAY0, T0)
    assert snap(store, sid) == before


def test_unknown_name_is_not_found(store: ScheduleStore, frozen: FrozenTime) -> None:
    from hexeract_lite import ScheduleNotFound

    with pytest.raises(ScheduleNotFound, match=r"app\.nothing"):
        SchedulerControl(store).backfill("app.nothing", DAY0, T0)


def test_a_message_without_a_name_is_backfilled_by_id(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = ScheduledMessage.cron(Target.mediator(), "0 */6 * * *", None, "tick", None)
    store.insert(msg, 3)
    assert SchedulerControl(store).backfill(str(msg.schedule_id), DAY0, T0) == 3


# -- the reference's own statements on a backfilling row ---------------------------------

VECTORS = Path(__file__).resolve().parents[2] / "shared" / "vectors"


@pytest.mark.skipif(
    not (VECTORS / "reference_sqlite_statements.tsv").exists(), reason="no shared vectors"
)
def test_a_reference_worker_fires_a_backfilling_row_at_its_instant_never_at_a_wrong_time(
    tmp_path: Path,
) -> None:
    """The reference's claim hands out the window's current instant (the rule's, so its
    id is the rule's), and its misfire rule moves the row to the rule's first instant
    after now: the window's other instants are not fired by it, none at a wrong time;
    a worker of ours then clears ``backfill_until`` on the next delivery. (The
    reference's statements read SQLite's clock: this test runs on the real one.)"""
    lines = (VECTORS / "reference_sqlite_statements.tsv").read_text().splitlines()
    sql = dict(line.split("\t", 1) for line in lines if line.strip())
    db = tmp_path / "shared.db"
    now = datetime.now(UTC)
    hour = now.replace(minute=0, second=0, microsecond=0)
    with SqliteScheduleStore.open(db) as store:
        sid = hourly(store)
        assert SchedulerControl(store).backfill(sid, hour - 5 * HOUR, hour - HOUR) == 5
    conn = apsw.Connection(str(db))
    try:
        [row] = conn.execute(sql["claim"], ("+30 seconds", 10)).fetchall()
        assert isinstance(row[0], bytes) and isinstance(row[4], str) and isinstance(row[5], str)
        assert uuid.UUID(bytes=row[0]) == sid and parse_ts(row[5]) == hour - 5 * HOUR
        nxt = CronExpression.parse(row[4]).next_due(datetime.now(UTC), parse_ts(row[5]))
        assert nxt is not None and hour < nxt <= hour + 2 * HOUR  # the rule's next, after now
        conn.execute(sql["reschedule"], (format_ts(nxt), row[0], row[10]))
        assert conn.changes() == 1
    finally:
        conn.close()
    clock = ManualClock(nxt)
    with SqliteScheduleStore.open(db, clock=clock) as store:
        s = snap(store, sid)
        assert s.scheduled_for == nxt and s.backfill_until == hour - HOUR
        seen: list[ScheduledMessage] = []
        assert SchedulerWorker(store, seen.append, clock=clock).run_once().rescheduled == 1
        assert [m.scheduled_for for m in seen] == [nxt]
        s = snap(store, sid)
        assert s.scheduled_for == nxt + HOUR and s.backfill_until is None


# -- a property: the window's firings are the oracle's, across the DST changes -------------


_EXAMPLES = iter(range(1 << 30))


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_backfill_fires_the_oracles_instants_across_dst_changes(
    store: ScheduleStore, frozen: FrozenTime, data: st.DataObject
) -> None:
    """A zoned rule backfilled over the window of a zone's offset change (tests/test_dst.py's
    windows and oracle: the rules as the DST rules state them, not as the engine computes
    them) fires exactly the oracle's instants, in order, with the rule's occurrence ids."""
    windows = minute_windows()
    w = windows[data.draw(st.integers(0, len(windows) - 1), label="window")]
    rules = [r for r in MINUTE_RULES if 0 < len(oracle(r, w)) <= 60]
    rule = data.draw(st.sampled_from(rules), label="rule")
    frozen.move_to(max(T0, instant(w.end) + HOUR))
    control = SchedulerControl(store)
    name = f"app.dst{next(_EXAMPLES)}"
    control.ensure(name, cron=rule, tz=w.change.zone, event_type="dst")
    sid = control.id_of(name)
    expected = [instant(u) for u in oracle(rule, w)]
    assert control.backfill(sid, instant(w.start + 1), instant(w.end)) == len(expected)
    seen: list[ScheduledMessage] = []
    drain(store, seen, cycles=len(expected) + 50)
    seen = [m for m in seen if m.schedule_id == sid]  # the earlier examples' rows fire too
    assert [m.scheduled_for for m in seen] == expected, (rule, w.change)
    assert [m.occurrence_id() for m in seen] == [OccurrenceId.derive(sid, t) for t in expected]
    assert snap(store, sid).backfill_until is None
