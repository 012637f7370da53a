"""Cross-process wake-ups by ``LISTEN``/``NOTIFY``: a hint (a lost one costs a poll
interval; the listener signals after it reconnects)."""

from __future__ import annotations

import contextlib
import hashlib
import select
import socket
import threading
from collections.abc import Callable
from typing import Any

import psycopg

from ..._log import package_logger

_log = package_logger(__name__)

_IDLE_LOOK_S = 60.0
"""The longest the listener thread sleeps without looking at its connection."""
_RETRY_MAX_S = 5.0
"""The longest pause between attempts to reconnect a lost listener connection."""


def channel_name(table: str) -> str:
    """The ``NOTIFY`` channel of ``table``: lowercase, within the 63-byte identifier
    limit, distinct per table name."""
    return "hexeract_lite_" + hashlib.sha256(table.encode()).hexdigest()[:24]


class ChangeListener:
    """A thread calling ``signal()`` whenever another store notifies ``channel``
    (``own_token``'s echoes ignored); it reconnects by itself."""

    def __init__(
        self,
        connect: Callable[[], psycopg.Connection[Any]],
        channel: str,
        own_token: str,
        signal: Callable[[], None],
    ) -> None:
        self._connect = connect
        self._channel = channel
        self._own = own_token
        self._signal = signal
        self._stop = threading.Event()
        # stop() writes a byte here to wake the thread at once (a socket pair, which
        # select() takes on every platform, where a pipe it does not)
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Connect and ``LISTEN`` (a driver error raises), then start the thread."""
        try:
            conn = self._listen()
        except BaseException:
            self._close_wake()
            raise
        self._thread = threading.Thread(
            target=self._run, args=(conn,), name=f"hexeract_lite listener {self._channel}"
        )
        self._thread.daemon = True
        self._thread.start()

    def stop(self) -> None:
        """End the thread now; it closes its connection. Idempotent."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _listen(self) -> psycopg.Connection[Any]:
        conn = self._connect()
        try:
            conn.execute(f'LISTEN "{self._channel}"'.encode())
        except BaseException:
            conn.close()
            raise
        return conn

    def _close_wake(self) -> None:
        for sock in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                sock.close()

    def _run(self, conn: psycopg.Connection[Any] | None) -> None:
        try:
            self._loop(conn)
        finally:
            self._close_wake()

    def _loop(self, conn: psycopg.Connection[Any] | None) -> None:
        delay = 0.05
        while not self._stop.is_set():
            if conn is None:
                try:
                    conn = self._listen()
                except psycopg.Error as exc:
                    _log.debug("listener on %s cannot reconnect: %s", self._channel, exc)
                    self._stop.wait(delay)
                    delay = min(delay * 2, _RETRY_MAX_S)
                    continue
                delay = 0.05
                self._signal()  # a change may have come while no one listened
            try:
                wake = self._wake_r.fileno()
                ready, _, _ = select.select([conn.fileno(), wake], [], [], _IDLE_LOOK_S)
                if wake in ready:
                    break
                if ready:
                    for note in conn.notifies(timeout=0):
                        if note.payload != self._own:
                            self._signal()
            except (psycopg.Error, OSError, ValueError) as exc:
                _log.debug("listener on %s lost its connection: %s", self._channel, exc)
                conn.close()
                conn = None
                self._signal()
        if conn is not None:
            conn.close()
