"""The plain ``hexeract scheduler list`` on a SQLite file, without the value classes.

``scheduler list`` (no filter, text output) is what an operator types most, and a
fresh process pays for every module it imports: the store and its value classes
(attrs) cost more than the listing itself. :func:`pending_text` opens the file as
:meth:`SqliteScheduleStore.open(readonly=True)
<hexeract_lite.store.sqlite.SqliteScheduleStore.open>` does (the same
:func:`~hexeract_lite.store.sqlite.schema.open_database`), runs the statement
:meth:`~hexeract_lite.store.sqlite.SqliteScheduleStore.list_pending` would run, and
renders each row with :func:`~hexeract_lite.cli.output.pending_cells`, the function
the store's snapshots are rendered with.

It vouches only for rows it can read exactly as the store's decoding would
(:func:`~hexeract_lite.store.sqlite.codec.record_from_row`, then the snapshot): on
any other row (one the store would show as ``malformed``, or a value it would not
read as stored) it returns None and the command lists through the store, so the
output is the same either way. A cron or interval rule, or a bus target, is decoded
by the store's own functions (importing them then).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import apsw

from .._time import parse_ts
from ..connect import ConnTarget
from ..store.columns import COLUMN_NAMES, COLUMNS, ColumnKind
from ..store.schema import validate_sqlite_table_name
from ..store.sqlite.driver import check_driver
from ..store.sqlite.schema import SCHEMA_VERSION, open_database
from ..store.sqlite.statements import PortableReads, SqliteStatements
from .output import pending_cells, pending_table

__all__ = ["pending_text"]

_I = {name: index for index, name in enumerate(COLUMN_NAMES)}
_INSTANTS = tuple((_I[c.name], c.required) for c in COLUMNS if c.kind is ColumnKind.INSTANT)
_ENDED = (_I["delivered_at"], _I["cancelled_at"], _I["dead_lettered_at"])
_BUSY_TIMEOUT = timedelta(seconds=5)  # SqliteScheduleStore.open's default


def pending_text(target: ConnTarget, table: str, limit: int) -> str | None:
    """The text of ``scheduler list --limit <limit>`` for the SQLite file ``target``
    names (opened read-only, never written), or None when a row needs the store's
    decoding. Raises what :func:`~hexeract_lite.connect.open_store` raises opening it
    read-only (:class:`~hexeract_lite.errors.StoreError` for a missing file or table,
    ...)."""
    table = validate_sqlite_table_name(table)
    check_driver("apsw", None)
    # the default database's folders are the store's to find (it never creates them
    # when reading): None, as open_store passes it
    path = None if target.source == "default" else target.path
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
        rows = conn.execute(_statement(conn, table, version), {"limit": limit}).fetchall()
        conn.close()
    except apsw.Error:
        return None  # the store reads again, and names the error as it does
    finally:
        conn.close()  # idempotent
        if hold is not None:  # after the close: no lock of ours is left
            hold.release()
    cells = []
    for row in rows:
        row_cells = _cells(row)
        if row_cells is None:
            return None
        cells.append(row_cells)
    return pending_table(cells)


def _statement(conn: Any, table: str, version: int) -> str:
    """What a read-only store's ``list_pending`` runs: the portable statement on an
    older table or one holding instants in another layout, else the indexed one."""
    present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    select_list = ", ".join(n if n in present else f"NULL AS {n}" for n in COLUMN_NAMES)
    statements = SqliteStatements(table, select_list)
    if version != SCHEMA_VERSION or conn.execute(statements.any_noncanonical).fetchall():
        return PortableReads(table, select_list).list_pending
    return statements.list_pending


def _cells(row: Sequence[Any]) -> tuple[str, ...] | None:
    """The row's cells as the store's snapshot renders, or None when this reading
    cannot vouch for them."""
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
    trigger = _trigger_label(row[_I["trigger_kind"]], row[_I["cron_expr"]])
    if trigger is None or not _target_ok(row[_I["target_kind"]], row[_I["target_routing_key"]]):
        return None
    return pending_cells(
        _uuid_text(sid),
        "paused" if row[_I["paused"]] else "pending",
        instants[_I["scheduled_for"]],
        row[_I["attempts"]],
        row[_I["max_attempts"]],
        trigger,
        event_type,
        name,
    )


def _trigger_label(kind: object, expression: object) -> str | None:
    """The trigger's label as the record's trigger shows it (a kind other than cron or
    interval is a delay there); None when the rule does not decode."""
    if kind not in ("cron", "interval"):
        return "delay"
    from ..store.record import rule_trigger

    try:
        rule = rule_trigger(kind, expression)  # type: ignore[arg-type]
    except Exception:
        return None
    return None if rule is None else rule.label()


def _target_ok(kind: object, routing_key: object) -> bool:
    """Whether the record's target decodes (a mediator or the outbox, without a key,
    always does; any other pair is checked by the store's own function)."""
    if kind in ("mediator", "outbox") and routing_key is None:
        return True
    from ..store.record import cached_target

    try:
        cached_target(kind, routing_key)
    except Exception:
        return False
    return True


def _uuid_text(raw: bytes) -> str:
    """``str(uuid.UUID(bytes=raw))``, without importing :mod:`uuid` (which imports
    :mod:`platform`)."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
