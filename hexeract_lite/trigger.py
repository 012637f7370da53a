"""Triggers: when a schedule fires. ``delay`` fires once; ``cron`` fires repeatedly."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Literal

import attrs

from ._time import to_utc_ms
from .errors import InvalidTrigger

__all__ = ["CronExpression", "Trigger", "TriggerKind"]

TriggerKind = Literal["delay", "cron"]

MACROS: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""The macros a cron expression may be, and the five-field rule each stands for."""

_PROBE_START = datetime(2000, 1, 1, tzinfo=UTC)


@attrs.frozen
class CronExpression:
    """A validated cron expression, evaluated in UTC (engine: cronsim, Debian cron rules).

    Accepted: five fields ``min hour dom month dow``; six fields with a *leading*
    seconds field ``sec min hour dom month dow`` (``*/2 * * * * *`` fires every two
    seconds); and the macros in :data:`MACROS`. Build it with :meth:`parse`.
    """

    expression: str
    """The text as given (a macro stays a macro)."""
    _rule: str = attrs.field(repr=False, eq=False)

    @classmethod
    def parse(cls, expression: str) -> CronExpression:
        """Validate ``expression``; raise :class:`InvalidTrigger` quoting it and the reason.

        Rejected: an empty text, a number of fields other than 5 or 6, a field out of
        range (``61 * * * *``), a zero step (``*/0``), an unknown macro (``@every 5m``)
        and an expression that can never fire (``0 0 31 2 *``).
        """
        if not isinstance(expression, str):
            raise InvalidTrigger(f"cron expression must be a string, got {expression!r}")
        return _parse_cached(expression)

    def next_occurrence(self, after: datetime) -> datetime | None:
        """The first instant strictly after ``after`` that the expression matches, in UTC.

        None when there is none within cronsim's 50-year horizon (or before year 9999).
        """
        from cronsim import CronSim  # imported on first use, not by every command

        start = to_utc_ms(after, "after", InvalidTrigger)
        try:
            return next(CronSim(self._rule, start))
        except (StopIteration, OverflowError, ValueError):
            return None

    def next_due(self, now: datetime, previous_due: datetime) -> datetime | None:
        """``next_occurrence(max(now, previous_due))``: the misfire rule.

        A schedule whose worker was down for many ticks fires once to catch up, then
        resumes on the rule: missed ticks collapse into one.
        """
        now = to_utc_ms(now, "now", InvalidTrigger)
        previous_due = to_utc_ms(previous_due, "previous_due", InvalidTrigger)
        return self.next_occurrence(max(now, previous_due))

    def __str__(self) -> str:
        return self.expression


@functools.lru_cache(maxsize=1024)
def _parse_cached(expression: str) -> CronExpression:
    from cronsim import CronSim, CronSimError

    text = expression.strip()
    if not text:
        raise InvalidTrigger(f"invalid cron expression {expression!r}: it is empty")
    if text.startswith("@"):
        rule = MACROS.get(text.lower())
        if rule is None:
            raise InvalidTrigger(
                f"invalid cron expression {expression!r}: unknown macro {text!r}"
                f" (known: {', '.join(sorted(MACROS))})"
            )
    else:
        fields = text.split()
        if len(fields) not in (5, 6):
            raise InvalidTrigger(
                f"invalid cron expression {expression!r}: it has {len(fields)} fields;"
                " expected 5 (min hour dom month dow) or 6 (sec min hour dom month dow)"
            )
        rule = " ".join(fields)
    try:
        probe = CronSim(rule, _PROBE_START)
    except (CronSimError, ValueError, IndexError) as exc:
        raise InvalidTrigger(
            f"invalid cron expression {expression!r}: {_reason(rule, exc)}"
        ) from exc
    try:
        next(probe)
    except StopIteration:
        raise InvalidTrigger(f"invalid cron expression {expression!r}: it can never fire") from None
    except (CronSimError, ValueError, IndexError) as exc:
        raise InvalidTrigger(f"invalid cron expression {expression!r}: {exc}") from exc
    return CronExpression(expression, rule)


def _reason(rule: str, exc: Exception) -> str:
    """Say which field is wrong, or that the day/month combination never occurs."""
    from cronsim import CronSim, CronSimError

    reason = str(exc).lower() or type(exc).__name__
    if "day-of-month" in reason:
        parts = rule.split()
        parts[-2] = "*"  # the same day-of-month in any month
        try:
            CronSim(" ".join(parts), _PROBE_START)
        except (CronSimError, ValueError, IndexError):
            return reason
        return "it can never fire (no such day in the months it names)"
    return reason


@attrs.frozen
class Trigger:
    """When a schedule fires: once at an instant (``delay``) or on a cron rule (``cron``)."""

    kind: TriggerKind
    """``"delay"`` or ``"cron"``, the reference's ``trigger_kind`` tag."""
    at: datetime | None = None
    """For ``delay``: the instant (UTC, millisecond precision)."""
    cron_expression: CronExpression | None = None
    """For ``cron``: the expression."""

    @classmethod
    def delay(cls, at: datetime) -> Trigger:
        """Fire once at ``at`` (an aware datetime; normalised to UTC milliseconds, a
        fraction of a millisecond rounded up so it never fires early)."""
        return cls("delay", at=to_utc_ms(at, "at", InvalidTrigger, round_up=True))

    @classmethod
    def cron(cls, expression: str | CronExpression) -> Trigger:
        """Fire on every instant of a cron expression (see :class:`CronExpression`)."""
        if not isinstance(expression, CronExpression):
            expression = CronExpression.parse(expression)
        return cls("cron", cron_expression=expression)

    @property
    def is_recurring(self) -> bool:
        """True for a cron trigger."""
        return self.kind == "cron"

    @property
    def expression(self) -> str | None:
        """The cron expression text, or None for a delay trigger."""
        return None if self.cron_expression is None else self.cron_expression.expression

    def label(self) -> str:
        """``delay`` or ``cron:<expr>``, as listings show it."""
        expr = self.cron_expression
        return "delay" if expr is None else f"cron:{expr.expression}"
