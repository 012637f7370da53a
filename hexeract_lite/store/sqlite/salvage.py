"""Rows whose text is not UTF-8, read anyway (:func:`fetch_rows`) as a
:class:`SalvagedRow`, which the codec refuses to decode, naming the column."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import apsw

from ..columns import COLUMN_NAMES

__all__ = ["SalvagedRow", "UndecodableText", "fetch_rows", "salvaged_query", "undecodable"]


class UndecodableText:
    """A TEXT value whose bytes are not UTF-8 (``raw``)."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def __repr__(self) -> str:
        return f"<not UTF-8: {self.raw!r}>"


class SalvagedRow(tuple[Any, ...]):
    """A row holding at least one :class:`UndecodableText`."""

    __slots__ = ()


def undecodable(row: Sequence[Any]) -> str:
    """Why a :class:`SalvagedRow` does not decode ('' for any other row)."""
    if type(row) is not SalvagedRow:
        return ""
    for name, value in zip(COLUMN_NAMES, row, strict=False):
        if type(value) is UndecodableText:
            return f"{name} is not UTF-8 text: {value.raw!r:.60}"
    return ""  # pragma: no cover - a SalvagedRow holds one


@functools.lru_cache(maxsize=64)
def salvaged_query(sql: str) -> str:
    """``sql`` (returning the columns of :data:`COLUMN_NAMES`) with text read as bytes,
    then one more column of every value's ``typeof``."""
    values = ", ".join(
        f"CASE typeof({c}) WHEN 'text' THEN CAST({c} AS BLOB) ELSE {c} END" for c in COLUMN_NAMES
    )
    types = " || ',' || ".join(f"typeof({c})" for c in COLUMN_NAMES)
    return f"SELECT {values}, {types} FROM ({sql}) AS salvaged"


def salvage(rows: Sequence[Sequence[Any]]) -> list[Any]:
    """Rows of :func:`salvaged_query` as the plain statement's would be."""
    out: list[Any] = []
    for row in rows:
        *values, types = row
        bad = False
        for index, kind in enumerate(str(types).split(",")):
            if kind == "text":
                raw = values[index]
                try:
                    values[index] = bytes(raw).decode("utf-8")
                except UnicodeDecodeError:
                    values[index] = UndecodableText(bytes(raw))
                    bad = True
        out.append(SalvagedRow(values) if bad else tuple(values))
    return out


def fetch_rows(cur: Any, sql: str, params: Any = ()) -> list[Any]:
    """Every row of ``sql``, salvaged when a text value does not decode and ``sql``
    returns the table's columns."""
    try:
        rows: list[Any] = cur.execute(sql, params).fetchall()
    except UnicodeDecodeError as exc:
        try:
            raw = cur.execute(salvaged_query(sql), params).fetchall()
        except apsw.SQLError:
            raise exc from None  # not a statement of the table's columns
        return salvage(raw)
    return rows
