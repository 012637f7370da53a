"""The store contract: what every schedule store does, method by method.

The in-memory store (:mod:`hexeract_lite.store.memory`) is its reference
implementation; one contract suite runs against every store. Leases and fencing are
described for users in ``docs/concepts/leases.md``.

- *Terminal*: ``delivered_at``, ``cancelled_at`` or ``dead_lettered_at`` set. Never
  claimed and never changed again, except that a dead-lettered row can be replayed.
- *Lease*: ``leased_until``; a row whose ``leased_until`` is null or ``<= now`` is
  unleased. A dead worker's lease is waited out (at-least-once delivery).
- *Fencing*: every acknowledgement takes the ``leased_until`` the claim returned and
  applies only while the row carries exactly that lease and is not terminal; else it
  returns False and changes nothing.
- *Control* (``set_paused``, ``resume``) and changes in place (``ensure``,
  ``update_schedule``, ``move``, ``run_now``) never clear or change a live lease; a new
  next firing of a leased recurring schedule waits in ``next_after_lease`` for the
  fenced acknowledgement (:mod:`hexeract_lite.store.changes`). ``cancel`` ends the
  lease: the acknowledgement in flight is fenced out.
- *Now*: every instant the store records comes from its clock, never the database's.
- *Ties*: claims and ``list_pending`` go by ``scheduled_for``, then schedule id (byte
  order); ``list_dead_letter`` by ``dead_lettered_at`` descending, then schedule id.
"""

from __future__ import annotations

import abc
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Self, TypeVar

from .._time import to_utc_ms
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import (
    InvalidArgument,
    InvalidConfiguration,
    NotReplayable,
)
from ..message import (
    ScheduledMessage,
    place_first,
    validate_message,
)
from ..settlement import Settlement, SettlementKind
from ..snapshot import LeasedOccurrence, MalformedSchedule, ScheduleSnapshot, ScheduleStatus
from .changes import (
    Change,
    EnsureResult,
    Plan,
    ensure_plan,
    ensure_rounds,
    move_plan,
    run_now_plan,
    update_plan,
)
from .checks import (
    check_change,
    check_claim,
    check_max_attempts,
    check_schedule_id,
    check_settlements,
    no_transactions,
)
from .longrun import LongRunContract
from .pausing import resume_change
from .record import ScheduleRecord
from .runs import SWEEP_ERROR, SWEEP_KEPT, RunLogContract
from .signal import ChangeSignal
from .stats import StoreStats

_T = TypeVar("_T")

__all__ = [
    "SWEEP_ERROR",
    "SWEEP_KEPT",
    "Change",
    "ChangeSignal",
    "EnsureResult",
    "ScheduleStore",
    "Settlement",
    "SettlementKind",
]


