"""The long handlers' store methods (:mod:`hexeract_lite.store.longrun`) once for every
SQL store, over the dialect's ``extend_lease``, ``request_abort`` and ``abort_request``
statements."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...errors import ScheduleNotFound
from ...settlement import Settlement, SettlementKind
from ..checks import check_extension, check_schedule_id
from ..longrun import check_abort_kind

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from ..settle_plan import PlannedSettlement

__all__ = ["LONG_RUN_STATEMENTS", "LeaseExtending"]

LONG_RUN_STATEMENTS = {SettlementKind.SNOOZED: "snooze", SettlementKind.CANCELLED: "cancel_leased"}
"""The long handlers' settlement kinds and their fenced statements (dialect attributes)."""


class LeaseExtending:
    """The long handlers' store methods over the dialect's statements (see the module)."""

    _sql: Any
    _codec: Any

    if TYPE_CHECKING:

        def _settle_plan(self, checked: list[Settlement]) -> list[PlannedSettlement]: ...

        def _write(
            self, what: str, *, worker: bool = False, atomic: bool = True
        ) -> AbstractContextManager[Any]: ...

        def _read(self, what: str, statement: Any, params: Any) -> list[Any]: ...

    def extend_lease(self, schedule_id: uuid.UUID, lease: datetime, until: datetime) -> bool:
        """See :meth:`~hexeract_lite.store.longrun.LongRunContract.extend_lease`: the id and
        lease are bound as a settlement's are (the same fencing)."""
        sid = check_schedule_id(schedule_id)
        extended = check_extension(lease, until)
        plan = self._settle_plan([Settlement.released(sid, lease)])
        if not plan:
            return False  # no lease this store hands out: fenced out
        [(_, _, params)] = plan
        params["until"] = self._codec.encode_instant(extended)
        with self._write("extend_lease", worker=True, atomic=False) as tx:
            return bool(tx.execute(self._sql.extend_lease, params) > 0)

    def request_abort(self, schedule_id: uuid.UUID, how: str) -> bool:
        """See :meth:`~hexeract_lite.store.longrun.LongRunContract.request_abort`."""
        sid = check_schedule_id(schedule_id)
        how = check_abort_kind(how)
        key = {"id": self._codec.encode_id(sid)}
        with self._write("request_abort", atomic=False) as tx:
            if tx.execute(self._sql.request_abort, {**key, "how": how}):
                return True
            if not tx.fetch(self._sql.exists, key):
                raise ScheduleNotFound(sid)
            return False

    def abort_requests(self, schedule_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
        """See :meth:`~hexeract_lite.store.longrun.LongRunContract.abort_requests`: one
        read of the row per id (a worker's batch in flight is small)."""
        found: dict[uuid.UUID, str] = {}
        for sid in schedule_ids:
            params = {"id": self._codec.encode_id(check_schedule_id(sid))}
            rows = self._read("abort_requests", self._sql.abort_request, params)
            if rows and rows[0][0] is not None:
                found[sid] = str(rows[0][0])
        return found
