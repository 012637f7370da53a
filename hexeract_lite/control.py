"""SchedulerControl: what an application (or the CLI) does with schedules it made."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from types import EllipsisType
from typing import Any

import attrs

from ._time import EPOCH
from .backfill import DEFAULT_BACKFILL_LIMIT, backfill_plan, check_window
from .errors import InvalidArgument, ScheduleNotFound
from .interval import Interval
from .message import ScheduledMessage, Target, encode_payload
from .names import check_group, check_name, group_of, name_id
from .policy import POLICY_FIELDS, CatchUp, policy_arguments, policy_of
from .runlog import RunOutcome, RunRecord
from .snapshot import MalformedSchedule, ScheduleSnapshot, ScheduleStatus
from .store.base import ScheduleStore
from .store.changes import Change, EnsureResult, Plan, check_same_kind
from .store.checks import check_max_attempts
from .store.pausing import check_note, pause_plan, resume_change
from .store.sql.dialect import MalformedRowError
from .trigger import CronExpression
from .upcoming import check_upcoming, upcoming_firings
from .zoned import CRON_TZ_PREFIX

DEFAULT_MAX_ATTEMPTS = 5
"""The attempt budget :meth:`SchedulerControl.schedule` gives each occurrence by default."""

_NOT_DECLARED = ("self", "max_attempts", "connection")  # what ensure takes and declare not

ScheduleIdLike = uuid.UUID | str
"""A schedule id, as a :class:`uuid.UUID` or its text form, or a schedule's name."""


def _id_or_name(value: object) -> tuple[uuid.UUID, str | None]:
    """A UUID (or its text) is an id; any other str is a schedule name."""
    if isinstance(value, uuid.UUID):
        return value, None
    if isinstance(value, str):
        try:
            return uuid.UUID(value), None
        except ValueError:
            return name_id(value), value
    raise InvalidArgument(f"expected a schedule id or name, got {value!r:.100}")


