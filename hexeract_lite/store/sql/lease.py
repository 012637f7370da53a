"""``extend_lease`` once for every SQL store: one fenced statement of the dialect's."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...settlement import Settlement
from ..checks import check_extension, check_schedule_id

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from ..settle_plan import PlannedSettlement

__all__ = ["LeaseExtending"]


class LeaseExtending:
    """:meth:`~hexeract_lite.store.base.ScheduleStore.extend_lease` over the dialect's
    ``extend_lease`` statement (``id``, ``lease`` and ``until`` bound)."""

    _sql: Any
    _codec: Any

    if TYPE_CHECKING:

        def _settle_plan(self, checked: list[Settlement]) -> list[PlannedSettlement]: ...

        def _write(
            self, what: str, *, worker: bool = False, atomic: bool = True
        ) -> AbstractContextManager[Any]: ...

    def extend_lease(self, schedule_id: uuid.UUID, lease: datetime, until: datetime) -> bool:
        """See :meth:`~hexeract_lite.store.base.ScheduleStore.extend_lease`: the id and
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
