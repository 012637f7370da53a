"""SchedulerControl.upcoming: the firings a schedule has ahead of it, as the worker makes them.

Two proofs: across every offset change of the DST suite's zones, ``upcoming`` gives the
brute-force oracle's instants; and on every store, on a frozen clock, what a real worker
then delivers (late starts, misfire grace, pauses, intervals, one-shots included) is what
``upcoming`` said beforehand.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hexeract_lite import (
    InMemoryScheduleStore,
    InvalidArgument,
    ManualClock,
    ScheduledMessage,
    ScheduleNotFound,
    SchedulerControl,
    SchedulerWorker,
    ScheduleStore,
    Target,
)
from hexeract_lite.cli.output import format_inspect

from .conftest import T0, FrozenTime
from .test_dst import MINUTE_RULES, instant, minute_windows, oracle

RULES = (*MINUTE_RULES[:4], "*/10 0,1 * * *")


class Recorder:
    def __init__(self) -> None:
        self.got: list[ScheduledMessage] = []

    def dispatch(self, message: ScheduledMessage) -> None:
        self.got.append(message)


def test_upcoming_is_the_oracle_across_every_offset_change_of_the_dst_suite() -> None:
    compared = 0
    for w in minute_windows():
        zone = w.change.zone
        clock = ManualClock(instant(w.start))
        store = InMemoryScheduleStore(clock=clock)
        control = SchedulerControl(store)
        for rule in RULES:
            fires = [instant(u) for u in oracle(rule, w)]
            if not fires:
                continue
            msg = ScheduledMessage.cron(Target.outbox(), rule, fires[0], "tick", {}, tz=zone)
            store.insert(msg, 3)
            got = control.upcoming(msg.schedule_id, count=len(fires), until=instant(w.end))
            assert got == fires, f"{rule!r} in {zone} around {w.change}"
            compared += len(fires)
    assert compared > 1000


def _case(rng: random.Random, now: datetime) -> tuple[ScheduledMessage, bool]:
    """A random schedule around ``now``, and whether to pause it."""
    grace = rng.choice([None, timedelta(minutes=10), timedelta(hours=2)])
    first = now + timedelta(minutes=rng.randint(-180, 120))
    kind = rng.choice(["cron", "zoned", "interval", "delay"])
    if kind == "delay":
        msg = ScheduledMessage.delay(Target.outbox(), first, "once", {}, misfire_grace=grace)
    elif kind == "interval":
        every = timedelta(minutes=rng.choice([7, 45, 90]))
        msg = ScheduledMessage.every(Target.outbox(), every, first, "grid", {}, misfire_grace=grace)
    else:
        rule = rng.choice(["*/20 * * * *", "0 * * * *", "30 2 * * *", "15 1,2,3 * * *"])
        tz = rng.choice(["Europe/Paris", "America/New_York"]) if kind == "zoned" else None
        cron = ScheduledMessage.cron(Target.outbox(), rule, first, "cron", {}, tz=tz)
        rule_first = cron.trigger.next_after(first - timedelta(milliseconds=1))
        assert rule_first is not None
        msg = ScheduledMessage.cron(
            Target.outbox(), rule, rule_first, "cron", {}, tz=tz, misfire_grace=grace
        )
    return msg, rng.random() < 0.15


def test_a_worker_then_fires_what_upcoming_said(store: ScheduleStore, frozen: FrozenTime) -> None:
    rng = random.Random(20261201)
    control = SchedulerControl(store)
    worker = SchedulerWorker(store, recorder := Recorder())
    start = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)  # Paris springs forward at 01:00 UTC
    seen = {"paused": 0, "skipped": 0, "overdue": 0}
    for round_ in range(40):
        frozen.move_to(start + timedelta(days=round_ * 7))
        msg, paused = _case(rng, frozen.now())
        late = frozen.now() - msg.scheduled_for
        grace = msg.misfire_grace
        seen["paused"] += paused
        seen["skipped"] += not paused and grace is not None and late > grace
        seen["overdue"] += not paused and late > timedelta(0) and (grace is None or late <= grace)
        store.insert(msg, 3)
        if paused:
            control.pause(msg.schedule_id)
        said = control.upcoming(msg.schedule_id, count=6)
        recorder.got.clear()
        # a running worker: a cycle now, then one at each instant it said
        worker.run_once()
        for at in said:
            frozen.move_to(max(at, frozen.now()))
            worker.run_once()
        fired = [m.scheduled_for for m in recorder.got if m.schedule_id == msg.schedule_id]
        assert fired == said, (msg.trigger.label(), msg.misfire_grace, paused)
        if paused:
            assert said == []
        store.cancel(msg.schedule_id)
    assert min(seen.values()) > 0, seen


def test_upcoming_of_a_retry_waits_out_its_backoff(frozen: FrozenTime) -> None:
    store = InMemoryScheduleStore()
    control = SchedulerControl(store)
    msg = ScheduledMessage.cron(Target.outbox(), "0 * * * *", T0, "tick", {})
    store.insert(msg, 3)
    [occ] = store.claim_due(T0, 1, timedelta(minutes=5))
    assert store.mark_failed(msg.schedule_id, timedelta(minutes=30), "boom", occ.leased_until)
    frozen.move_to(T0 + timedelta(minutes=1))
    # the failed 12:00 firing is retried at 12:30 (listed then); the rule goes on from there
    assert control.upcoming(msg.schedule_id, count=3) == [
        T0 + timedelta(minutes=30),
        T0 + timedelta(hours=1),
        T0 + timedelta(hours=2),
    ]
    assert control.upcoming(msg.schedule_id, until=timedelta(minutes=20)) == []
    assert control.upcoming(msg.schedule_id, until=timedelta(minutes=90)) == [
        T0 + timedelta(minutes=30),
        T0 + timedelta(hours=1),
    ]
    frozen.move_to(T0 + timedelta(minutes=45))  # the backoff has passed: overdue since
    assert control.upcoming(msg.schedule_id, count=1) == [T0 + timedelta(minutes=30)]


def test_a_change_made_during_a_lease_is_listed_after_the_firing_held(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    control = SchedulerControl(store)
    msg = ScheduledMessage.cron(Target.outbox(), "0 * * * *", T0, "tick", {})
    store.insert(msg, 3)
    [occ] = store.claim_due(T0, 1, timedelta(minutes=5))
    moved = T0 + timedelta(hours=3, minutes=30)
    assert control.reschedule(msg.schedule_id, moved)
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.scheduled_for == T0 and snap.next_after_lease == moved
    assert "\nthen moves to     2026-03-01T15:30:00.000Z\n" in format_inspect(snap)
    said = [T0, moved, T0 + timedelta(hours=4), T0 + timedelta(hours=5)]
    assert control.upcoming(msg.schedule_id, count=4) == said
    assert store.reschedule(msg.schedule_id, T0 + timedelta(hours=1), occ.leased_until)
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.scheduled_for == moved and snap.next_after_lease is None
    assert control.upcoming(msg.schedule_id, count=3) == said[1:]
    recorder = Recorder()
    worker = SchedulerWorker(store, recorder)
    for at in said[1:]:
        frozen.move_to(at)
        worker.run_once()
    assert [m.scheduled_for for m in recorder.got] == said[1:]


def test_upcoming_refuses_bad_arguments_and_unknown_schedules(frozen: FrozenTime) -> None:
    store = InMemoryScheduleStore()
    control = SchedulerControl(store)
    msg = ScheduledMessage.delay(Target.outbox(), T0 + timedelta(hours=1), "once", {})
    store.insert(msg, 3)
    assert control.upcoming(msg.schedule_id) == [T0 + timedelta(hours=1)]
    assert control.upcoming(msg.schedule_id, until=T0) == []
    for bad, needle in [
        ({"count": 0}, "count must be an integer from 1 to 10000, got 0"),
        ({"count": True}, "got True"),
        ({"until": timedelta(0)}, "until must be a timedelta > 0"),
        ({"until": datetime(2026, 3, 1)}, "until"),  # naive
    ]:
        with pytest.raises(InvalidArgument, match=needle):
            control.upcoming(msg.schedule_id, **bad)  # type: ignore[arg-type]
    with pytest.raises(ScheduleNotFound):
        control.upcoming("app.nothing")


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from hexeract_lite.cli import main

    capsys.readouterr()
    code = main(["scheduler", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_next_shows_each_firing_in_utc_and_on_the_zone_s_wall_clock(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, frozen: FrozenTime
) -> None:
    db = str(tmp_path / "s.db")
    frozen.move_to(datetime(2026, 3, 27, 12, 0, tzinfo=UTC))  # Paris springs forward on the 29th
    code, _, err = _cli(
        capsys, "ensure", "--conn", db, "--name", "app.wake", "--cron", "30 8 * * *",
        "--tz", "Europe/Paris", "--event-type", "wake",
    )  # fmt: skip
    assert code == 0, err
    before = Path(db).read_bytes()
    code, out, _ = _cli(capsys, "next", "--conn", db, "app.wake", "--count", "3")
    assert code == 0
    assert out.splitlines() == [
        "2026-03-28T07:30:00.000Z  2026-03-28 08:30:00 CET",
        "2026-03-29T06:30:00.000Z  2026-03-29 08:30:00 CEST",
        "2026-03-30T06:30:00.000Z  2026-03-30 08:30:00 CEST",
    ]
    code, out, _ = _cli(
        capsys, "next", "--conn", db, "app.wake", "--until", "2d", "--tz", "Asia/Tokyo",
        "--format", "json",
    )  # fmt: skip
    shown = json.loads(out)
    assert shown["zone"] == "Asia/Tokyo" and shown["status"] == "pending"
    assert shown["firings"] == [
        {"at": "2026-03-28T07:30:00.000Z", "local": "2026-03-28T16:30:00.000+09:00"},
        {"at": "2026-03-29T06:30:00.000Z", "local": "2026-03-29T15:30:00.000+09:00"},
    ]
    code, out, _ = _cli(capsys, "next", "--conn", db, "app.wake", "--until", "1s")
    assert (code, out.strip()) == (
        0,
        f"Schedule {shown['schedule_id']} has no firing within --until 1s;"
        " the next is at 2026-03-28T07:30:00.000Z.",
    )
    code, out, _ = _cli(capsys, "inspect", "--conn", db, "--name", "app.wake")
    assert "scheduled for (local)  2026-03-28 08:30:00 CET" in out
    assert "scheduled_for_local" not in out  # a JSON field; the text has its own line
    assert _cli(capsys, "pause", "--conn", db, "--name", "app.wake")[0] == 0
    before = Path(db).read_bytes()
    code, out, _ = _cli(capsys, "next", "--conn", db, "app.wake")
    assert code == 0 and out.strip().endswith("has no upcoming firing (paused).")
    assert Path(db).read_bytes() == before  # read-only
    code, _, err = _cli(capsys, "next", "--conn", db, "app.nope")
    assert code == 1 and "no schedule named 'app.nope'" in err
    code, _, err = _cli(capsys, "next", "--conn", db, "app.wake", "--tz", "Mars/Base")
    assert code == 2 and "--tz 'Mars/Base'" in err
    code, _, err = _cli(capsys, "next", "--conn", db, "app.wake", "--count", "0")
    assert code == 2 and "--count" in err
