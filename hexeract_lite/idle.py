"""The pacing of a worker's loop between cycles, without I/O (:class:`Pacer`). A store
whose ``data_version()`` is a number (SQLite's) is *tracked*: an idle loop compares it
a few times per ``poll_interval`` to notice other processes' commits."""

from __future__ import annotations

import math
import time
from datetime import datetime, timedelta

from ._log import package_logger
from .clock import Clock
from .config import SchedulerWorkerConfig
from .errors import StoreError
from .settle import error_summary, error_text

__all__ = [
    "COMMIT_CHECKS_PER_POLL",
    "FULL_CYCLE_EVERY_S",
    "SHARED_FOR_S",
    "STOP_CHECK_S",
    "STORE_ERROR_BACKOFF_MAX",
    "Pacer",
]

log = package_logger("hexeract_lite.worker")

STORE_ERROR_BACKOFF_MAX = timedelta(seconds=30)
"""The longest pause a worker's loop makes after repeated store errors."""

STOP_CHECK_S = 0.1
"""An idle thread loop looks at its ``stop`` event at least this often."""

COMMIT_CHECKS_PER_POLL = 2
"""An idle worker on a tracked store checks its ``data_version()`` this often per
``poll_interval``, so another process's commit is noticed within half of it even
where the store cannot signal it sooner (the SQLite store does on Linux: see
:mod:`hexeract_lite.store.sqlite.notify`)."""

SHARED_FOR_S = 1.0
"""After a draining worker on a tracked store sees another connection's
commit, it pauses ``min_cycle_delay`` after each full batch for this long."""

FULL_CYCLE_EVERY_S = 5.0
"""On a tracked store, an idle worker still runs a full cycle this often."""


class Pacer:
    """The decisions of one worker between its cycles."""

    __slots__ = (
        "_busy",
        "_clock",
        "_config",
        "_failures",
        "_hint",
        "_idle_since",
        "_moved",
        "_next_sweep",
        "_overdue",
        "_poll",
        "_seen",
        "_shared_until",
        "_take_turns",
    )

    def __init__(self, clock: Clock, config: SchedulerWorkerConfig, take_turns: bool) -> None:
        self._clock = clock
        self._take_turns = take_turns
        self._config = config
        self._poll = config.poll_interval.total_seconds()
        self._failures = 0
        self._overdue = 0
        self._shared_until = -math.inf
        self._next_sweep = -math.inf
        self._busy = False
        self._seen: int | None = None
        self._moved = False
        self._hint: datetime | None = None
        self._idle_since = 0.0

    @property
    def tracks_commits(self) -> bool:
        """The store's last ``data_version()`` was a number."""
        return self._seen is not None

    def observe(self, version: int | None) -> None:
        """The store's ``data_version()`` before a cycle (None: it cannot tell)."""
        before, self._seen = self._seen, version
        self._moved = before is not None and version is not None and before != version

    def committed_since(self, version: int | None) -> bool:
        """True when a tracked store's version moved to ``version`` (another commit)."""
        return self._seen is not None and version != self._seen

    def after_cycle(self, claimed: int) -> float | None:
        """The pause in seconds after a full batch, or None: go idle. ``min_cycle_delay``, none
        where writers take row locks, and on a tracked store only for :data:`SHARED_FOR_S`
        after another connection committed."""
        if self._failures:
            log.info("the store answers again after %d error(s)", self._failures)
            self._failures = 0
        if claimed < self._config.batch_size:
            return None
        pause = self._config.min_cycle_delay.total_seconds()
        if not self._take_turns or not pause:
            return 0.0
        if self._seen is None:
            return pause
        now = time.monotonic()
        if self._moved:
            self._shared_until = now + SHARED_FOR_S
        return pause if now < self._shared_until else 0.0

    def go_idle(self, hint: datetime | None, claimed: int) -> None:
        """After a cycle that claimed less than a batch: sleep until ``hint`` (the store's
        next due instant), a hint still past after two empty cycles in a row ignored (the
        store says work is due but hands none out)."""
        if hint is None or hint > self._clock.now() or claimed:
            self._overdue = 0
        else:
            self._overdue += 1
            if self._overdue >= 2:
                hint = None
        self._hint, self._idle_since = hint, time.monotonic()

    def next_timeout(self, cap: float) -> float | None:
        """Seconds an idle loop waits (at most ``cap``) before the next look; None: run a
        cycle now. At most ``poll_interval`` at a time; on a tracked store it looks
        :data:`COMMIT_CHECKS_PER_POLL` times per ``poll_interval`` (:meth:`committed_since`)
        and runs a cycle only on a change, at the hint, or every :data:`FULL_CYCLE_EVERY_S`."""
        tracked = self._seen is not None
        timeout = min(self._poll / COMMIT_CHECKS_PER_POLL if tracked else self._poll, cap)
        if self._hint is not None:
            until_hint = (self._hint - self._clock.now()).total_seconds()
            if until_hint <= 0:
                return None
            timeout = min(timeout, until_hint)
        elapsed = time.monotonic() - self._idle_since
        budget = FULL_CYCLE_EVERY_S if tracked else self._poll
        if elapsed >= budget:
            return None
        return max(min(timeout, budget - elapsed), 0.0)

    def sweep_due(self) -> bool:
        """True at most once per ``poll_interval``."""
        now = time.monotonic()
        if now < self._next_sweep:
            return False
        self._next_sweep = now + self._poll
        return True

    def burst_ended(self, claimed: int) -> bool:
        """True for an empty claim after one that found some (time to checkpoint the log)."""
        ended, self._busy = self._busy and not claimed, bool(claimed)
        return ended

    def after_error(self, exc: Exception) -> float:
        """A cycle raised ``exc``: log it; the backoff in seconds."""
        self._failures += 1
        failures = self._failures
        cap = max(STORE_ERROR_BACKOFF_MAX.total_seconds(), self._poll)
        delay = min(self._poll * 2.0 ** min(failures - 1, 30), cap)
        if isinstance(exc, StoreError):
            log.warning(
                "store error (%d in a row), next try in %.2f s: %s",
                failures,
                delay,
                error_summary(error_text(exc)),
                exc_info=exc,
            )
        else:
            log.error(
                "unexpected error in the poll loop (%d in a row), next try in %.2f s",
                failures,
                delay,
                exc_info=exc,
            )
        return delay
