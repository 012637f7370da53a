"""Pausing a group of named schedules, and pause notes (hexeract_lite.store.pausing), on
every store: one transaction, other groups untouched, the note shown until the resume."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest

from hexeract_lite import (
    InvalidArgument,
    ScheduledMessage,
    SchedulerControl,
    ScheduleSnapshot,
    ScheduleStore,
    Target,
)
from hexeract_lite.store.record import ScheduleRecord

from .conftest import T0, FrozenTime

HOUR = timedelta(hours=1)


def named(store: ScheduleStore, *names: str) -> dict[str, uuid.UUID]:
    control = SchedulerControl(store)
    for name in names:
        control.ensure(name, cron="0 * * * *", event_type="e")
    return {name: control.id_of(name) for name in names}


def snap(store: ScheduleStore, sid: uuid.UUID) -> ScheduleSnapshot:
    found = store.inspect(sid)
    assert found is not None
    return found


def test_pause_group_pauses_the_group_only_and_resume_group_resumes_it(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    ids = named(store, "app.a", "app.b", "app.c.d", "app2.x", "other.y", "app")
    unnamed = ScheduledMessage.cron(Target.mediator(), "0 * * * *", None, "e", None)
    store.insert(unnamed, 3)
    control = SchedulerControl(store)
    assert control.pause_group("app", note="db migration until 14:00") == 3
    group = ("app.a", "app.b", "app.c.d")
    for name, sid in ids.items():
        s = snap(store, sid)
        assert (s.status.value == "paused") is (name in group), name
        assert s.pause_note == ("db migration until 14:00" if name in group else None)
    assert snap(store, unnamed.schedule_id).status.value == "pending"
    assert control.pause_group("app") == 0  # already paused: nothing to do
    assert snap(store, ids["app.a"]).pause_note == "db migration until 14:00"
    frozen.shift(3 * HOUR)  # paused past their instants: each realigns, no catch-up
    assert control.resume_group("app") == 3
    for name in group:
        s = snap(store, ids[name])
        assert s.status.value == "pending" and s.pause_note is None
        assert s.scheduled_for == T0 + 4 * HOUR
    assert control.resume_group("app") == 0


def test_a_schedule_paused_before_keeps_its_own_note(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    ids = named(store, "app.a", "app.b")
    control = SchedulerControl(store)
    assert control.pause(ids["app.a"], note="broken upstream")
    assert control.pause_group("app", note="maintenance") == 1
    assert snap(store, ids["app.a"]).pause_note == "broken upstream"
    assert snap(store, ids["app.b"]).pause_note == "maintenance"
    assert not control.pause(ids["app.a"], note="again")
    assert snap(store, ids["app.a"]).pause_note == "broken upstream"
    assert control.resume(ids["app.a"])
    assert snap(store, ids["app.a"]).pause_note is None
    assert control.pause(ids["app.a"])  # a pause without a note shows none
    assert snap(store, ids["app.a"]).pause_note is None
    # the flag cleared by the plain statement (as the reference's resume does) leaves
    # no note behind for the next pause
    assert control.resume_group("app") == 2 and control.pause_group("app", note="x") == 2
    assert store.set_paused(ids["app.b"], False)
    assert store.set_paused(ids["app.b"], True)
    assert snap(store, ids["app.b"]).pause_note is None


def test_pause_group_is_one_transaction(store: ScheduleStore, frozen: FrozenTime) -> None:
    """A plan that fails on the group's second row leaves the first unwritten too."""
    ids = named(store, "app.a", "app.b", "app.c")
    seen: list[str] = []

    def plan(row: ScheduleRecord, now: datetime) -> tuple[bool, ScheduleRecord | None]:
        seen.append(row.name or "")
        if len(seen) == 2:
            raise RuntimeError("the second row's plan fails")
        new = row.copy()
        new.paused = True
        return True, new

    with pytest.raises(RuntimeError, match="second row"):
        store.modify_named("app.", plan)
    assert seen == ["app.a", "app.b"]  # by name
    assert all(snap(store, sid).status.value == "pending" for sid in ids.values())


def test_terminal_schedules_are_not_part_of_a_group(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    ids = named(store, "app.a", "app.b")
    control = SchedulerControl(store)
    control.cancel(ids["app.b"])
    assert control.pause_group("app") == 1
    assert snap(store, ids["app.b"]).status.value == "cancelled"
    control.cancel(ids["app.a"])
    with pytest.raises(InvalidArgument, match="no live schedule is named in group 'app'"):
        control.pause_group("app")


@pytest.mark.parametrize(
    ("group", "match"),
    [
        ("nosuch", "no live schedule is named in group 'nosuch'"),
        ("app.a", "a group is the part of a name before its first dot, got 'app.a'"),
        ("", "a group must not be empty"),
        (7, "a group must be a str, got 7"),
    ],
)
def test_an_unknown_or_bad_group_is_refused_naming_it(
    store: ScheduleStore, frozen: FrozenTime, group: object, match: str
) -> None:
    ids = named(store, "app.a")
    control = SchedulerControl(store)
    for act in (control.pause_group, control.resume_group):
        with pytest.raises(InvalidArgument, match=match):
            act(group)  # type: ignore[arg-type]
    assert snap(store, ids["app.a"]).status.value == "pending"


@pytest.mark.parametrize(
    ("note", "match"),
    [("", "must not be blank"), ("  ", "blank"), (3, "got 3"), ("x" * 501, "501 characters")],
)
def test_a_bad_note_is_refused_naming_it(
    store: ScheduleStore, frozen: FrozenTime, note: object, match: str
) -> None:
    ids = named(store, "app.a")
    control = SchedulerControl(store)
    with pytest.raises(InvalidArgument, match=match):
        control.pause_group("app", note=note)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match=match):
        control.pause(ids["app.a"], note=note)  # type: ignore[arg-type]
    assert snap(store, ids["app.a"]).status.value == "pending"
