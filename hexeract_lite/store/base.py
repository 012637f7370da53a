"""The store contract: what every schedule store does, method by method.

The in-memory store (:mod:`hexeract_lite.store.memory`) is the reference
implementation of this text; one contract suite (``tests/test_store_contract.py``)
runs against every store.

Vocabulary
----------
*Terminal*: a row with ``delivered_at``, ``cancelled_at`` or ``dead_lettered_at``
set. Terminal rows are never claimed and never change again, except that a
dead-lettered one can be replayed.

*Lease*: ``leased_until``, the instant until which a claim holds an occurrence. A
row whose ``leased_until`` is null or ``<= now`` is unleased. A worker that dies
never releases its lease explicitly; the store waits it out and the occurrence is
claimed again (at-least-once delivery).

*Fencing*: every acknowledgement (``mark_delivered``, ``reschedule``,
``mark_failed``, ``mark_dead_lettered``) takes the ``leased_until`` the claim
returned and applies only while the row still carries exactly that lease and is
not terminal. It returns False otherwise: another worker owns the occurrence now
(not an error), and the row is left unchanged.

*Now*: instants the store records itself (``created_at``, ``delivered_at``, the
retry deadline, replay's new ``scheduled_for``, the sweep) come from the store's
clock. SQL never reads the database's own clock.

Ordering and ties: claims and ``list_pending`` go by ``scheduled_for`` ascending,
then by schedule id (byte order); ``list_dead_letter`` by ``dead_lettered_at``
descending, then by schedule id.
"""

from __future__ import annotations

import abc
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any

import attrs

from .._time import to_utc_ms
from ..errors import InvalidArgument, InvalidConfiguration
from ..message import ScheduledMessage
from ..snapshot import LeasedOccurrence, ScheduleSnapshot
from .record import ScheduleRecord

__all__ = ["SWEEP_ERROR", "ChangeSignal", "ScheduleStore"]

SWEEP_ERROR = "attempts exhausted by a crashed worker; dead-lettered by the sweeper"
"""The ``last_error`` the sweep records on the rows it dead-letters."""