class ScheduleStore(abc.ABC, RunLogContract, LongRunContract):
    """Persistent schedules with at-least-once claiming. Safe to share between threads.

    Subclasses call ``super().__init__()`` so that :attr:`changes` exists.

    .. versionadded:: 0.1.0
    """

    def __init__(self) -> None:
        self.changes = ChangeSignal()
        """Notified after this process commits a change that may make work claimable."""

    # -- writing schedules ---------------------------------------------------

    @abc.abstractmethod
    def insert(self, message: ScheduledMessage, max_attempts: int) -> None:
        """Store a new pending schedule (``attempts = 0``, ``created_at = now``) with
        ``max_attempts`` (>= 1) per occurrence; an existing id: :class:`DuplicateSchedule`.
        """

    @abc.abstractmethod
    def insert_many(self, messages: Sequence[ScheduledMessage], max_attempts: int) -> None:
        """Insert every message in one transaction; any duplicate id (in the batch or
        the store) raises :class:`DuplicateSchedule` and inserts none.
        """

    # -- the worker's side ---------------------------------------------------

    @abc.abstractmethod
    def claim_due(self, now: datetime, batch_size: int, lease: timedelta) -> list[LeasedOccurrence]:
        """Atomically claim up to ``batch_size`` (>= 1) due occurrences for ``lease`` (>= 1 ms).

        Eligible: ``scheduled_for <= now``, not terminal, not paused, ``attempts <
        max_attempts``, unleased; oldest first. Each claimed row gets ``attempts + 1`` and
        ``leased_until = now + lease``. A row that cannot be decoded is dead-lettered
        (``last_error`` naming the column), not returned.
        """

    @abc.abstractmethod
    def mark_delivered(self, schedule_id: uuid.UUID, lease: datetime) -> bool:
        """Fenced: set ``delivered_at = now`` and clear the lease. False if fenced out."""

    @abc.abstractmethod
    def reschedule(self, schedule_id: uuid.UUID, next: datetime, lease: datetime) -> bool:
        """Fenced: a recurring occurrence was delivered; fire next at ``next`` (attempts,
        lease and ``last_error`` reset). False if fenced out.
        """

    @abc.abstractmethod
    def mark_failed(
        self, schedule_id: uuid.UUID, retry_in: timedelta, error: str, lease: datetime
    ) -> bool:
        """Fenced: retry no sooner than ``now + retry_in`` (>= 0, before the year 9999)
        with ``last_error = error`` (not None); attempts unchanged. False if fenced out.
        """

    @abc.abstractmethod
    def mark_dead_lettered(self, schedule_id: uuid.UUID, error: str, lease: datetime) -> bool:
        """Fenced: set ``dead_lettered_at = now`` and ``last_error = error`` (not None),
        clear the lease. False if fenced out.
        """

    def settle(self, outcomes: Sequence[Settlement]) -> list[bool]:
        """Apply fenced acknowledgements in order, each as its single method would; one bool each.

        Every item is checked first (one bad item rejects the batch before anything is
        written); a stale or foreign lease is not an error but False. Instants come from one
        reading of the clock. The stores here apply the batch in one transaction and notify
        :attr:`changes` once after it; the default calls the single methods in order.
        """
        checked = check_settlements(outcomes)
        for item in checked:
            if item.kind not in _SINGLE:
                raise NotImplementedError(
                    f"{type(self).__name__} has no single method for a {item.kind.value}"
                    " settlement; a store supports it by overriding settle()"
                )
        return [_settle_one(self, item) for item in checked]

    def settle_and_claim(
        self, outcomes: Sequence[Settlement], now: datetime, batch_size: int, lease: timedelta
    ) -> tuple[list[bool], list[LeasedOccurrence]]:
        """:meth:`settle` then :meth:`claim_due`, every check made before anything is
        written. The stores here do both in one transaction; the default, two.

        .. versionadded:: 0.2.0
        """
        check_claim(now, batch_size, lease)
        check_settlements(outcomes)
        return self.settle(outcomes), self.claim_due(now, batch_size, lease)

    @property
    def fuses_settle_and_claim(self) -> bool:
        """True when :meth:`settle_and_claim` is one transaction (the store overrides it).

        .. versionadded:: 0.2.0
        .. deprecated:: 0.2.0
           The worker no longer reads it.
        """
        return type(self).settle_and_claim is not ScheduleStore.settle_and_claim

    @abc.abstractmethod
    def dead_letter_exhausted(self) -> int:
        """The sweep run every poll cycle: dead-letter each live, unpaused, unleased row
        with ``attempts >= max_attempts`` (``last_error``: :data:`SWEEP_ERROR`, or
        :data:`SWEEP_KEPT` and the error it had); return how many.
        """

    @abc.abstractmethod
    def next_wakeup(self) -> datetime | None:
        """No row becomes claimable or sweepable before this (None: no live row). It may
        be early, never late.
        """

    # -- control -------------------------------------------------------------

    @abc.abstractmethod
    def cancel(self, schedule_id: uuid.UUID) -> bool:
        """Set ``cancelled_at = now`` and clear the lease; True if it cancelled (terminal:
        False). Unknown id: :class:`ScheduleNotFound`.
        """

    @abc.abstractmethod
    def set_paused(self, schedule_id: uuid.UUID, paused: bool) -> bool:
        """Set or clear the paused flag (and clear the pause note), leaving any lease; True
        if it changed. Terminal: False. Unknown id: :class:`ScheduleNotFound`.
        """

    @abc.abstractmethod
    def resume(self, schedule_id: uuid.UUID, next: datetime | None = None) -> bool:
        """Resume a paused schedule; True if it is no longer paused.

        ``next`` given: realign to it (attempts and error reset, a live lease kept). Else a
        cron schedule whose firing passed moves to its first instant after now (none: it
        stays paused, False); else the flag is cleared. Not paused or terminal: False.
        Unknown id: :class:`ScheduleNotFound`.
        """

    @abc.abstractmethod
    def inspect(self, schedule_id: uuid.UUID) -> ScheduleSnapshot | None:
        """The schedule's snapshot, or None when there is no such id. A row that cannot
        be decoded raises :class:`StoreError` naming the schedule and the column."""

    # -- admin ---------------------------------------------------------------

    @abc.abstractmethod
    def list_pending(self, limit: int = 50) -> list[ScheduleSnapshot | MalformedSchedule]:
        """Pending and paused schedules, soonest first, at most ``limit``; a row that
        cannot be decoded is a :class:`~hexeract_lite.snapshot.MalformedSchedule` in its place.
        """

    @abc.abstractmethod
    def list_dead_letter(self, limit: int = 50) -> list[ScheduleSnapshot | MalformedSchedule]:
        """Dead-lettered schedules, most recent first, at most ``limit`` (undecodable rows
        as in :meth:`list_pending`).
        """

    @abc.abstractmethod
    def replay(self, schedule_id: uuid.UUID) -> None:
        """Give a dead-lettered schedule a fresh start at now (attempts, lease, error, pause
        cleared). Other status: :class:`NotReplayable`; unknown id: :class:`ScheduleNotFound`.
        """

    # -- named schedules and changes in place -------------------------------

    def modify_record(self, schedule_id: uuid.UUID, plan: Plan[_T]) -> _T:
        """Run ``plan`` on the row in one transaction and write back the record it returns
        (None: nothing); return its answer. Unknown id: :class:`ScheduleNotFound`. The
        primitive under :meth:`ensure`, :meth:`update_schedule`, :meth:`move` and
        :meth:`run_now`; the default raises :class:`NotImplementedError`.

        .. versionadded:: 0.2.0
        """
        raise NotImplementedError(f"{type(self).__name__} cannot change a schedule in place")

    def modify_named(self, prefix: str, plan: Plan[_T]) -> list[_T]:
        """:meth:`modify_record` on every live row named ``prefix...`` (bytes), by name,
        in one transaction (a plan's exception writes nothing); the answers, one a row."""
        raise NotImplementedError(f"{type(self).__name__} cannot change a group in place")

    def list_named(self, prefix: str) -> list[ScheduleSnapshot]:
        """Every live schedule whose name starts with ``prefix``, by name.

        .. versionadded:: 0.2.0
        """
        raise NotImplementedError(f"{type(self).__name__} cannot list named schedules")

    def modify_within(self, connection: object, schedule_id: uuid.UUID, plan: Plan[_T]) -> _T:
        """:meth:`modify_record` inside the application's transaction on ``connection``,
        under a savepoint; the default raises :class:`InvalidArgument`.

        .. versionadded:: 0.2.0
        """
        raise no_transactions(self, connection)

    def ensure(
        self, message: ScheduledMessage, max_attempts: int, *, connection: object = None
    ) -> EnsureResult:
        """Insert the named ``message`` if missing, update it in place if changed; say which
        (rules: :func:`~hexeract_lite.store.changes.ensure_plan`). Safe to race. With
        ``connection``, inside the application's transaction (:meth:`modify_within`).

        .. versionadded:: 0.2.0
        """
        check_max_attempts(max_attempts)
        message = place_first(validate_message(message), self.clock.now())
        if message.name is None:
            raise InvalidArgument(f"ensure needs a named message, got {message.schedule_id}")
        plan = ensure_plan(message, max_attempts)
        sid = message.schedule_id
        if connection is None:
            return ensure_rounds(
                message,
                lambda: self.insert(message, max_attempts),
                lambda: self.modify_record(sid, plan),
            )
        if not self.shares_transactions:
            raise no_transactions(self, connection)
        insert: Callable[..., None] = self.insert  # this store's takes connection=
        return ensure_rounds(
            message,
            lambda: insert(message, max_attempts, connection=connection),
            lambda: self.modify_within(connection, sid, plan),
        )

    def update_schedule(self, schedule_id: uuid.UUID, change: Change) -> bool:
        """Change a live schedule in place (None fields stay); True when a value differed.
        Terminal: :class:`NotChangeable`.

        .. versionadded:: 0.2.0
        """
        check_schedule_id(schedule_id)
        change = check_change(change)
        if change.empty:
            raise InvalidArgument(f"update of {schedule_id} names nothing to change")
        return self.modify_record(schedule_id, update_plan(change))

    def move(self, schedule_id: uuid.UUID, at: datetime) -> bool:
        """Make ``at`` the next firing (attempts and error reset). Terminal, or a one-shot
        in flight: :class:`NotChangeable`.

        .. versionadded:: 0.2.0
        """
        check_schedule_id(schedule_id)
        at = to_utc_ms(at, "at", InvalidArgument, round_up=True)
        return self.modify_record(schedule_id, move_plan(at))

    def run_now(self, schedule_id: uuid.UUID) -> bool:
        """Make now the next firing. Terminal or paused: :class:`NotChangeable`; a
        one-shot in flight: False.

        .. versionadded:: 0.2.0
        """
        check_schedule_id(schedule_id)
        return self.modify_record(schedule_id, run_now_plan())

    # -- health ---------------------------------------------------------------

    def list_schedules(
        self,
        *,
        status: ScheduleStatus | str | None = None,
        event_type: str | None = None,
        after: uuid.UUID | None = None,
        limit: int = 50,
        name: str | None = None,
    ) -> list[ScheduleSnapshot | MalformedSchedule]:
        """Schedules in id order after the cursor ``after``, at most ``limit``, filtered
        by ``status`` (or ``all``), an ``event_type`` glob and a ``name`` glob. Bad
        arguments raise :class:`InvalidArgument` naming them; undecodable rows are
        :class:`MalformedSchedule` items.

        .. versionadded:: 0.2.0
        """
        raise NotImplementedError(f"{type(self).__name__} cannot filter listings")

    def prune(
        self,
        older_than: timedelta,
        *,
        statuses: Iterable[ScheduleStatus | str] = ("delivered", "cancelled"),
        batch_size: int = 500,
        dry_run: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Delete (``dry_run``: count) the rows of ``statuses`` that ended more than
        ``older_than`` ago, ``batch_size`` per transaction, telling ``progress`` the running
        total; return how many. Never a live row.

        .. versionadded:: 0.2.0
        """
        raise NotImplementedError(f"{type(self).__name__} cannot prune")

    def replay_dead_letters(self, ids: Sequence[uuid.UUID]) -> int:
        """:meth:`replay` those of ``ids`` still dead-lettered (others skipped) in one
        transaction; return how many.

        .. versionadded:: 0.2.0
        """
        count = 0
        for sid in ids:
            snapshot = self.inspect(sid)
            if snapshot is None or snapshot.status is not ScheduleStatus.DEAD_LETTERED:
                continue
            try:
                self.replay(sid)
            except NotReplayable:
                continue
            count += 1
        return count

    def stats(self) -> StoreStats:
        """The store's figures at its now (:class:`~hexeract_lite.store.stats.StoreStats`),
        never scanning ended rows.

        .. versionadded:: 0.2.0
        """
        raise NotImplementedError(f"{type(self).__name__} cannot report stats")

    # -- copying rows between stores (``hexeract scheduler migrate``) ---------

    def export_records(self, after: uuid.UUID | None, limit: int) -> list[ScheduleRecord]:
        """Up to ``limit`` (>= 1) rows as stored, in id order after ``after``: pages for
        :func:`hexeract_lite.migrate.migrate`.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot export records")

    def import_records(self, records: Sequence[ScheduleRecord]) -> int:
        """Insert, exactly as given and in one transaction, the records whose id is not
        stored yet (others skipped); return how many.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot import records")

    # -- optional capabilities (each with a default for a store without it) --

    @property
    def copies_records(self) -> bool:
        """True when :meth:`export_records` and :meth:`import_records` work."""
        return False

    @property
    def shares_transactions(self) -> bool:
        """True when writes take an application's ``connection=``."""
        return False

    @property
    def readonly(self) -> bool:
        """True when the store was opened read-only: it never writes.

        .. versionadded:: 0.2.0
        """
        return False

    @property
    def writers_take_turns(self) -> bool:
        """True when all writers wait for one lock (a draining worker then pauses)."""
        return False

    @property
    def clock(self) -> Clock:
        """Where the store reads "now" from."""
        return SYSTEM_CLOCK

    def data_version(self) -> int | None:
        """A number that changes when another connection commits, or None (unknown)."""
        return None

    def checkpoint(self) -> bool:
        """Fold the write-ahead log into the file; True if it did."""
        return False

    def vacuum(self) -> None:
        """Give free pages back to the file system (SQLite only)."""
        raise InvalidArgument(
            f"vacuum is for SQLite files ({type(self).__name__} has none); a database"
            " server reclaims space itself (PostgreSQL's autovacuum, InnoDB's purge)"
        )

    def transaction_runner(
        self,
        handler: Callable[[ScheduledMessage, Any], object],
        clock: Clock,
        policy: Any,
        timeout: float,
        *,
        run_log: bool = True,
    ) -> Any:
        """What runs a :class:`~hexeract_lite.transactional.TransactionalSink`'s handler,
        the acknowledgement and (``run_log``) its run record in one transaction.
        """
        raise InvalidConfiguration(
            f"a TransactionalSink needs a SQLite, PostgreSQL or MySQL store, got {self!r}"
        )

    # -- lifetime ------------------------------------------------------------

    def close(self) -> None:
        """Release the store's resources."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


_SINGLE = frozenset(
    {
        SettlementKind.DELIVERED,
        SettlementKind.RESCHEDULE,
        SettlementKind.FAILED,
        SettlementKind.DEAD_LETTERED,
    }
)
"""The kinds the default :meth:`ScheduleStore.settle` maps to a single method."""


def _settle_one(store: ScheduleStore, item: Settlement) -> bool:
    sid, lease = item.schedule_id, item.lease
    if item.kind is SettlementKind.DELIVERED:
        return store.mark_delivered(sid, lease)
    if item.kind is SettlementKind.RESCHEDULE:
        assert item.next is not None
        return store.reschedule(sid, item.next, lease)
    assert item.error is not None
    if item.kind is SettlementKind.FAILED:
        assert item.retry_in is not None
        return store.mark_failed(sid, item.retry_in, item.error, lease)
    return store.mark_dead_lettered(sid, item.error, lease)


class SettlingStore(ScheduleStore):
    """A store whose single acknowledgements are one-item :meth:`settle` calls."""

    _clock: Clock

    @property
    def clock(self) -> Clock:
        return self._clock

    def _now(self) -> datetime:
        return to_utc_ms(self._clock.now(), "clock.now()")

    @abc.abstractmethod
    def settle(self, outcomes: Sequence[Settlement]) -> list[bool]: ...

    def insert(
        self, message: ScheduledMessage, max_attempts: int, *, connection: object = None
    ) -> None:
        self.insert_many([message], max_attempts, connection=connection)  # type: ignore[call-arg]

    def resume(self, schedule_id: uuid.UUID, next: datetime | None = None) -> bool:
        sid = check_schedule_id(schedule_id)
        if next is not None:
            next = to_utc_ms(next, "next", InvalidArgument)
        return self.modify_record(sid, resume_change(next))

    def mark_delivered(self, schedule_id: uuid.UUID, lease: datetime) -> bool:
        return self.settle([Settlement.delivered(schedule_id, lease)])[0]

    def reschedule(self, schedule_id: uuid.UUID, next: datetime, lease: datetime) -> bool:
        return self.settle([Settlement.reschedule(schedule_id, next, lease)])[0]

    def mark_failed(
        self, schedule_id: uuid.UUID, retry_in: timedelta, error: str, lease: datetime
    ) -> bool:
        return self.settle([Settlement.failed(schedule_id, retry_in, error, lease)])[0]

    def mark_dead_lettered(self, schedule_id: uuid.UUID, error: str, lease: datetime) -> bool:
        return self.settle([Settlement.dead_lettered(schedule_id, error, lease)])[0]
