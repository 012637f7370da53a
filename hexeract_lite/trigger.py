"""Triggers: when a schedule fires. ``delay`` fires once; ``cron`` and ``interval`` fire
repeatedly."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Literal

import attrs

from ._time import to_utc_ms
from .errors import InvalidTrigger
from .interval import Interval
from .zoned import DEFAULT_ZONE, every_real_hour, load_zone, next_in_zone, parse_zoned, render_zoned

TriggerKind = Literal["delay", "cron", "interval"]

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
    """A validated cron expression (Debian cron rules) on a time zone's wall clock: five
    fields, six with a leading seconds field, or a macro of :data:`MACROS`, each maybe after
    a ``CRON_TZ=<IANA zone>`` prefix. Build it with :meth:`parse`; ``str()`` is the stored text.

    .. versionadded:: 0.1.0
    """

    expression: str
    """The text as given, without the zone prefix (a macro stays a macro)."""
    _rule: str = attrs.field(repr=False, eq=False)
    tz: str = DEFAULT_ZONE
    """The IANA zone name whose wall clock the expression is read on."""
    _tzinfo: tzinfo = attrs.field(default=UTC, repr=False, eq=False)

    @classmethod
    def parse(cls, expression: str, tz: str | None = None) -> CronExpression:
        """Validate ``expression`` (zone: ``tz`` or a ``CRON_TZ=`` prefix, else UTC);
        :class:`InvalidTrigger` quoting it and the reason."""
        if not isinstance(expression, str):
            raise InvalidTrigger(f"cron expression must be a string, got {expression!r}")
        if tz is not None and not isinstance(tz, str):
            raise InvalidTrigger(f"a time zone must be a name such as 'Europe/Paris', got {tz!r}")
        return _parse_zoned_cached(expression, tz)

    @property
    def every_real_hour(self) -> bool:
        """The hour field is ``*`` or has a step: every real occurrence of a time fires."""
        return every_real_hour(self._rule)

    def next_occurrence(self, after: datetime) -> datetime | None:
        """The first firing strictly after ``after`` (aware), in UTC; None within cronsim's
        50-year horizon (or before year 9999)."""
        return next_in_zone(self._rule, self._tzinfo, to_utc_ms(after, "after", InvalidTrigger))

    def next_due(self, now: datetime, previous_due: datetime) -> datetime | None:
        """``next_occurrence(max(now, previous_due))``: missed ticks collapse into one."""
        now = to_utc_ms(now, "now", InvalidTrigger)
        previous_due = to_utc_ms(previous_due, "previous_due", InvalidTrigger)
        return self.next_occurrence(max(now, previous_due))

    def __str__(self) -> str:
        return render_zoned(self.tz, self.expression)


@functools.lru_cache(maxsize=1024)
def _parse_zoned_cached(text: str, tz: str | None) -> CronExpression:
    zone, expression = parse_zoned(text)
    if tz is not None:
        if expression is not text and tz != zone:  # a CRON_TZ= prefix, UTC included
            raise InvalidTrigger(
                f"cron expression {text!r} names zone {zone!r} and tz={tz!r} another;"
                " give the zone once"
            )
        zone = tz
    parsed = _parse_cached(expression)
    if zone == DEFAULT_ZONE:
        return parsed
    return CronExpression(parsed.expression, parsed._rule, zone, load_zone(zone))


@functools.lru_cache(maxsize=1024)
def _parse_cached(expression: str) -> CronExpression:
    from cronsim import CronSim, CronSimError

    text = expression.strip()
    if not text:
        raise InvalidTrigger(f"invalid cron expression {expression!r}: it is empty")
    if text.startswith("TZ="):  # the shell's variable, not cron's
        raise InvalidTrigger(
            f"invalid cron expression {expression!r}: the zone prefix is CRON_TZ=;"
            f" write {'CRON_' + text!r}, or give the zone apart (tz=, or --tz)"
        )
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
    """When a schedule fires: once (``delay``), on a cron rule (``cron``), or every fixed
    duration from an anchor (``interval``).

    .. versionadded:: 0.1.0"""

    kind: TriggerKind
    """``"delay"``, ``"cron"`` or ``"interval"``: the stored ``trigger_kind``."""
    at: datetime | None = None
    """For ``delay``: the instant (UTC, millisecond precision)."""
    cron_expression: CronExpression | None = None
    """For ``cron``: the expression."""
    interval: Interval | None = None
    """For ``interval``: the period and its anchor."""

    @classmethod
    def delay(cls, at: datetime) -> Trigger:
        """Fire once at ``at`` (aware; UTC milliseconds, rounded up)."""
        return cls("delay", at=to_utc_ms(at, "at", InvalidTrigger, round_up=True))

    @classmethod
    def cron(cls, expression: str | CronExpression, *, tz: str | None = None) -> Trigger:
        """Fire on every instant of a cron expression, on the wall clock of ``tz`` (default:
        the expression's ``CRON_TZ=`` prefix, else UTC)."""
        if isinstance(expression, CronExpression):
            if tz is not None and tz != expression.tz:
                expression = CronExpression.parse(str(expression), tz=tz)
        else:
            expression = CronExpression.parse(expression, tz=tz)
        return cls("cron", cron_expression=expression)

    @classmethod
    def every(cls, every: timedelta | str, anchor: datetime) -> Trigger:
        """Fire at ``anchor`` and every ``every`` after it (see :class:`Interval`)."""
        return cls("interval", interval=Interval.of(every, anchor))

    @property
    def is_recurring(self) -> bool:
        """True for a cron or interval trigger."""
        return self.kind != "delay"

    @property
    def zone(self) -> str:
        """The zone the rule reads its wall clock on: a cron rule's, else UTC."""
        return DEFAULT_ZONE if self.cron_expression is None else self.cron_expression.tz

    @property
    def expression(self) -> str | None:
        """The stored rule text (``cron_expr``), or None for a delay."""
        rule = self.cron_expression or self.interval
        return None if rule is None else str(rule)

    def next_due(self, now: datetime, previous_due: datetime) -> datetime | None:
        """The next firing after one due at ``previous_due`` ran at ``now`` (missed firings
        collapse into one); None when there is none."""
        rule = self.cron_expression or self.interval
        return None if rule is None else rule.next_due(now, previous_due)

    def next_after(self, instant: datetime) -> datetime | None:
        """The first firing strictly after ``instant``; None for a delay or an ended rule."""
        if self.cron_expression is not None:
            return self.cron_expression.next_occurrence(instant)
        if self.interval is not None:
            return self.interval.next_after(instant)
        return None

    def label(self) -> str:
        """``delay``, ``cron:<stored text>`` or ``interval:<stored text>``."""
        text = self.expression
        return "delay" if text is None else f"{self.kind}:{text}"
