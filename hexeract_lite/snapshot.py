"""What the stores hand back: status, snapshots and leased occurrences."""

from __future__ import annotations

import enum
import uuid
from datetime import datetime, timedelta

import attrs

from ._time import rfc3339
from .message import ScheduledMessage, Target
from .occurrence import OccurrenceId
from .policy import Firing, SchedulePolicy
from .trigger import Trigger


class ScheduleStatus(enum.StrEnum):
    """A schedule's status: ``pending``, ``paused`` or one of the terminal ``delivered``,
    ``cancelled`` and ``dead-lettered``.

    .. versionadded:: 0.1.0"""

    PENDING = "pending"
    PAUSED = "paused"
    DELIVERED = "delivered"
    CANCELLED = "cancelled"
    DEAD_LETTERED = "dead-lettered"

    @property
    def is_terminal(self) -> bool:
        """True for delivered, cancelled and dead-lettered."""
        return self not in (ScheduleStatus.PENDING, ScheduleStatus.PAUSED)

    @classmethod
    def derive(
        cls,
        *,
        delivered_at: datetime | None,
        cancelled_at: datetime | None,
        dead_lettered_at: datetime | None,
        paused: bool,
    ) -> ScheduleStatus:
        """The status of a row with these fields."""
        if delivered_at is not None:
            return cls.DELIVERED
        if cancelled_at is not None:
            return cls.CANCELLED
        if dead_lettered_at is not None:
            return cls.DEAD_LETTERED
        if paused:
            return cls.PAUSED
        return cls.PENDING


@attrs.frozen(kw_only=True)
class ScheduleSnapshot:
    """A read-only view of one schedule's row, as ``inspect`` and the listings return it.

    .. versionadded:: 0.1.0"""

    schedule_id: uuid.UUID
    status: ScheduleStatus
    scheduled_for: datetime
    attempts: int
    max_attempts: int
    trigger: Trigger
    last_error: str | None
    event_type: str
    target: Target
    payload_json: str
    leased_until: datetime | None
    created_at: datetime
    delivered_at: datetime | None
    cancelled_at: datetime | None
    dead_lettered_at: datetime | None
    name: str | None = None
    """The schedule's name, or None (see :mod:`hexeract_lite.names`)."""
    misfire_grace: timedelta | None = None
    """How late a firing may be found and still be delivered; None: no limit."""
    backfill_until: datetime | None = None
    """The end of the backfill window the schedule is in, or None."""
    pause_note: str | None = None
    """The note given when the schedule was paused, or None."""
    next_after_lease: datetime | None = None
    """Where a change made while the firing held was leased moves it once settled."""
    policy: SchedulePolicy | None = None
    """The schedule's end, firing limit, jitter and catch-up (None: none)."""
    firings: int = 0
    """Deliveries of this recurring schedule so far."""
    jitter_offset: timedelta = timedelta(0)
    """The jitter: ``scheduled_for`` less the rule's instant."""

    @property
    def occurrence_at(self) -> datetime:
        """The rule's instant of the firing held, which its occurrence id derives from."""
        return self.scheduled_for - self.jitter_offset

    @property
    def firings_left(self) -> int | None:
        """How many deliveries ``max_firings`` still allows (None: no limit)."""
        if self.policy is None or self.policy.max_firings is None:
            return None
        return max(self.policy.max_firings - self.firings, 0)

    def firing(self) -> Firing:
        """The firing the schedule holds, for the policy rules."""
        return Firing(self.occurrence_at, self.jitter_offset, self.firings)

    snoozes: int = 0
    """How often the current occurrence snoozed (:class:`~hexeract_lite.Snooze`).

    .. versionadded:: 0.2.0
    """
    abort_requested: str | None = None
    """``"abort"`` or ``"cancel"`` while ``SchedulerControl.abort`` is pending, else None.

    .. versionadded:: 0.2.0
    """

    def to_json_dict(self) -> dict[str, object]:
        """A JSON-ready dict: ISO 8601 UTC instants, the trigger as its label."""
        return {
            "schedule_id": str(self.schedule_id),
            "status": self.status.value,
            "scheduled_for": rfc3339(self.scheduled_for),
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "trigger": self.trigger.label(),
            "last_error": self.last_error,
            "event_type": self.event_type,
            "target": self.target.label(),
            "leased_until": rfc3339(self.leased_until),
            "created_at": rfc3339(self.created_at),
            "delivered_at": rfc3339(self.delivered_at),
            "cancelled_at": rfc3339(self.cancelled_at),
            "dead_lettered_at": rfc3339(self.dead_lettered_at),
            "name": self.name,
            **self._policy_json(),
        }

    def _policy_json(self) -> dict[str, object]:
        policy = self.policy
        if policy is None:
            return {}
        return {
            "end_at": rfc3339(policy.end_at),
            "max_firings": policy.max_firings,
            "firings": self.firings,
            "firings_left": self.firings_left,
            "jitter_ms": None
            if policy.jitter is None
            else policy.jitter // timedelta(milliseconds=1),
            "jitter_offset_ms": self.jitter_offset // timedelta(milliseconds=1),
            "catch_up": policy.catch_up,
            "catch_up_limit": policy.catch_up_limit if policy.catch_up == "all" else None,
        }


