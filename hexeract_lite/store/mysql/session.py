"""How long the MySQL store waits (connecting, each read, a pooled connection, a row
lock, a read statement), and :func:`store_error`: which bound ran out."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs
import pymysql

from ...errors import InvalidConfiguration, StoreError
from ...redact import scrub
from ..sql.dialect import lock_timed_out, seconds_text, statement_timed_out
from ..sql.server import ServerSession

_LOCK_WAIT = 1205
_STATEMENT_TIME = (1969, 3024)  # MariaDB's max_statement_time, MySQL's max_execution_time
_DEADLOCK = 1213
DUPLICATE_KEY = 1062
"""The server's error for a row a unique index holds already."""


ISOLATION = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"
"""Every session reads committed rows and takes no gap locks (so a claim's range never
blocks an insert)."""


class PoolTimeout(Exception):
    """No pooled connection came free within the pool timeout."""


def _check(name: str, value: object, least: timedelta) -> timedelta:
    if not isinstance(value, timedelta) or value < least or value > timedelta(days=24):
        raise InvalidConfiguration(
            f"{name} must be a timedelta from {least.total_seconds():g} s to 24 days, got {value!r}"
        )
    return value


@attrs.frozen(kw_only=True)
class Timeouts:
    """The store's bounds on waiting (see the module), checked when built."""

    connect: timedelta
    read: timedelta
    pool: timedelta
    lock: timedelta
    statement: timedelta

    @classmethod
    def checked(cls, **values: object) -> Timeouts:
        """Each a :class:`timedelta` (``lock``: whole seconds, at least 1 s; the others
        at least 1 ms); anything else raises :class:`InvalidConfiguration` naming it."""
        ms = timedelta(milliseconds=1)
        checked = {
            name: _check(f"{name}_timeout", value, timedelta(seconds=1) if name == "lock" else ms)
            for name, value in values.items()
        }
        return cls(**checked)

    def session_sql(self, mariadb: bool) -> str:
        """The ``SET SESSION`` statement of a new connection (its isolation level is
        set apart: :data:`ISOLATION`)."""
        lock = max(1, round(self.lock.total_seconds()))
        if mariadb:
            limit = f"max_statement_time = {self.statement.total_seconds():.3f}"
        else:
            limit = f"max_execution_time = {max(1, self.statement // timedelta(milliseconds=1))}"
        return (
            f"SET SESSION time_zone = '+00:00', innodb_lock_wait_timeout = {lock}, {limit},"
            " sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ENGINE_SUBSTITUTION'"
        )


def store_error(prefix: str, exc: BaseException, *, url: str, timeouts: Timeouts) -> StoreError:
    """``<prefix>: <what went wrong>`` for a driver error: which bound ran out when one
    did; never the password."""
    code = exc.args[0] if isinstance(exc, pymysql.MySQLError) and exc.args else None
    if code == _LOCK_WAIT:
        detail = lock_timed_out(timeouts.lock)
    elif code in _STATEMENT_TIME:
        detail = statement_timed_out(timeouts.statement)
    elif code == _DEADLOCK:
        detail = "deadlock with another session; the transaction was rolled back"
    elif isinstance(exc, PoolTimeout):
        detail = (
            f"waited longer than the pool timeout ({seconds_text(timeouts.pool)}) for a"
            " connection: every pooled connection is busy"
        )
    else:
        detail = scrub(f"{type(exc).__name__}: {exc}", url).strip()
    return StoreError(f"{prefix}: {detail}")


class MysqlSession(ServerSession):
    """A connection as the SQL base uses it; a count is of the rows matched (the
    connection counts found rows). Other processes poll: there is no one to notify."""

    __slots__ = ()
    conn: pymysql.Connection[Any]

    def execute(self, statement: Any, params: Any = ()) -> int:
        """Run a statement; the rows it matched."""
        with self.conn.cursor() as cur:
            return int(cur.execute(statement, params or None))

    def fetch(self, statement: Any, params: Any = ()) -> list[Any]:
        """Run a statement; its rows."""
        with self.conn.cursor() as cur:
            cur.execute(statement, params or None)
            return list(cur.fetchall())
