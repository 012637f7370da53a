"""Settling a dispatch: what the store records for each claimed occurrence.

:func:`settlement_for` is the rule the worker applies to every occurrence of a batch
once its turn is over (a pure function: no store, no clock, no I/O):

==============================  ======================================================
what happened at its turn       the settlement
==============================  ======================================================
dispatched, delay trigger       ``delivered``
dispatched, cron or interval    ``reschedule`` to ``next_due(now, scheduled_for)``, the
                                first instant of the rule after both (missed ticks
                                collapse into one catch-up); ``delivered`` when the
                                rule has no further instant; with a policy, its next
                                firing (:meth:`~hexeract_lite.policy.Rule.after_firing`:
                                jittered, caught up, ``delivered`` past its end or
                                count); the firing is counted
failed, budget left             ``failed`` with :meth:`RetryPolicy.next_delay`
                                (``attempts < max_attempts``)
failed, exhausted               ``dead_lettered`` with the error text
snoozed (the handler raised or  ``snoozed``: the attempt given back, due again after
returned ``Snooze(delay)``)     the delay; past ``max_snoozes`` snoozes of the
                                occurrence: ``dead_lettered`` with that reason
aborted (an abort was asked     as failed (the attempt counts: retried, or
for while it ran)               dead-lettered when exhausted), run-log outcome
                                ``aborted``; with ``cancel=True``: ``cancelled``
missed (found later than its    one-shot: ``dead_lettered`` with the reason (replayable);
misfire grace, or missed under  recurring: ``reschedule`` to its next firing
its policy, not a retry after   (:meth:`~hexeract_lite.policy.Rule.after_miss`) without
a failure)                      dispatch (``delivered`` when there is none)
not dispatched (stopping)       ``released``: the claim's attempt given back, the lease
                                cleared, claimable again at once
lease expired before its turn   nothing: another worker may own it now
==============================  ======================================================

Every settlement carries the claim's ``leased_until`` as its fencing token.
"""

from __future__ import annotations

import enum
import os
import traceback
import uuid
from datetime import datetime
from typing import TYPE_CHECKING

import attrs

from .backfill import window_next
from .config import DEFAULT_MAX_SNOOZES
from .errors import DispatchError
from .longrun import DispatchAborted, Snooze
from .policy import Firing, Rule
from .runlog import RunDraft, RunOutcome, RunStamp
from .settlement import Settlement, SettlementKind
from .snapshot import LeasedOccurrence

if TYPE_CHECKING:
    from .retry import RandomSource, RetryPolicy

__all__ = [
    "LEASE_EXPIRED",
    "Acknowledged",
    "MAX_ERROR_CHARS",
    "MAX_HEAD_CHARS",
    "NOT_DISPATCHED",
    "SUCCEEDED",
    "DispatchOutcome",
    "DispatchResult",
    "ResultKind",
    "error_summary",
    "error_text",
    "missed_result",
    "outcome_of",
    "settlement_for",
]


MAX_ERROR_CHARS = 4000
"""``last_error`` texts longer than this are cut (ending in ``…``) to keep rows small."""

MAX_HEAD_CHARS = 1000
"""The exception line (type and message) of a ``last_error`` is cut to this many characters
(ending in ``…``) before the traceback is added."""

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep

TRACEBACK_HEADER = "Traceback (most recent call last, innermost frames kept):"


def _exception_line(error: BaseException) -> str:
    try:
        detail = str(error)
    except Exception:  # its __str__ raised: say so, as the traceback module does
        detail = "<exception str() failed>"
    if "\n" in detail:  # e.g. pytest's assertion detail, which shows values (the payload)
        detail = detail.split("\n", 1)[0] + " …"
    return f"{type(error).__name__}: {detail}" if detail else type(error).__name__


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _frames(error: BaseException) -> list[str]:
    """The traceback of ``error``, outermost first, one text per frame; never locals."""
    if error.__traceback__ is None:
        return []
    try:
        stack = traceback.StackSummary.extract(traceback.walk_tb(error.__traceback__))
    except Exception:  # a frame that cannot be summarised: the line alone
        return []
    # The worker's own frames that called the sink say nothing of the failure.
    while stack and stack[0].filename.startswith(_PACKAGE_DIR):
        stack.pop(0)
    return list(stack.format())