@attrs.frozen(kw_only=True)
class MalformedSchedule:
    """A row a listing could not decode, in its place; a claim dead-letters it."""

    schedule_id: uuid.UUID | None
    """The id, when the id column itself could be decoded."""
    raw_id: str
    """The id as stored, for display."""
    reason: str
    """What is wrong, naming the column."""
    status: ScheduleStatus | None = None
    """The status, when the columns it derives from could be decoded."""

    def to_json_dict(self) -> dict[str, object]:
        """A JSON-ready dict: the id, ``"status": "malformed"`` and the reason."""
        return {
            "schedule_id": self.raw_id,
            "status": "malformed",
            "row_status": None if self.status is None else self.status.value,
            "malformed": self.reason,
        }


@attrs.frozen(kw_only=True)
class LeasedOccurrence:
    """An occurrence a worker claimed: ``attempts`` so far (this one included);
    ``leased_until``, the end of the claim and the fencing token of its acknowledgement.

    .. versionadded:: 0.1.0"""

    message: ScheduledMessage
    attempts: int
    max_attempts: int
    leased_until: datetime
    retrying: bool = False
    """True when an earlier attempt failed: a retry, late on purpose after its backoff."""
    backfill_until: datetime | None = None
    """The end of the backfill window the schedule is in, or None."""

    @property
    def in_backfill(self) -> bool:
        """Inside a backfill's window: it fires however late it is."""
        until = self.backfill_until
        return until is not None and self.message.scheduled_for <= until

    firings: int = 0
    """Deliveries of the schedule before this one (a recurring schedule's)."""
    jitter_offset: timedelta = timedelta(0)
    """The jitter: how much later than ``message.scheduled_for`` this firing was due."""

    @property
    def due(self) -> datetime:
        """When this firing was due: the rule's instant plus its jitter."""
        return self.message.scheduled_for + self.jitter_offset

    def firing(self) -> Firing:
        """This firing, for the policy rules."""
        return Firing(self.message.scheduled_for, self.jitter_offset, self.firings)

    snoozes: int = 0
    """How often this occurrence snoozed so far (:class:`~hexeract_lite.Snooze`).

    .. versionadded:: 0.2.0
    """

    def occurrence_id(self) -> OccurrenceId:
        """The dedup key of this firing (stable across redeliveries)."""
        return self.message.occurrence_id()

    def is_exhausted(self) -> bool:
        """True once ``attempts >= max_attempts``: a failure now dead-letters."""
        return self.attempts >= self.max_attempts
