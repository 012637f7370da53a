"""SchedulerControl: schedule, inspect, pause, resume, cancel, replay (frozen clock)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from hexeract_lite import (
    NotReplayable,
    ScheduledMessage,
    ScheduleNotFound,
    ScheduleStatus,
    ScheduleStore,
    Target,
)
from hexeract_lite.control import DEFAULT_MAX_ATTEMPTS, SchedulerControl
from hexeract_lite.worker import CycleReport, SchedulerWorker

from .conftest import T0, FrozenTime

S = timedelta(seconds=1)


def one_shot(delay: timedelta = timedelta(0)) -> ScheduledMessage:
    return ScheduledMessage.delay(Target.outbox(), T0 + delay, "reminder", {"n": 1})


def every_minute() -> ScheduledMessage:
    return ScheduledMessage.cron(Target.bus("tick"), "* * * * *", T0, "tick", None)


def test_schedule_inserts_with_the_default_budget(store: ScheduleStore, frozen: FrozenTime) -> None:
    control = SchedulerControl(store)
    msg = one_shot()
    assert control.schedule(msg) == msg.schedule_id
    snap = control.inspect(msg.schedule_id)
    assert snap.status is ScheduleStatus.PENDING and snap.max_attempts == DEFAULT_MAX_ATTEMPTS == 5
    many = [one_shot(i * S) for i in range(3)]
    assert control.schedule_many(many, max_attempts=2) == [m.schedule_id for m in many]
    assert {getattr(s, "max_attempts", None) for s in control.list_pending()} == {5, 2}


def test_inspect_accepts_text_ids_and_raises_for_unknown_ones(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    control = SchedulerControl(store)
    msg = one_shot()
    control.schedule(msg)
    assert control.inspect(str(msg.schedule_id)).schedule_id == msg.schedule_id
    unknown = uuid.uuid4()
    with pytest.raises(ScheduleNotFound) as info:
        control.inspect(unknown)
    assert info.value.schedule_id == unknown
    with pytest.raises(ScheduleNotFound, match="no schedule named 'not-a-uuid'"):
        control.inspect("not-a-uuid")  # text that is no UUID is a name


@pytest.mark.parametrize("action", ["pause", "resume", "cancel", "replay"])
def test_unknown_ids_are_not_found(store: ScheduleStore, frozen: FrozenTime, action: str) -> None:
    with pytest.raises(ScheduleNotFound):
        getattr(SchedulerControl(store), action)(uuid.uuid4())


def test_pause_stops_claims_and_resume_brings_it_back(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    control = SchedulerControl(store)
    msg = one_shot()
    control.schedule(msg)
    worker = SchedulerWorker(store, lambda m: None)
    assert control.pause(msg.schedule_id) is True
    assert control.pause(msg.schedule_id) is False, "already paused"
    assert control.inspect(msg.schedule_id).status is ScheduleStatus.PAUSED
    assert worker.run_once() == CycleReport()
    assert control.resume(msg.schedule_id) is True
    assert control.resume(msg.schedule_id) is False, "not paused"
    assert worker.run_once() == CycleReport(claimed=1, delivered=1)


def test_resume_of_a_past_due_cron_realigns_without_catch_up(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    control = SchedulerControl(store)
    msg = every_minute()
    control.schedule(msg)
    fired: list[ScheduledMessage] = []
    worker = SchedulerWorker(store, fired.append)
    control.pause(msg.schedule_id)
    frozen.shift(10 * 60 * S + 30 * S)  # ten ticks pass while paused
    assert control.resume(msg.schedule_id) is True
    snap = control.inspect(msg.schedule_id)
    assert snap.status is ScheduleStatus.PENDING
    assert snap.scheduled_for == T0 + 11 * 60 * S, "the next instant after now"
    assert worker.run_once() == CycleReport(), "no catch-up firing for the pause"
    frozen.move_to(T0 + 11 * 60 * S)
    assert worker.run_once().rescheduled == 1
    assert [m.scheduled_for for m in fired] == [T0 + 11 * 60 * S]


def test_resume_of_a_future_one_shot_keeps_its_instant(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    control = SchedulerControl(store)
    msg = one_shot(60 * S)
    control.schedule(msg)
    control.pause(msg.schedule_id)
    frozen.shift(10 * S)
    control.resume(msg.schedule_id)
    assert control.inspect(msg.schedule_id).scheduled_for == T0 + 60 * S


def test_cancel_stops_a_cron_and_is_a_no_op_on_terminal_schedules(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    control = SchedulerControl(store)
    cron, done = every_minute(), one_shot()
    control.schedule_many([cron, done])
    fired: list[ScheduledMessage] = []
    worker = SchedulerWorker(store, fired.append)
    assert worker.run_once() == CycleReport(claimed=2, delivered=1, rescheduled=1)
    assert control.cancel(cron.schedule_id) is True
    snap = control.inspect(cron.schedule_id)
    assert snap.status is ScheduleStatus.CANCELLED and snap.cancelled_at == T0
    assert control.cancel(cron.schedule_id) is False
    assert control.cancel(done.schedule_id) is False, "delivered is terminal"
    assert control.inspect(done.schedule_id).status is ScheduleStatus.DELIVERED
    assert control.pause(done.schedule_id) is False
    frozen.shift(5 * 60 * S)
    assert worker.run_once() == CycleReport()
    assert len(fired) == 2


def test_replay_only_dead_lettered(store: ScheduleStore, frozen: FrozenTime) -> None:
    control = SchedulerControl(store)
    msg = one_shot()
    control.schedule(msg, max_attempts=1)

    def fail(_: ScheduledMessage) -> None:
        raise RuntimeError("nope")

    with pytest.raises(NotReplayable, match="pending"):
        control.replay(msg.schedule_id)
    SchedulerWorker(store, fail).run_once()
    assert [s.schedule_id for s in control.list_dead_letter()] == [msg.schedule_id]
    control.replay(str(msg.schedule_id))
    snap = control.inspect(msg.schedule_id)
    assert snap.status is ScheduleStatus.PENDING and snap.attempts == 0
    assert control.list_dead_letter() == []
