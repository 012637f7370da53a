"""RowCodec: a server dialect's rows as records, from its decoder of each column kind,
and what a listing shows of a row that does not decode."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from ...snapshot import MalformedSchedule, ScheduleStatus
from ..columns import COLUMN_NAMES, COLUMNS, ColumnKind
from ..record import ScheduleRecord, message_problem

__all__ = ["RowCodec"]

_INDEX = {name: index for index, name in enumerate(COLUMN_NAMES)}
_REQUIRED = tuple(index for index, column in enumerate(COLUMNS) if column.required)
_ENDS = tuple(_INDEX[n] for n in ("delivered_at", "cancelled_at", "dead_lettered_at"))


def _as_is(value: Any) -> Any:
    return value


class RowCodec:
    """``decoders``: each column kind's decoder of a non-NULL value (raising on one that
    does not decode; a kind left out is taken as it is); ``diagnose``: which column
    makes a row undecodable ('' when none is found; default: the first whose decoder
    raises)."""

    def __init__(
        self,
        decoders: dict[ColumnKind, Callable[[Any], Any]],
        diagnose: Callable[[Sequence[Any]], str] | None = None,
    ) -> None:
        self._row = tuple(decoders.get(column.kind, _as_is) for column in COLUMNS)
        self._instant = decoders[ColumnKind.INSTANT]
        self._flag = decoders[ColumnKind.BOOL]
        self.diagnose = diagnose or self._diagnose

    def decode(self, row: Sequence[Any]) -> ScheduleRecord:
        """A row of the select list (registry order) as a record; raises on a value that
        does not decode."""
        values: list[Any] = [
            None if v is None else f(v) for f, v in zip(self._row, row, strict=False)
        ]
        for index in _REQUIRED:
            if values[index] is None:
                raise ValueError(f"{COLUMN_NAMES[index]} is NULL")
        return ScheduleRecord(*values)

    def _id(self, row: Sequence[Any]) -> uuid.UUID | None:
        try:
            sid = self._row[0](row[0])
        except Exception:
            return None
        return sid if isinstance(sid, uuid.UUID) else None

    def row_label(self, row: Sequence[Any]) -> str:
        """The row's schedule id as text (a repr when it is not one)."""
        sid = self._id(row)
        return repr(row[0])[:60] if sid is None else str(sid)

    def _diagnose(self, row: Sequence[Any]) -> str:
        for column, dec in zip(COLUMNS, self._row, strict=True):
            value = row[_INDEX[column.name]]
            if value is None:
                if column.required:
                    return f"{column.name} is NULL"
                continue
            try:
                dec(value)
            except (TypeError, ValueError) as exc:
                return f"{column.name}: {exc}"
        return message_problem(row)

    def why(self, row: Sequence[Any], exc: BaseException) -> str:
        """Why a row did not decode: the column :attr:`diagnose` names, else the exception."""
        return self.diagnose(row) or f"{type(exc).__name__}: {exc}"

    def _status(self, row: Sequence[Any]) -> ScheduleStatus | None:
        try:
            ends = [None if row[i] is None else self._instant(row[i]) for i in _ENDS]
            paused = self._flag(row[_INDEX["paused"]])
        except Exception:
            return None
        return ScheduleStatus.derive(
            delivered_at=ends[0], cancelled_at=ends[1], dead_lettered_at=ends[2], paused=paused
        )

    def malformed(self, row: Sequence[Any], exc: BaseException) -> MalformedSchedule:
        """What a listing shows in place of a row it cannot decode."""
        return MalformedSchedule(
            schedule_id=self._id(row),
            raw_id=self.row_label(row),
            reason=self.why(row, exc),
            status=self._status(row),
        )
