"""The README's quick start as a complete program.

Schedules a one-shot message two seconds ahead and a recurring one every ten seconds
in the SQLite file, runs a worker whose sink prints each firing once (deduplicating on
the occurrence id), and stops once both have fired; the recurring schedule is then
cancelled, so nothing is left pending.

    python examples/quickstart.py [DATABASE]

DATABASE defaults to the default database (``SqliteScheduleStore.open()``). Exits 0
once both messages are delivered, 1 if they are not within 30 seconds.
"""

from __future__ import annotations

import sys
import threading
from datetime import UTC, datetime, timedelta

from hexeract_lite import (
    CallableSink,
    OccurrenceId,
    ScheduledMessage,
    SchedulerWorker,
    SqliteScheduleStore,
    Target,
)

seen: set[OccurrenceId] = set()
event_types: set[str] = set()
both_fired = threading.Event()


def handle(message: ScheduledMessage) -> None:
    """The sink: any callable taking the message."""
    occurrence = message.occurrence_id()  # the dedup key: same firing, same id
    if occurrence in seen:
        return  # a repeat delivery (at-least-once): ignore
    seen.add(occurrence)
    print(message.event_type, message.payload, flush=True)
    event_types.add(message.event_type)
    if event_types >= {"reminder.due", "heartbeat"}:
        both_fired.set()


def main(argv: list[str]) -> int:
    with SqliteScheduleStore.open(argv[0] if argv else None) as store:
        now = datetime.now(UTC)
        store.insert(
            ScheduledMessage.delay(
                Target.outbox(), now + timedelta(seconds=2), "reminder.due", {"user": 42}
            ),
            max_attempts=5,
        )
        heartbeat = ScheduledMessage.cron(Target.outbox(), "*/10 * * * * *", now, "heartbeat", None)
        store.insert(heartbeat, max_attempts=3)
        with SchedulerWorker(store, CallableSink(handle)).start():
            delivered = both_fired.wait(timeout=30)
        store.cancel(heartbeat.schedule_id)
    if not delivered:
        print(f"FAILED: only {sorted(event_types)} fired within 30 s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