class ChangeSignal:
    """Wakes a sleeping worker when this process changes something it may claim.

    Stores call :meth:`notify` after an insert, replay, resume, reschedule or failure
    commits. A worker remembers :meth:`version` before it looks for work and then
    :meth:`wait` s on it, so a change in between is never missed. (Changes made by
    *other processes* are the store's to notice, e.g. by polling
    ``PRAGMA data_version``.)
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._version = 0

    def version(self) -> int:
        """A counter that moves on every notify."""
        with self._cond:
            return self._version

    def notify(self) -> None:
        """Record a change and wake every waiter."""
        with self._cond:
            self._version += 1
            self._cond.notify_all()

    def wait(self, since: int, timeout: float) -> bool:
        """Block until the version differs from ``since`` or ``timeout`` seconds pass.

        Returns True when a change happened. (``timeout`` is measured with the
        monotonic clock: it is a sleep, not a decision about what is due.)
        """
        with self._cond:
            return self._cond.wait_for(lambda: self._version != since, max(timeout, 0.0))


class ScheduleStore(abc.ABC):
    """Persistent schedules with at-least-once claiming. Safe to share between threads.

    Subclasses call ``super().__init__()`` so that :attr:`changes` exists.
    """

    def __init__(self) -> None:
        self.changes = ChangeSignal()
        """Notified after this process commits a change that may make work claimable."""

    # -- writing schedules ---------------------------------------------------

    @abc.abstractmethod
    def insert(self, message: ScheduledMessage, max_attempts: int) -> None:
        """Store a new schedule, pending, with ``attempts = 0`` and ``created_at = now``.

        ``max_attempts`` (>= 1, else :class:`InvalidConfiguration`) is the attempt
        budget of each occurrence. An existing ``schedule_id`` raises
        :class:`DuplicateSchedule` and changes nothing.
        """

    @abc.abstractmethod
    def insert_many(self, messages: Sequence[ScheduledMessage], max_attempts: int) -> None:
        """Insert every message, all or nothing (one transaction).

        A duplicate id, within the batch or against the store, raises
        :class:`DuplicateSchedule` and inserts none of them.
        """

    # -- the worker's side ---------------------------------------------------

    @abc.abstractmethod
    def claim_due(self, now: datetime, batch_size: int, lease: timedelta) -> list[LeasedOccurrence]:
        """Claim up to ``batch_size`` due occurrences, in one atomic step.

        Eligible rows: ``scheduled_for <= now``, not terminal, not paused,
        ``attempts < max_attempts``, and unleased (``leased_until`` null or
        ``<= now``). Oldest ``scheduled_for`` first (ties by schedule id). Each
        claimed row gets ``attempts + 1`` and ``leased_until = now + lease``, so a
        crash-and-reclaim still spends the budget. ``batch_size`` must be >= 1 and
        ``lease`` > 0 (:class:`InvalidConfiguration`).
        """

    @abc.abstractmethod
    def mark_delivered(self, schedule_id: uuid.UUID, lease: datetime) -> bool:
        """Fenced: set ``delivered_at = now`` and clear the lease. False if fenced out."""

    @abc.abstractmethod
    def reschedule(self, schedule_id: uuid.UUID, next: datetime, lease: datetime) -> bool:
        """Fenced: a cron occurrence was delivered; the schedule now fires at ``next``.

        Sets ``scheduled_for = next`` (UTC, ms), ``attempts = 0``, and clears the lease
        and ``last_error``. False if fenced out.
        """

    @abc.abstractmethod
    def mark_failed(
        self, schedule_id: uuid.UUID, retry_in: timedelta, error: str, lease: datetime
    ) -> bool:
        """Fenced: a dispatch failed with budget left; retry no sooner than ``now + retry_in``.

        Sets ``leased_until = now + retry_in`` and ``last_error = error``; attempts are
        unchanged (they were advanced at claim). ``retry_in`` must be >= 0. False if
        fenced out.
        """

    @abc.abstractmethod
    def mark_dead_lettered(self, schedule_id: uuid.UUID, error: str, lease: datetime) -> bool:
        """Fenced: the occurrence is exhausted; set ``dead_lettered_at = now``,
        ``last_error = error`` and clear the lease. False if fenced out."""

    @abc.abstractmethod
    def dead_letter_exhausted(self) -> int:
        """The sweep, run at the start of every poll cycle; returns how many rows it moved.

        Dead-letters every non-terminal, non-paused row with ``attempts >=
        max_attempts`` and no live lease (a worker crashed on the last attempt), with
        ``last_error =`` :data:`SWEEP_ERROR`, ``dead_lettered_at = now``, lease cleared.
        """

    @abc.abstractmethod
    def next_wakeup(self) -> datetime | None:
        """A hint for a sleeping worker: no row becomes claimable (or sweepable) before it.

        The minimum, over non-terminal, non-paused rows, of ``scheduled_for`` for
        unleased rows and of ``max(scheduled_for, leased_until)`` for leased ones;
        None when there is no such row. Waking early is harmless; the hint must never
        be later than the first instant a claim or the sweep would find work.
        """

    # -- control -------------------------------------------------------------

    @abc.abstractmethod
    def cancel(self, schedule_id: uuid.UUID) -> bool:
        """Set ``cancelled_at = now`` and clear the lease; True if it cancelled.

        A terminal schedule is left as it is (False). Unknown id:
        :class:`ScheduleNotFound`.
        """

    @abc.abstractmethod
    def set_paused(self, schedule_id: uuid.UUID, paused: bool) -> bool:
        """Set or clear the paused flag of a non-terminal schedule; True if it changed.

        A paused schedule is never claimed; a worker already holding its lease may
        still acknowledge. Resuming through here clears the flag only (use
        :meth:`resume` for the realignment rule). Terminal: no-op (False). Unknown
        id: :class:`ScheduleNotFound`.
        """

    @abc.abstractmethod
    def resume(self, schedule_id: uuid.UUID, next: datetime | None = None) -> bool:
        """Resume a paused schedule; True if it is no longer paused.

        - ``next`` given: realign to it: ``scheduled_for = next``, attempts,
          ``last_error`` and lease reset, flag cleared.
        - else, for a cron schedule whose ``scheduled_for`` is already past
          (``< now``): realign to the first cron instant after now (no catch-up for a
          pause); when the expression has no further instant it stays paused (False).
        - else: just clear the flag.

        Not paused, or terminal: no-op (False). Unknown id: :class:`ScheduleNotFound`.
        """

    @abc.abstractmethod
    def inspect(self, schedule_id: uuid.UUID) -> ScheduleSnapshot | None:
        """The schedule's snapshot, or None when there is no such id."""

    # -- admin ---------------------------------------------------------------

    @abc.abstractmethod
    def list_pending(self, limit: int = 50) -> list[ScheduleSnapshot]:
        """Pending and paused schedules, soonest ``scheduled_for`` first, at most ``limit``."""

    @abc.abstractmethod
    def list_dead_letter(self, limit: int = 50) -> list[ScheduleSnapshot]:
        """Dead-lettered schedules, most recently dead-lettered first, at most ``limit``."""

    @abc.abstractmethod
    def replay(self, schedule_id: uuid.UUID) -> None:
        """Give a dead-lettered schedule a fresh start.

        Sets ``scheduled_for = now``, ``attempts = 0`` and clears the lease,
        ``last_error``, ``paused`` and ``dead_lettered_at``. Any other status raises
        :class:`NotReplayable` naming it; an unknown id, :class:`ScheduleNotFound`.
        """

    # -- copying rows between stores (``hexeract scheduler migrate``) ---------

    def export_records(self, after: uuid.UUID | None, limit: int) -> list[ScheduleRecord]:
        """Up to ``limit`` rows, every column as stored, in schedule id order (byte
        order, which is :class:`uuid.UUID` order), starting after ``after`` (None: from
        the first id). Page through a store by passing the last id of each page.

        For copying schedules between stores (:func:`hexeract_lite.migrate.migrate`),
        not for the worker. Each page is read in one statement; pages read at different
        times may see a store that changed in between. ``limit`` >= 1
        (:class:`InvalidConfiguration`). A store that cannot export raises
        :class:`NotImplementedError` (the default).
        """
        raise NotImplementedError(f"{type(self).__name__} cannot export records")

    def import_records(self, records: Sequence[ScheduleRecord]) -> int:
        """Insert the rows whose schedule id the store does not hold yet, exactly as
        given (every column: attempts, lease, paused flag, errors and timestamps
        included), in one transaction; return how many it inserted.

        A row whose id is already stored is skipped and left unchanged, never updated
        (so importing the same rows twice inserts nothing the second time); a repeated
        id within ``records`` counts once. Instants are stored at millisecond
        precision. Anything that is not a :class:`ScheduleRecord` raises
        :class:`InvalidConfiguration` before anything is written. A store that cannot
        import raises :class:`NotImplementedError` (the default).
        """
        raise NotImplementedError(f"{type(self).__name__} cannot import records")

    # -- lifetime ------------------------------------------------------------

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the store's resources. The default does nothing."""

    def __enter__(self) -> ScheduleStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# -- argument checks shared by every store -------------------------------------


