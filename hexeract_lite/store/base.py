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

    Subclasses call ``super().__init__()`` so that :attr:`changes` exists. The run log's
    methods are :class:`~hexeract_lite.store.runs.RunLogContract`'s, the long handlers'
    :class:`~hexeract_lite.store.longrun.LongRunContract`'s.

    .. versionadded:: 0.1.0
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
        ``lease`` at least 1 ms, the precision ``leased_until`` is stored at
        (:class:`InvalidConfiguration`). A claimed row that cannot be decoded is
        dead-lettered (``last_error`` naming the column), not returned.
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
        unchanged (they were advanced at claim). ``retry_in`` must be >= 0, and
        ``now + retry_in`` no later than the year 9999 (:class:`InvalidConfiguration`
        naming it, nothing written). ``error`` None: :class:`InvalidArgument`, nothing
        written (another object is stored as its ``str``). False if fenced out.
        """

    @abc.abstractmethod
    def mark_dead_lettered(self, schedule_id: uuid.UUID, error: str, lease: datetime) -> bool:
        """Fenced: the occurrence is exhausted; set ``dead_lettered_at = now``,
        ``last_error = error`` and clear the lease. ``error`` None:
        :class:`InvalidArgument`, nothing written. False if fenced out."""

    def settle(self, outcomes: Sequence[Settlement]) -> list[bool]:
        """Apply a batch of fenced acknowledgements; one bool per item, in order.

        Each item does exactly what the single method of its kind does (see
        :class:`Settlement`), with the same fencing, independently of the others: an
        item whose lease is stale, whose row is terminal or unknown, gets False and
        changes nothing, and the items after it still apply. Items apply in order, so
        a batch behaves like the single calls made one after the other (a second item
        for the same occurrence is fenced out by the first, which consumed the lease).
        Instants the store records (``delivered_at``, the retry deadline) come from
        one reading of its clock for the whole batch.

        Every item is checked first, with the single methods' rules (a schedule id
        that is not a UUID, a ``next`` that is not an aware datetime:
        :class:`InvalidArgument`; a negative or missing ``retry_in``, or one that puts
        the retry past the year 9999: :class:`InvalidConfiguration`), plus: an item that is not a
        :class:`Settlement`, an unknown kind, or a ``failed``/``dead_lettered`` item
        without an error text: :class:`InvalidArgument`. One bad item rejects the
        whole batch before anything is written. A lease that is not one the store
        could have handed out (naive, another type) is not an error: that item is
        fenced out (False), as with the single methods. An empty batch is a no-op
        (``[]``).

        The stores here apply the batch in one transaction: all of it or, on a store
        error, none of it (a crash before the commit leaves every occurrence leased, to
        be redelivered). :attr:`changes` is notified once, after the commit, when a
        ``reschedule`` or ``failed`` item applied. The default calls the single methods
        in order (not one transaction).
        """
        checked = check_settlements(outcomes)
        if any(item.kind is SettlementKind.RELEASED for item in checked):
            raise NotImplementedError(
                f"{type(self).__name__} has no single method for a released settlement;"
                " a store supports it by overriding settle()"
            )
        results: list[bool] = []
        for item in checked:
            kind = item.kind
            if kind is SettlementKind.DELIVERED:
                ok = self.mark_delivered(item.schedule_id, item.lease)
            elif kind is SettlementKind.RESCHEDULE:
                assert item.next is not None
                ok = self.reschedule(item.schedule_id, item.next, item.lease)
            elif kind is SettlementKind.FAILED:
                assert item.retry_in is not None and item.error is not None
                ok = self.mark_failed(item.schedule_id, item.retry_in, item.error, item.lease)
            else:
                assert item.error is not None
                ok = self.mark_dead_lettered(item.schedule_id, item.error, item.lease)
            results.append(ok)
        return results

    def settle_and_claim(
        self, outcomes: Sequence[Settlement], now: datetime, batch_size: int, lease: timedelta
    ) -> tuple[list[bool], list[LeasedOccurrence]]:
        """:meth:`settle` ``outcomes``, then :meth:`claim_due` ``(now, batch_size,
        lease)``: the settlements' answers and the claimed occurrences.

        The same results as the two calls one after the other (an occurrence the
        settlements make claimable can be claimed at once), with the same checks, all
        made before anything is written.

        The stores here apply both in one transaction: all of it or, on a store error,
        none of it. The default calls :meth:`settle` then :meth:`claim_due` (two
        transactions: a store error from the claim comes after the settlements).

        .. versionadded:: 0.2.0
        """
        check_claim(now, batch_size, lease)
        check_settlements(outcomes)
        return self.settle(outcomes), self.claim_due(now, batch_size, lease)

    @property
    def fuses_settle_and_claim(self) -> bool:
        """True when :meth:`settle_and_claim` is one transaction (the store overrides
        it): all of it or, on a store error, none of it.

        .. versionadded:: 0.2.0
        .. deprecated:: 0.2.0
           The worker no longer reads it: it calls :meth:`settle_and_claim` on every store.
        """
        return type(self).settle_and_claim is not ScheduleStore.settle_and_claim

    @abc.abstractmethod
    def dead_letter_exhausted(self) -> int:
        """The sweep, run at the start of every poll cycle; returns how many rows it moved.

        Dead-letters every non-terminal, non-paused row with ``attempts >=
        max_attempts`` and no live lease (a worker crashed on the last attempt, or
        ``max_attempts`` was lowered), with ``last_error =`` :data:`SWEEP_ERROR` when it
        had none, else :data:`SWEEP_KEPT` followed by the one it had; ``dead_lettered_at
        = now``, lease cleared.
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
        still acknowledge (the lease is never touched). Resuming through here clears
        the flag only (use :meth:`resume` for the realignment rule). Either way the pause
        note is cleared. Terminal: no-op (False). Unknown id: :class:`ScheduleNotFound`.
        """

    @abc.abstractmethod
    def resume(self, schedule_id: uuid.UUID, next: datetime | None = None) -> bool:
        """Resume a paused schedule; True if it is no longer paused.

        - ``next`` given: realign to it: ``scheduled_for = next``, attempts and
          ``last_error`` reset, flag cleared; the lease is cleared unless it is live
          (``leased_until > now``), which stays, so the dispatch in flight can still
          acknowledge.
        - else, for a cron schedule whose ``scheduled_for`` is already past
          (``< now``): realign to the first cron instant after now (no catch-up for a
          pause); when the expression has no further instant it stays paused (False).
        - else: just clear the flag.

        Not paused, or terminal: no-op (False). Unknown id: :class:`ScheduleNotFound`.

        .. versionchanged:: 0.2.0
           Keeps a live lease (``leased_until > now``) instead of clearing it.
        """

    @abc.abstractmethod
    def inspect(self, schedule_id: uuid.UUID) -> ScheduleSnapshot | None:
        """The schedule's snapshot, or None when there is no such id. A row that cannot
        be decoded raises :class:`StoreError` naming the schedule and the column."""

    # -- admin ---------------------------------------------------------------

    @abc.abstractmethod
    def list_pending(self, limit: int = 50) -> list[ScheduleSnapshot | MalformedSchedule]:
        """Pending and paused schedules, soonest ``scheduled_for`` first, at most ``limit``.

        A row the store cannot decode (another tool or a hand edit wrote it: an instant
        that is none, a cron expression that does not parse) is a
        :class:`~hexeract_lite.snapshot.MalformedSchedule` in its place, naming the
        column, so one bad row never hides the others.

        .. versionchanged:: 0.2.0
           Returns :class:`MalformedSchedule` items for rows that cannot be decoded.
        """

    @abc.abstractmethod
    def list_dead_letter(self, limit: int = 50) -> list[ScheduleSnapshot | MalformedSchedule]:
        """Dead-lettered schedules, most recently dead-lettered first, at most ``limit``;
        a row that cannot be decoded is a :class:`MalformedSchedule` in its place (see
        :meth:`list_pending`).

        .. versionchanged:: 0.2.0
           Returns :class:`MalformedSchedule` items for rows that cannot be decoded.
        """

    @abc.abstractmethod
    def replay(self, schedule_id: uuid.UUID) -> None:
        """Give a dead-lettered schedule a fresh start.

        Sets ``scheduled_for = now``, ``attempts = 0`` and clears the lease,
        ``last_error``, ``paused`` and ``dead_lettered_at``. Any other status raises
        :class:`NotReplayable` naming it; an unknown id, :class:`ScheduleNotFound`.
        """

    # -- named schedules and changes in place -------------------------------

    def modify_record(self, schedule_id: uuid.UUID, plan: Plan[_T]) -> _T:
        """Run ``plan`` on the row in one transaction (or under the store's lock) and
        write back the record it returns (every column; None: nothing written); return
        its answer. Unknown id: :class:`ScheduleNotFound`. An exception from the plan
        writes nothing. :attr:`changes` is notified after a write. The primitive under
        :meth:`ensure`, :meth:`update_schedule`, :meth:`move` and :meth:`run_now`
        (their rules are in :mod:`hexeract_lite.store.changes`). A store that cannot
        raises :class:`NotImplementedError` (the default).

        .. versionadded:: 0.2.0
        """
        raise NotImplementedError(f"{type(self).__name__} cannot change a schedule in place")

    def modify_named(self, prefix: str, plan: Plan[_T]) -> list[_T]:
        """:meth:`modify_record` on every live row named ``prefix...`` (bytes), by name,
        in one transaction (a plan's exception writes nothing); the answers, one a row."""
        raise NotImplementedError(f"{type(self).__name__} cannot change a group in place")

    def list_named(self, prefix: str) -> list[ScheduleSnapshot]:
        """Every non-terminal schedule whose name starts with ``prefix`` (byte for byte),
        by name. A store that cannot raises :class:`NotImplementedError` (the default).

        .. versionadded:: 0.2.0
        """
        raise NotImplementedError(f"{type(self).__name__} cannot list named schedules")

    def modify_within(self, connection: object, schedule_id: uuid.UUID, plan: Plan[_T]) -> _T:
        """:meth:`modify_record` inside the application's transaction on ``connection``
        (what the store's ``insert(..., connection=)`` accepts), under a savepoint:
        nothing is committed, the change exists once the caller commits. A store that
        cannot raises :class:`InvalidArgument` (the default).

        .. versionadded:: 0.2.0
        """
        raise no_transactions(self, connection)

    def ensure(
        self, message: ScheduledMessage, max_attempts: int, *, connection: object = None
    ) -> EnsureResult:
        """Store the named ``message`` if missing, leave it if the same, update it in
        place if changed; say which (:class:`EnsureResult`; rules:
        :func:`~hexeract_lite.store.changes.ensure_plan`). Safe to race from many
        processes: the id is the name's, so exactly one row is inserted and the others
        compare against it. A message without a name: :class:`InvalidArgument`.

        ``connection``: the application's connection with a transaction open (as for
        the store's ``insert(..., connection=)``): the row is created or changed inside
        that transaction (:meth:`modify_within`), nothing is committed, and the same
        checks refuse a bad connection; a store that cannot: :class:`InvalidArgument`.

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
        """Change a non-terminal schedule in place (None fields stay); True when a value
        differed. Terminal: :class:`NotChangeable`. A new cron rule's next firing is its
        first instant after now; under a live lease it waits for that firing's
        acknowledgement (see :mod:`hexeract_lite.store.changes`).

        .. versionadded:: 0.2.0
        """
        check_schedule_id(schedule_id)
        change = check_change(change)
        if change.empty:
            raise InvalidArgument(f"update of {schedule_id} names nothing to change")
        return self.modify_record(schedule_id, update_plan(change))

    def move(self, schedule_id: uuid.UUID, at: datetime) -> bool:
        """Make ``at`` (aware) the schedule's next firing; attempts and last error reset.
        Terminal, or a one-shot schedule in flight: :class:`NotChangeable`; a recurring
        one in flight moves once that firing is acknowledged.

        .. versionadded:: 0.2.0
        """
        check_schedule_id(schedule_id)
        at = to_utc_ms(at, "at", InvalidArgument, round_up=True)
        return self.modify_record(schedule_id, move_plan(at))

    def run_now(self, schedule_id: uuid.UUID) -> bool:
        """Make now the schedule's next firing (a recurring one then goes on on its
        rule). Terminal or paused: :class:`NotChangeable`. A one-shot schedule in
        flight: False (its firing is under way).

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
        """Schedules in schedule id order (byte order), at most ``limit``, starting after
        ``after`` (a keyset cursor: the last id of the page before; None: the first).

        ``status``: one of ``pending``, ``paused``, ``delivered``, ``cancelled``,
        ``dead-lettered`` or ``all``/None; ``event_type``: a glob matched against the
        whole event type (``*``, ``?``; see :mod:`hexeract_lite.store.listing`);
        ``name``: a glob on the schedule's name (a schedule without one never matches). A
        bad status, glob, cursor or limit raises :class:`InvalidArgument` /
        :class:`InvalidConfiguration` naming it. A row that cannot be decoded is a
        :class:`MalformedSchedule` in its place. A store that cannot list raises
        :class:`NotImplementedError` (the default).

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
        """Delete the rows of ``statuses`` (``delivered``, ``cancelled``; ``dead-lettered``
        only when named) that ended more than ``older_than`` before the store's now;
        return how many (with ``dry_run``, how many would be, deleting nothing).

        Never a live row: pending and paused rows, recurring schedules among them, are
        not ended and never match. Deletes ``batch_size`` rows per transaction, so the
        write lock is never held for long; ``progress`` is told the running total after
        each. A bad ``older_than`` (not a positive timedelta) or status raises
        :class:`InvalidArgument` naming it, before anything is deleted. A store that
        cannot prune raises :class:`NotImplementedError` (the default).

        .. versionadded:: 0.2.0
        """
        raise NotImplementedError(f"{type(self).__name__} cannot prune")

    def replay_dead_letters(self, ids: Sequence[uuid.UUID]) -> int:
        """Replay (see :meth:`replay`) those of ``ids`` that are dead-lettered, in one
        transaction; return how many were. An id that is not dead-lettered (any more:
        another replay got there first) or unknown is skipped, never an error. The
        default replays them one at a time.

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
        """Counts by status, due and not claimed, in flight, in backoff, the lag of the
        oldest due row and the next wake-up, at the store's now
        (:class:`~hexeract_lite.store.stats.StoreStats`). Reads only; never scans ended
        rows. A store that cannot count raises :class:`NotImplementedError` (the default).

        .. versionadded:: 0.2.0
        """
        raise NotImplementedError(f"{type(self).__name__} cannot report stats")

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

    # -- optional capabilities (each with a default for a store without it) --

    @property
    def copies_records(self) -> bool:
        """True when the store implements :meth:`export_records` and
        :meth:`import_records`, through which ``migrate`` copies. The default is False."""
        return False

    @property
    def shares_transactions(self) -> bool:
        """True when ``insert``, ``insert_many`` and :meth:`ensure` take an application's
        ``connection=`` and :meth:`modify_within` writes inside its transaction. The
        default is False (they refuse a connection with :class:`InvalidArgument`)."""
        return False

    @property
    def writers_take_turns(self) -> bool:
        """True when all writers wait for one lock: a draining worker then pauses
        ``min_cycle_delay`` after a full batch. The default is False."""
        return False

    @property
    def clock(self) -> Clock:
        """Where the store reads "now" from. The default is the system clock."""
        return SYSTEM_CLOCK

    def data_version(self) -> int | None:
        """A number that changes when another connection commits to the database, or
        None when the store cannot tell (the default). A worker polls it to notice
        other processes' changes within its poll interval."""
        return None

    def checkpoint(self) -> bool:
        """Fold the store's write-ahead log into its file; True if it did. The default
        does nothing (False)."""
        return False

    def vacuum(self) -> None:
        """Give the database's free pages back to the file system. A store without it
        raises :class:`InvalidArgument` (the default)."""
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
        """What runs a :class:`~hexeract_lite.transactional.TransactionalSink`'s handler
        and the acknowledgement in one transaction on this store's database (an object
        with ``run(occurrence) -> DispatchResult`` and ``close()``), recording the
        delivery's run in that transaction too when ``run_log`` and the store keeps a
        run log. A store without shared transactions raises
        :class:`InvalidConfiguration` (the default)."""
        raise InvalidConfiguration(
            f"a TransactionalSink needs a SQLite, PostgreSQL or MySQL store, got {self!r}"
        )

    # -- lifetime ------------------------------------------------------------

    def close(self) -> None:
        """Release the store's resources. The default does nothing."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SettlingStore(ScheduleStore):
    """A store whose single acknowledgements are one-item :meth:`settle` calls, and
    whose now is its ``_clock``'s (UTC, ms)."""

    _clock: Clock

    @property
    def clock(self) -> Clock:
        """The clock the store reads "now" from."""
        return self._clock

    def _now(self) -> datetime:
        return to_utc_ms(self._clock.now(), "clock.now()")

    @abc.abstractmethod
    def settle(self, outcomes: Sequence[Settlement]) -> list[bool]: ...

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
