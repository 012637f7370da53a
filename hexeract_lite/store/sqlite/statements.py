"""The SQL of the SQLite store, built once per store from a validated table name: the
SQL base's statements in SQLite's words, and SQLite's own. The hot statements name
their index (``INDEXED BY``), whatever SQLite's statistics say; instants are compared
as text (:data:`~hexeract_lite.store.schema.NONCANONICAL`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, LiteralString

from ..columns import COLUMN_NAMES, SELECT_LIST
from ..listing import sqlite_glob, sqlite_status_where
from ..schema import (
    CANONICAL_TS,
    LIVE,
    NONCANONICAL,
    OFF_LAYOUT,
    sqlite_noncanonical,
    validate_sqlite_table_name,
)
from ..sql.statements import SharedStatements
from .plain import any_noncanonical, indexed_pending, portable_pending
from .salvage import fetch_rows

if TYPE_CHECKING:
    import pathlib
    import uuid

    import apsw

    from ...snapshot import ScheduleStatus

__all__ = [
    "LEASE_CHUNK",
    "SqliteStatements",
    "claim_rows",
    "file_sizes",
    "stats_sql",
]

LEASE_CHUNK = 500
"""The most rowids one leasing UPDATE names (within SQLite's bound-parameter limit)."""

_PARAM = re.compile(r"%\((\w+)\)s")
_ACTIVE = f"{LIVE} AND paused = 0"
_FRESH = f"{_ACTIVE} AND leased_until IS NULL"  # on the due index
_LEASED = f"{_ACTIVE} AND leased_until IS NOT NULL"  # on the leased index


class SqliteStatements(SharedStatements):
    """Every statement of one store, built once, for one validated table name."""

    _prune_delete = "DELETE FROM {t} WHERE rowid IN (SELECT rowid FROM {t} WHERE {w} LIMIT %(n)s)"

    def __init__(self, table: str, select_list: str = SELECT_LIST, indexed: bool = True) -> None:
        """``indexed=False``: an older table, read-only, which may lack our indexes."""
        t = validate_sqlite_table_name(table)
        self.table = t
        cols = select_list  # SELECT_LIST, or NULL for the columns an older table lacks
        self.select_list = cols

        def q(text: LiteralString) -> str:
            sql = text.format(
                t=t,
                cols=cols,
                now="%(now)s",
                deadline="%(until)s",
                not_terminal=LIVE,
                regexp="REGEXP",
                in_ids="= %(id)s",  # replay_many: one id per statement
                int8="",
                jsonb="",
            )
            return _PARAM.sub(r":\1", sql).replace("GREATEST(", "max(")

        super().__init__(q)
        due = f"{t} INDEXED BY idx_{t}_due"
        leased = f"{t} INDEXED BY idx_{t}_leased"
        self.insert = (
            f"INSERT INTO {t} (schedule_id, event_type, payload, trigger_kind, cron_expr,"
            " scheduled_for, target_kind, target_routing_key, attempts, max_attempts,"
            " leased_until, paused, last_error, created_at, name, misfire_grace_ms, end_at,"
            " max_firings, jitter_ms, jitter_offset_ms, catch_up, catch_up_limit)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, NULL, 0, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        # The claim, in one write transaction (claim_rows): a probe for an expired lease,
        # the rowids to lease (from the due index, and with an expired lease from both
        # indexes, merged), then one UPDATE of exactly those rowids.
        expired = (
            f"{_LEASED} AND leased_until <= :now AND scheduled_for <= :now"
            " AND attempts < max_attempts"
        )
        self.claim_probe = f"SELECT 1 FROM {leased} WHERE {expired} LIMIT 1"
        fresh = f"{_FRESH} AND scheduled_for <= :now AND attempts < max_attempts"
        self.claim_fresh = (
            f"SELECT rowid FROM {due} WHERE {fresh} ORDER BY scheduled_for, schedule_id LIMIT :n"
        )
        self.claim = (
            "SELECT rid FROM ("
            " SELECT * FROM ("
            f"  SELECT rowid AS rid, scheduled_for, schedule_id FROM {due} WHERE {fresh}"
            "  ORDER BY scheduled_for, schedule_id LIMIT :n)"
            " UNION ALL"
            " SELECT * FROM ("
            f"  SELECT rowid AS rid, scheduled_for, schedule_id FROM {leased} WHERE {expired}"
            "  ORDER BY scheduled_for, schedule_id LIMIT :n))"
            " ORDER BY scheduled_for, schedule_id LIMIT :n"
        )
        self._lease_head = (
            f"UPDATE {t} SET attempts = attempts + 1, leased_until = ?, abort_requested = NULL"
            " WHERE rowid IN ("
        )
        self._lease_tail = f") RETURNING {cols}"
        self._lease_sql: dict[int, str] = {}
        # Live rows with an instant in another layout, rewritten before any comparison:
        # one probe of a normally empty index (OFF_LAYOUT repeated, so SQLite uses it).
        odd = f"{t} INDEXED BY idx_{t}_noncanonical"
        noncanonical = f"{OFF_LAYOUT} AND {NONCANONICAL}"
        self.any_noncanonical = any_noncanonical(t)
        self.normalise = (
            f"UPDATE {odd} SET"
            f" scheduled_for = CASE WHEN {sqlite_noncanonical('scheduled_for')}"
            f"  THEN strftime({CANONICAL_TS}, scheduled_for) ELSE scheduled_for END,"
            f" leased_until = CASE WHEN {sqlite_noncanonical('leased_until')}"
            f"  THEN strftime({CANONICAL_TS}, leased_until) ELSE leased_until END"
            f" WHERE {noncanonical}"
        )
        self.set_paused = (  # a reference row may hold any non-zero flag
            f"UPDATE {t} SET paused = :paused, pause_note = NULL"
            f" WHERE schedule_id = :id AND {LIVE} AND (paused <> 0) <> :paused"
        )
        sweepable = (
            f"{_ACTIVE} AND attempts >= max_attempts"
            " AND (leased_until IS NULL OR leased_until <= :now)"
        )
        self.sweepable = sweepable
        self.sweep = (
            f"UPDATE {t} INDEXED BY idx_{t}_exhausted"
            " SET dead_lettered_at = :now, leased_until = NULL,"
            " last_error = CASE WHEN last_error IS NULL THEN :error ELSE :kept || last_error END"
            f" WHERE {sweepable}"
        )
        # before the sweep's write transaction: anything to sweep or rewrite?
        self.sweep_probe = (
            f"SELECT EXISTS (SELECT 1 FROM {odd} WHERE {noncanonical})"
            f" OR EXISTS (SELECT 1 FROM {t} INDEXED BY idx_{t}_exhausted WHERE {sweepable})"
        )
        # The wake-up hint: the first fresh row; among leased rows the least
        # max(scheduled_for, leased_until). The first leased row (l, s) in index order
        # gives it when s <= l (every other lease is at least l); otherwise only rows
        # whose lease ends in (l, s] can beat s, and that range is read.
        self.next_wakeup = (
            "SELECT"
            f" (SELECT scheduled_for FROM {due}"
            f"   WHERE {_FRESH}"
            "   ORDER BY scheduled_for, schedule_id LIMIT 1),"
            " (SELECT CASE WHEN f.s <= f.l THEN f.l ELSE min(f.s, coalesce("
            f"   (SELECT min(max(scheduled_for, leased_until)) FROM {leased}"
            f"    WHERE {_LEASED} AND leased_until > f.l AND leased_until <= f.s),"
            "   f.s)) END"
            f"  FROM (SELECT leased_until AS l, scheduled_for AS s FROM {leased}"
            f"   WHERE {_LEASED} ORDER BY leased_until, scheduled_for LIMIT 1) AS f)"
        )
        # names of a group: the prefix compared byte for byte (substr(), not LIKE,
        # whose wildcards a name may hold and which ignores ASCII case)
        self.list_named = (
            f"SELECT {cols} FROM {t} WHERE name IS NOT NULL AND {LIVE}"
            " AND substr(name, 1, :length) = :prefix ORDER BY name"
        )
        self.lock_named = self.list_named  # the write transaction holds the file's lock
        self.list_pending = indexed_pending(t, cols)
        self.portable_pending = portable_pending(t, cols)
        dead = f"{t} INDEXED BY idx_{t}_dead_letter" if indexed else t
        self.list_dead_letter = (
            f"SELECT {cols} FROM {dead} WHERE dead_lettered_at IS NOT NULL"
            " ORDER BY dead_lettered_at DESC, schedule_id LIMIT :limit"
        )
        self.portable_next_wakeup = (
            "SELECT min(CASE WHEN l IS NULL THEN s ELSE max(s, l) END), NULL FROM ("
            f" SELECT strftime({CANONICAL_TS}, scheduled_for) AS s,"
            f" strftime({CANONICAL_TS}, leased_until) AS l"
            f" FROM {t} WHERE {_ACTIVE})"
        )
        self.stats = stats_sql(t, indexed=indexed)
        marks = ", ".join("?" for _ in COLUMN_NAMES)
        self.import_row = (
            f"INSERT INTO {t} ({SELECT_LIST}) VALUES ({marks}) ON CONFLICT (schedule_id) DO NOTHING"
        )

    def lease(self, count: int) -> str:
        """``UPDATE`` leasing ``count`` rowids (``?``: the deadline, then the rowids),
        returning the rows; built once per count."""
        sql = self._lease_sql.get(count)
        if sql is None:
            marks = ", ".join("?" * count)
            sql = self._lease_sql[count] = f"{self._lease_head}{marks}{self._lease_tail}"
        return sql

    def _by_status(self, status: ScheduleStatus | None) -> str:
        """The table read on the partial index holding exactly the rows of ``status``."""
        assert status is not None
        suffix = "dead_letter" if status.value == "dead-lettered" else status.value
        return f"{self.table} INDEXED BY idx_{self.table}_{suffix}"

    def status_count(self, status: ScheduleStatus) -> str:
        """How many rows ``status`` has, counted on its index up to :data:`FEW_ROWS`."""
        return (
            f"SELECT count(*) FROM (SELECT 1 FROM {self._by_status(status)}"
            f" WHERE {sqlite_status_where(status)} LIMIT {FEW_ROWS})"
        )

    def list_query(
        self,
        status: ScheduleStatus | None,
        glob: str | None,
        name: str | None,
        after: uuid.UUID | None,
        limit: int,
        indexed: bool,
    ) -> tuple[str, dict[str, Any]]:
        """A page of ``list_schedules`` in id order and its parameters; ``indexed``: the
        rows of ``status`` read on its index and sorted (for a status few rows have)."""
        source = self._by_status(status) if indexed else self.table
        where = [sqlite_status_where(status)]
        params: dict[str, Any] = {"limit": limit}
        if glob is not None:
            where.append("event_type GLOB :glob")
            params["glob"] = sqlite_glob(glob)
        if name is not None:
            where.append("name GLOB :name")
            params["name"] = sqlite_glob(name)
        if after is not None:
            where.append("schedule_id > :after")
            params["after"] = after.bytes
        sql = (
            f"SELECT {self.select_list} FROM {source} WHERE {' AND '.join(where)}"
            " ORDER BY schedule_id LIMIT :limit"
        )
        return sql, params


def claim_rows(cur: apsw.Cursor, sql: SqliteStatements, params: dict[str, Any]) -> list[Any]:
    """Lease at most ``n`` claimable rows (``now``, ``until``: instant texts) inside
    the caller's write transaction; the leased rows, in no particular order."""
    pick = sql.claim if cur.execute(sql.claim_probe, params).fetchall() else sql.claim_fresh
    rowids = [row[0] for row in cur.execute(pick, params)]
    until = params["until"]
    rows: list[Any] = []
    for start in range(0, len(rowids), LEASE_CHUNK):
        chunk = rowids[start : start + LEASE_CHUNK]
        try:
            rows += cur.execute(sql.lease(len(chunk)), (until, *chunk)).fetchall()
        except UnicodeDecodeError:  # leased all the same: read them back, salvaged
            marks = ", ".join("?" * len(chunk))
            again = f"SELECT {SELECT_LIST} FROM {sql.table} WHERE rowid IN ({marks})"
            rows += fetch_rows(cur, again, chunk)
    return rows


FEW_ROWS = 10_000
"""A status with fewer rows than this is listed from its index (read and sorted)."""


def stats_sql(table: str, *, indexed: bool = True) -> str:
    """One row of the counts and oldest instants :class:`StoreStats` reports (``:now`` bound)."""
    t = validate_sqlite_table_name(table)
    fresh, leased = _FRESH, _LEASED
    # The planner would count fresh rows on the reference's pending index, reading each
    # row for its lease; the due index holds exactly them (a count reads it alone).
    due = f"{t} INDEXED BY idx_{t}_due" if indexed else t
    held = f"{t} INDEXED BY idx_{t}_leased" if indexed else t
    return (
        "SELECT"
        f" (SELECT count(*) FROM {due} WHERE {fresh}),"
        f" (SELECT count(*) FROM {held} WHERE {leased}),"
        f" (SELECT count(*) FROM {t} WHERE {LIVE} AND paused <> 0),"
        f" (SELECT count(*) FROM {t} WHERE delivered_at IS NOT NULL),"
        f" (SELECT count(*) FROM {t} WHERE cancelled_at IS NOT NULL),"
        f" (SELECT count(*) FROM {t} WHERE dead_lettered_at IS NOT NULL),"
        f" (SELECT count(*) FROM {due} WHERE {fresh} AND scheduled_for <= :now),"
        f" (SELECT min(scheduled_for) FROM {due} WHERE {fresh} AND scheduled_for <= :now),"
        f" (SELECT count(*) FROM {held} WHERE {leased} AND leased_until <= :now"
        " AND scheduled_for <= :now),"
        f" (SELECT min(scheduled_for) FROM {held} WHERE {leased} AND leased_until <= :now"
        " AND scheduled_for <= :now),"
        f" (SELECT count(*) FROM {held} WHERE {leased} AND leased_until > :now"
        " AND last_error IS NOT NULL),"
        f" (SELECT count(*) FROM {held} WHERE {leased} AND leased_until > :now"
        " AND last_error IS NULL)"
    )


def file_sizes(path: pathlib.Path) -> tuple[int | None, int | None]:
    """The size in bytes of the database file and of its WAL (None: no such file)."""
    sizes: list[int | None] = []
    for candidate in (path, path.with_name(path.name + "-wal")):
        try:
            sizes.append(candidate.stat().st_size)
        except OSError:
            sizes.append(None)
    return sizes[0], sizes[1]
