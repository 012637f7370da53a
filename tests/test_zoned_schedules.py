"""Zoned cron and interval schedules on every store's worker path.

The DST proof of ``tests/test_dst.py`` checks the engine against a brute-force oracle;
here the same oracle checks what a worker delivers: schedules inserted on each store
(memory, SQLite, PostgreSQL), a frozen clock (time-machine, ``tick=False``) moved to
each instant the oracle gives across a spring-forward and a fall-back, ``run_once()``
at each, the delivered firings compared with the oracle's.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

from hexeract_lite import (
    InvalidMessage,
    InvalidTrigger,
    ScheduledMessage,
    SchedulerControl,
    ScheduleSnapshot,
    ScheduleStatus,
    ScheduleStore,
    StoreError,
    Target,
)
from hexeract_lite.snapshot import MalformedSchedule
from hexeract_lite.store.sqlite import SqliteScheduleStore
from hexeract_lite.trigger import CronExpression, Trigger
from hexeract_lite.worker import SchedulerWorker

from . import pg
from .conftest import T0, FrozenTime
from .test_dst import DAY, HOUR, Window, instant, oracle, scan, seconds, window

MS = timedelta(milliseconds=1)

RULES = (
    "0 2 * * *",  # skipped at spring forward, repeated at fall back (Paris)
    "30 2 * * *",
    "30 1 * * *",  # repeated in New York
    "0 * * * *",  # every real hour
    "*/30 * * * *",
    "15 */2 * * *",
    "0 30 2 * * *",  # six fields: the same rules
    "0 0 * * * *",
)

CHANGES = (
    ("Europe/Paris", 2026, 3),  # Sun 29 Mar 2026, 02:00 -> 03:00
    ("Europe/Paris", 2026, 10),  # Sun 25 Oct 2026, 03:00 -> 02:00
    ("America/New_York", 2026, 3),  # Sun 8 Mar 2026
    ("America/New_York", 2026, 11),  # Sun 1 Nov 2026
)


class Recorder:
    def __init__(self) -> None:
        self.got: list[ScheduledMessage] = []

    def dispatch(self, message: ScheduledMessage) -> None:
        self.got.append(message)


def change_window(name: str, year: int, month: int) -> Window:
    start = seconds(year, month, 1)
    [change] = scan(name, start, start + 31 * DAY)
    w = window(change, 60, reach=6 * HOUR)
    assert w is not None
    return w


@pytest.mark.parametrize(("name", "year", "month"), CHANGES)
def test_a_worker_fires_zoned_rules_at_the_oracle_instants(
    store: ScheduleStore, frozen: FrozenTime, name: str, year: int, month: int
) -> None:
    """The oracle test on the worker path: insert, freeze, run_once at each instant."""
    w = change_window(name, year, month)
    frozen.move_to(instant(w.start))
    want: dict[uuid.UUID, list[datetime]] = {}
    expressions: dict[uuid.UUID, str] = {}
    for rule in RULES:
        fires = [instant(u) for u in oracle(rule, w)]
        msg = ScheduledMessage.cron(
            Target.outbox(), rule, fires[0], "tick", {"rule": rule}, tz=name
        )
        store.insert(msg, 3)
        want[msg.schedule_id] = fires
        expressions[msg.schedule_id] = rule
        snap = store.inspect(msg.schedule_id)
        assert snap is not None and snap.trigger.label() == f"cron:CRON_TZ={name} {rule}"
    sink = Recorder()
    worker = SchedulerWorker(store, sink)
    instants = sorted({t for fires in want.values() for t in fires})
    for t in instants:
        frozen.move_to(t - MS)  # nothing fires early
        assert worker.run_once().claimed == 0, f"something fired before {t}"
        frozen.move_to(t)
        report = worker.run_once()
        due = [sid for sid, fires in want.items() if t in fires]
        assert report.claimed == len(due) and report.rescheduled == len(due), t
    got: dict[uuid.UUID, list[datetime]] = {sid: [] for sid in want}
    for m in sink.got:
        got[m.schedule_id].append(m.scheduled_for)
    for sid, fires in want.items():
        assert got[sid] == fires, f"{expressions[sid]!r} in {name} around {w.change}"
        snap = store.inspect(sid)
        assert snap is not None and snap.scheduled_for > instant(w.end) - timedelta(hours=2)


def test_an_interval_schedule_stays_on_its_grid(store: ScheduleStore, frozen: FrozenTime) -> None:
    """Late deliveries do not shift the grid; a long outage collapses into one catch-up."""
    every = timedelta(minutes=90)
    msg = ScheduledMessage.every(Target.outbox(), every, T0, "tick", {})
    store.insert(msg, 3)
    snap = store.inspect(msg.schedule_id)
    assert snap is not None
    assert snap.trigger.label() == "interval:@every 1h30m from 2026-03-01T12:00:00.000Z"
    sink = Recorder()
    worker = SchedulerWorker(store, sink)
    frozen.move_to(T0 + timedelta(minutes=7))  # late by 7 minutes
    assert worker.run_once().rescheduled == 1
    frozen.move_to(T0 + every + timedelta(seconds=1))
    assert worker.run_once().rescheduled == 1
    frozen.move_to(T0 + 10 * every + timedelta(minutes=3))  # down for eight firings
    assert worker.run_once().rescheduled == 1
    assert worker.run_once().claimed == 0  # one catch-up only
    frozen.move_to(T0 + 11 * every)
    assert worker.run_once().rescheduled == 1
    assert [m.scheduled_for for m in sink.got] == [T0, T0 + every, T0 + 2 * every, T0 + 11 * every]
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.scheduled_for == T0 + 12 * every


def test_pause_and_resume_realign_an_interval_to_its_grid(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    every = timedelta(minutes=90)
    msg = ScheduledMessage.every(Target.outbox(), every, T0 + every, "tick", {})
    store.insert(msg, 3)
    assert store.set_paused(msg.schedule_id, True)
    frozen.move_to(T0 + 4 * every + timedelta(minutes=1))
    assert store.resume(msg.schedule_id)
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.scheduled_for == T0 + 5 * every


# -- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "needle"),
    [
        (
            lambda: ScheduledMessage.cron(
                Target.outbox(), "0 9 * * *", T0, "e", {}, tz="Mars/Base"
            ),
            "'Mars/Base'",
        ),
        (
            lambda: ScheduledMessage.cron(
                Target.outbox(), "CRON_TZ=Nowhere 0 9 * * *", T0, "e", {}
            ),
            "'Nowhere'",
        ),
        (
            lambda: ScheduledMessage.every(Target.outbox(), timedelta(0), T0, "e", {}),
            "every=0 s",
        ),
        (
            lambda: ScheduledMessage.every(Target.outbox(), timedelta(seconds=-5), T0, "e", {}),
            "every=-5 s",
        ),
        (
            lambda: ScheduledMessage.every(
                Target.outbox(), timedelta(microseconds=500), T0, "e", {}
            ),
            "microseconds=500",
        ),
        (
            lambda: ScheduledMessage.every(
                Target.outbox(), timedelta(milliseconds=1, microseconds=1), T0, "e", {}
            ),
            "microseconds=1001",
        ),
        (
            lambda: ScheduledMessage.every(Target.outbox(), "ninety minutes", T0, "e", {}),
            "'ninety minutes'",
        ),
    ],
)
def test_bad_rules_are_refused_naming_the_value(build: object, needle: str) -> None:
    with pytest.raises(InvalidTrigger) as info:
        build()  # type: ignore[operator]
    assert needle in str(info.value)


def test_a_trigger_built_by_hand_is_refused_at_insert(store: ScheduleStore) -> None:
    import attrs

    msg = ScheduledMessage.delay(Target.outbox(), T0, "e", {})
    bad = attrs.evolve(msg, trigger=Trigger("interval"))
    with pytest.raises(InvalidMessage, match=r"Trigger\.every"):
        store.insert(bad, 3)
    assert store.inspect(msg.schedule_id) is None


# -- rows another tool wrote ---------------------------------------------------------------

UNKNOWN_ZONE = "CRON_TZ=Mars/Olympus 0 9 * * *"


def _check_dead_lettered(store: ScheduleStore, sid: uuid.UUID, good: uuid.UUID) -> None:
    with pytest.raises(StoreError, match="Mars/Olympus"):
        store.inspect(sid)
    listed = store.list_pending()
    [odd] = [item for item in listed if isinstance(item, MalformedSchedule)]
    assert odd.schedule_id == sid and "unknown time zone 'Mars/Olympus'" in odd.reason
    claimed = store.claim_due(T0, 10, timedelta(seconds=30))
    assert [c.message.schedule_id for c in claimed] == [good]
    dead = [s for s in store.list_dead_letter() if s.schedule_id == sid]
    assert len(dead) == 1 and dead[0].status is ScheduleStatus.DEAD_LETTERED
    assert "Mars/Olympus" in (
        dead[0].reason if isinstance(dead[0], MalformedSchedule) else dead[0].last_error or ""
    )


def _pair() -> tuple[ScheduledMessage, ScheduledMessage]:
    bad = ScheduledMessage.cron(Target.outbox(), "0 9 * * *", T0 - MS, "e", {}, tz="Europe/Paris")
    good = ScheduledMessage.delay(Target.outbox(), T0 - MS, "e", {})
    return bad, good


def test_an_unknown_zone_in_a_sqlite_row_is_dead_lettered_with_the_reason(
    tmp_path: Path, frozen: FrozenTime
) -> None:
    bad, good = _pair()
    path = tmp_path / "s.db"
    with SqliteScheduleStore.open(path) as store:
        store.insert_many([bad, good], 3)
        conn = apsw.Connection(str(path))
        conn.execute(
            "UPDATE scheduled_messages SET cron_expr = ? WHERE schedule_id = ?",
            (UNKNOWN_ZONE, bad.schedule_id.bytes),
        )
        conn.close()
        _check_dead_lettered(store, bad.schedule_id, good.schedule_id)


def test_an_unknown_zone_in_a_postgres_row_is_dead_lettered_with_the_reason(
    frozen: FrozenTime,
) -> None:
    import psycopg

    url = pg.require_server()
    table = pg.unique_table()
    bad, good = _pair()
    with pg.open_scratch_store(table) as store:
        store.insert_many([bad, good], 3)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                f'UPDATE "{table}" SET cron_expr = %s WHERE schedule_id = %s'.encode(),
                [UNKNOWN_ZONE, bad.schedule_id],
            )
        _check_dead_lettered(store, bad.schedule_id, good.schedule_id)


def test_utc_rows_are_stored_as_before(store: ScheduleStore) -> None:
    """A UTC rule's stored text has no prefix: such rows stay byte-identical."""
    for tz in (None, "UTC"):
        msg = ScheduledMessage.cron(Target.outbox(), "0 9 * * 1", T0, "e", {}, tz=tz)
        assert msg.trigger.expression == "0 9 * * 1"
        store.insert(msg, 3)
        snap = store.inspect(msg.schedule_id)
        assert isinstance(snap, ScheduleSnapshot) and snap.trigger.label() == "cron:0 9 * * 1"
        expr = snap.trigger.cron_expression
        assert expr is not None and expr.tz == "UTC" and expr == CronExpression.parse("0 9 * * 1")


