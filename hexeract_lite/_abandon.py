"""The exception that ends a worker's thread its watcher gave up on."""

from __future__ import annotations

__all__ = ["LoopAbandoned"]


class LoopAbandoned(BaseException):
    """Raised on a dispatching thread whose run (a sink call, or the hooks) its watcher
    gave up on: the thread ends without recording anything. A BaseException, so that
    no ``except Exception`` on the way stops it."""
