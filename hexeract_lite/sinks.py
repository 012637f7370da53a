"""Sinks: where a due message goes when the worker dispatches it.

A sink has ``dispatch(message)`` (:class:`ScheduleSink`), which returns ``None`` (or
an awaitable resolving to ``None``) or raises; anything else it returns is a failed
dispatch, so a mistake is loud. Delivery is at least once: consumers deduplicate on
the occurrence id, which :class:`BusSink` stamps as the bus message id."""

from __future__ import annotations

import copy
import inspect
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from ._log import package_logger
from .errors import DispatchError, InvalidArgument
from .message import ScheduledMessage

if TYPE_CHECKING:
    from .settle import DispatchResult
    from .snapshot import LeasedOccurrence

__all__ = [
    "BusMessage",
    "BusSink",
    "BusTransport",
    "CallableSink",
    "InProcessBus",
    "OccurrenceSink",
    "ScheduleSink",
    "TargetRouterSink",
    "as_sink",
    "is_async_sink",
]

_log = package_logger("hexeract_lite.sinks")


@runtime_checkable
class ScheduleSink(Protocol):
    """Delivers a due message: ``dispatch(message)``, sync or async; return ``None`` on
    success, raise on failure. A sync one runs on a watched thread, given up after
    ``dispatch_timeout``; an async one is awaited. Deduplicate on
    ``message.occurrence_id()``.

    .. versionadded:: 0.1.0"""

    def dispatch(self, message: ScheduledMessage) -> Awaitable[None] | None:
        """Deliver ``message``; raise to make the worker retry it."""
        ...


class OccurrenceSink:
    """A sink handed the whole leased occurrence (:meth:`dispatch_occurrence`, always from
    a thread), which settles it itself; a bound
    :class:`~hexeract_lite.transactional.TransactionalSink` is one."""

    is_async = False
    """Never awaited, whatever its :meth:`dispatch` is."""

    def dispatch(self, message: ScheduledMessage) -> None:
        """Not used by the worker (:meth:`dispatch_occurrence` is)."""
        raise DispatchError(f"{self!r} dispatches leased occurrences, not bare messages")

    def dispatch_occurrence(self, occurrence: LeasedOccurrence) -> DispatchResult:
        """Dispatch ``occurrence`` and record its settlement; never raises."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the sink holds (a later dispatch opens it again)."""


def is_async_sink(sink: object) -> bool:
    """True when ``sink.dispatch`` is awaited on the event loop: its boolean ``is_async``
    attribute, else whether ``dispatch`` is a coroutine function."""
    flag = getattr(sink, "is_async", None)
    if isinstance(flag, bool):
        return flag
    return is_coroutine_callable(getattr(sink, "dispatch", None))


