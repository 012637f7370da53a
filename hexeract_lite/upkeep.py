"""Upkeep over many rows: bulk replay of dead letters, and progress on a terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TextIO

from ._log import package_logger
from ._time import seconds_text
from .config import check_duration
from .errors import InvalidConfiguration
from .snapshot import MalformedSchedule, ScheduleStatus
from .store.base import ScheduleStore
from .store.listing import check_batch_size, check_glob

__all__ = [
    "DEFAULT_UPKEEP_BATCH",
    "RETENTION_EVERY",
    "Progress",
    "Retention",
    "checkpoint_after_burst",
    "replay_all",
]

log = package_logger("hexeract_lite.worker")

RETENTION_EVERY = timedelta(hours=1)
"""How often a worker with ``retention`` prunes (and once at its first cycle)."""

DEFAULT_UPKEEP_BATCH = 500
"""Rows per transaction of a bulk replay or a prune."""

Report = Callable[[int], None]
"""Told the running total after each batch."""


def replay_all(
    store: ScheduleStore,
    *,
    event_type: str | None = None,
    batch_size: int = DEFAULT_UPKEEP_BATCH,
    progress: Report | None = None,
    on_malformed: Callable[[MalformedSchedule], None] | None = None,
) -> int:
    """Replay every dead-lettered schedule (of event types matching the glob
    ``event_type``), ``batch_size`` per transaction; return how many. Rows changed
    meanwhile are skipped; malformed ones told to ``on_malformed``."""
    glob = check_glob(event_type)
    size = check_batch_size(batch_size)
    total = 0
    after = None
    while True:
        page = store.list_schedules(
            status=ScheduleStatus.DEAD_LETTERED, event_type=glob, after=after, limit=size
        )
        if not page:
            return total
        ids = [s.schedule_id for s in page if not isinstance(s, MalformedSchedule)]
        if on_malformed is not None:
            for item in page:
                if isinstance(item, MalformedSchedule):
                    on_malformed(item)
        known = [s.schedule_id for s in page if s.schedule_id is not None]
        if not known:
            return total  # not even an id could be decoded: none to go on from
        after = known[-1]  # past the malformed rows too, never stopping at them
        if ids:
            total += store.replay_dead_letters(ids)
        if progress is not None:
            progress(total)
        if len(page) < size:
            return total


class Progress:
    """Counts and rate of a long command on a terminal's stderr, one line rewritten at most
    every 0.2 s (nothing off a terminal); :meth:`done` or leaving the block ends the line."""

    def __init__(self, what: str, stream: TextIO | None = None) -> None:
        self._what = what
        self._stream = stream if stream is not None else sys.stderr
        self._live = bool(getattr(self._stream, "isatty", lambda: False)())
        self._started = time.monotonic()
        self._shown = 0.0
        self._wrote = False
        self._count: int | None = None
        self._count_shown: int | None = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.done()

    def __call__(self, count: int) -> None:
        """Show ``count`` done so far, and the rate."""
        if not self._live:
            return
        self._count = count
        now = time.monotonic()
        if now - self._shown < 0.2:
            return
        self._shown = now
        self._show(count, now)

    def _show(self, count: int, now: float) -> None:
        elapsed = now - self._started
        rate = f" ({count / elapsed:,.0f}/s)" if elapsed >= 0.1 else ""
        self._stream.write(f"\r{self._what}: {count}{rate}\033[K")
        self._stream.flush()
        self._wrote = True
        self._count_shown = count

    def done(self) -> None:
        """Show the final count (when a later one than shown was given) and end the
        line (when anything was shown). Safe to call twice."""
        if not self._wrote:
            return
        if self._count is not None and self._count != self._count_shown:
            self._show(self._count, time.monotonic())
        self._stream.write("\n")
        self._stream.flush()
        self._wrote = False


def checkpoint_after_burst(store: ScheduleStore) -> None:
    """A burst of work just ended: a store with ``checkpoint()`` (SQLite) folds its WAL
    into the file, so the WAL does not stay at megabytes; an error is logged only."""
    try:
        store.checkpoint()
    except Exception:
        log.warning("checkpoint after a burst failed", exc_info=True)


class Retention:
    """A worker's ``retention=``: delivered and cancelled rows, and run records, that ended
    more than ``keep`` ago are pruned at the first cycle and then every
    :data:`RETENTION_EVERY`; an error is logged and tried next time."""

    def __init__(self, keep: object) -> None:
        if not isinstance(keep, timedelta) or keep <= timedelta(0):
            raise InvalidConfiguration(
                "retention must be a positive datetime.timedelta or None,"
                f" got retention={seconds_text(keep)}"
            )
        check_duration("retention", keep)  # no longer than LONGEST_SETTING
        self.keep = keep
        self._next = 0.0

    def is_due(self) -> bool:
        """True when :meth:`run_if_due` would prune now."""
        return time.monotonic() >= self._next

    def run_if_due(self, store: ScheduleStore) -> int | None:
        """Prune if it is time: how many rows went, or None (not time, or it failed)."""
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + RETENTION_EVERY.total_seconds()
        try:
            count = store.prune(self.keep)
            runs = store.prune_runs(self.keep)
        except Exception:
            log.warning("retention: pruning rows older than %s failed", self.keep, exc_info=True)
            return None
        if count:
            log.info("retention: pruned %d row(s) that ended more than %s ago", count, self.keep)
        if runs:
            log.info("retention: pruned %d run record(s) older than %s", runs, self.keep)
        return count
