"""Review round 4a: defects found by exercising the README's named schedules, time
zones, misfire grace and worker sections from outside."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hexeract_lite import SchedulerControl, ScheduleSnapshot, ScheduleStore
from hexeract_lite.cli import main

from .conftest import FrozenTime


def _snap(store: ScheduleStore, sid: uuid.UUID) -> ScheduleSnapshot:
    snap = store.inspect(sid)
    assert isinstance(snap, ScheduleSnapshot)
    return snap


# --- update(cron=...) without a zone keeps the schedule's zone --------------------------


def test_update_of_a_zoned_rule_without_a_zone_keeps_the_zone(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """The README's quick start declares myapp.backup.daily on Europe/Paris and its CLI
    section updates it with ``--cron '30 3 * * *'``: "changes what you pass and keeps
    the rest". Before, the rule silently moved to UTC (an hour off in winter)."""
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


def test_cli_update_cron_without_tz_keeps_the_zone(
    tmp_path: Path, frozen: FrozenTime, capsys: pytest.CaptureFixture[str]
) -> None:
    conn = ["--conn", str(tmp_path / "s.db")]
    name = ["--name", "myapp.backup.daily"]
    rule = ["--cron", "0 3 * * *", "--tz", "Europe/Paris", "--event-type", "backup.run"]
    assert main(["scheduler", "ensure", *name, *rule, *conn]) == 0
    assert main(["scheduler", "update", *name, "--cron", "30 3 * * *", *conn]) == 0
    capsys.readouterr()
    assert main(["scheduler", "inspect", *name, "--format", "json", *conn]) == 0
    shown = capsys.readouterr().out
    assert '"trigger": "cron:CRON_TZ=Europe/Paris 30 3 * * *"' in shown
    assert '"scheduled_for": "2026-03-02T02:30:00.000Z"' in shown


# --- the worker command's help states the real defaults ---------------------------------


