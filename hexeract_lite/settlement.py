"""A fenced acknowledgement as a value: what a worker asks a store to record for one
claimed occurrence (:meth:`~hexeract_lite.store.base.ScheduleStore.settle`)."""

from __future__ import annotations

import enum
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from .runlog import RunDraft, RunEntry

__all__ = ["Settlement", "SettlementKind"]


class SettlementKind(enum.StrEnum):
    """Which acknowledgement a :class:`Settlement` stands for (its constructor of the same
    name says what it records)."""

    DELIVERED = "delivered"
    RESCHEDULE = "reschedule"
    FAILED = "failed"
    DEAD_LETTERED = "dead_lettered"
    RELEASED = "released"
    SNOOZED = "snoozed"
    CANCELLED = "cancelled"


@attrs.frozen
class Settlement:
    """One fenced acknowledgement, as a value, for ``store.settle``.

    Its constructors take the arguments of the single-acknowledgement method of the same
    name (``delivered``: ``mark_delivered``, ``reschedule``, ``failed``: ``mark_failed``,
    ``dead_lettered``: ``mark_dead_lettered``), or have none (``released``, ``snoozed``,
    ``cancelled``). ``lease`` is the claim's ``leased_until`` (the fencing token).
    ``store.settle`` checks every item, with the single methods' rules, before it writes.

    .. versionadded:: 0.1.0"""

    kind: SettlementKind
    schedule_id: uuid.UUID
    lease: datetime
    next: datetime | None = None
    """For ``reschedule``: the instant the schedule fires next."""
    retry_in: timedelta | None = None
    """For ``failed`` and ``snoozed``: how long to wait before the occurrence is
    claimable again."""
    error: str | None = None
    """For ``failed`` and ``dead_lettered``: the ``last_error`` to record."""
    offset: timedelta | None = attrs.field(default=None, kw_only=True)
    """For ``reschedule``: the jitter of the next firing; ``next`` is its rule's instant
    plus this offset (None: no jitter)."""
    counted: bool = attrs.field(default=False, kw_only=True)
    """For ``reschedule`` and ``delivered``: the firing was delivered, so the schedule's
    count of firings goes up by one (a recurring schedule's)."""
    run: RunEntry | RunDraft | None = attrs.field(default=None, eq=False, kw_only=True)
    """The run to record with it in the store's run log (None: none); a store records
    it as ``lease_lost`` when the settlement is fenced out."""

    @classmethod
    def delivered(
        cls,
        schedule_id: uuid.UUID,
        lease: datetime,
        *,
        run: RunEntry | RunDraft | None = None,
        counted: bool = False,
    ) -> Settlement:
        """The dispatch succeeded: set ``delivered_at`` and clear the lease (``counted``:
        a recurring schedule's last firing, counted)."""
        return cls(SettlementKind.DELIVERED, schedule_id, lease, run=run, counted=counted)

    @classmethod
    def reschedule(
        cls,
        schedule_id: uuid.UUID,
        next: datetime,
        lease: datetime,
        *,
        run: RunEntry | RunDraft | None = None,
        offset: timedelta | None = None,
        counted: bool = False,
    ) -> Settlement:
        """A cron occurrence was delivered (``counted``) or skipped: the schedule fires
        next at ``next``, its rule's instant plus the jitter ``offset`` (when given)."""
        return cls(
            SettlementKind.RESCHEDULE,
            schedule_id,
            lease,
            next=next,
            run=run,
            offset=offset or None,
            counted=counted,
        )

    @classmethod
    def failed(
        cls,
        schedule_id: uuid.UUID,
        retry_in: timedelta,
        error: str,
        lease: datetime,
        *,
        run: RunEntry | RunDraft | None = None,
    ) -> Settlement:
        """The dispatch failed with budget left: retry no sooner than ``now + retry_in``."""
        return cls(
            SettlementKind.FAILED, schedule_id, lease, retry_in=retry_in, error=error, run=run
        )

    @classmethod
    def dead_lettered(
        cls,
        schedule_id: uuid.UUID,
        error: str,
        lease: datetime,
        *,
        run: RunEntry | RunDraft | None = None,
    ) -> Settlement:
        """The occurrence is exhausted: dead-letter the schedule with ``error``."""
        return cls(SettlementKind.DEAD_LETTERED, schedule_id, lease, error=error, run=run)

    @classmethod
    def released(
        cls, schedule_id: uuid.UUID, lease: datetime, *, run: RunEntry | RunDraft | None = None
    ) -> Settlement:
        """The worker is stopping and never dispatched the occurrence: give back the claim's
        attempt and clear the lease, so it is claimable again at once under the same id."""
        return cls(SettlementKind.RELEASED, schedule_id, lease, run=run)

    @classmethod
    def snoozed(
        cls,
        schedule_id: uuid.UUID,
        delay: timedelta,
        lease: datetime,
        *,
        run: RunEntry | RunDraft | None = None,
    ) -> Settlement:
        """The handler snoozed: give the attempt back, count the snooze, and hold the
        occurrence (same id and ``scheduled_for``) until ``now + delay``.

        .. versionadded:: 0.2.0"""
        return cls(SettlementKind.SNOOZED, schedule_id, lease, retry_in=delay, run=run)

    @classmethod
    def cancelled(
        cls, schedule_id: uuid.UUID, lease: datetime, *, run: RunEntry | RunDraft | None = None
    ) -> Settlement:
        """The dispatch was aborted with ``cancel=True``: cancel the schedule.

        .. versionadded:: 0.2.0
        """
        return cls(SettlementKind.CANCELLED, schedule_id, lease, run=run)

    @property
    def wakes(self) -> bool:
        """True for the kinds that can make work claimable (``reschedule``, ``failed``,
        ``released``, ``snoozed``): a store notifies ``store.changes`` once one applied."""
        return self.kind in _WAKING


_WAKING = frozenset(
    {
        SettlementKind.RESCHEDULE,
        SettlementKind.FAILED,
        SettlementKind.RELEASED,
        SettlementKind.SNOOZED,
    }
)