def error_text(error: BaseException | str) -> str:
    """The ``last_error`` text of a failure, at most :data:`MAX_ERROR_CHARS`.

    An exception: ``"<Type>: <message's first line>"`` (cut to :data:`MAX_HEAD_CHARS`
    when a traceback follows), then :data:`TRACEBACK_HEADER` and the innermost frames
    that fit (never locals, not the worker's own), saying how many were left out."""
    if not isinstance(error, BaseException):
        return _cut(str(error), MAX_ERROR_CHARS)
    frames = _frames(error)
    if not frames:
        return _cut(_exception_line(error), MAX_ERROR_CHARS)
    head = _cut(_exception_line(error), MAX_HEAD_CHARS)
    budget = MAX_ERROR_CHARS - len(head) - len(TRACEBACK_HEADER) - 2 - 48
    kept: list[str] = []
    for frame in reversed(frames):
        if len(frame) > budget:
            break
        kept.append(frame)
        budget -= len(frame)
    omitted = len(frames) - len(kept)
    lines = [head, TRACEBACK_HEADER]
    if omitted:
        lines.append(f"  ... {omitted} outer frame(s) left out")
    lines.append("".join(reversed(kept)))
    return "\n".join(lines).rstrip("\n")


def error_summary(text: str | None) -> str | None:
    """The exception line of a ``last_error`` text (its first line)."""
    return None if text is None else text.split("\n", 1)[0]


class ResultKind(enum.Enum):
    """What happened to a claimed occurrence at its turn in the batch."""

    SUCCEEDED = "succeeded"
    """Dispatched; the sink returned None."""
    FAILED = "failed"
    """Dispatched; the sink raised, timed out, returned something else, or was abandoned."""
    NOT_DISPATCHED = "not dispatched"
    """Never handed to the sink: the worker is stopping."""
    LEASE_EXPIRED = "lease expired"
    """Never handed to the sink: its lease ran out before its turn."""
    MISSED = "missed"
    """Never handed to the sink: found later than its schedule's misfire grace."""
    SNOOZED = "snoozed"
    """Dispatched; the handler raised or returned :class:`~hexeract_lite.Snooze`."""
    ABORTED = "aborted"
    """Dispatched; stopped by an abort asked for while it ran
    (:class:`~hexeract_lite.longrun.DispatchAborted`)."""


@attrs.frozen
class DispatchResult:
    """One occurrence's turn: its :class:`ResultKind`, a failure's error, how long a
    dispatch took and when it began."""

    kind: ResultKind
    error: BaseException | str | None = None
    duration: float | None = attrs.field(default=None, eq=False)
    """Seconds the sink took (None: not dispatched, or not measured)."""
    began: float | None = attrs.field(default=None, eq=False)
    """``time.monotonic()`` when the sink was called (None: not dispatched, or not
    measured)."""
    timed_out: bool = attrs.field(default=False, eq=False)
    """A failure because the call ran past ``dispatch_timeout``."""

    @classmethod
    def failed(cls, error: BaseException | str) -> DispatchResult:
        """A failed dispatch (a :class:`~hexeract_lite.Snooze`: snoozed; an abort: aborted)."""
        if isinstance(error, Snooze):
            return cls(ResultKind.SNOOZED, error)
        if isinstance(error, DispatchAborted):
            return cls(ResultKind.ABORTED, error)
        return cls(ResultKind.FAILED, error)

    @classmethod
    def timeout(cls, error: BaseException) -> DispatchResult:
        """A dispatch that failed by running past ``dispatch_timeout``."""
        return cls(ResultKind.FAILED, error, timed_out=True)

    def exception(self) -> BaseException:
        """The error as an exception to raise (a text becomes a DispatchError)."""
        error = self.error
        return error if isinstance(error, BaseException) else DispatchError(str(error or ""))

    def took(self, duration: float, began: float | None = None) -> DispatchResult:
        """This result with its ``duration`` and ``began``, when it was dispatched."""
        if self.kind in _DISPATCHED:
            if type(self) is DispatchResult:  # the common case, without evolve's cost
                return DispatchResult(self.kind, self.error, duration, began, self.timed_out)
            return attrs.evolve(self, duration=duration, began=began)
        return self


def missed_result(occurrence: LeasedOccurrence, now: datetime) -> DispatchResult | None:
    """A ``MISSED`` result when the occurrence is not to be delivered; None: deliver it.
    A backfill's, a retry's or a snooze's firing is never late."""
    msg = occurrence.message
    if msg.misfire_grace is None and msg.policy is None:
        return None  # the common case
    reason = _rule(occurrence).missed_reason(
        occurrence.firing(),
        now,
        retrying=occurrence.retrying or occurrence.snoozes > 0 or occurrence.in_backfill,
    )
    return None if reason is None else DispatchResult(ResultKind.MISSED, reason)