def test_the_frozen_clock_sees_the_zoned_instant() -> None:
    """Under time-machine (tick=False), the rule's next firing after the frozen now is the
    UTC instant of 09:00 Paris on each side of the spring-forward."""
    import time_machine

    rule = CronExpression.parse("0 9 * * *", tz="Europe/Paris")
    for frozen_at, want in (
        (datetime(2026, 3, 28, 12, tzinfo=UTC), datetime(2026, 3, 29, 7, tzinfo=UTC)),
        (datetime(2026, 3, 27, 12, tzinfo=UTC), datetime(2026, 3, 28, 8, tzinfo=UTC)),
    ):
        with time_machine.travel(frozen_at, tick=False):
            assert rule.next_occurrence(datetime.now(UTC)) == want


def test_a_reader_that_knows_only_utc_cron_refuses_interval_and_zoned_texts() -> None:
    """The stored texts of zoned and interval rules do not parse as the reference's
    five- or six-field UTC cron (our UTC-only grammar is the reference's): a reference
    worker refuses such a row instead of firing it at a wrong time."""
    from cronsim import CronSim, CronSimError

    interval = Trigger.every(timedelta(minutes=90), T0)
    assert interval.expression == "@every 1h30m from 2026-03-01T12:00:00.000Z"
    with pytest.raises(InvalidTrigger, match="unknown macro"):
        CronExpression.parse(interval.expression)
    zoned = Trigger.cron("0 9 * * 1-5", tz="Europe/Paris")
    assert zoned.expression == "CRON_TZ=Europe/Paris 0 9 * * 1-5"
    with pytest.raises((CronSimError, ValueError)):
        CronSim(zoned.expression, T0)


