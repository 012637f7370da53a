"""The long handlers' methods of the store contract: lease extension (the heartbeat)
and abort requests (cleared by the next claim)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from ..errors import InvalidArgument

__all__ = ["ABORT_KINDS", "LongRunContract", "check_abort_kind"]

ABORT_KINDS = ("abort", "cancel")
"""What ``abort_requested`` holds: stop the dispatch (a failed attempt), or stop it and
cancel the schedule."""


def check_abort_kind(how: object) -> str:
    """``how`` if it is one of :data:`ABORT_KINDS`; :class:`InvalidArgument` otherwise."""
    if how not in ABORT_KINDS:
        raise InvalidArgument(f"an abort request is 'abort' or 'cancel', got {how!r:.100}")
    assert isinstance(how, str)
    return how


class LongRunContract:
    """The long handlers' methods of the store contract (see the module)."""

    __slots__ = ()

    def extend_lease(self, schedule_id: uuid.UUID, lease: datetime, until: datetime) -> bool:
        """Fenced: while the live row carries ``lease``, set ``leased_until = until`` (an
        aware datetime later than ``lease``, else :class:`InvalidArgument`); False if fenced out.

        .. versionadded:: 0.2.0
        """
        raise NotImplementedError(f"{type(self).__name__} cannot extend leases")

    def request_abort(self, schedule_id: uuid.UUID, how: str) -> bool:
        """Store ``how`` (``"abort"`` or ``"cancel"``) as the abort request of a live,
        leased schedule; False when nothing is in flight. Unknown id: :class:`ScheduleNotFound`.

        .. versionadded:: 0.2.0
        """
        raise NotImplementedError(f"{type(self).__name__} cannot store abort requests")

    def abort_requests(self, schedule_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
        """The abort requests stored on ``schedule_ids`` (those with one).

        .. versionadded:: 0.2.0
        """
        return {}
