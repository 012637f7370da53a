"""Rows of the MySQL table as Python values, and rows that cannot be.

Ids are the 16 raw bytes of the UUID, instants naive ``DATETIME(6)`` values in UTC
(bound naive, read back as aware UTC at milliseconds), the payload JSON text, the
paused flag ``0``/``1``. A row another tool wrote in a shape no schedule has (an id
that is not 16 bytes, a zero date, a payload that is not JSON, an unknown trigger) is
named by :func:`diagnose`, column first.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from ..._time import to_utc_ms
from ...snapshot import MalformedSchedule, ScheduleStatus
from ..columns import COLUMN_NAMES, COLUMNS, ColumnKind
from ..record import ScheduleRecord, message_problem

__all__ = [
    "decode",
    "diagnose",
    "encode_id",
    "encode_instant",
    "encode_lease",
    "malformed",
    "record_params",
    "row_label",
    "why",
]

_K = ColumnKind
_INDEX = {name: index for index, name in enumerate(COLUMN_NAMES)}


def encode_id(schedule_id: uuid.UUID) -> bytes:
    """A schedule id as bound: its 16 bytes."""
    return schedule_id.bytes


def encode_instant(instant: datetime) -> datetime:
    """An aware instant as bound: naive UTC (``DATETIME`` holds no zone)."""
    return instant.astimezone(UTC).replace(tzinfo=None)


def _optional_instant(instant: datetime | None) -> datetime | None:
    return None if instant is None else encode_instant(instant)


def encode_lease(lease: object) -> datetime | None:
    """The lease as bound, or None (fenced out without SQL) when it is no aware
    datetime, which no lease this store hands out can equal."""
    if isinstance(lease, datetime) and lease.utcoffset() is not None:
        return encode_instant(lease)
    return None


def _id(value: Any) -> uuid.UUID:
    if not isinstance(value, bytes | bytearray) or len(value) != 16:
        raise ValueError(f"schedule_id is not 16 bytes: {value!r:.60}")
    return uuid.UUID(bytes=bytes(value))


def _instant(value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ValueError(f"not a timestamp: {value!r:.60}")
    return to_utc_ms(value.replace(tzinfo=UTC), "timestamp")


def _json(value: Any) -> str:
    if isinstance(value, bytes):
        value = value.decode()
    return json.dumps(json.loads(value), ensure_ascii=False, separators=(",", ":"))


def _same(value: Any) -> Any:
    return value


def _flag(value: Any) -> bool:
    if value not in (0, 1):
        raise ValueError(f"paused is not 0 or 1: {value!r:.60}")
    return bool(value)


_DECODERS: dict[ColumnKind, Callable[[Any], Any]] = {
    _K.ID: _id,
    _K.TEXT: _same,
    _K.JSON: _json,
    _K.INSTANT: _instant,
    _K.INT: _same,
    _K.BIGINT: _same,
    _K.BOOL: _flag,
}
_ROW = tuple(_DECODERS[c.kind] for c in COLUMNS)
_REQUIRED = tuple(index for index, column in enumerate(COLUMNS) if column.required)
_ENCODERS: dict[ColumnKind, Callable[[Any], Any]] = {
    _K.ID: encode_id,
    _K.INSTANT: _optional_instant,
    _K.BOOL: int,
}


def decode(row: Sequence[Any]) -> ScheduleRecord:
    """A row of the select list (registry order) as a record; raises on a value that
    does not decode (:func:`diagnose` names the column)."""
    values: list[Any] = [None if v is None else dec(v) for dec, v in zip(_ROW, row, strict=False)]
    for index in _REQUIRED:
        if values[index] is None:
            raise ValueError(f"{COLUMN_NAMES[index]} is NULL")
    return ScheduleRecord(*values)


def record_params(record: ScheduleRecord) -> dict[str, Any]:
    """Every column of ``record`` as bound, by name."""
    params: dict[str, Any] = {}
    for column in COLUMNS:
        value = getattr(record, column.name)
        encode = _ENCODERS.get(column.kind)
        params[column.name] = value if encode is None or value is None else encode(value)
    return params


def row_label(row: Sequence[Any]) -> str:
    """The row's schedule id as text (a repr when it is not 16 bytes)."""
    try:
        return str(_id(row[0]))
    except ValueError:
        return repr(row[0])[:60]


def diagnose(row: Sequence[Any]) -> str:
    """Which column makes a row undecodable, and why ('' when none is found)."""
    for column, dec in zip(COLUMNS, _ROW, strict=True):
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


def why(row: Sequence[Any], exc: BaseException) -> str:
    """The reason a row failed to decode: the column :func:`diagnose` names, else the
    exception."""
    return diagnose(row) or f"{type(exc).__name__}: {exc}"


def _status(row: Sequence[Any]) -> ScheduleStatus | None:
    try:
        ends = [
            _instant(row[_INDEX[n]]) for n in ("delivered_at", "cancelled_at", "dead_lettered_at")
        ]
        paused = _flag(row[_INDEX["paused"]])
    except ValueError:
        return None
    return ScheduleStatus.derive(
        delivered_at=ends[0], cancelled_at=ends[1], dead_lettered_at=ends[2], paused=paused
    )


def malformed(row: Sequence[Any], exc: BaseException) -> MalformedSchedule:
    """What a listing shows in place of a row it cannot decode."""
    try:
        sid: uuid.UUID | None = _id(row[0])
    except ValueError:
        sid = None
    return MalformedSchedule(
        schedule_id=sid, raw_id=row_label(row), reason=why(row, exc), status=_status(row)
    )
