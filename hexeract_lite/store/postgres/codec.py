"""The PostgreSQL codec: rows of the table as Python values, and rows that cannot be."""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, LiteralString

import psycopg
from psycopg import sql
from psycopg.pq import Format

from ..._json import strict_loads
from ..._time import to_utc_ms
from ..columns import COLUMN_NAMES, COLUMNS, ColumnKind, columns_of_kind
from ..record import ScheduleRecord, message_problem
from ..sql.codec import RowCodec

_K = ColumnKind

ARRAY_TYPES: dict[ColumnKind, LiteralString] = {
    _K.ID: "uuid",
    _K.TEXT: "text",
    _K.JSON: "text",
    _K.INSTANT: "timestamptz",
    _K.INT: "int4",
    _K.BIGINT: "int8",
    _K.BOOL: "bool",
}
"""The PostgreSQL array element type each kind is sent as (JSON as text, cast after)."""

TEXT_COLUMNS: tuple[str, ...] = columns_of_kind(_K.TEXT)
"""The text columns (the payload is JSON, checked by the server)."""

assert tuple(f.name for f in ScheduleRecord.__attrs_attrs__) == COLUMN_NAMES


class Unreadable(str):
    """A stored value the driver could not load (its text), e.g. a ``TIMESTAMPTZ`` of
    ``'infinity'`` or the year 20000, which no :class:`datetime` can hold."""

    __slots__ = ()


def select_list(alias: LiteralString | None = None) -> sql.Composable:
    """Every column in registry (and :class:`ScheduleRecord`) order; JSON as text."""
    items: list[sql.Composable] = []
    for column in COLUMNS:
        ident = sql.Identifier(alias, column.name) if alias else sql.Identifier(column.name)
        items.append(sql.SQL("{}::text").format(ident) if column.kind is _K.JSON else ident)
    return sql.SQL(", ").join(items)


def fetch_rows(cur: psycopg.Cursor[Any]) -> list[tuple[Any, ...]]:
    """Every row of the cursor's result. A value the driver cannot load (see
    :class:`Unreadable`) does not fail the others: it comes back as its text."""
    try:
        return cur.fetchall()
    except psycopg.DataError:
        rows = _load_leniently(cur)
        if rows is None:
            raise
        return rows


def _load_leniently(cur: psycopg.Cursor[Any]) -> list[tuple[Any, ...]] | None:
    """The result loaded value by value (None: no result)."""
    result = cur.pgresult
    if result is None:
        return None
    loaders = []
    for col in range(result.nfields):
        oid, fmt = result.ftype(col), Format(result.fformat(col))
        loader_class = cur.adapters.get_loader(oid, fmt)
        if loader_class is None:
            return None
        loaders.append(loader_class(oid, cur))
    rows = []
    for index in range(result.ntuples):
        row: list[Any] = []
        for col, loader in enumerate(loaders):
            raw = result.get_value(index, col)
            if raw is None:
                row.append(None)
                continue
            try:
                row.append(loader.load(raw))
            except psycopg.DataError:
                row.append(Unreadable(bytes(raw).decode("utf-8", "replace")))
        rows.append(tuple(row))
    return rows


_EXPONENT_FORM = re.compile(r"\d[eE]\+?\d")
"""A number written with a non-negative exponent (``1e+20``, ``1.5E3``)."""

_STRING_OR_BIG = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|-?\d+(?:\.\d+)?[eE]\+?\d+', re.DOTALL)
"""A JSON string (kept as it is), or a number written with a non-negative exponent."""


def jsonb_text(payload_json: str) -> str:
    """The payload to bind for ``JSONB``: a number with a non-negative exponent (``1e20``,
    which ``JSONB`` would read back as an int) sent as its integer value with ``.0``,
    so that it comes back the same float; everything else as it is."""
    if not _EXPONENT_FORM.search(payload_json):
        return payload_json
    return _STRING_OR_BIG.sub(_float_kept, payload_json)


def _float_kept(match: re.Match[str]) -> str:
    token = match.group()
    if token.startswith('"'):
        return token
    value = float(token)
    if math.isinf(value):
        return token
    text = repr(value)
    return f"{int(value)}.0" if "e+" in text else text


def _canonical_json(text: str) -> str:
    return json.dumps(strict_loads(text), ensure_ascii=False, separators=(",", ":"))


def decode_instant(value: datetime) -> datetime:
    """A loaded ``TIMESTAMPTZ`` at milliseconds."""
    return to_utc_ms(value, "timestamp")


def same(value: Any) -> Any:
    """Return ``value`` as it is: psycopg binds UUIDs and aware datetimes itself."""
    return value


def encode_lease(lease: object) -> datetime | None:
    """The lease as bound; None (fenced out without SQL) when it is no aware datetime."""
    if isinstance(lease, datetime) and lease.utcoffset() is not None:
        return lease
    return None


encode_id = same
encode_instant = same
"""psycopg binds ids and instants as they are."""

_ONE_MS = timedelta(milliseconds=1)


def whole_ms(delta: timedelta) -> int:
    """A non-negative duration in whole milliseconds (rounded down)."""
    return delta // _ONE_MS


def diagnose(row: Sequence[Any]) -> str:
    """Which column makes a row undecodable, and why ('' when none is found)."""
    if not isinstance(row[0], uuid.UUID):
        return f"schedule_id is not a UUID: {row[0]!r:.60}"
    for column, value in zip(COLUMNS, row, strict=False):
        if value is None:
            if column.required:
                return f"{column.name} is NULL"
            continue
        if column.kind is _K.INSTANT and not isinstance(value, datetime):
            return f"{column.name} is not a timestamp Python can hold: {str(value)!r:.60}"
        if column.kind is _K.JSON:
            try:
                strict_loads(value)
            except (TypeError, ValueError) as exc:
                return f"payload is not JSON: {exc}"
    return message_problem(row)


_CODEC = RowCodec(
    {
        _K.ID: same,
        _K.JSON: _canonical_json,
        _K.INSTANT: decode_instant,
        _K.BOOL: bool,
    },
    diagnose,
)
decode = _CODEC.decode
"""A row of :func:`select_list` as a record; raises on an undecodable value."""
row_label, why, malformed = _CODEC.row_label, _CODEC.why, _CODEC.malformed
