"""``backfill_until`` kept while the next firing is inside the window, cleared past it
(as the memory store does). The assignment comes first in its ``SET`` list: MySQL
evaluates the list left to right over the values already assigned."""

from __future__ import annotations

from typing import LiteralString

__all__ = ["DELIVERED_KEEPS_WINDOW", "rescheduled_keeps_window"]

DELIVERED_KEEPS_WINDOW: LiteralString = (
    "backfill_until = CASE WHEN next_after_lease <= backfill_until THEN backfill_until END"
)
"""``mark_delivered``'s: only ``next_after_lease`` moves a delivered row on."""


def rescheduled_keeps_window(next_param: LiteralString) -> LiteralString:
    """``reschedule``'s, ``next_param`` the placeholder of the next firing."""
    return (
        "backfill_until = CASE WHEN COALESCE(next_after_lease, "
        + next_param
        + ") <= backfill_until THEN backfill_until END"
    )