def test_worker_help_states_the_configs_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    """``--min-cycle-delay`` said "default: 5ms" (the reference's); the default is 2 ms."""
    from hexeract_lite import SchedulerWorkerConfig
    from hexeract_lite.cli.args import parse_duration

    assert main(["scheduler", "worker", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    defaults = SchedulerWorkerConfig()
    for flag, field in (
        ("--poll-interval", "poll_interval"),
        ("--lease", "lease"),
        ("--dispatch-timeout", "dispatch_timeout"),
        ("--retry-base-delay", "retry_base_delay"),
        ("--retry-max-delay", "retry_max_delay"),
        ("--min-cycle-delay", "min_cycle_delay"),
    ):
        shown = text.rsplit(f"{flag} DURATION", 1)[1].split("(default: ", 1)[1].split(")", 1)[0]
        assert parse_duration(shown) == getattr(defaults, field), flag
    shown = text.rsplit("--batch-size N", 1)[1].split("(default: ", 1)[1].split(")", 1)[0]
    assert int(shown) == defaults.batch_size


# --- RetryPolicy.next_delay names a bad attempts value ----------------------------------


@pytest.mark.parametrize("attempts", ["x", "3", 2.5, None, True])
def test_next_delay_refuses_an_attempts_that_is_not_an_int(attempts: object) -> None:
    """Before: ``"x"`` leaked int()'s bare ValueError, ``None`` a TypeError, and ``"3"``,
    ``2.5`` and ``True`` were silently read as 3, 2 and 1."""
    from hexeract_lite import InvalidArgument, RetryPolicy

    with pytest.raises(InvalidArgument, match="attempts"):
        RetryPolicy(jitter=False).next_delay(attempts)  # type: ignore[arg-type]


def test_next_delay_still_counts_negative_attempts_as_zero() -> None:
    from datetime import timedelta

    from hexeract_lite import RetryPolicy

    policy = RetryPolicy(jitter=False)
    assert policy.next_delay(-3) == policy.next_delay(0) == timedelta(seconds=1)
    assert policy.next_delay(3) == timedelta(seconds=8)


# --- an interval's anchor is never rounded down ----------------------------------------


def test_an_interval_never_fires_before_its_anchor() -> None:
    """README: "a fraction of a millisecond rounded up (a message never fires before the
    instant you asked for)". ``every(..., anchor=now)`` with now's microseconds fired up to a
    millisecond early (the anchor was truncated); a delay and a cron ``first`` round up."""
    from datetime import timedelta

    from hexeract_lite import Interval, ScheduledMessage, Target

    anchor = datetime(2026, 3, 1, 12, 0, 0, 500, tzinfo=UTC)
    message = ScheduledMessage.every(Target.outbox(), timedelta(minutes=1), anchor, "e", None)
    assert message.scheduled_for == datetime(2026, 3, 1, 12, 0, 0, 1000, tzinfo=UTC)
    assert message.scheduled_for >= anchor
    assert Interval.of("1m", anchor).anchor >= anchor
    exact = datetime(2026, 3, 1, 12, 0, 0, 2000, tzinfo=UTC)
    assert Interval.of("1m", exact).anchor == exact  # whole milliseconds stay as they are


# --- declaring a delivered one-shot with another instant settles on UNCHANGED -----------


def test_a_delivered_one_shot_declared_with_another_instant_is_unchanged_at_every_start(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """A delivered one-shot keeps its status and its instant (its history); before, a
    declaration with another ``at`` reported UPDATED, and wrote the row, at every start
    forever, since the instant it compared was never written."""
    from datetime import timedelta

    from hexeract_lite import SchedulerWorker
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


# --- reconcile checks every entry before writing ----------------------------------------


def _bad_entries(control: SchedulerControl) -> list[object]:
    bad = control.declare("app.bad", cron="0 4 * * *", event_type="e")
    return [(bad, 0), (bad, "3"), (bad,), (bad, 3, 4)]


@pytest.mark.parametrize("which", range(4))
def test_reconcile_with_a_bad_entry_writes_nothing(
    store: ScheduleStore, frozen: FrozenTime, which: int
) -> None:
    """A bad budget or a malformed pair after good entries: before, the good ones were
    created (or a bare ValueError from unpacking leaked) before the bad one was seen."""
    from hexeract_lite import InvalidArgument

    control = SchedulerControl(store)
    good = control.declare("app.good", cron="0 3 * * *", event_type="e")
    with pytest.raises(InvalidArgument):
        control.reconcile("app", [good, _bad_entries(control)[which]])  # type: ignore[list-item]
    assert store.inspect(control.id_of("app.good")) is None
    assert store.inspect(control.id_of("app.bad")) is None


def test_reconcile_of_something_not_iterable_is_invalid_argument(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    from hexeract_lite import InvalidArgument

    with pytest.raises(InvalidArgument, match="reconcile"):
        SchedulerControl(store).reconcile("app", 5)  # type: ignore[arg-type]


# --- run_async refuses a stop event it cannot await -------------------------------------

_RUN_ASYNC_WITH_A_THREADING_EVENT = """
import asyncio, threading
from hexeract_lite import InMemoryScheduleStore, InvalidArgument, SchedulerWorker

async def main():
    worker = SchedulerWorker(InMemoryScheduleStore(), lambda m: None)
    try:
        await asyncio.wait_for(worker.run_async(threading.Event()), 5)
    except InvalidArgument as exc:
        print("refused:", exc)
    except TimeoutError:
        print("ran")

asyncio.run(main())
"""


def test_run_async_with_a_threading_event_is_refused_not_a_blocked_loop() -> None:
    """``worker.run(stop)`` takes a threading.Event; handing the same one to
    ``run_async`` blocked the event loop for good (``stop.wait()`` called on the loop
    with no timeout), so not even ``wait_for`` could end it. Run in a child process:
    before the fix it never returned."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _RUN_ASYNC_WITH_A_THREADING_EVENT],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert "refused: run_async's stop must be an asyncio.Event" in done.stdout


@pytest.mark.parametrize("stop", [5, "x"])
def test_run_async_names_a_stop_that_is_not_an_event(stop: object) -> None:
    import asyncio

    from hexeract_lite import InMemoryScheduleStore, InvalidArgument, SchedulerWorker

    worker = SchedulerWorker(InMemoryScheduleStore(), lambda m: None)
    with pytest.raises(InvalidArgument, match=r"asyncio\.Event"):
        asyncio.run(worker.run_async(stop))  # type: ignore[arg-type]


# --- the worker names a bad clock, and a bad stop timeout -------------------------------


def test_a_worker_refuses_a_clock_without_now() -> None:
    """Before: accepted, then the first cycle raised a bare AttributeError ('int' object
    has no attribute 'now'); the SQLite and PostgreSQL stores already refuse it."""
    from hexeract_lite import InMemoryScheduleStore, InvalidConfiguration, SchedulerWorker

    with pytest.raises(InvalidConfiguration, match="clock"):
        SchedulerWorker(InMemoryScheduleStore(), lambda m: None, clock=5)  # type: ignore[arg-type]


def test_stop_names_a_bad_timeout() -> None:
    from hexeract_lite import InMemoryScheduleStore, InvalidArgument, SchedulerWorker

    handle = SchedulerWorker(InMemoryScheduleStore(), lambda m: None).start()
    try:
        with pytest.raises(InvalidArgument, match="timeout"):
            handle.stop("x")  # type: ignore[arg-type]
        assert handle.is_alive  # a refused stop stops nothing
    finally:
        assert handle.stop(10)