_DISPATCHED = frozenset(
    {ResultKind.SUCCEEDED, ResultKind.FAILED, ResultKind.SNOOZED, ResultKind.ABORTED}
)
SUCCEEDED = DispatchResult(ResultKind.SUCCEEDED)
NOT_DISPATCHED = DispatchResult(ResultKind.NOT_DISPATCHED)
LEASE_EXPIRED = DispatchResult(ResultKind.LEASE_EXPIRED)


def settlement_for(
    occurrence: LeasedOccurrence,
    result: DispatchResult,
    now: datetime,
    policy: RetryPolicy,
    rng: RandomSource | None = None,
    stamp: RunStamp | None = None,
    max_snoozes: int = DEFAULT_MAX_SNOOZES,
) -> Settlement | None:
    """The settlement of ``occurrence`` after ``result`` (see the module docstring); None
    for :data:`LEASE_EXPIRED`. With ``stamp``, it carries its run for the run log."""
    msg = occurrence.message
    kind = result.kind
    sid, lease = msg.schedule_id, occurrence.leased_until
    if kind is ResultKind.SUCCEEDED:
        run = _run(stamp, occurrence, result, RunOutcome.DELIVERED, None)
        nxt = window_next(occurrence)  # a backfill's window: its next instant, unjittered
        if nxt is not None and not _last_firing(occurrence, nxt):
            return Settlement.reschedule(sid, nxt, lease, run=run, counted=True)
        recurring = msg.trigger.is_recurring
        if msg.policy is None:  # the common case, without building the firing
            nxt = msg.trigger.next_due(now, msg.scheduled_for)
            if nxt is None:
                return Settlement.delivered(sid, lease, run=run, counted=recurring)
            return Settlement.reschedule(sid, nxt, lease, run=run, counted=True)
        firing = _rule(occurrence).after_firing(occurrence.firing(), now)
        return _next_settlement(sid, lease, firing, run, counted=recurring)
    if kind is ResultKind.SNOOZED:
        assert isinstance(result.error, Snooze)
        if occurrence.snoozes >= max_snoozes:
            text = f"snoozed more than max_snoozes ({max_snoozes}) times; dead-lettered"
            run = _run(stamp, occurrence, result, RunOutcome.DEAD_LETTERED, text)
            return Settlement.dead_lettered(sid, text, lease, run=run)
        run = _run(stamp, occurrence, result, RunOutcome.SNOOZED, None)
        return Settlement.snoozed(sid, result.error.delay, lease, run=run)
    if (
        kind is ResultKind.ABORTED
        and isinstance(result.error, DispatchAborted)
        and result.error.cancel
    ):
        text = error_text(result.error)
        run = _run(stamp, occurrence, result, RunOutcome.ABORTED, text)
        return Settlement.cancelled(sid, lease, run=run)
    if kind is ResultKind.FAILED or kind is ResultKind.ABORTED:
        text = error_text(result.error if result.error is not None else "")
        aborted = kind is ResultKind.ABORTED
        if occurrence.attempts >= occurrence.max_attempts:
            outcome = RunOutcome.ABORTED if aborted else RunOutcome.DEAD_LETTERED
            run = _run(stamp, occurrence, result, outcome, text)
            return Settlement.dead_lettered(sid, text, lease, run=run)
        outcome = RunOutcome.TIMED_OUT if result.timed_out else RunOutcome.FAILED
        outcome = RunOutcome.ABORTED if aborted else outcome
        run = _run(stamp, occurrence, result, outcome, text)
        delay = policy.next_delay(occurrence.attempts, rng)
        return Settlement.failed(sid, delay, text, lease, run=run)
    if kind is ResultKind.MISSED:
        text = error_text(result.error if result.error is not None else "missed")
        if msg.trigger.is_recurring:  # skip the stale firing, go on at the next one
            run = _run(stamp, occurrence, result, RunOutcome.SKIPPED, text)
            firing = _rule(occurrence).after_miss(occurrence.firing(), now)
            return _next_settlement(sid, lease, firing, run, counted=False)
        run = _run(stamp, occurrence, result, RunOutcome.DEAD_LETTERED, text)
        return Settlement.dead_lettered(sid, text, lease, run=run)
    if kind is ResultKind.NOT_DISPATCHED:
        run = _run(stamp, occurrence, result, RunOutcome.RELEASED, None)
        return Settlement.released(sid, lease, run=run)
    return None


