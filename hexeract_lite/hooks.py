"""Hooks: what a worker tells the application about its work, as events.

``SchedulerWorker(..., hooks=[callback, ...])``: each callback is called with one event
object for each of these, in this order within a cycle:

===========================  ==========================================================
event                        when
===========================  ==========================================================
:class:`Swept`               the opening sweep dead-lettered rows left exhausted
:class:`MalformedDeadLettered`  a claim met a row it cannot decode and dead-lettered it
:class:`Delivered`           a dispatch succeeded and was recorded (delivered, or a cron
                             schedule rescheduled: ``next`` is its next instant)
:class:`Missed`              a recurring firing was not dispatched (misfire grace,
                             ``catch_up``, the policy's end or ``max_firings``)
:class:`Failed`              a dispatch failed and waits out ``retry_in``
:class:`DeadLettered`        a dispatch failed on its last attempt
:class:`Released`            the worker was stopping: handed back undispatched
:class:`LeaseLost`           the settlement was fenced out (another worker owns it)
:class:`Snoozed`             the handler snoozed: dispatched again after ``delay``
:class:`Aborted`             an abort stopped the dispatch (asked for by
                             ``SchedulerControl.abort``)
:class:`LeaseExtended`       a heartbeat extended a dispatch's lease
:class:`HeartbeatLost`       a heartbeat found the lease lost (another worker may own it)
:class:`StoreErrorBackedOff`  a store error; the loop waits ``backoff`` and goes on
===========================  ==========================================================

Settlement events are emitted once the whole batch is settled, so a hook can never
change what is delivered or settled: a hook that raises is logged with its traceback
and the next hook is called. Hooks run on the thread that settles;
:class:`LeaseExtended` and :class:`HeartbeatLost` on the thread that made the
heartbeat. A hook still running ``dispatch_timeout`` after the loop was asked to stop
is given up on as a hung sink is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta

import attrs

from ._log import package_logger
from .errors import InvalidConfiguration
from .message import ScheduledMessage
from .settle import DispatchOutcome, DispatchResult, ResultKind
from .settlement import Settlement
from .snapshot import LeasedOccurrence

__all__ = [
    "Aborted",
    "DeadLettered",
    "Delivered",
    "Failed",
    "HeartbeatLost",
    "Hook",
    "LeaseExtended",
    "LeaseLost",
    "MalformedDeadLettered",
    "Missed",
    "Released",
    "Snoozed",
    "StoreErrorBackedOff",
    "Swept",
    "WorkerEvent",
    "abandon_hooks",
    "call_hooks",
    "check_hooks",
    "hooks_running_since",
    "settlement_event",
]

log = package_logger("hexeract_lite.worker")


@attrs.frozen(kw_only=True)
class Delivered:
    """A dispatch succeeded and was recorded; ``lag``: settlement instant minus
    ``scheduled_for``; ``duration``: the sink's time; ``next``: a recurring schedule's
    next instant (None: delivered for good)."""

    message: ScheduledMessage
    attempt: int
    lag: timedelta
    duration: timedelta
    next: datetime | None


@attrs.frozen(kw_only=True)
class Missed:
    """A firing was not dispatched (``reason``: misfire grace, ``catch_up``, or the policy's
    end or ``max_firings``); ``next``: the firing it moved to (None: it completed). A
    one-shot's missed firing is :class:`DeadLettered` instead.

    .. versionadded:: 0.2.0"""

    message: ScheduledMessage
    reason: str
    next: datetime | None


@attrs.frozen(kw_only=True)
class Failed:
    """A dispatch failed and was recorded; claimable again after ``retry_in``;
    ``error_text`` is what ``last_error`` holds."""

    message: ScheduledMessage
    attempt: int
    max_attempts: int
    error: BaseException | str
    error_text: str
    retry_in: timedelta
    duration: timedelta | None


@attrs.frozen(kw_only=True)
class DeadLettered:
    """A dispatch failed on its last attempt; the schedule is dead-lettered."""

    message: ScheduledMessage
    attempt: int
    error: BaseException | str
    error_text: str
    duration: timedelta | None


@attrs.frozen(kw_only=True)
class Released:
    """The worker was stopping: the occurrence was handed back undispatched."""

    message: ScheduledMessage


@attrs.frozen(kw_only=True)
class LeaseLost:
    """The settlement of ``message`` was fenced out: another worker owns it now."""

    message: ScheduledMessage


@attrs.frozen(kw_only=True)
class Snoozed:
    """The handler snoozed: claimable again after ``delay``, its attempt given back;
    ``snoozes``: this occurrence's snoozes so far.

    .. versionadded:: 0.2.0"""

    message: ScheduledMessage
    attempt: int
    delay: timedelta
    snoozes: int


@attrs.frozen(kw_only=True)
class Aborted:
    """An abort stopped the dispatch: a failed attempt (retried after ``retry_in``, or
    dead-lettered when None), or the schedule ``cancelled``.

    .. versionadded:: 0.2.0"""

    message: ScheduledMessage
    attempt: int
    cancelled: bool
    retry_in: timedelta | None


@attrs.frozen(kw_only=True)
class LeaseExtended:
    """A heartbeat extended the lease of a dispatch in flight to ``leased_until``.

    .. versionadded:: 0.2.0
    """

    message: ScheduledMessage
    leased_until: datetime


@attrs.frozen(kw_only=True)
class HeartbeatLost:
    """A heartbeat found the lease of a dispatch in flight lost; the handle's
    ``should_abort()`` is True from now on.

    .. versionadded:: 0.2.0"""

    message: ScheduledMessage


@attrs.frozen(kw_only=True)
class Swept:
    """The opening sweep dead-lettered ``count`` rows a crashed worker left exhausted."""

    count: int


@attrs.frozen(kw_only=True)
class MalformedDeadLettered:
    """A claimed row could not be decoded and was dead-lettered undispatched;
    ``schedule``: its id as stored (a text: it may not be a UUID)."""

    schedule: str
    reason: str


@attrs.frozen(kw_only=True)
class StoreErrorBackedOff:
    """A store error ended a cycle of the loop; it waits ``backoff`` before the next."""

    error: BaseException
    backoff: timedelta


WorkerEvent = (
    Delivered
    | Missed
    | Failed
    | DeadLettered
    | Released
    | LeaseLost
    | Snoozed
    | Aborted
    | LeaseExtended
    | HeartbeatLost
    | Swept
    | MalformedDeadLettered
    | StoreErrorBackedOff
)
"""Any of the events a hook receives."""

Hook = Callable[[WorkerEvent], object]
"""A hook: called with each event; what it returns is ignored."""


def check_hooks(hooks: Iterable[Hook] | None) -> tuple[Hook, ...]:
    """``hooks`` as a tuple; not an iterable of callables: :class:`InvalidConfiguration`."""
    if hooks is None:
        return ()
    try:
        if callable(hooks) or isinstance(hooks, str | bytes):
            raise TypeError
        checked = tuple(hooks)
    except TypeError:
        raise InvalidConfiguration(
            f"hooks must be a sequence of callables, got hooks={hooks!r}"
        ) from None
    for hook in checked:
        if not callable(hook):
            raise InvalidConfiguration(f"each hook must be callable, got {hook!r}")
    return checked


class LoopAbandoned(BaseException):
    """Ends a thread whose sink call or hooks its watcher gave up on, recording nothing (a
    BaseException, so that no ``except Exception`` on the way stops it)."""


_RUNNING: dict[int, float] = {}
"""Thread ident -> when (monotonic) the hooks that thread is calling started."""

_ABANDONED: set[int] = set()
"""Threads whose hook calls a watcher gave up on."""


def hooks_running_since(thread: threading.Thread) -> float | None:
    """When (monotonic) ``thread`` started the hook calls it makes now; None: it makes none."""
    ident = thread.ident
    return None if ident is None else _RUNNING.get(ident)


_LOCK = threading.Lock()


def abandon_hooks(thread: threading.Thread) -> bool:
    """Give up on ``thread``'s hook calls if it still makes them (True): after the hook in
    hand, it calls no other and raises :class:`LoopAbandoned`."""
    with _LOCK:
        if thread.ident is None or thread.ident not in _RUNNING:
            return False
        _ABANDONED.add(thread.ident)
        return True


def call_hooks(hooks: Sequence[Hook], events: Iterable[WorkerEvent]) -> None:
    """Call every hook with every event, in order; a hook's exception is logged and goes
    no further."""
    if not hooks:
        return
    ident = threading.get_ident()
    outer = ident not in _RUNNING
    if outer:
        _RUNNING[ident] = time.monotonic()
    abandoned = False
    try:
        for event in events:
            for hook in hooks:
                try:
                    hook(event)
                except Exception:
                    log.exception("hook %r raised on %s; ignored", hook, type(event).__name__)
                if ident in _ABANDONED:
                    raise LoopAbandoned
    finally:
        if outer:  # given up on after its last look, it must not go on either
            with _LOCK:
                _RUNNING.pop(ident, None)
                abandoned = ident in _ABANDONED
                _ABANDONED.discard(ident)
    if abandoned:
        raise LoopAbandoned


def settlement_event(
    occ: LeasedOccurrence,
    settlement: Settlement,
    outcome: DispatchOutcome,
    result: DispatchResult,
    now: datetime,
) -> WorkerEvent:
    """The hook event of one recorded settlement (``outcome``), at ``now``."""
    msg = occ.message
    took = None if result.duration is None else timedelta(seconds=result.duration)
    if outcome is DispatchOutcome.DELIVERED or outcome is DispatchOutcome.RESCHEDULED:
        return Delivered(
            message=msg,
            attempt=occ.attempts,
            lag=now - msg.scheduled_for,
            duration=took if took is not None else timedelta(0),
            next=settlement.next,
        )
    if outcome is DispatchOutcome.MISSED:
        return Missed(message=msg, reason=str(result.error or ""), next=settlement.next)
    if outcome is DispatchOutcome.SNOOZED:
        assert settlement.retry_in is not None
        snoozes = occ.snoozes + 1
        return Snoozed(
            message=msg, attempt=occ.attempts, delay=settlement.retry_in, snoozes=snoozes
        )
    aborted = outcome is DispatchOutcome.CANCELLED or result.kind is ResultKind.ABORTED
    if aborted and outcome is not DispatchOutcome.LEASE_LOST:
        cancelled = outcome is DispatchOutcome.CANCELLED
        retry_in = settlement.retry_in if outcome is DispatchOutcome.RETRIED else None
        return Aborted(message=msg, attempt=occ.attempts, cancelled=cancelled, retry_in=retry_in)
    text = settlement.error or ""
    error = result.error if result.error is not None else text
    if outcome is DispatchOutcome.RETRIED:
        assert settlement.retry_in is not None
        return Failed(
            message=msg,
            attempt=occ.attempts,
            max_attempts=occ.max_attempts,
            error=error,
            error_text=text,
            retry_in=settlement.retry_in,
            duration=took,
        )
    if outcome is DispatchOutcome.DEAD_LETTERED:
        return DeadLettered(
            message=msg, attempt=occ.attempts, error=error, error_text=text, duration=took
        )
    if outcome is DispatchOutcome.LEASE_LOST:
        return LeaseLost(message=msg)
    return Released(message=msg)
