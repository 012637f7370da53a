"""Sinks for the CLI tests: ``hexeract scheduler worker --sink tests.cli_sinks:<name>``.

The worker runs in another process, so the sinks report through a file named by the
``HEXERACT_TEST_SINK_LOG`` environment variable: one JSON line per dispatch.
"""

from __future__ import annotations

import json
import os
import time

from hexeract_lite import ScheduledMessage

LOG_ENV = "HEXERACT_TEST_SINK_LOG"


def _log(message: ScheduledMessage, outcome: str) -> None:
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    line = json.dumps(
        {
            "schedule_id": str(message.schedule_id),
            "occurrence_id": str(message.occurrence_id()),
            "event_type": message.event_type,
            "payload": message.payload,
            "outcome": outcome,
        }
    )
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def record(message: ScheduledMessage) -> None:
    """A callable sink that delivers by writing a line to the log."""
    _log(message, "delivered")


def refuse(message: ScheduledMessage) -> None:
    """A callable sink that always fails."""
    _log(message, "refused")
    raise RuntimeError(f"sink refused {message.event_type}: downstream is down")


class RecordingSink:
    """A ScheduleSink (an object with ``dispatch``) that records like :func:`record`."""

    def dispatch(self, message: ScheduledMessage) -> None:
        _log(message, "delivered")


recording_sink = RecordingSink()

not_a_sink = 42
"""Neither a ScheduleSink nor callable: ``--sink`` must refuse it."""


def slow(message: ScheduledMessage) -> None:
    """Logs ``started``, takes half a second, then delivers: a stop signal arrives mid-way."""
    _log(message, "started")
    time.sleep(0.5)
    _log(message, "delivered")
