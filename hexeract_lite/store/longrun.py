"""The long handlers' methods of the store contract: lease extension and abort requests.

A worker's heartbeat extends the lease of a dispatch in flight (:meth:`extend_lease`,
fenced like the acknowledgements); ``SchedulerControl.abort`` stores an abort request
on the row (:meth:`request_abort`), which the worker running the dispatch reads
(:meth:`abort_requests`); the next claim of the occurrence clears it.
"""

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
        """Fenced like the acknowledgements: while the live row carries ``lease``, set
        ``leased_until = until``; True when it did, False when fenced out (the lease
        was lost, or the row is terminal or unknown). ``until`` becomes the
        occurrence's fencing token.

        ``until`` must be an aware datetime later than ``lease`` (both at millisecond
        precision): :class:`InvalidArgument` otherwise, nothing written. A lease the
        store could not have handed out is fenced out (False). A store that cannot
        raises :class:`NotImplementedError` (the default).

        .. versionadded:: 0.3.0
        """
        raise NotImplementedError(f"{type(self).__name__} cannot extend leases")

    def request_abort(self, schedule_id: uuid.UUID, how: str) -> bool:
        """Ask the dispatch in flight of a live, leased schedule to stop: store ``how``
        (``"abort"`` or ``"cancel"``) in its ``abort_requested``; True when stored.
        False, writing nothing, when the schedule holds no lease (nothing is in flight)
        or is terminal. An unknown id: :class:`ScheduleNotFound`; a bad ``how``:
        :class:`InvalidArgument`. A store that cannot raises
        :class:`NotImplementedError` (the default).

        .. versionadded:: 0.3.0
        """
        raise NotImplementedError(f"{type(self).__name__} cannot store abort requests")

    def abort_requests(self, schedule_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
        """The abort requests stored on the schedules ``schedule_ids`` (those with one).
        Reads only. The default: none.

        .. versionadded:: 0.3.0
        """
        return {}