def is_coroutine_callable(fn: object) -> bool:
    """True for a coroutine function, or an object whose ``__call__`` is one."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    return inspect.iscoroutinefunction(call)


class CallableSink:
    """A sink that calls ``fn(message)`` (a function or coroutine function); what ``fn``
    returns is the dispatch's.

    .. versionadded:: 0.1.0"""

    def __init__(self, fn: Callable[[ScheduledMessage], Awaitable[None] | None]) -> None:
        if not callable(fn):
            raise InvalidArgument(f"CallableSink needs a callable, got {fn!r}")
        self.fn = fn
        self.is_async: bool = is_coroutine_callable(fn)
        """True when ``fn`` is a coroutine function: the worker awaits it."""

    def dispatch(self, message: ScheduledMessage) -> Awaitable[None] | None:
        """Call ``fn(message)`` and return what it returns."""
        return self.fn(message)

    def __repr__(self) -> str:
        return f"CallableSink({self.fn!r})"


@runtime_checkable
class BusTransport(Protocol):
    """What :class:`BusSink` publishes through (hexeract's ``publish_raw``)."""

    def publish_raw(
        self, routing_key: str, message_id: uuid.UUID, message_type: str, payload: Any
    ) -> Awaitable[None] | None:
        """Publish one message; raise when it was not accepted."""
        ...


class BusSink:
    """Publishes bus-target messages: ``transport.publish_raw(routing_key, message_id,
    message_type, payload)``, with the target's routing key, the occurrence id (stable
    across redeliveries: what a consumer deduplicates on), the ``event_type`` and the
    decoded payload. Another target: :class:`DispatchError`. What ``publish_raw`` returns
    is returned, so an async transport is awaited.

    .. versionadded:: 0.1.0"""

    def __init__(self, transport: BusTransport) -> None:
        publish = getattr(transport, "publish_raw", None)
        if not callable(publish):
            raise InvalidArgument(
                f"BusSink needs a transport with publish_raw(), got {transport!r}"
            )
        self.transport = transport
        self.is_async: bool = is_coroutine_callable(publish)
        """True when the transport's ``publish_raw`` is a coroutine function."""

    def dispatch(self, message: ScheduledMessage) -> Awaitable[None] | None:
        """Publish ``message`` under its routing key, stamped with its occurrence id."""
        target = message.target
        if target.kind != "bus" or target.routing_key is None:
            raise DispatchError(
                f"BusSink only publishes bus targets; schedule {message.schedule_id}"
                f" targets {target.label()}"
            )
        return self.transport.publish_raw(
            target.routing_key,
            message.occurrence_id().as_uuid(),
            message.event_type,
            message.payload,
        )

    def __repr__(self) -> str:
        return f"BusSink({self.transport!r})"


# -- the in-process bus ----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class BusMessage:
    """What an :class:`InProcessBus` handler receives; ``message_id`` is the publisher's
    (through :class:`BusSink`, the occurrence id); each handler gets its own deep copy
    of ``payload``.

    .. versionadded:: 0.1.0"""

    message_id: uuid.UUID
    message_type: str
    routing_key: str
    payload: Any = attrs.field(eq=False)


BusHandler = Callable[[BusMessage], Awaitable[None] | None]
"""A subscriber: a function or coroutine function taking a :class:`BusMessage`."""


def _pattern_words(pattern: str) -> tuple[str, ...]:
    if not isinstance(pattern, str) or not pattern:
        raise InvalidArgument(f"a subscription pattern is a non-empty string, got {pattern!r}")
    words = tuple(pattern.split("."))
    for word in words:
        if word not in ("*", "#") and ("*" in word or "#" in word):
            raise InvalidArgument(
                f"invalid pattern {pattern!r}: the wildcards * and # stand for whole"
                f" dot-separated words, got the word {word!r}"
            )
    return words


def topic_matches(pattern: str, routing_key: str) -> bool:
    """True when ``routing_key`` matches the topic ``pattern``: dot-separated words, ``*``
    one word, ``#`` zero or more (``orders.*`` matches ``orders.created``, not
    ``orders`` or ``orders.eu.created``; ``orders.#`` all three)."""
    return _match(_pattern_words(pattern), tuple(routing_key.split(".")))


def _match(pattern: Sequence[str], key: Sequence[str]) -> bool:
    # reachable[j]: the pattern prefix consumed so far can match the first j key words.
    reachable = [True] + [False] * len(key)
    for word in pattern:
        if word == "#":
            nxt = list(reachable)
            for j in range(1, len(key) + 1):
                nxt[j] = nxt[j] or nxt[j - 1]
        else:
            nxt = [False] * (len(key) + 1)
            for j in range(1, len(key) + 1):
                nxt[j] = reachable[j - 1] and (word == "*" or word == key[j - 1])
        reachable = nxt
    return reachable[len(key)]


class InProcessBus:
    """A message bus inside one process: topic subscriptions, synchronous delivery.

    ``publish_raw`` calls every handler whose pattern (:func:`topic_matches`) matches, in
    subscription order. A handler that raises makes it raise once the others ran (several
    as one :class:`DispatchError`): the dispatch is retried and every handler sees the
    message again. Coroutine handlers are awaited (``publish_raw`` then returns an
    awaitable). A routing key no handler matches raises :class:`DispatchError`, unless
    ``drop_unrouted=True``: then it is counted in :attr:`dropped`. Thread-safe.

    .. versionadded:: 0.1.0"""

    def __init__(self, *, drop_unrouted: bool = False) -> None:
        self.drop_unrouted = bool(drop_unrouted)
        self.dropped = 0
        """How many messages were published with no matching subscriber and dropped."""
        self._subs: tuple[tuple[tuple[str, ...], BusHandler], ...] = ()
        self._lock = threading.Lock()

    def subscribe(self, pattern: str, handler: BusHandler) -> Callable[[], None]:
        """Deliver messages whose routing key matches ``pattern`` to ``handler``; returns a
        function that removes the subscription (idempotent)."""
        words = _pattern_words(pattern)
        if not callable(handler):
            raise InvalidArgument(f"a bus handler must be callable, got {handler!r}")
        sub = (words, handler)
        with self._lock:
            self._subs = (*self._subs, sub)

        def unsubscribe() -> None:
            with self._lock:
                self._subs = tuple(s for s in self._subs if s is not sub)

        return unsubscribe

    def publish_raw(
        self, routing_key: str, message_id: uuid.UUID, message_type: str, payload: Any
    ) -> Awaitable[None] | None:
        """Deliver to every matching handler; raise if any raised (see the class doc)."""
        key_words = tuple(routing_key.split("."))
        handlers = [h for words, h in self._subs if _match(words, key_words)]
        if not handlers:
            if self.drop_unrouted:
                with self._lock:
                    self.dropped += 1
                _log.debug("dropped unrouted message %s (routing key %r)", message_id, routing_key)
                return None
            raise DispatchError(
                f"no subscriber for routing key {routing_key!r}: message {message_id} would be"
                " lost (InProcessBus(drop_unrouted=True) drops such messages instead)"
            )
        errors: list[BaseException] = []
        pending: list[tuple[object, Awaitable[object]]] = []
        for handler in handlers:
            try:
                message = BusMessage(
                    message_id=message_id,
                    message_type=message_type,
                    routing_key=routing_key,
                    payload=copy.deepcopy(payload),  # a handler's changes stay its own
                )
                result = handler(message)
            except Exception as exc:
                errors.append(exc)
                continue
            if result is not None:
                if inspect.isawaitable(result):
                    pending.append((handler, result))
                else:
                    errors.append(_bad_return("bus handler", handler, result))
        if errors:
            for _, aw in pending:
                _discard(aw)
            raise _combine(errors)
        if pending:
            return _await_all(pending)
        return None

    def __repr__(self) -> str:
        return f"InProcessBus({len(self._subs)} subscriptions, drop_unrouted={self.drop_unrouted})"


async def _await_all(pending: list[tuple[object, Awaitable[object]]]) -> None:
    errors: list[BaseException] = []
    for i, (handler, aw) in enumerate(pending):
        try:
            result = await aw
        except Exception as exc:
            errors.append(exc)
            continue
        except BaseException:
            for _, rest in pending[i + 1 :]:
                _discard(rest)
            raise
        if result is not None:
            errors.append(_bad_return("bus handler", handler, result))
    if errors:
        raise _combine(errors)


def _combine(errors: list[BaseException]) -> BaseException:
    if len(errors) == 1:
        return errors[0]
    detail = "; ".join(f"{type(e).__name__}: {e}" for e in errors)
    err = DispatchError(f"{len(errors)} bus handlers failed: {detail}")
    err.__cause__ = errors[0]
    return err


def _bad_return(what: str, fn: object, result: object) -> DispatchError:
    """The failure of a sink or handler that returned something other than None."""
    return DispatchError(
        f"{what} {fn!r:.80} returned {result!r:.80}; it must return None (or an awaitable"
        " resolving to None) and raise to signal a failure"
    )


def _discard(value: object) -> None:
    """Close a coroutine nobody will await."""
    if inspect.iscoroutine(value):
        value.close()


# -- routing by target -----------------------------------------------------------------


def as_sink(sink: object) -> ScheduleSink | None:
    """``sink`` when it has ``dispatch()``, a callable as a :class:`CallableSink`; else None."""
    if callable(getattr(sink, "dispatch", None)):
        return sink  # type: ignore[return-value]
    return CallableSink(sink) if callable(sink) else None


def _routed(name: str, sink: object) -> ScheduleSink | None:
    if sink is None:
        return None
    found = as_sink(sink)
    if found is None:
        raise InvalidArgument(
            f"{name} must be a sink (with dispatch()) or a callable, got {sink!r}"
        )
    return found


class TargetRouterSink:
    """Sends each message to the sink of its target kind (``mediator``, ``outbox``,
    ``bus``: each a sink or a callable, optional); a kind without one:
    :class:`DispatchError`. What the sink returns is returned.

    .. versionadded:: 0.1.0"""

    is_async = False
    """Routing is synchronous; an async sink's awaitable is returned and awaited."""

    def __init__(
        self,
        *,
        mediator: ScheduleSink | Callable[[ScheduledMessage], Any] | None = None,
        outbox: ScheduleSink | Callable[[ScheduledMessage], Any] | None = None,
        bus: ScheduleSink | Callable[[ScheduledMessage], Any] | None = None,
    ) -> None:
        kinds = {"mediator": mediator, "outbox": outbox, "bus": bus}
        self.sinks = {kind: _routed(kind, sink) for kind, sink in kinds.items()}

    def dispatch(self, message: ScheduledMessage) -> Awaitable[None] | None:
        """Hand ``message`` to the sink of ``message.target.kind``."""
        sink = self.sinks.get(message.target.kind)
        if sink is None:
            raise DispatchError(
                f"no sink for target {message.target.label()} (schedule {message.schedule_id});"
                " give TargetRouterSink one"
            )
        return sink.dispatch(message)

    def __repr__(self) -> str:
        names = ", ".join(f"{k}={v!r}" for k, v in self.sinks.items() if v is not None)
        return f"TargetRouterSink({names})"
