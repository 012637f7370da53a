"""EventRouterSink: a sink that hands each message to the handler of its event type."""

from __future__ import annotations

import fnmatch
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from .errors import DispatchError, InvalidArgument
from .message import ScheduledMessage
from .sinks import is_coroutine_callable

__all__ = ["EventRouterSink", "Handler"]

Handler = Callable[[ScheduledMessage], Any]
"""A handler: takes the message; returns None (or an awaitable resolving to None)."""

_H = TypeVar("_H", bound=Handler)
_GLOB = frozenset("*?[")


class EventRouterSink:
    """Routes each message to the handler registered for its event type.

    Register with :meth:`on` (a decorator), :meth:`add`, or a mapping::

        router = EventRouterSink()  # or EventRouterSink({"backup.run": backup, ...})

        @router.on("reminders.*")
        async def remind(message: ScheduledMessage) -> None: ...

    A pattern is an event type or a glob (:func:`fnmatch.fnmatchcase`: ``*`` matches dots
    too); an exact one wins, else globs in registration order. No handler: a failed
    dispatch (:class:`DispatchError`). Handlers are sync or async, return None or raise.
    With every handler async the router is an async sink (:attr:`is_async`); with a sync
    one among them it runs on a dispatch thread, an async handler on a private loop there.

    .. versionadded:: 0.2.0"""

    def __init__(self, handlers: Mapping[str, Handler] | None = None) -> None:
        self._exact: dict[str, Handler] = {}
        self._globs: list[tuple[str, Handler]] = []
        if handlers is not None:
            if not isinstance(handlers, Mapping):
                raise InvalidArgument(
                    f"handlers must be a mapping of event type to handler, got {handlers!r:.100}"
                )
            for pattern, handler in handlers.items():
                self.add(pattern, handler)

    def add(self, pattern: str, handler: Handler) -> None:
        """Register ``handler`` for ``pattern``; a pattern registered twice, an empty one or a
        handler that is not callable: :class:`InvalidArgument`."""
        if not isinstance(pattern, str) or not pattern:
            raise InvalidArgument(f"an event type pattern must be a non-empty str, got {pattern!r}")
        if not callable(handler):
            raise InvalidArgument(f"the handler for {pattern!r} is not callable: {handler!r:.100}")
        if pattern in self._exact or any(p == pattern for p, _ in self._globs):
            raise InvalidArgument(f"event type pattern {pattern!r} already has a handler")
        if _GLOB.isdisjoint(pattern):
            self._exact[pattern] = handler
        else:
            self._globs.append((pattern, handler))

    @property
    def is_async(self) -> bool:
        """True when the router has handlers and all of them are async. A worker reads
        it when it is made: register the handlers first."""
        handlers = [*self._exact.values(), *(h for _, h in self._globs)]
        return bool(handlers) and all(map(is_coroutine_callable, handlers))

    def on(self, pattern: str) -> Callable[[_H], _H]:
        """A decorator: ``@router.on("reminders.*")`` registers the function it decorates."""

        def register(handler: _H) -> _H:
            self.add(pattern, handler)
            return handler

        return register

    def handler_for(self, event_type: str) -> Handler | None:
        """The handler a message of ``event_type`` goes to, or None."""
        found = self._exact.get(event_type)
        if found is not None:
            return found
        for pattern, handler in self._globs:
            if fnmatch.fnmatchcase(event_type, pattern):
                return handler
        return None

    def dispatch(self, message: ScheduledMessage) -> Awaitable[None] | None:
        """Hand ``message`` to its event type's handler; none: :class:`DispatchError`."""
        handler = self.handler_for(message.event_type)
        if handler is None:
            raise DispatchError(
                f"no handler for event type {message.event_type!r} (schedule"
                f" {message.schedule_id}); register one with EventRouterSink.on"
            )
        result: Awaitable[None] | None = handler(message)
        return result

    def __repr__(self) -> str:
        patterns = [*self._exact, *(p for p, _ in self._globs)]
        return f"EventRouterSink({patterns!r})"
