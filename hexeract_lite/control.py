"""SchedulerControl: what an application (or the CLI) does with schedules it made."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from .errors import InvalidArgument, ScheduleNotFound
from .message import ScheduledMessage
from .snapshot import MalformedSchedule, ScheduleSnapshot
from .store.base import ScheduleStore

__all__ = ["DEFAULT_MAX_ATTEMPTS", "SchedulerControl"]

DEFAULT_MAX_ATTEMPTS = 5
"""The attempt budget :meth:`SchedulerControl.schedule` gives each occurrence by default."""

ScheduleIdLike = uuid.UUID | str
"""A schedule id, as a :class:`uuid.UUID` or its text form."""


def _schedule_id(value: object) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError:
            pass
    raise InvalidArgument(f"schedule_id must be a UUID (or its text), got {value!r}")


class SchedulerControl:
    """Schedule, inspect, pause, resume, cancel and replay, over any store.

    Every method takes a schedule id as a :class:`uuid.UUID` or its text; a malformed
    one raises :class:`InvalidArgument`, an unknown one :class:`ScheduleNotFound`.
    State changes return True when they changed something and False when there was
    nothing to do (already paused, already terminal, ...), so they are safe to
    repeat.
    """

    def __init__(self, store: ScheduleStore) -> None:
        self.store = store

    def schedule(
        self, message: ScheduledMessage, *, max_attempts: int = DEFAULT_MAX_ATTEMPTS
    ) -> uuid.UUID:
        """Store ``message`` as a new pending schedule; return its schedule id.

        ``max_attempts`` (>= 1) is the attempt budget of each of its occurrences. An
        id already stored raises :class:`DuplicateSchedule`.
        """
        self.store.insert(message, max_attempts)
        return message.schedule_id

    def schedule_many(
        self, messages: Sequence[ScheduledMessage], *, max_attempts: int = DEFAULT_MAX_ATTEMPTS
    ) -> list[uuid.UUID]:
        """Store every message in one transaction, all or nothing; return their ids."""
        self.store.insert_many(messages, max_attempts)
        return [m.schedule_id for m in messages]

    def inspect(self, schedule_id: ScheduleIdLike) -> ScheduleSnapshot:
        """The schedule's current snapshot; unknown id: :class:`ScheduleNotFound`.

        (The store's own ``inspect`` returns None for an unknown id instead.)
        """
        sid = _schedule_id(schedule_id)
        snap = self.store.inspect(sid)
        if snap is None:
            raise ScheduleNotFound(sid)
        return snap

    def pause(self, schedule_id: ScheduleIdLike) -> bool:
        """Stop claiming the schedule until :meth:`resume`; True if it was not paused.

        A worker already holding an occurrence of it may still deliver that one. A
        terminal schedule is left alone (False).
        """
        return self.store.set_paused(_schedule_id(schedule_id), True)

    def resume(self, schedule_id: ScheduleIdLike) -> bool:
        """Resume a paused schedule; True when it is no longer paused.

        A cron schedule whose due instant passed while it was paused realigns to its
        first instant after now, attempts and last error reset: no catch-up firing for
        the pause. When the expression has no further instant it stays paused
        (False). Not paused, or terminal: nothing to do (False).
        """
        return self.store.resume(_schedule_id(schedule_id))

    def cancel(self, schedule_id: ScheduleIdLike) -> bool:
        """Cancel the schedule for good; True if it cancelled it.

        A terminal schedule (delivered, cancelled, dead-lettered) is left as it is
        (False). A worker already holding an occurrence may still dispatch it, but
        its acknowledgement is refused, so nothing fires after that one.
        """
        return self.store.cancel(_schedule_id(schedule_id))

    def replay(self, schedule_id: ScheduleIdLike) -> None:
        """Give a dead-lettered schedule a fresh start, due now, with a full budget.

        Any other status raises :class:`NotReplayable` naming it.
        """
        self.store.replay(_schedule_id(schedule_id))

    def list_pending(self, limit: int = 50) -> list[ScheduleSnapshot | MalformedSchedule]:
        """Pending and paused schedules, soonest first, at most ``limit``; a row the
        store cannot decode is a :class:`MalformedSchedule` in its place."""
        return self.store.list_pending(limit)

    def list_dead_letter(self, limit: int = 50) -> list[ScheduleSnapshot | MalformedSchedule]:
        """Dead-lettered schedules, most recently dead-lettered first, at most ``limit``;
        a row the store cannot decode is a :class:`MalformedSchedule` in its place."""
        return self.store.list_dead_letter(limit)

    def __repr__(self) -> str:
        return f"SchedulerControl({self.store!r})"