def _rule(occurrence: LeasedOccurrence) -> Rule:
    msg = occurrence.message
    return Rule(msg.schedule_id, msg.trigger, msg.policy, msg.misfire_grace)


def _last_firing(occurrence: LeasedOccurrence, nxt: datetime) -> bool:
    """The policy ends the schedule at this delivery, before ``nxt``."""
    policy = occurrence.message.policy
    if policy is None:
        return False
    if policy.max_firings is not None and occurrence.firings + 1 >= policy.max_firings:
        return True
    return policy.end_at is not None and nxt > policy.end_at


def _next_settlement(
    sid: uuid.UUID, lease: datetime, firing: Firing | None, run: RunDraft | None, *, counted: bool
) -> Settlement:
    """``reschedule`` to ``firing``, or ``delivered`` when there is none."""
    if firing is None:
        return Settlement.delivered(sid, lease, run=run, counted=counted)
    return Settlement.reschedule(
        sid, firing.due, lease, run=run, offset=firing.offset, counted=counted
    )


def _run(
    stamp: RunStamp | None,
    occurrence: LeasedOccurrence,
    result: DispatchResult,
    outcome: RunOutcome,
    error: str | None,
) -> RunDraft | None:
    if stamp is None:
        return None
    msg = occurrence.message
    return stamp.record(
        msg.schedule_id,
        msg.scheduled_for,
        occurrence.attempts,
        outcome,
        result.began,
        result.duration,
        None if error is None else error.split("\n", 1)[0],
    )


class DispatchOutcome(enum.StrEnum):
    """What became of one claimed occurrence."""

    DELIVERED = "delivered"
    """Dispatched; a delay trigger (or a cron with no further instant) marked delivered."""
    RESCHEDULED = "rescheduled"
    """Dispatched; a cron schedule moved to its next instant."""
    RETRIED = "retried"
    """The dispatch failed; the occurrence waits out its retry delay."""
    DEAD_LETTERED = "dead_lettered"
    """The dispatch failed on the last attempt; the schedule is dead-lettered."""
    LEASE_LOST = "lease_lost"
    """The acknowledgement was fenced out: another worker owns the occurrence now."""
    SKIPPED = "skipped"
    """Its lease had expired before its turn in the batch; not dispatched."""
    MISSED = "missed"
    """Not dispatched: later than its misfire grace, missed under its ``catch_up``
    policy, or past its policy's end or ``max_firings``; the recurring schedule moved
    to its next firing, or completed."""
    RELEASED = "released"
    """The worker was stopping; not dispatched, handed back to the store."""
    SNOOZED = "snoozed"
    """The handler snoozed; the occurrence is due again after the delay."""
    CANCELLED = "cancelled"
    """Aborted with ``cancel=True``: the schedule is cancelled."""


_OUTCOMES = {
    SettlementKind.DELIVERED: DispatchOutcome.DELIVERED,
    SettlementKind.RESCHEDULE: DispatchOutcome.RESCHEDULED,
    SettlementKind.FAILED: DispatchOutcome.RETRIED,
    SettlementKind.DEAD_LETTERED: DispatchOutcome.DEAD_LETTERED,
    SettlementKind.RELEASED: DispatchOutcome.RELEASED,
    SettlementKind.SNOOZED: DispatchOutcome.SNOOZED,
    SettlementKind.CANCELLED: DispatchOutcome.CANCELLED,
}


def outcome_of(
    settlement: Settlement | None, applied: bool = True, result: DispatchResult | None = None
) -> DispatchOutcome:
    """What a settlement counts as once the store answered ``applied``: ``LEASE_LOST``
    when fenced out, ``SKIPPED`` for None, ``MISSED`` for a firing not dispatched."""
    if settlement is None:
        return DispatchOutcome.SKIPPED
    if not applied:
        return DispatchOutcome.LEASE_LOST
    outcome = _OUTCOMES[settlement.kind]
    if result is not None and result.kind is ResultKind.MISSED and outcome in _ONWARD:
        return DispatchOutcome.MISSED
    return outcome


_ONWARD = frozenset({DispatchOutcome.DELIVERED, DispatchOutcome.RESCHEDULED})


@attrs.frozen(kw_only=True)
class Acknowledged(DispatchResult):
    """A dispatch whose acknowledgement the handler's transaction recorded (``applied``),
    or that was fenced out."""

    kind: ResultKind = ResultKind.SUCCEEDED
    settlement: Settlement
    applied: bool
