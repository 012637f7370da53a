"""The SQLite codec: an id is its 16 raw bytes, an instant ``YYYY-MM-DDTHH:MM:SS.mmmZ``
text, a flag 0/1, the rest as it is; rows are read with ``SELECT`` :data:`SELECT_LIST`."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ..._time import format_ts, parse_ts
from ...errors import InvalidConfiguration
from ...message import ScheduledMessage
from ...snapshot import LeasedOccurrence, ScheduleStatus
from ...trigger import Trigger
from ..columns import COLUMN_NAMES, COLUMNS, SELECT_LIST, ColumnKind
from ..record import (
    ScheduleRecord,
    cached_target,
    insert_columns,
    load_payload,
    message_problem,
    policy_of,
    rule_trigger,
)
from ..sql.codec import RowCodec
from .salvage import SalvagedRow, undecodable

__all__ = [
    "COLUMN_INDEX",
    "SELECT_LIST",
    "decode_id",
    "decode",
    "decode_instant",
    "diagnose",
    "encode_id",
    "encode_instant",
    "encode_lease",
    "leased_from_row",
    "malformed",
    "message_rows",
    "record_from_row",
    "row_from_record",
    "row_label",
    "why",
]

COLUMN_INDEX: dict[str, int] = {name: index for index, name in enumerate(COLUMN_NAMES)}
MAX_INT64 = 2**63 - 1


def encode_id(schedule_id: uuid.UUID) -> bytes:
    """A schedule id as stored: its 16 raw bytes."""
    return schedule_id.int.to_bytes(16, "big")


def decode_id(value: object) -> uuid.UUID:
    """A stored id (ValueError unless 16 bytes), without ``uuid.UUID``'s argument checks."""
    if not isinstance(value, bytes) or len(value) != 16:
        raise ValueError(f"schedule_id is not 16 bytes: {value!r:.60}")
    made = _new_uuid(_UUID)
    _set(made, "int", _from_bytes(value))
    _set(made, "is_safe", _UNKNOWN_SAFETY)
    return made


_UUID = uuid.UUID
_new_uuid = object.__new__
_set = object.__setattr__
_from_bytes = int.from_bytes
_UNKNOWN_SAFETY = uuid.SafeUUID.unknown


encode_instant: Callable[[datetime], str] = format_ts


def decode_instant(value: object) -> datetime:
    """A stored instant, in any layout SQLite's readers accept (else ValueError)."""
    if not isinstance(value, str):
        raise ValueError(f"not a timestamp: {value!r:.60}")
    return parse_ts(value)


