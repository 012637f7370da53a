"""A deadline for a transactional handler: a watchdog that ends the transaction from
outside once a dispatch outlives its ``dispatch_timeout``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .._log import package_logger

__all__ = ["Watchdog"]

log = package_logger(__name__)


class Watchdog:
    """Calls an action once a dispatch's deadline passes, unless disarmed first.

    The action runs on the watchdog's thread under its lock, so :meth:`disarm` returns
    only once a running action has finished.
    """

    def __init__(self, name: str = "hexeract-tx-watchdog") -> None:
        self._name = name
        self._cond = threading.Condition()
        self._action: Callable[[], None] | None = None
        self._deadline = 0.0
        self.fired = False
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, action: Callable[[], None]) -> None:
        """Call ``action`` in ``seconds`` unless :meth:`disarm` comes first."""
        with self._cond:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._main, name=self._name, daemon=True)
                self._thread.start()
            self._action, self._deadline, self.fired = action, time.monotonic() + seconds, False
            self._cond.notify()

    def disarm(self) -> bool:
        """Stop watching; True if the deadline passed (the action ran)."""
        with self._cond:
            self._action = None
            return self.fired

    def _main(self) -> None:
        while True:
            with self._cond:
                while self._action is None:
                    if not self._cond.wait(timeout=60):
                        self._thread = None
                        return
                remaining = self._deadline - time.monotonic()
                if remaining > 0:
                    self._cond.wait(timeout=remaining)
                    continue
                action, self.fired = self._action, True
                self._action = None
                # under the lock: disarm() waits until the action is done
                try:
                    action()
                except Exception:  # the thread must outlive a failed action
                    log.exception("the transactional dispatch's deadline action failed")