def check_max_attempts(max_attempts: object) -> int:
    """``max_attempts`` must be an int >= 1."""
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise InvalidConfiguration(f"max_attempts must be an integer >= 1, got {max_attempts!r}")
    return max_attempts


def check_claim(now: datetime, batch_size: object, lease: object) -> datetime:
    """Validate ``claim_due``'s arguments; return ``now`` normalised."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidConfiguration(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if not isinstance(lease, timedelta) or lease <= timedelta(0):
        raise InvalidConfiguration(f"lease must be a positive timedelta, got {lease!r}")
    return to_utc_ms(now, "now", InvalidConfiguration)


def check_retry_in(retry_in: object) -> timedelta:
    """``retry_in`` must be a timedelta >= 0."""
    if not isinstance(retry_in, timedelta) or retry_in < timedelta(0):
        raise InvalidConfiguration(f"retry_in must be a timedelta >= 0, got {retry_in!r}")
    return retry_in


def check_limit(limit: object) -> int:
    """A listing limit must be an int >= 1."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidConfiguration(f"limit must be an integer >= 1, got {limit!r}")
    return limit


def check_messages(messages: Sequence[ScheduledMessage]) -> None:
    """Every item must be a ScheduledMessage."""
    for message in messages:
        if not isinstance(message, ScheduledMessage):
            raise InvalidConfiguration(f"expected ScheduledMessage, got {message!r:.200}")


