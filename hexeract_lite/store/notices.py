"""Notices a store gives the worker that is calling it: malformed rows it dead-lettered.

A worker wraps its claim in :func:`collecting_malformed` (a context variable: each
thread or task hears only of its own claims).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

__all__ = ["collecting_malformed", "malformed_dead_lettered"]

_COLLECTOR: contextvars.ContextVar[list[tuple[str, str]] | None] = contextvars.ContextVar(
    "hexeract_malformed", default=None
)


def malformed_dead_lettered(schedule: str, reason: str) -> None:
    """Called by a store once it has dead-lettered the malformed row ``schedule`` (its
    id as stored) for ``reason``; a no-op outside :func:`collecting_malformed`."""
    collector = _COLLECTOR.get()
    if collector is not None:
        collector.append((schedule, reason))


@contextlib.contextmanager
def collecting_malformed() -> Iterator[list[tuple[str, str]]]:
    """Collect, into the list it yields, the ``(schedule, reason)`` of every malformed
    row the stores dead-letter in this context until the block ends."""
    collected: list[tuple[str, str]] = []
    token = _COLLECTOR.set(collected)
    try:
        yield collected
    finally:
        _COLLECTOR.reset(token)