def _optional(code: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else code(value)


_optional_instant = _optional(decode_instant)


def encode_lease(lease: object) -> str | None:
    """The stored text of a lease token, or None when no stored lease can equal it."""
    if not isinstance(lease, datetime) or lease.tzinfo is None or lease.utcoffset() is None:
        return None
    utc = lease.astimezone(UTC)
    if utc.microsecond % 1000:
        return None
    return format_ts(utc)


def _as_is(value: Any) -> Any:
    return value


def _flag(value: Any) -> int:
    return 1 if value else 0


def _json_text(value: Any) -> Any:
    """The stored JSON text, checked: what the worker could not decode is no record."""
    try:
        load_payload(value)
    except RecursionError as exc:
        raise ValueError(f"payload is nested too deeply: {exc}") from None
    return value


_ENCODE: dict[ColumnKind, Callable[[Any], Any]] = {
    ColumnKind.ID: encode_id,
    ColumnKind.INSTANT: format_ts,
    ColumnKind.BOOL: _flag,
}
_ENCODERS = tuple(
    (c.name, _ENCODE[c.kind] if c.required else _optional(_ENCODE[c.kind]))
    if c.kind in _ENCODE
    else (c.name, _as_is)
    for c in COLUMNS
)
_INTS = tuple(c.name for c in COLUMNS if c.kind is ColumnKind.INT and c.required)


def row_from_record(record: ScheduleRecord) -> tuple[Any, ...]:
    """A record as the values of one row, in :data:`SELECT_LIST` order. An integer
    beyond SQLite's 64 bits raises :class:`InvalidConfiguration` naming it."""
    for name in _INTS:
        if getattr(record, name) > MAX_INT64:
            raise InvalidConfiguration(
                f"record {record.schedule_id}: {name} must be at most {MAX_INT64} on SQLite,"
                f" got {getattr(record, name)}"
            )
    return tuple(encode(getattr(record, name)) for name, encode in _ENCODERS)


def message_rows(
    messages: Sequence[ScheduledMessage], max_attempts: int, created: str
) -> list[tuple[Any, ...]]:
    """The values ``SqliteStatements.insert`` binds for each validated message."""
    fmt = format_ts
    ms = _MS
    rows = []
    for m in messages:
        # named, not starred: a starred unpack and rebuild costs a list per row
        due, text, end_at, firings, jitter, offset, catch_up, catch_up_limit = insert_columns(m)
        target = m.target
        rows.append(
            (
                m.schedule_id.bytes,
                m.event_type,
                m.payload_json,
                m.trigger.kind,
                text,
                fmt(due),
                target.kind,
                target.routing_key,
                max_attempts,
                created,
                m.name,
                None if (grace := m.misfire_grace) is None else grace // ms,
                None if end_at is None else fmt(end_at),
                firings,
                jitter,
                offset,
                catch_up,
                catch_up_limit,
            )
        )
    return rows


_MS = timedelta(milliseconds=1)

_ZERO = timedelta(0)
_CLAIM_ORDER = (
    "schedule_id event_type payload trigger_kind cron_expr scheduled_for target_kind"
    " target_routing_key attempts max_attempts leased_until paused last_error created_at"
    " delivered_at cancelled_at dead_lettered_at name next_after_lease misfire_grace_ms end_at"
    " max_firings firings jitter_ms jitter_offset_ms catch_up catch_up_limit backfill_until"
    " pause_note snoozes abort_requested"
)  # the order leased_from_row unpacks
if tuple(_CLAIM_ORDER.split()) != COLUMN_NAMES:  # pragma: no cover - a new column: unpack it there
    raise ImportError("leased_from_row unpacks the columns in an older order")


def leased_from_row(row: Sequence[Any], until_text: str, until: datetime) -> LeasedOccurrence:
    """A claimed row as ``record_from_row(row).leased()`` builds it, without the record
    in between (``until_text``: the claim's lease as stored)."""
    if type(row) is SalvagedRow:
        raise ValueError(undecodable(row))
    (
        sid, event_type, payload, trigger_kind, cron_expr, due, target_kind, routing_key,
        attempts, max_attempts, lease_text, _, last_error, created_at, _, _, _, name, _,
        grace, end_at, max_firings, firings, jitter_ms, offset, catch_up, limit,
        backfill_until, _, snoozes, _,
    ) = row  # fmt: skip
    scheduled_for = parse_ts(due)
    jitter = _ZERO
    if offset:
        jitter = timedelta(milliseconds=offset)
        scheduled_for -= jitter  # the rule's instant
    parse_ts(created_at)  # a row that cannot be read whole is malformed
    trigger = rule_trigger(trigger_kind, cron_expr)
    if trigger is None:
        trigger = Trigger("delay", at=scheduled_for)
    policy = None
    if end_at is not None or max_firings is not None or jitter_ms or catch_up is not None:
        policy = policy_of(_optional_instant(end_at), max_firings, jitter_ms, catch_up, limit)
    message = ScheduledMessage(
        schedule_id=decode_id(sid),
        event_type=event_type,
        payload=load_payload(payload),
        payload_json=payload,
        target=cached_target(target_kind, routing_key),
        trigger=trigger,
        scheduled_for=scheduled_for,
        name=name,
        misfire_grace=None if grace is None else timedelta(milliseconds=grace),
        policy=policy,
    )
    return LeasedOccurrence(
        message=message,
        attempts=attempts,
        max_attempts=max_attempts,
        leased_until=until if lease_text == until_text else parse_ts(lease_text),
        retrying=last_error is not None,
        backfill_until=None if backfill_until is None else parse_ts(backfill_until),
        firings=firings or 0,
        jitter_offset=jitter,
        snoozes=snoozes or 0,
    )


_I = COLUMN_INDEX


def diagnose(row: Sequence[Any]) -> str:
    """Which column makes a row undecodable, and why ('' when none is found)."""
    if problem := undecodable(row):
        return problem
    for column, value in zip(COLUMNS, row, strict=True):
        name, kind = column.name, column.kind
        if value is None:
            if column.required:
                return f"{name} is NULL"
            continue
        if kind is ColumnKind.ID:
            try:
                decode_id(value)
            except ValueError as exc:
                return str(exc)
        elif kind is ColumnKind.INSTANT:
            try:
                decode_instant(value)
            except ValueError:
                return f"{name} is not a timestamp: {value!r:.60}"
        elif kind is ColumnKind.JSON:
            try:
                load_payload(value)
            except (TypeError, ValueError, RecursionError) as exc:
                return f"{name} is not JSON: {exc}"
        elif kind in (ColumnKind.INT, ColumnKind.BIGINT, ColumnKind.BOOL):
            if not isinstance(value, int):
                return f"{name} is not an integer: {value!r:.60}"
        elif not isinstance(value, str):
            return f"{name} is not text: {value!r:.60}"
    return message_problem(row)


class _Codec(RowCodec):
    def decode(self, row: Sequence[Any]) -> ScheduleRecord:
        if type(row) is SalvagedRow:
            raise ValueError(undecodable(row))
        return super().decode(row)

    def _status(self, row: Sequence[Any]) -> ScheduleStatus | None:
        paused = row[_I["paused"]]  # the ends as stored: a malformed one still ends the row
        if not isinstance(paused, int):
            return None
        return ScheduleStatus.derive(
            delivered_at=row[_I["delivered_at"]],
            cancelled_at=row[_I["cancelled_at"]],
            dead_lettered_at=row[_I["dead_lettered_at"]],
            paused=bool(paused),
        )


_CODEC = _Codec(
    {
        ColumnKind.ID: decode_id,
        ColumnKind.TEXT: _as_is,
        ColumnKind.JSON: _json_text,
        ColumnKind.INSTANT: decode_instant,
        ColumnKind.INT: _as_is,
        ColumnKind.BIGINT: _as_is,
        ColumnKind.BOOL: bool,
    },
    diagnose,
)
record_from_row = decode = _CODEC.decode
"""A row of ``SELECT`` :data:`SELECT_LIST` as a record; raises on a value that does not decode."""
row_label, why, malformed = _CODEC.row_label, _CODEC.why, _CODEC.malformed