def check_export(after: object, limit: object) -> uuid.UUID | None:
    """Validate ``export_records``' arguments; return ``after``."""
    if after is not None and not isinstance(after, uuid.UUID):
        raise InvalidArgument(f"after must be a uuid.UUID or None, got {after!r}")
    check_limit(limit)
    return after


_RECORD_TEXT = ("event_type", "payload", "trigger_kind", "target_kind")
_RECORD_OPTIONAL_TEXT = ("cron_expr", "target_routing_key", "last_error")
_RECORD_INSTANTS = ("scheduled_for", "created_at")
_RECORD_OPTIONAL_INSTANTS = ("leased_until", "delivered_at", "cancelled_at", "dead_lettered_at")


def _record_instant(value: object, sid: uuid.UUID, name: str) -> datetime:
    if isinstance(value, datetime) and value.tzinfo is UTC and not value.microsecond % 1000:
        return value  # already what a store holds (the common case, from another store)
    try:
        return to_utc_ms(value, f"record {sid}: {name}", InvalidConfiguration)
    except OverflowError:
        raise InvalidConfiguration(f"record {sid}: invalid {name} {value!r:.200}") from None


def check_records(records: Sequence[ScheduleRecord]) -> list[ScheduleRecord]:
    """Validate ``import_records``' argument: ScheduleRecords whose fields have their
    column's type, ``attempts`` and ``max_attempts`` >= 0. Returns them with every
    instant normalised to UTC milliseconds (a record that needed it is a copy; a naive
    instant is refused, as everywhere). Raises :class:`InvalidConfiguration` naming the
    schedule id and the field."""
    checked: list[ScheduleRecord] = []
    for record in records:
        if not isinstance(record, ScheduleRecord) or not isinstance(record.schedule_id, uuid.UUID):
            raise InvalidConfiguration(f"expected ScheduleRecord, got {record!r:.200}")
        sid = record.schedule_id
        for name in _RECORD_TEXT:
            value = getattr(record, name)
            if not isinstance(value, str):
                raise InvalidConfiguration(f"record {sid}: invalid {name} {value!r:.200}")
        for name in _RECORD_OPTIONAL_TEXT:
            value = getattr(record, name)
            if value is not None and not isinstance(value, str):
                raise InvalidConfiguration(f"record {sid}: invalid {name} {value!r:.200}")
        for name in ("attempts", "max_attempts"):
            value = getattr(record, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidConfiguration(f"record {sid}: invalid {name} {value!r:.200}")
        if not isinstance(record.paused, bool):
            raise InvalidConfiguration(f"record {sid}: invalid paused {record.paused!r:.200}")
        changes: dict[str, Any] = {}
        for name in (*_RECORD_INSTANTS, *_RECORD_OPTIONAL_INSTANTS):
            value = getattr(record, name)
            if value is None and name in _RECORD_OPTIONAL_INSTANTS:
                continue
            instant = _record_instant(value, sid, name)
            if instant is not value:
                changes[name] = instant
        checked.append(attrs.evolve(record, **changes) if changes else record)
    return checked


def check_schedule_id(schedule_id: object) -> uuid.UUID:
    """A schedule id argument must be a :class:`uuid.UUID`."""
    if not isinstance(schedule_id, uuid.UUID):
        raise InvalidArgument(f"schedule_id must be a uuid.UUID, got {schedule_id!r}")
    return schedule_id
