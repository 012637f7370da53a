"""The PostgreSQL store's pool and change listener; a forked child abandons the
parent's untouched and connects afresh on first use."""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from ..._log import package_logger
from ...errors import InvalidConfiguration, StoreError
from ...redact import redact_conn
from ..sql.server import check_count
from .notify import ChangeListener, channel_name
from .session import DEFAULT_CONNECT_TIMEOUT, Timeouts, store_error

_log = package_logger(__name__)

Conn = psycopg.Connection[TupleRow]

_LISTEN_RETRY_S = 5.0
"""After the listener failed to start, claims go on without it this long before retrying."""
_NOTIFY = "SELECT pg_notify(%s, %s)"

_OPEN: weakref.WeakSet[Connections] = weakref.WeakSet()
_ABANDONED: list[object] = []
"""In a forked child: the parent's pools and listeners, kept from the garbage collector."""


def _after_fork_in_child() -> None:
    for connections in list(_OPEN):
        connections.forget_parent()


# POSIX only: elsewhere there is no fork, and a child process imports its own stores.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def check_pool_sizes(pool_min_size: object, pool_max_size: object) -> None:
    """``0 <= pool_min_size <= pool_max_size``, ``pool_max_size >= 1``, integers."""
    least = check_count("pool_min_size", pool_min_size, 0)
    if check_count("pool_max_size", pool_max_size, 0) < max(least, 1):
        raise InvalidConfiguration(
            f"pool_max_size must be >= max(pool_min_size, 1), got {pool_max_size!r}"
            f" with pool_min_size={pool_min_size!r}"
        )


def conninfo_params(conninfo: object) -> dict[str, Any]:
    """The parsed connection string; a bad one raises without showing it."""
    if not isinstance(conninfo, str):
        raise InvalidConfiguration(f"conninfo must be a str, got {type(conninfo).__name__}")
    try:
        return conninfo_to_dict(conninfo)
    except psycopg.Error:
        # libpq's message may quote the string, password included: neither it nor the
        # string is shown, and the driver's error is not chained
        raise StoreError(
            "invalid PostgreSQL connection string (not shown: it may hold a password);"
            " expected postgresql://user:password@host:port/dbname or key=value pairs"
        ) from None


def conninfo_connect_timeout(params: dict[str, Any]) -> timedelta:
    """The ``connect_timeout`` a connection string sets, as libpq reads it (whole
    seconds, at least 2); 10 s when it sets none, or 0 (libpq's "forever")."""
    text = str(params.get("connect_timeout") or "").strip()
    try:
        seconds = int(text)
    except ValueError:
        return DEFAULT_CONNECT_TIMEOUT
    return timedelta(seconds=max(seconds, 2)) if seconds > 0 else DEFAULT_CONNECT_TIMEOUT


_TCP_DEFAULTS: dict[str, int] = {
    "keepalives": 1,
    "keepalives_idle": 15,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
}
"""libpq's TCP settings, unless the connection string sets its own, so that a server
host that vanished without closing its connections is noticed (ignored on Unix-domain
sockets and systems without these options)."""


