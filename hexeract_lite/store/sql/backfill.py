"""The end of a backfill in SQL, as every dialect's fenced acknowledgements write it.

A delivery moves a backfilling row to its next firing; ``backfill_until`` is kept while
that firing is inside the window and cleared (NULL) past it, as the memory store does
(see :mod:`hexeract_lite.backfill`). A NULL ``backfill_until`` stays NULL. The
assignment must come first in its ``SET`` list: MySQL evaluates the list left to right
over the values already assigned.
"""

from __future__ import annotations

from typing import LiteralString

__all__ = ["DELIVERED_KEEPS_WINDOW", "rescheduled_keeps_window"]

DELIVERED_KEEPS_WINDOW: LiteralString = (
    "backfill_until = CASE WHEN next_after_lease <= backfill_until THEN backfill_until END"
)
"""``mark_delivered``'s assignment: only a change made during the lease
(``next_after_lease``) moves a delivered row on; no next firing ends the window."""


def rescheduled_keeps_window(next_param: LiteralString) -> LiteralString:
    """``reschedule``'s assignment, ``next_param`` the dialect's placeholder of the
    next firing (``:next``, ``%(next)s``)."""
    return (
        "backfill_until = CASE WHEN COALESCE(next_after_lease, "
        + next_param
        + ") <= backfill_until THEN backfill_until END"
    )
