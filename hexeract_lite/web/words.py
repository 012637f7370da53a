"""A schedule's trigger in words, for the console: ``every day at 08:30 (Europe/Paris)``;
an uncommon cron shape as itself (``on the cron rule 0 0 1,15 * *``).
"""

from __future__ import annotations

from .._time import rfc3339
from ..interval import format_duration
from ..trigger import MACROS, Trigger

_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


def _number(field: str, top: int) -> int | None:
    return int(field) if field.isdigit() and int(field) <= top else None


def _weekdays(field: str) -> str | None:
    """``1-5`` → ``Monday to Friday``; ``1,3`` → ``Monday and Wednesday``; else None."""
    if "-" in field and "," not in field:
        lo, _, hi = field.partition("-")
        a, b = _number(lo, 7), _number(hi, 7)
        if a is not None and b is not None:
            return f"{_DAYS[a % 7]} to {_DAYS[b % 7]}"
    days = [_number(part, 7) for part in field.split(",")]
    if all(d is not None for d in days):
        names = [_DAYS[d % 7] for d in days if d is not None]
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return None


def _cron_words(expression: str) -> str | None:
    """The five-field rule ``expression`` in words, or None when its shape is not a
    common one."""
    fields = MACROS.get(expression.strip().lower(), expression).split()
    if len(fields) != 5:
        return None
    minute, hour, dom, month, dow = fields
    if month != "*":
        return None
    if hour == "*" and dom == "*" and dow == "*":
        if minute == "*":
            return "every minute"
        if minute.startswith("*/") and minute[2:].isdigit():
            return f"every {int(minute[2:])} minutes"
        m = _number(minute, 59)
        return None if m is None else f"every hour at minute {m}"
    m = _number(minute, 59)
    if m is None:
        return None
    if hour.startswith("*/") and hour[2:].isdigit() and dom == "*" and dow == "*":
        return f"every {int(hour[2:])} hours at minute {m}"
    h = _number(hour, 23)
    if h is None:
        return None
    at = f"at {h:02d}:{m:02d}"
    if dom == "*" and dow == "*":
        return f"every day {at}"
    if dom == "*":
        days = _weekdays(dow)
        return None if days is None else f"every {days} {at}"
    d = _number(dom, 31)
    if d is not None and dow == "*":
        return f"on day {d} of every month {at}"
    return None


def trigger_words(trigger: Trigger) -> str:
    """The trigger in words: when a one-shot fires, an interval's period and grid, a
    cron rule's shape and zone."""
    if trigger.kind == "delay" and trigger.at is not None:
        return f"once, at {rfc3339(trigger.at)}"
    if trigger.kind == "interval" and trigger.interval is not None:
        every = trigger.interval
        return f"every {format_duration(every.every)}, on the grid from {rfc3339(every.anchor)}"
    cron = trigger.cron_expression
    if cron is None:
        return trigger.label()
    rule = cron.expression
    words = _cron_words(rule)
    said = words if words is not None else f"on the cron rule {rule}"
    return f"{said} ({cron.tz} wall clock)" if cron.tz != "UTC" else f"{said} (UTC)"
