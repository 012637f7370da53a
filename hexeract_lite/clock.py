"""The clock: the only code in hexeract_lite that reads the wall clock (``clock=``)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

from .errors import InvalidArgument


@runtime_checkable
class Clock(Protocol):
    """Anything with a ``now()`` returning an aware UTC datetime.

    .. versionadded:: 0.1.0
    """

    def now(self) -> datetime:
        """The current instant, timezone-aware, in UTC."""
        ...


class SystemClock:
    """The wall clock: ``datetime.now(timezone.utc)`` at every call.

    .. versionadded:: 0.1.0
    """

    def now(self) -> datetime:
        """The current instant, read from the system at each call."""
        return datetime.now(UTC)

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK: Clock = SystemClock()
"""The default clock of every store and worker.

.. versionadded:: 0.1.0
"""


class ManualClock:
    """A clock that only moves when told to; handy in tests and simulations.

    .. versionadded:: 0.1.0
    """

    def __init__(self, start: datetime) -> None:
        self._now = _aware_utc(start, "ManualClock")
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """The instant the clock was last set to."""
        with self._lock:
            return self._now

    def advance(self, delta: timedelta) -> datetime:
        """Move the clock by ``delta`` (which may be negative) and return the new now."""
        with self._lock:
            self._now += delta
            return self._now

    def set(self, instant: datetime) -> None:
        """Set the clock to ``instant`` (aware)."""
        instant = _aware_utc(instant, "ManualClock.set")
        with self._lock:
            self._now = instant

    def __repr__(self) -> str:
        return f"ManualClock({self._now.isoformat()})"


def _aware_utc(value: object, who: str) -> datetime:
    """``value`` in UTC, when an aware datetime within years 1 to 9999."""
    if not isinstance(value, datetime):
        raise InvalidArgument(f"{who} needs an aware datetime, got {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(f"{who} needs an aware datetime, got naive {value!r}")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise InvalidArgument(
            f"{who} needs an instant within years 1 to 9999 in UTC, got {value.isoformat()!r}"
        ) from None
