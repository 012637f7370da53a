"""Scheduled reminders: a one-shot and a recurring reminder through a bus, end to end.

The Python counterpart of hexeract's ``06_scheduled_reminder`` example:

1. schedule a one-shot reminder 2 s ahead and a recurring one every 2 s
   (``*/2 * * * * *``), both published through :class:`BusSink` on an
   :class:`InProcessBus`;
2. a worker delivers them; the bus handler deduplicates on the message id, which is
   the occurrence id (delivery is at least once, so a consumer must tolerate a
   repeat), and counts distinct reminders;
3. after the one-shot and two recurring firings, inspect the live recurring schedule
   (pending), cancel it, and show that it no longer fires.

Run it on the default database (``SqliteScheduleStore.open()``), or pass
``--db PATH``. Its schedules live in a table of their own (``--table``, default
``reminder_demo``): its worker claims every due schedule of its table, so on the
default table it would also take your application's schedules and, its bus sink
refusing their targets, spend their attempts until they are dead-lettered. It prints
each step and exits 0 on success, 1 with the reason on a failure. It takes about 10
seconds.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from hexeract_lite import (
    BusMessage,
    BusSink,
    CronExpression,
    InProcessBus,
    ScheduledMessage,
    SchedulerControl,
    SchedulerWorker,
    ScheduleSnapshot,
    ScheduleStatus,
    SqliteScheduleStore,
    Target,
)

EVERY_TWO_SECONDS = "*/2 * * * * *"
DEMO_TABLE = "reminder_demo"
"""The demo's own table: a worker claims every due schedule of its table."""
QUIET_PERIOD = 3.0
"""How long to watch the cancelled schedule (more than one of its 2 s periods)."""


class Failed(Exception):
    """A step of the example did not happen as it should."""


class ReminderInbox:
    """The bus consumer: deduplicates on the message id and counts distinct reminders."""

    def __init__(self, started: float) -> None:
        self._started = started
        self._seen: set[uuid.UUID] = set()
        self.counts: Counter[str] = Counter()
        self.duplicates = 0
        self.changed = threading.Condition()

    def handle(self, message: BusMessage) -> None:
        with self.changed:
            if message.message_id in self._seen:
                self.duplicates += 1  # a redelivery of a firing we already handled
                return
            self._seen.add(message.message_id)
            self.counts[message.routing_key] += 1
            n = self.counts[message.routing_key]
            self.changed.notify_all()
        text = message.payload.get("text") if isinstance(message.payload, dict) else None
        say(
            self._started,
            f"  <- {message.routing_key} #{n}: {text!r}"
            f" (message id {str(message.message_id)[:8]}...)",
        )

    def count(self, routing_key: str) -> int:
        with self.changed:
            return self.counts[routing_key]

    def wait_until(self, what: str, predicate: Callable[[], bool], deadline: float) -> None:
        with self.changed:
            if not self.changed.wait_for(predicate, max(deadline - time.monotonic(), 0)):
                raise Failed(f"timed out waiting for {what}")


def wait_settled(
    control: SchedulerControl, schedule_id: uuid.UUID, deadline: float
) -> ScheduleSnapshot:
    """The schedule's snapshot once no worker holds it (its last firing is recorded)."""
    while True:
        snap = control.inspect(schedule_id)
        if snap.leased_until is None:
            return snap
        if time.monotonic() > deadline:
            raise Failed(f"timed out waiting for the worker to settle {schedule_id}")
        time.sleep(0.01)


def say(started: float, text: str) -> None:
    print(f"[{time.monotonic() - started:5.1f}s] {text}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="the SQLite file (default: the default database)")
    parser.add_argument("--table", default=DEMO_TABLE, help=f"the scheduler table ({DEMO_TABLE})")
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="give up after this many seconds (30)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    started = time.monotonic()
    deadline = started + args.timeout
    with SqliteScheduleStore.open(args.db, table=args.table) as store:
        say(started, f"database: {store.path} (table {store.table})")
        control = SchedulerControl(store)
        inbox = ReminderInbox(started)
        bus = InProcessBus()
        bus.subscribe("reminders.#", inbox.handle)

        now = datetime.now(UTC)
        first_tick = CronExpression.parse(EVERY_TWO_SECONDS).next_occurrence(now)
        assert first_tick is not None
        once = ScheduledMessage.delay(
            Target.bus("reminders.once"),
            now + timedelta(seconds=2),
            "reminder",
            {"text": "stand up and stretch"},
        )
        recurring = ScheduledMessage.cron(
            Target.bus("reminders.recurring"),
            EVERY_TWO_SECONDS,
            first_tick,
            "reminder",
            {"text": "drink some water"},
        )
        control.schedule(once, max_attempts=3)
        control.schedule(recurring, max_attempts=3)
        say(started, f"scheduled one-shot  {once.schedule_id} for {once.scheduled_for:%H:%M:%S.%f}")
        say(started, f"scheduled recurring {recurring.schedule_id} ({EVERY_TWO_SECONDS})")

        worker = SchedulerWorker(store, BusSink(bus))
        try:
            with worker.start():
                say(started, "worker started; waiting for the one-shot and two recurring firings")
                inbox.wait_until(
                    "the one-shot and two recurring reminders",
                    lambda: (
                        inbox.counts["reminders.once"] >= 1
                        and inbox.counts["reminders.recurring"] >= 2
                    ),
                    deadline,
                )

                # The handler runs inside the dispatch; the worker records the delivery
                # (reschedules the cron) right after it returns. Wait for that.
                snap = wait_settled(control, recurring.schedule_id, deadline)
                say(
                    started,
                    f"inspect recurring: status {snap.status}, next at"
                    f" {snap.scheduled_for:%H:%M:%S}, trigger {snap.trigger.label()}",
                )
                if snap.status is not ScheduleStatus.PENDING:
                    raise Failed(f"the recurring schedule is {snap.status}, expected pending")

                control.cancel(recurring.schedule_id)
                fired = inbox.count("reminders.recurring")
                status = control.inspect(recurring.schedule_id).status
                say(started, f"cancelled recurring: status {status}")
                if status is not ScheduleStatus.CANCELLED:
                    raise Failed(f"the recurring schedule is {status} after cancel")

                say(started, f"watching for {QUIET_PERIOD:g} s: it must not fire again")
                time.sleep(min(QUIET_PERIOD, max(deadline - time.monotonic(), 0)))
                after = inbox.count("reminders.recurring")
                if after != fired:
                    raise Failed(f"the cancelled reminder fired {after - fired} more time(s)")
                say(started, f"no firing after cancel (still {fired} recurring reminders)")

            once_status = control.inspect(once.schedule_id).status
            if once_status is not ScheduleStatus.DELIVERED:
                raise Failed(f"the one-shot is {once_status}, expected delivered")
            say(started, f"one-shot: {once_status}")
            total = sum(inbox.counts.values())
            say(
                started,
                f"done: {total} distinct reminders ({inbox.counts['reminders.once']} one-shot,"
                f" {fired} recurring), {inbox.duplicates} duplicate(s) ignored",
            )
            return 0
        except Failed as exc:
            print(f"FAILED: {exc}", file=sys.stderr, flush=True)
            return 1
        finally:
            # Leave nothing pending behind in a shared database, even after a failure.
            for message in (once, recurring):
                control.cancel(message.schedule_id)


if __name__ == "__main__":
    raise SystemExit(main())
