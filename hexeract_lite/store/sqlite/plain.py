"""A read-only store's pending listing as plain values, for the CLI's plain
``scheduler list`` (which pays for every module it imports): None for a row this
cannot read exactly as the store would, and the caller lists through the store."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import apsw

from ..._time import parse_ts
from ..columns import COLUMN_NAMES, COLUMNS, ColumnKind
from ..schema import CANONICAL_TS, LIVE, NONCANONICAL, OFF_LAYOUT
from .schema import SCHEMA_VERSION, open_database

__all__ = [
    "any_noncanonical",
    "indexed_pending",
    "plain_pending",
    "portable_pending",
    "present_columns",
    "read_pending",
    "uuid_text",
]

_I = {name: index for index, name in enumerate(COLUMN_NAMES)}
_INSTANTS = tuple((_I[c.name], c.required) for c in COLUMNS if c.kind is ColumnKind.INSTANT)
_ENDED = (_I["delivered_at"], _I["cancelled_at"], _I["dead_lettered_at"])
_BUSY_TIMEOUT = timedelta(seconds=5)  # SqliteScheduleStore.open's default

# id, status, scheduled instant, attempts, budget, trigger label, event type, name, the
# rule's zone
PlainPending = tuple[str, str, datetime, Any, Any, str, str, "str | None", str]


def indexed_pending(t: str, cols: str) -> str:
    """The pending listing (``:limit``) on the pending and paused indexes, merged."""
    return (
        f"SELECT {cols} FROM ("
        " SELECT * FROM ("
        f"  SELECT {cols} FROM {t} INDEXED BY idx_{t}_pending"
        f"  WHERE {LIVE} AND paused = 0"
        "  ORDER BY scheduled_for, schedule_id LIMIT :limit)"
        " UNION ALL"
        " SELECT * FROM ("
        f"  SELECT {cols} FROM {t} INDEXED BY idx_{t}_paused"
        f"  WHERE {LIVE} AND paused <> 0"
        "  ORDER BY scheduled_for, schedule_id LIMIT :limit))"
        " ORDER BY scheduled_for, schedule_id LIMIT :limit"
    )


def any_noncanonical(t: str) -> str:
    """Is a live row's instant in another layout? One probe of a normally empty index
    (:data:`OFF_LAYOUT` repeated, so SQLite uses it)."""
    return (
        f"SELECT 1 FROM {t} INDEXED BY idx_{t}_noncanonical"
        f" WHERE {OFF_LAYOUT} AND {NONCANONICAL} LIMIT 1"
    )


def portable_pending(t: str, cols: str) -> str:
    """The pending listing on a table that may lack our indexes or hold instants in
    another layout: no ``INDEXED BY``, instants read by ``strftime``."""
    canonical = f"coalesce(strftime({CANONICAL_TS}, scheduled_for), scheduled_for)"
    return f"SELECT {cols} FROM {t} WHERE {LIVE} ORDER BY {canonical}, schedule_id LIMIT :limit"


def present_columns(connection: apsw.Connection, table: str) -> str:
    """:data:`SELECT_LIST`, ``NULL AS <column>`` for each column an older table lacks."""
    present = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
    return ", ".join(name if name in present else f"NULL AS {name}" for name in COLUMN_NAMES)


def read_pending(path: Any, table: str, limit: int) -> list[Any] | None:
    """The rows a read-only store's ``list_pending(limit)`` reads, opened as it opens
    the file; None when reading failed (the store reads again and names the error)."""
    _db, conn, version, hold = open_database(
        path,
        table,
        durability="full",
        busy_timeout=_BUSY_TIMEOUT,
        create=False,
        vfs=None,
        readonly=True,
    )
    try:
        cols = present_columns(conn, table)
        # as the read-only store's list_pending chooses (its _normalise_if_needed)
        portable = version != SCHEMA_VERSION or conn.execute(any_noncanonical(table)).fetchall()
        statement = (portable_pending if portable else indexed_pending)(table, cols)
        rows = conn.execute(statement, {"limit": limit}).fetchall()
        conn.close()
    except (apsw.Error, UnicodeDecodeError):  # the store reads a non-UTF-8 row salvaged
        return None
    finally:
        conn.close()  # idempotent
        hold.release()  # after the close: no lock of ours is left
    return rows


def plain_pending(row: Sequence[Any]) -> PlainPending | None:
    """The row's values as the store's snapshot shows them, or None."""
    if len(row) != len(COLUMN_NAMES):
        return None
    sid = row[_I["schedule_id"]]
    if not isinstance(sid, bytes) or len(sid) != 16:
        return None
    instants = {}
    for index, required in _INSTANTS:
        value = row[index]
        if value is None and not required:
            continue
        if not isinstance(value, str):
            return None
        try:
            instants[index] = parse_ts(value)
        except (ValueError, TypeError, OverflowError):
            return None
    if any(row[i] is not None for i in _ENDED):
        return None  # a listing of pending schedules holds none
    event_type, name = row[_I["event_type"]], row[_I["name"]]
    if not isinstance(event_type, str) or not (name is None or isinstance(name, str)):
        return None
    grace = row[_I["misfire_grace_ms"]]
    if grace is not None:
        try:
            timedelta(milliseconds=grace)
        except (TypeError, ValueError, OverflowError):
            return None
    if not _json_ok(row[_I["payload"]]):
        return None  # the store lists it as malformed
    rule = _trigger(row[_I["trigger_kind"]], row[_I["cron_expr"]])
    if rule is None or not _target_ok(row[_I["target_kind"]], row[_I["target_routing_key"]]):
        return None
    trigger, zone = rule
    return (
        uuid_text(sid),
        "paused" if row[_I["paused"]] else "pending",
        instants[_I["scheduled_for"]],
        row[_I["attempts"]],
        row[_I["max_attempts"]],
        trigger,
        event_type,
        name,
        zone,
    )


def _json_ok(payload: object) -> bool:
    from ..._json import strict_loads

    if not isinstance(payload, str):
        return False
    try:
        strict_loads(payload)
    except (ValueError, RecursionError):
        return False
    return True


def _trigger(kind: object, expression: object) -> tuple[str, str] | None:
    """The record's trigger label and the zone its rule reads (None: the rule does not
    decode)."""
    if kind == "delay":
        return "delay", "UTC"
    from ..record import rule_trigger

    try:
        rule = rule_trigger(kind, expression)  # type: ignore[arg-type]
    except Exception:
        return None
    return None if rule is None else (rule.label(), rule.zone)


def _target_ok(kind: object, routing_key: object) -> bool:
    if kind in ("mediator", "outbox") and routing_key is None:
        return True
    from ..record import cached_target

    try:
        cached_target(kind, routing_key)
    except Exception:
        return False
    return True


def uuid_text(raw: bytes) -> str:
    """``str(uuid.UUID(bytes=raw))``, without importing :mod:`uuid`."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