def _snap(store: ScheduleStore, sid: uuid.UUID) -> ScheduleSnapshot:
    snap = store.inspect(sid)
    assert isinstance(snap, ScheduleSnapshot)
    return snap


def test_update_of_a_zoned_rule_without_a_zone_keeps_the_zone(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """The README's quick start declares myapp.backup.daily on Europe/Paris and its CLI section
    updates it with ``--cron '30 3 * * *'``: "changes what you pass and keeps the rest". The
    zone stays; an explicit zone, UTC included, moves it."""
    control = SchedulerControl(store)
    control.ensure("myapp.backup.daily", cron="0 3 * * *", tz="Europe/Paris", event_type="b")
    sid = control.id_of("myapp.backup.daily")
    assert control.update("myapp.backup.daily", cron="30 3 * * *", payload={"full": True})
    snap = _snap(store, sid)
    assert snap.trigger.expression == "CRON_TZ=Europe/Paris 30 3 * * *"
    assert snap.scheduled_for == datetime(2026, 3, 2, 2, 30, tzinfo=UTC)  # 03:30 +01
    # the same rule in the same zone: nothing to change
    assert not control.update("myapp.backup.daily", cron="30 3 * * *")
    # an explicit zone still moves it, UTC included
    assert control.update("myapp.backup.daily", cron="30 3 * * *", tz="UTC")
    assert _snap(store, sid).trigger.expression == "30 3 * * *"
    assert control.update("myapp.backup.daily", cron="CRON_TZ=Asia/Tokyo 30 3 * * *")
    assert _snap(store, sid).trigger.expression == "CRON_TZ=Asia/Tokyo 30 3 * * *"