@attrs.frozen
class ReconcileReport:
    """What :meth:`SchedulerControl.reconcile` did, name by name.

    .. versionadded:: 0.2.0
    """

    ensured: dict[str, EnsureResult]
    """Each declared name and what ensuring it did."""
    cancelled: list[str]
    """The group's names that were not declared and were cancelled."""

    def to_json_dict(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {
            "ensured": {name: result.value for name, result in self.ensured.items()},
            "cancelled": list(self.cancelled),
        }


class SchedulerControl:
    """Schedule, inspect, pause, resume, cancel and replay, over any store.

    A schedule id is a :class:`uuid.UUID` or its text (malformed: :class:`InvalidArgument`;
    unknown: :class:`ScheduleNotFound`). State changes return whether they changed something.

    .. versionadded:: 0.1.0"""

    def __init__(self, store: ScheduleStore) -> None:
        self.store = store

    def schedule(
        self, message: ScheduledMessage, *, max_attempts: int = DEFAULT_MAX_ATTEMPTS
    ) -> uuid.UUID:
        """Store ``message`` as a new pending schedule, each occurrence with ``max_attempts``
        (>= 1) attempts; return its id. An id already stored: :class:`DuplicateSchedule`."""
        self.store.insert(message, max_attempts)
        return message.schedule_id

    def schedule_many(
        self, messages: Sequence[ScheduledMessage], *, max_attempts: int = DEFAULT_MAX_ATTEMPTS
    ) -> list[uuid.UUID]:
        """Store every message in one transaction, all or nothing; return their ids."""
        self.store.insert_many(messages, max_attempts)
        return [m.schedule_id for m in messages]

    async def schedule_async(
        self, message: ScheduledMessage, *, max_attempts: int = DEFAULT_MAX_ATTEMPTS
    ) -> uuid.UUID:
        """:meth:`schedule` on a worker thread (``asyncio.to_thread``).

        .. versionadded:: 0.2.0"""
        import asyncio  # loaded by asyncio code only: `import hexeract_lite` stays light

        return await asyncio.to_thread(self.schedule, message, max_attempts=max_attempts)

    async def schedule_many_async(
        self, messages: Sequence[ScheduledMessage], *, max_attempts: int = DEFAULT_MAX_ATTEMPTS
    ) -> list[uuid.UUID]:
        """:meth:`schedule_many` on a worker thread.

        .. versionadded:: 0.2.0"""
        import asyncio

        return await asyncio.to_thread(self.schedule_many, messages, max_attempts=max_attempts)

    def inspect(self, schedule_id: ScheduleIdLike) -> ScheduleSnapshot:
        """The schedule's current snapshot; unknown id or name: :class:`ScheduleNotFound`.

        .. versionchanged:: 0.2.0
           A schedule's name in place of its id."""
        sid, name = _id_or_name(schedule_id)
        snap = self.store.inspect(sid)
        if snap is None:
            raise ScheduleNotFound(sid, name)
        return snap

    def pause(self, schedule_id: ScheduleIdLike, *, note: str | None = None) -> bool:
        """Stop claiming the schedule until :meth:`resume`; True if it was not paused.

        An occurrence already held may still be delivered; a terminal schedule is left alone.
        ``note`` (up to 500 printable characters): why, shown until resumed.

        .. versionchanged:: 0.2.0
           ``note=``; a schedule's name in place of its id."""
        sid = self._existing(schedule_id)
        if note is None:
            return self.store.set_paused(sid, True)
        return self.store.modify_record(sid, pause_plan(check_note(note)))

    def pause_group(self, group: str, *, note: str | None = None) -> int:
        """Pause every live schedule named in ``group`` (a name's part before its first dot)
        in one transaction, with ``note``; return how many were paused. None live:
        :class:`InvalidArgument`.

        .. versionadded:: 0.2.0"""
        return self._group(group, pause_plan(check_note(note)))

    def resume_group(self, group: str) -> int:
        """Resume every paused schedule named in ``group`` in one transaction, as
        :meth:`resume` does; return how many. None live: :class:`InvalidArgument`.

        .. versionadded:: 0.2.0"""
        return self._group(group, resume_change())

    def _group(self, group: str, plan: Plan[bool]) -> int:
        check_group(group)
        answers = self.store.modify_named(group + ".", plan)
        if not answers:
            raise InvalidArgument(
                f"no live schedule is named in group {group!r} (names {group}.<...>)"
            )
        return sum(answers)

    def backfill(
        self,
        id_or_name: uuid.UUID | str,
        start: datetime,
        end: datetime,
        *,
        limit: int = DEFAULT_BACKFILL_LIMIT,
    ) -> int:
        """Fire the rule's instants in ``[start, end]`` (aware), in order, with their own
        occurrence ids, then go on on the rule; return how many.

        Starts once a firing in flight is acknowledged; never skipped by the misfire grace.
        More than ``limit`` (1 to 100000), none, or a bad window: :class:`InvalidArgument`;
        a one-shot, paused or terminal schedule: :class:`NotChangeable`.

        .. versionadded:: 0.2.0"""
        first, last, limit = check_window(start, end, limit)
        return self.store.modify_record(
            self._existing(id_or_name), backfill_plan(first, last, limit)
        )

    def resume(self, schedule_id: ScheduleIdLike) -> bool:
        """Resume a paused schedule and clear its note; True when it is no longer paused.

        A cron schedule whose instant passed while paused moves to its first instant after
        now (attempts reset; no catch-up); with none it stays paused (False).

        .. versionchanged:: 0.2.0
           A schedule's name in place of its id."""
        return self.store.resume(self._existing(schedule_id))

    def cancel(self, schedule_id: ScheduleIdLike) -> bool:
        """Cancel the schedule for good; True if it did (a terminal one: False). An occurrence
        already claimed may still be dispatched; nothing fires after it.

        .. versionchanged:: 0.2.0
           A schedule's name in place of its id."""
        return self.store.cancel(self._existing(schedule_id))

    def replay(self, schedule_id: ScheduleIdLike) -> None:
        """Give a dead-lettered schedule a fresh start, due now, with a full budget; any other
        status: :class:`NotReplayable`.

        .. versionchanged:: 0.2.0
           A schedule's name in place of its id."""
        self.store.replay(self._existing(schedule_id))

    # -- named schedules and changes in place -------------------------------------

    def ensure(
        self,
        name: str,
        *,
        event_type: str,
        payload: Any = None,
        cron: str | CronExpression | None = None,
        at: datetime | None = None,
        every: timedelta | str | None = None,
        first: datetime | None = None,
        target: Target | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        tz: str | None = None,
        misfire_grace: timedelta | None = None,
        end_at: datetime | None = None,
        max_firings: int | None = None,
        jitter: timedelta | None = None,
        catch_up: CatchUp | None = None,
        catch_up_limit: int | None = None,
        connection: object = None,
    ) -> EnsureResult:
        """Make the schedule called ``name`` exist as declared; say what that took.

        Exactly one of ``cron`` (from ``first``, default its next instant; on ``tz``'s wall
        clock), ``every`` (a grid anchored at ``first``, default the epoch) or ``at``.
        Missing or cancelled: created; as stored: unchanged; else updated in place. Another
        trigger kind: :class:`NotChangeable`. The id is
        :func:`~hexeract_lite.names.name_id` of ``name``. ``end_at`` ... ``catch_up_limit``:
        the :class:`~hexeract_lite.policy.SchedulePolicy`. ``connection``: an open
        transaction on the store's database that the change commits with.

        .. versionadded:: 0.2.0"""
        declared = {k: v for k, v in locals().items() if k not in _NOT_DECLARED}  # no local before
        return self.store.ensure(self.declare(**declared), max_attempts, connection=connection)

    def reconcile(
        self, group: str, declared: Iterable[ScheduledMessage | tuple[ScheduledMessage, int]]
    ) -> ReconcileReport:
        """Ensure every declared schedule and cancel the group's others.

        ``declared``: named messages of ``group``, or ``(message, max_attempts)`` pairs, all
        checked before anything is written. Schedules outside the group are never touched.

        .. versionadded:: 0.2.0"""
        check_group(group)
        try:
            entries = list(declared)
        except TypeError:
            raise InvalidArgument(
                f"reconcile takes a list of declared schedules, got {declared!r:.100}"
            ) from None
        items: list[tuple[ScheduledMessage, int]] = []
        for entry in entries:
            pair = entry if isinstance(entry, tuple) else (entry, DEFAULT_MAX_ATTEMPTS)
            message = pair[0] if len(pair) == 2 else None
            if not isinstance(message, ScheduledMessage) or message.name is None:
                raise InvalidArgument(
                    "reconcile takes named ScheduledMessages or (message, max_attempts)"
                    f" pairs, got {entry!r:.200}"
                )
            budget = check_max_attempts(pair[1])
            if group_of(message.name) != group:
                raise InvalidArgument(
                    f"schedule name {message.name!r} is not in group {group!r}"
                    f" (its group is the part before the first dot)"
                )
            items.append((message, budget))
        names = [m.name for m, _ in items]
        if len(set(names)) != len(names):
            raise InvalidArgument(f"reconcile of group {group!r} declares a name twice")
        stored = {s.name: s for s in self.store.list_named(group + ".")}
        for m, _ in items:  # a kind ensure would refuse: refused before any is written
            snap = stored.get(m.name)
            if snap is not None and snap.status is not ScheduleStatus.CANCELLED:
                check_same_kind(snap.schedule_id, snap.trigger.kind, m)
        ensured = {m.name or "": self.store.ensure(m, budget) for m, budget in items}
        cancelled: list[str] = []
        for snap in self.store.list_named(group + "."):
            undeclared = snap.name is not None and snap.name not in ensured
            if undeclared and self.store.cancel(snap.schedule_id):
                cancelled.append(snap.name or "")
        return ReconcileReport(ensured, cancelled)

    def declare(
        self,
        name: str,
        *,
        event_type: str,
        payload: Any = None,
        cron: str | CronExpression | None = None,
        at: datetime | None = None,
        every: timedelta | str | None = None,
        first: datetime | None = None,
        target: Target | None = None,
        tz: str | None = None,
        misfire_grace: timedelta | None = None,
        end_at: datetime | None = None,
        max_firings: int | None = None,
        jitter: timedelta | None = None,
        catch_up: CatchUp | None = None,
        catch_up_limit: int | None = None,
    ) -> ScheduledMessage:
        """The message :meth:`ensure` would store, for :meth:`reconcile`'s list.

        .. versionadded:: 0.2.0"""
        policy = policy_of(end_at, max_firings, jitter, catch_up, catch_up_limit)  # checked first
        check_name(name)
        target = Target.mediator() if target is None else target
        if sum(x is not None for x in (cron, at, every)) != 1:
            raise InvalidArgument(f"schedule {name!r}: give exactly one of cron=, every= or at=")
        if tz is not None and cron is None:
            raise InvalidArgument(f"schedule {name!r}: tz= goes with cron= only")
        kw: dict[str, Any] = {"name": name, "misfire_grace": misfire_grace}
        kw.update(policy_arguments(policy))
        clock = self.store.clock
        if cron is not None:
            return ScheduledMessage.cron(
                target, cron, first, event_type, payload, clock=clock, tz=tz, **kw
            )
        if every is not None:
            anchor = first if first is not None else default_grid_anchor(every, clock.now())
            return ScheduledMessage.every(target, every, anchor, event_type, payload, **kw)
        if first is not None:
            raise InvalidArgument(f"schedule {name!r}: first= goes with cron= or every=, not at=")
        if policy is not None:
            raise InvalidArgument(
                f"schedule {name!r}: end_at=, max_firings=, jitter= and catch_up= go with"
                " cron= or every=, not at="
            )
        assert at is not None
        return ScheduledMessage.delay(target, at, event_type, payload, **kw)

    @staticmethod
    def id_of(id_or_name: uuid.UUID | str) -> uuid.UUID:
        """The schedule id of an id (or its text) or a name; no store is read.

        .. versionadded:: 0.2.0"""
        return _id_or_name(id_or_name)[0]

    def _existing(self, id_or_name: object) -> uuid.UUID:
        sid, name = _id_or_name(id_or_name)
        if name is not None:
            try:
                found = self.store.inspect(sid) is not None
            except MalformedRowError:  # it exists: what is done to it decides
                found = True
            if not found:
                raise ScheduleNotFound(sid, name)
        return sid

    def abort(self, id_or_name: uuid.UUID | str, *, cancel: bool = False) -> bool:
        """Ask the schedule's dispatch in flight to stop; True when the request was stored.

        Within ``poll_interval`` an async handler is cancelled, a sync one sees
        ``current_dispatch().should_abort()``; recorded as ``aborted`` (a failed attempt, or
        with ``cancel=True`` the schedule cancelled). Nothing in flight: False.

        .. versionadded:: 0.2.0"""
        if not isinstance(cancel, bool):
            raise InvalidArgument(f"cancel must be True or False, got cancel={cancel!r:.100}")
        sid = self._existing(id_or_name)
        return self.store.request_abort(sid, "cancel" if cancel else "abort")

    def reschedule(self, id_or_name: uuid.UUID | str, at: datetime) -> bool:
        """Move the next firing to ``at`` (aware), attempts and last error reset; a recurring
        one then goes on on its rule (in flight: once that firing is acknowledged). Terminal,
        or a one-shot in flight: :class:`NotChangeable`.

        .. versionadded:: 0.2.0"""
        return self.store.move(self._existing(id_or_name), at)

    def update(
        self,
        id_or_name: uuid.UUID | str,
        *,
        payload: Any = ...,
        cron: str | CronExpression | None = None,
        target: Target | None = None,
        event_type: str | None = None,
        max_attempts: int | None = None,
        tz: str | None = None,
        misfire_grace: timedelta | EllipsisType | None = ...,
        end_at: datetime | EllipsisType | None = ...,
        max_firings: int | EllipsisType | None = ...,
        jitter: timedelta | EllipsisType | None = ...,
        catch_up: CatchUp | EllipsisType | None = ...,
        catch_up_limit: int | EllipsisType | None = ...,
    ) -> bool:
        """Change a schedule in place (an argument left out stays); True when a value differed.

        Terminal, or ``cron`` for a schedule that is not a cron one: :class:`NotChangeable`.
        A ``cron`` text without a zone (``CRON_TZ=`` or ``tz``) keeps the schedule's zone.
        ``misfire_grace`` ... ``catch_up_limit``: None for the default.

        .. versionadded:: 0.2.0"""
        if tz is not None and cron is None:
            raise InvalidArgument("update: tz= goes with cron= only")
        policy = (end_at, max_firings, jitter, catch_up, catch_up_limit)
        change = Change(
            event_type=event_type,
            payload_json=None if payload is ... else encode_payload(payload),
            target=target,
            cron=None if cron is None else CronExpression.parse(str(cron), tz=tz),
            keep_zone=tz is None
            and isinstance(cron, str)
            and not cron.strip().startswith(CRON_TZ_PREFIX),
            max_attempts=max_attempts,
            misfire_grace=None if isinstance(misfire_grace, EllipsisType) else misfire_grace,
            set_misfire_grace=not isinstance(misfire_grace, EllipsisType),
            policy=tuple(
                (k, v) for k, v in zip(POLICY_FIELDS, policy, strict=True) if v is not ...
            ),
        )
        return self.store.update_schedule(self._existing(id_or_name), change)

    def run_now(self, id_or_name: uuid.UUID | str) -> bool:
        """Fire the schedule once as soon as a worker can; a recurring one then goes on on its
        rule. Terminal or paused: :class:`NotChangeable`. False: a one-shot already in flight.

        .. versionadded:: 0.2.0"""
        return self.store.run_now(self._existing(id_or_name))

    def upcoming(
        self,
        id_or_name: uuid.UUID | str,
        *,
        count: int = 10,
        until: datetime | timedelta | None = None,
    ) -> list[datetime]:
        """The UTC instants of the next ``count`` firings, none after ``until`` (aware, or a
        duration from now); none for a paused or ended schedule.

        .. versionadded:: 0.2.0"""
        now = self.store.clock.now()
        count, end = check_upcoming(count, until, now)
        return upcoming_firings(self.inspect(id_or_name), now, count, end)

    def runs(
        self,
        id_or_name: uuid.UUID | str | None = None,
        *,
        limit: int = 50,
        outcome: RunOutcome | str | None = None,
        since: datetime | timedelta | None = None,
    ) -> list[RunRecord]:
        """The run log, newest first: at most ``limit`` records, of one schedule or all, of one
        ``outcome``, finished at or after ``since`` (aware, or a duration back from now).

        .. versionadded:: 0.2.0"""
        sid = None if id_or_name is None else self._existing(id_or_name)
        if isinstance(since, timedelta):
            since = _back_from(self.store.clock.now(), since)
        return self.store.runs(sid, limit=limit, outcome=outcome, since=since)

    def list_pending(self, limit: int = 50) -> list[ScheduleSnapshot | MalformedSchedule]:
        """Pending and paused schedules, soonest first, at most ``limit``; an undecodable row
        is a :class:`MalformedSchedule`."""
        return self.store.list_pending(limit)

    def list_dead_letter(self, limit: int = 50) -> list[ScheduleSnapshot | MalformedSchedule]:
        """Dead-lettered schedules, most recent first, at most ``limit``; an undecodable row is
        a :class:`MalformedSchedule`."""
        return self.store.list_dead_letter(limit)

    def __repr__(self) -> str:
        return f"SchedulerControl({self.store!r})"


def _back_from(now: datetime, age: timedelta) -> datetime:
    """``now - age`` for a ``since`` duration, which must be >= 0 and reach an instant."""
    if age < timedelta(0):
        raise InvalidArgument(f"since must be a duration back from now (>= 0), got {age!r}")
    try:
        return now - age
    except OverflowError:
        raise InvalidArgument(f"since {age!r} back from now is before the year 1") from None


def default_grid_anchor(every: timedelta | str, now: datetime) -> datetime:
    """The first instant after ``now`` of the ``every`` grid anchored at the epoch."""
    nxt = Interval.of(every, EPOCH).next_after(now)
    if nxt is None:
        raise InvalidArgument(f"every {every!r} has no instant after {now.isoformat()}")
    return nxt
