"""Rows of the MySQL table as Python values: ids as 16 bytes, instants as naive UTC
``DATETIME(6)``, the paused flag 0/1; a row that does not decode named column first."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..._time import to_utc_ms
from ..columns import COLUMNS, ColumnKind
from ..record import ScheduleRecord
from ..sql.codec import RowCodec

_K = ColumnKind


def encode_id(schedule_id: uuid.UUID) -> bytes:
    """A schedule id as bound: its 16 bytes."""
    return schedule_id.bytes


def encode_instant(instant: datetime) -> datetime:
    """An aware instant as bound: naive UTC (``DATETIME`` holds no zone)."""
    return instant.astimezone(UTC).replace(tzinfo=None)


def encode_lease(lease: object) -> datetime | None:
    """The lease as bound; None (fenced out without SQL) when it is no aware datetime."""
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


def _flag(value: Any) -> bool:
    if value not in (0, 1):
        raise ValueError(f"paused is not 0 or 1: {value!r:.60}")
    return bool(value)


_CODEC = RowCodec(
    {
        _K.ID: _id,
        _K.JSON: _json,
        _K.INSTANT: _instant,
        _K.BOOL: _flag,
    }
)
decode, row_label, why, malformed = _CODEC.decode, _CODEC.row_label, _CODEC.why, _CODEC.malformed
diagnose = _CODEC.diagnose
_ENCODERS: dict[ColumnKind, Callable[[Any], Any]] = {
    _K.ID: encode_id,
    _K.INSTANT: encode_instant,
    _K.BOOL: int,
}


def record_params(record: ScheduleRecord) -> dict[str, Any]:
    """Every column of ``record`` as bound, by name."""
    params: dict[str, Any] = {}
    for column in COLUMNS:
        value = getattr(record, column.name)
        encode = _ENCODERS.get(column.kind)
        params[column.name] = value if encode is None or value is None else encode(value)
    return params