def _connect_kwargs(timeouts: Timeouts, conninfo: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": timeouts.connect_seconds()}
    given = conninfo_to_dict(conninfo)
    kwargs.update({key: value for key, value in _TCP_DEFAULTS.items() if key not in given})
    return kwargs


def connect(conninfo: str, timeouts: Timeouts) -> Conn:
    """One autocommit connection with the store's bounds set (driver errors raise)."""
    conn = psycopg.connect(conninfo, **_connect_kwargs(timeouts, conninfo))
    try:
        timeouts.configure(conn)
    except BaseException:
        conn.close()
        raise
    return conn


class Connections:
    """A store's pool and listener (see the module's notes). Thread-safe."""

    def __init__(
        self,
        conninfo: str,
        *,
        table: str,
        timeouts: Timeouts,
        pool_min_size: int,
        pool_max_size: int,
        listen: bool,
        signal: Callable[[], None],
    ) -> None:
        self._conninfo = conninfo
        self._table = table
        self.timeouts = timeouts
        self.where = redact_conn(conninfo)
        """The server, printable (no password)."""
        self._sizes = (pool_min_size, pool_max_size)
        self._signal = signal
        self._closed = False
        self._lock = threading.Lock()
        self._channel = channel_name(table)
        self._token = f"{os.getpid()}:{id(self):x}"
        self._listen = listen
        self._listener: ChangeListener | None = None
        self._listen_after = 0.0
        self._pool = self._new_pool()
        self._pool.open(wait=False)
        self._pool_opened = True
        _OPEN.add(self)

    def _new_pool(self) -> ConnectionPool[Conn]:
        """A pool that is not open yet (opening starts its threads)."""
        return ConnectionPool(
            self._conninfo,
            kwargs=_connect_kwargs(self.timeouts, self._conninfo),
            min_size=self._sizes[0],
            max_size=self._sizes[1],
            open=False,
            configure=self.timeouts.configure,
            timeout=self.timeouts.pool.total_seconds(),
            name=f"hexeract_lite:{self._table}",
        )

    def forget_parent(self) -> None:
        """In a forked child: abandon the parent's pool and listener, touching nothing
        of them, and prepare a fresh pool, opened on first use (so a child that is
        about to exec never connects)."""
        if self._closed:
            return
        parent_pool = self._pool
        # A pool whose __del__ sees it open would stop its (absent) threads through its
        # queue, whose lock a parent thread may hold: mark it closed, touch nothing
        # else. Its connections never end the parent's sessions: psycopg does not
        # finish a connection in another process than the one that opened it.
        parent_pool._closed = True
        _ABANDONED.append(parent_pool)
        if self._listener is not None:  # its thread is the parent's: not here
            _ABANDONED.append(self._listener)
            self._listener = None
        self._token = f"{os.getpid()}:{id(self):x}"
        self._lock = threading.Lock()  # the parent's may be held by a thread not here
        self._pool = self._new_pool()
        self._pool_opened = False

    @contextmanager
    def connection(self, action: str) -> Iterator[Conn]:
        """A pooled connection; driver errors become :class:`StoreError` naming
        ``action``, the table, the server and, when one ran out, the bound."""
        if not self._pool_opened:
            with self._lock:
                if not self._pool_opened and not self._closed:
                    self._pool.open(wait=False)
                    self._pool_opened = True
        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise store_error(
                f"{action} failed on table {self._table!r} at {self.where}",
                exc,
                conninfo=self._conninfo,
                timeouts=self.timeouts,
            ) from exc

    # -- changes between processes -----------------------------------------------------

    def start_listening(self) -> None:
        """Start the listener when listening is asked for and none runs; on failure, log
        it, go on without, and try again later."""
        if not self._listen or self._listener is not None:
            return
        with self._lock:
            if self._listener is not None or self._closed:
                return
            if time.monotonic() < self._listen_after:
                return
            listener = ChangeListener(
                lambda: connect(self._conninfo, self.timeouts),
                self._channel,
                self._token,
                self._signal,
            )
            try:
                listener.start()
            except psycopg.Error as exc:
                self._listen_after = time.monotonic() + _LISTEN_RETRY_S
                error = store_error("listen", exc, conninfo=self._conninfo, timeouts=self.timeouts)
                _log.warning(
                    "%s: workers on %s poll instead of listening for other processes' changes",
                    error,
                    self._table,
                )
                return
            self._listener = listener

    def announce(self, conn: Conn) -> None:
        """Tell other processes' listeners that work may have become claimable (sent
        after the commit; a failure is only logged: they poll anyway)."""
        try:
            conn.execute(_NOTIFY, [self._channel, self._token])
        except psycopg.Error as exc:
            _log.debug("notify on %s failed: %s", self._channel, exc)

    # -- lifetime ----------------------------------------------------------------------

    def close(self) -> None:
        """Stop the listener and close the pool. Idempotent."""
        self._closed = True
        _OPEN.discard(self)
        if self._listener is not None:
            self._listener.stop()
        self._pool.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed
