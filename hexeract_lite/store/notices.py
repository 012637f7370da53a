"""Notices a store gives the worker calling it: the malformed rows it dead-lettered
(per thread or task, through a context variable).
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
    """Report a dead-lettered malformed row; a no-op outside :func:`collecting_malformed`."""
    collector = _COLLECTOR.get()
    if collector is not None:
        collector.append((schedule, reason))


@contextlib.contextmanager
def collecting_malformed() -> Iterator[list[tuple[str, str]]]:
    """Collect the ``(schedule, reason)`` of each malformed row dead-lettered in the block."""
    collected: list[tuple[str, str]] = []
    token = _COLLECTOR.set(collected)
    try:
        yield collected
    finally:
        _COLLECTOR.reset(token)
