"""What the console's chart shows of the past: :func:`hourly_counts`, from the store's
run log (``store.run_counts``), or without one from its newest dead letters.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import attrs

from ..runlog import RunOutcome
from ..store.runs import hour_of

if TYPE_CHECKING:
    from ..store.base import ScheduleStore

HOUR = timedelta(hours=1)
FAILURES = frozenset(map(RunOutcome, ("failed", "timed_out", "dead_lettered", "swept", "aborted")))
"""The outcomes the chart counts as failures."""

DEAD_LETTER_CAP = 1000
"""How many of the newest dead letters a store without an hourly query is read for."""

RUNS_UNAVAILABLE = (
    "This store keeps no run log: a schedule's row holds only its last attempt"
    " (see its attempts and last error above)."
)
"""What the schedule page says in place of its runs on a store without a run log."""

NO_RUNS_YET = "No runs recorded for this schedule yet."
"""What the schedule page says in place of its runs when its run log has none."""


@attrs.frozen(kw_only=True)
class HourlyCounts:
    """Counts per hour: ``hours[i]`` starts the hour ``delivered[i]`` and
    ``failed[i]`` count; ``delivered`` is None when the store cannot tell;
    ``capped`` when ``failed`` was read from a bounded page that may miss older ones."""

    hours: list[datetime]
    delivered: list[int] | None
    failed: list[int]
    capped: bool = False
    source: str = ""
    """One sentence on what the counts are, for the chart's caption."""


def hourly_counts(store: ScheduleStore, since: datetime, now: datetime) -> HourlyCounts:
    """Deliveries and failures (:data:`FAILURES`) per hour, from the hour of ``since``
    to that of ``now``, by when each attempt finished; without a run log, only the
    newest :data:`DEAD_LETTER_CAP` dead letters (``delivered`` None)."""
    start = hour_of(since)
    hours = [start + i * HOUR for i in range((hour_of(now) - start) // HOUR + 1)]
    index = {h: i for i, h in enumerate(hours)}
    delivered = [0] * len(hours)
    failed = [0] * len(hours)
    if store.keeps_runs:
        for hour, outcome, n in store.run_counts(start, hour_of(now) + HOUR):
            slot = index.get(hour)
            if slot is None:
                continue
            if outcome is RunOutcome.DELIVERED:
                delivered[slot] += n
            elif outcome in FAILURES:
                failed[slot] += n
        return HourlyCounts(
            hours=hours,
            delivered=delivered,
            failed=failed,
            source="dispatch attempts in the run log, by the hour they finished in: delivered,"
            " and failed (failed, timed out, aborted, dead-lettered or swept)",
        )
    capped = False
    newest = store.list_dead_letter(DEAD_LETTER_CAP)
    for row in newest:
        ended = getattr(row, "dead_lettered_at", None)
        if ended is None:
            continue
        if ended < start:
            break
        slot = index.get(hour_of(ended))
        if slot is not None:
            failed[slot] += 1
    else:
        capped = len(newest) >= DEAD_LETTER_CAP
    return HourlyCounts(
        hours=hours,
        delivered=None,
        failed=failed,
        capped=capped,
        source="schedules dead-lettered, by the hour their row ended in"
        " (deliveries are not known on this store without a run log)",
    )
