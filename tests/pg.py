"""Finding the PostgreSQL server the tests run against, and fresh tables on it.

The server is the one ``HEXERACT_TEST_POSTGRES_URL`` names (``scripts/test`` starts one
with ``scripts/pg-test-server`` and sets it). When the variable is unset, the server
``scripts/pg-test-server`` starts by default (127.0.0.1:54329) is tried, so that
``scripts/pg-test-server start && pytest`` just works.

No server: PostgreSQL tests are skipped, with the reason, except in CI (``CI=true``),
where they fail: CI must exercise the PostgreSQL store, and a silently skipped suite
would hide that it did not.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.scratch import ScratchTables

if TYPE_CHECKING:
    from hexeract_lite.clock import Clock
    from hexeract_lite.store.base import ScheduleStore
    from hexeract_lite.store.postgres import PostgresScheduleStore

URL_ENV = "HEXERACT_TEST_POSTGRES_URL"
DEFAULT_URL = "postgresql://hexeract:hexeract-test-only@127.0.0.1:54329/hexeract_test"
"""Where ``scripts/pg-test-server`` puts its server unless told otherwise."""


def in_ci() -> bool:
    """True when running under CI (``CI=true``, as CI services set it)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _problem(url: str) -> str | None:
    """None when a connection to ``url`` works, else why not (password-free)."""
    import psycopg

    from hexeract_lite.connect import redact_conn

    try:
        with psycopg.connect(url, connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"cannot connect to {redact_conn(url)}: {type(exc).__name__}"


@cache
def server() -> tuple[str | None, str]:
    """``(url, "")`` for the server to use, or ``(None, why there is none)``.

    A server named by ``HEXERACT_TEST_POSTGRES_URL`` is used even when it does not
    answer: its tests then fail with the connection error, rather than skip.
    """
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return None, "psycopg is not installed (pip install -e '.[postgres]')"
    url = os.environ.get(URL_ENV, "").strip()
    if url:
        return url, ""
    why = _problem(DEFAULT_URL)
    if why is None:
        return DEFAULT_URL, ""
    return None, (
        f"no PostgreSQL server: {URL_ENV} is not set and {why}"
        " (run scripts/pg-test-server start, which installs and starts one)"
    )


def require_server() -> str:
    """The server's URL; skips the calling test when there is none (fails it in CI)."""
    url, why = server()
    if url is None:
        if in_ci():
            pytest.fail(f"CI=true but PostgreSQL tests cannot run: {why}", pytrace=False)
        pytest.skip(why)
    return url


def unique_table(prefix: str = "t") -> str:
    """A table name no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


_ADMIN: dict[tuple[int, str], Any] = {}
"""One autocommit connection per process and server for dropping scratch tables (a
connection each time was most of a drop's cost)."""
_ADMIN_LOCK = threading.Lock()


def _on_admin(url: str, work: Callable[[Any], None]) -> None:
    """``work(connection)`` on this process's admin connection to ``url`` (reconnecting
    once when the server went away since)."""
    import psycopg

    key = (os.getpid(), url)
    with _ADMIN_LOCK:
        conn = _ADMIN.get(key)
        if conn is not None and not conn.closed:
            try:
                work(conn)
                return
            except psycopg.OperationalError:  # the server went away since: reconnect
                conn.close()
        _ADMIN[key] = conn = psycopg.connect(url, autocommit=True)
        conn.execute("SET lock_timeout = '5s'")  # a lock a test left held: fail, not hang
        work(conn)


def drop_table(url: str, table: str) -> None:
    """Drop ``table`` and its run log (and their indexes) if they exist, and forget its
    schema version."""
    from psycopg import sql

    from hexeract_lite.store.postgres.schema import META_TABLE, runs_table_name

    def drop(conn: Any) -> None:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))
        conn.execute(
            sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(runs_table_name(table)))
        )
        if conn.execute("SELECT to_regclass(%s)", [META_TABLE]).fetchone() != (None,):
            conn.execute(
                sql.SQL("DELETE FROM {} WHERE table_name = %s").format(sql.Identifier(META_TABLE)),
                [table],
            )

    _on_admin(url, drop)


def empty_table(url: str, table: str) -> bool:
    """Delete every row of ``table`` and of its run log; False when that failed."""
    import psycopg
    from psycopg import sql

    from hexeract_lite.store.postgres.schema import runs_table_name

    def empty(conn: Any) -> None:
        with conn.transaction():
            for name in (table, runs_table_name(table)):
                conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(name)))

    try:
        _on_admin(url, empty)
    except psycopg.Error:
        return False
    return True


_SCRATCH = ScratchTables(empty_table, drop_table, unique_table)


def open_scratch_store(
    table: str | None = None, *, clock: Clock | None = None, **options: object
) -> PostgresScheduleStore:
    """A store on a fresh table of the test server (:meth:`.ScratchTables.open`)."""
    from hexeract_lite.store.postgres import PostgresScheduleStore

    return _SCRATCH.open(PostgresScheduleStore, require_server(), table, clock, options)


def postgres_store_factory() -> Callable[[Path], ScheduleStore] | None:
    """The contract suite's factory for the PostgreSQL store, or None without a server.

    In CI a missing server still yields a factory: one whose tests fail, saying why.
    """
    url, _why = server()
    if url is None and not in_ci():
        return None

    def factory(tmp_path: Path) -> ScheduleStore:
        return open_scratch_store()

    return factory


class TcpProxy:
    """A TCP forwarder to the test server, on 127.0.0.1, that a test can take away.

    ``url`` is the server's URL with this proxy's port. :meth:`cut` closes the
    listening socket and every forwarded connection at once: to a client, the server
    is gone (connections reset, new ones refused).
    """

    def __init__(self, url: str) -> None:
        import socket
        import threading

        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(url)
        self._target = (str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432))
        self._listener = socket.create_server(("127.0.0.1", 0))
        port = self._listener.getsockname()[1]
        params.update(host="127.0.0.1", port=str(port))
        self.url = str(make_conninfo("", **params))
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._cut = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                if self._cut:
                    client.close()
                    server.close()
                    return
                self._sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: object, dst: object) -> None:
        import socket

        assert isinstance(src, socket.socket) and isinstance(dst, socket.socket)
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Take the server away: refuse new connections, reset the open ones."""
        import socket
        import struct

        with self._lock:
            self._cut = True
            sockets, self._sockets = self._sockets, []
        self._listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):  # then RST on close: the server's host is gone
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            with contextlib.suppress(OSError):  # wakes the forwarding thread blocked on it
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
