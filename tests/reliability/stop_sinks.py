"""Sinks for the stop-signal tests: ``--sink tests.reliability.stop_sinks:<name>``.

The worker runs in another process, so the sinks report through the file named by
``HEXERACT_TEST_STOP_LOG``: one line ``<event> <schedule id>`` per event.
"""

from __future__ import annotations

import os
import time

from hexeract_lite import ScheduledMessage

LOG_ENV = "HEXERACT_TEST_STOP_LOG"


def _log(event: str, message: ScheduledMessage) -> None:
    with open(os.environ[LOG_ENV], "a", encoding="utf-8") as fh:
        fh.write(f"{event} {message.schedule_id}\n")


def hang(message: ScheduledMessage) -> None:
    """Logs ``started``, then holds the dispatch for a minute (until the process ends)."""
    _log("started", message)
    time.sleep(60)
    _log("delivered", message)
