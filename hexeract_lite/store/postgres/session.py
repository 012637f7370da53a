"""How long the PostgreSQL store waits, and :func:`store_error`: which bound ran out."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import attrs
import psycopg
from psycopg_pool import PoolTimeout

from ...errors import InvalidConfiguration, StoreError
from ...redact import scrub
from ..sql.dialect import lock_timed_out, seconds_text, statement_timed_out
from ..sql.server import ServerSession
from .codec import fetch_rows

_MAX_MS = 2**31 - 1
"""The server's largest timeout setting, in milliseconds (about 24.8 days)."""

DEFAULT_CONNECT_TIMEOUT = timedelta(seconds=10)
DEFAULT_POOL_TIMEOUT = timedelta(seconds=10)
DEFAULT_LOCK_TIMEOUT = timedelta(seconds=5)
DEFAULT_STATEMENT_TIMEOUT = timedelta(seconds=30)


def _check(name: str, value: object, *, whole_seconds: bool = False) -> timedelta:
    if (
        not isinstance(value, timedelta)
        or value <= timedelta(0)
        or value > timedelta(milliseconds=_MAX_MS)
    ):
        raise InvalidConfiguration(
            f"{name} must be a timedelta above 0 and at most {_MAX_MS} ms, got {value!r}"
        )
    if value < timedelta(milliseconds=1):
        raise InvalidConfiguration(f"{name} must be at least 1 ms, got {value!r}")
    if whole_seconds and value < timedelta(seconds=2):
        raise InvalidConfiguration(
            f"{name} must be at least 2 s (libpq's least; it counts whole seconds), got {value!r}"
        )
    return value


@attrs.frozen(kw_only=True)
class Timeouts:
    """The store's bounds on waiting (see the module's notes), checked when built."""

    connect: timedelta
    pool: timedelta
    lock: timedelta
    statement: timedelta

    @classmethod
    def checked(cls, **values: object) -> Timeouts:
        """Each a :class:`timedelta` from 1 ms (``connect``: 2 s) to 2**31 - 1 ms;
        anything else raises :class:`InvalidConfiguration` naming it and the value."""
        return cls(
            **{
                n: _check(f"{n}_timeout", v, whole_seconds=n == "connect")
                for n, v in values.items()
            }
        )

    def connect_seconds(self) -> int:
        """``connect_timeout`` as libpq takes it (whole seconds, rounded up)."""
        return -(-self.connect // timedelta(seconds=1))

    def configure(self, conn: psycopg.Connection[Any]) -> None:
        """Set the server-side bounds on a new connection (one round trip)."""
        conn.execute(
            "SELECT set_config('lock_timeout', %s, false),"
            " set_config('statement_timeout', %s, false)",
            [
                f"{self.lock // timedelta(milliseconds=1)}ms",
                f"{self.statement // timedelta(milliseconds=1)}ms",
            ],
        )


def store_error(
    prefix: str, exc: BaseException, *, conninfo: str, timeouts: Timeouts
) -> StoreError:
    """``<prefix>: <what went wrong>`` for a driver error: says which bound ran out
    when one did; never shows the password."""
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        detail = lock_timed_out(timeouts.lock)
    elif isinstance(exc, psycopg.errors.QueryCanceled):
        detail = statement_timed_out(timeouts.statement)
    elif isinstance(exc, PoolTimeout):
        detail = (
            f"waited longer than the pool timeout ({seconds_text(timeouts.pool)}) for a"
            " connection: the server does not answer, or every pooled connection is busy"
        )
    elif isinstance(exc, psycopg.errors.ConnectionTimeout):
        detail = f"gave up connecting after the connect timeout ({seconds_text(timeouts.connect)})"
    else:
        detail = scrub(str(exc), conninfo).strip()
    return StoreError(f"{prefix}: {detail}")


class PostgresSession(ServerSession):
    """A pooled connection as the SQL base uses it; statements run in one pipeline."""

    __slots__ = ()
    conn: psycopg.Connection[Any]

    def execute(self, statement: Any, params: Any = ()) -> int:
        """Run a statement; the rows it changed."""
        return self.conn.execute(statement, params).rowcount

    def execute_each(self, statements: list[tuple[Any, Any]]) -> list[int]:
        """Run the statements in one pipeline (one round trip); the rows each changed."""
        if not statements:
            return []
        groups = [  # a run of the same statement is one executemany
            (statement, [params for _, params in run])
            for statement, run in itertools.groupby(statements, key=lambda item: item[0])
        ]
        with self.conn.pipeline():
            cursors = [self.conn.cursor() for _ in groups]
            for cur, (statement, params) in zip(cursors, groups, strict=True):
                cur.executemany(statement, params, returning=True)
        counts: list[int] = []
        for cur in cursors:
            counts.append(cur.rowcount)
            while cur.nextset():
                counts.append(cur.rowcount)
        return counts

    def fetch(self, statement: Any, params: Any = ()) -> list[Any]:
        """Run a statement; its rows (a value the driver cannot load as its text)."""
        return fetch_rows(self.conn.execute(statement, params))
