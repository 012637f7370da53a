"""ScheduledMessage and Target: what is delivered, where, and when."""

from __future__ import annotations

import json
import os
import reprlib
import sys
import uuid
from datetime import datetime, timedelta
from typing import Any, Literal

import attrs

from ._json import strict_loads
from ._time import check_whole_ms, to_utc_ms
from .clock import SYSTEM_CLOCK, Clock
from .errors import InvalidArgument, InvalidMessage
from .names import check_name, name_id
from .occurrence import OccurrenceId
from .policy import CatchUp, SchedulePolicy, first_firing, policy_of
from .trigger import CronExpression, Trigger

TargetKind = Literal["mediator", "outbox", "bus"]
MAX_EVENT_TYPE_LENGTH = 64
"""``event_type`` has 1 to 64 characters (the reference's ``VARCHAR(64)``)."""
MAX_PAYLOAD_BYTES = 1024 * 1024
"""The largest payload accepted: 1 MiB of UTF-8 JSON text.

.. versionadded:: 0.1.0
"""
MAX_ROUTING_KEY_LENGTH = 255


def new_schedule_id() -> uuid.UUID:
    """A fresh UUIDv7 (RFC 9562): Unix milliseconds, then 74 random bits."""
    now = SYSTEM_CLOCK.now()
    ms = int(now.timestamp() * 1000) & 0xFFFF_FFFF_FFFF
    rand = int.from_bytes(os.urandom(10), "big")
    value = (
        (ms << 80)
        | (0x7 << 76)
        | ((rand >> 62) & 0xFFF) << 64
        | (0b10 << 62)
        | (rand & 0x3FFF_FFFF_FFFF_FFFF)
    )
    return uuid.UUID(int=value)


@attrs.frozen
class Target:
    """Where a message goes: the in-process ``mediator``, the ``outbox``, or the ``bus``
    with a routing key.

    .. versionadded:: 0.1.0
    """

    kind: TargetKind
    routing_key: str | None = None

    @classmethod
    def mediator(cls) -> Target:
        """Dispatch to the application's in-process mediator."""
        return cls("mediator")

    @classmethod
    def outbox(cls) -> Target:
        """Dispatch to the application's outbox."""
        return cls("outbox")

    @classmethod
    def bus(cls, routing_key: str) -> Target:
        """Publish on a message bus under ``routing_key``."""
        if routing_key is None:
            raise InvalidMessage("a bus target needs a routing_key, got None")
        return cls("bus", routing_key)

    def __attrs_post_init__(self) -> None:
        key = self.routing_key
        if key is not None and (
            not isinstance(key, str)
            or not key
            or len(key) > MAX_ROUTING_KEY_LENGTH
            or not key.isprintable()  # a lone surrogate (not UTF-8) is not printable
        ):
            raise InvalidMessage(
                f"routing_key must be a string of 1 to {MAX_ROUTING_KEY_LENGTH} characters,"
                f" got {key!r}"
            )
        if self.kind not in ("mediator", "outbox", "bus"):
            raise InvalidMessage(
                f"target kind must be 'mediator', 'outbox' or 'bus', got {self.kind!r}"
            )
        if (self.kind == "bus") != (self.routing_key is not None):
            raise InvalidMessage(
                f"a routing_key goes with a bus target only, got kind={self.kind!r}"
                f" routing_key={self.routing_key!r}"
            )

    def label(self) -> str:
        """``mediator``, ``outbox`` or ``bus:<routing key>``."""
        return self.kind if self.routing_key is None else f"bus:{self.routing_key}"


def _show(value: object) -> str:
    """``repr(value)`` cut to 200 characters (``reprlib``'s when too deep); never raises."""
    for show in (repr, reprlib.repr):
        try:
            return f"{show(value):.200}"
        except RecursionError:
            continue
        except Exception:
            break
    return f"<{type(value).__name__} that repr() cannot show>"


def _too_deep(what: str) -> InvalidMessage:
    return InvalidMessage(
        f"{what} is nested too deeply: more levels of lists and objects than Python's"
        f" recursion limit ({sys.getrecursionlimit()}) lets JSON encode or decode"
    )


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def encode_payload(payload: Any) -> str:
    """The payload as compact JSON text; :class:`InvalidMessage` when it is not JSON."""
    try:
        text = _ENCODER.encode(payload)
    except RecursionError:
        raise _too_deep(f"payload {_show(payload)}") from None
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(
            f"payload is not JSON-serialisable: {exc} (payload {_show(payload)})"
        ) from exc
    try:
        _check_size(text)
    except UnicodeEncodeError as exc:
        raise InvalidMessage(
            f"payload is not valid Unicode text: {exc} (payload {_show(payload)})"
        ) from exc
    return text


def _check_size(text: str) -> None:
    size = len(text.encode("utf-8"))
    if size > MAX_PAYLOAD_BYTES:
        raise InvalidMessage(
            f"payload is {size} bytes of JSON; the limit is {MAX_PAYLOAD_BYTES} bytes"
        )


def _check_event_type(event_type: object) -> str:
    if not isinstance(event_type, str) or not 1 <= len(event_type) <= MAX_EVENT_TYPE_LENGTH:
        raise InvalidMessage(
            f"event_type must be a string of 1 to {MAX_EVENT_TYPE_LENGTH} characters,"
            f" got {event_type!r:.100}"
            + (f" ({len(event_type)} characters)" if isinstance(event_type, str) else "")
        )
    if not event_type.isprintable():
        raise InvalidMessage(f"event_type must be printable Unicode text, got {event_type!r:.100}")
    return event_type


def check_grace(grace: object) -> timedelta | None:
    """A misfire grace: None, or a timedelta >= 0 of whole milliseconds;
    :class:`InvalidMessage` otherwise."""
    return check_whole_ms("misfire_grace", grace, InvalidMessage)


def validate_message(message: object) -> ScheduledMessage:
    """``message``, each field checked before it is written; else :class:`InvalidMessage`."""
    if not isinstance(message, ScheduledMessage):
        raise InvalidMessage(f"expected a ScheduledMessage, got {_show(message)}")
    if message._checked:
        return message  # built by delay()/cron(), which checked all of this
    if not isinstance(message.schedule_id, uuid.UUID):
        raise InvalidMessage(f"schedule_id must be a uuid.UUID, got {message.schedule_id!r}")
    _check_message_name(message.name, message.schedule_id)
    _check_event_type(message.event_type)
    if not isinstance(message.target, Target):
        raise InvalidMessage(f"target must be a Target, got {message.target!r}")
    trigger = message.trigger
    if (
        not isinstance(trigger, Trigger)
        or trigger.kind not in ("delay", "cron", "interval")
        or (trigger.kind == "cron") != (trigger.cron_expression is not None)
        or (trigger.kind == "interval") != (trigger.interval is not None)
    ):
        raise InvalidMessage(
            "trigger must be Trigger.delay(...), Trigger.cron(...) or Trigger.every(...),"
            f" got {trigger!r}"
        )
    check_grace(message.misfire_grace)
    policy = message.policy
    if policy is not None and not isinstance(policy, SchedulePolicy):
        raise InvalidMessage(f"policy must be a SchedulePolicy or None, got {_show(policy)}")
    if policy is not None and not trigger.is_recurring:
        raise InvalidMessage(
            f"end_at, max_firings, jitter and catch_up go with a recurring schedule (cron or"
            f" every), not with a one-shot {trigger.label()} ({policy!r:.200})"
        )
    when = message.scheduled_for
    if (
        not isinstance(when, datetime)
        or when.utcoffset() != timedelta(0)
        or when.microsecond % 1000
    ):
        raise InvalidMessage(
            f"scheduled_for must be an aware UTC datetime at millisecond precision,"
            f" got {when!r} (ScheduledMessage.delay/cron and .at() normalise it)"
        )
    text = message.payload_json
    if not isinstance(text, str):
        raise InvalidMessage(f"payload_json must be JSON text, got {_show(text)}")
    try:
        _check_size(text)
    except UnicodeEncodeError as exc:
        raise InvalidMessage(f"payload_json is not JSON: {exc} (text {text!r:.200})") from exc
    try:
        decoded = strict_loads(text)
    except RecursionError:
        raise _too_deep(f"payload_json {text!r:.100}") from None
    except ValueError as exc:
        raise InvalidMessage(f"payload_json is not JSON: {exc} (text {text!r:.200})") from exc
    try:
        same = decoded == message.payload
    except RecursionError:
        raise _too_deep(f"payload {_show(message.payload)}") from None
    if not same:
        raise InvalidMessage(
            f"payload {_show(message.payload)[:100]} and payload_json {text!r:.100} disagree"
        )
    return message


def place_first(message: ScheduledMessage, now: datetime) -> ScheduledMessage:
    """``message`` as a store whose clock reads ``now`` keeps it: a cron message built
    without ``first_occurrence`` gets its rule's first instant after ``now``."""
    if not message._first_from_clock:
        return message
    rule = message.trigger.cron_expression
    assert rule is not None
    when = _first_after(rule, now)
    if when == message.scheduled_for:
        return message
    if message.policy is not None:
        first_firing(message.schedule_id, message.trigger, message.policy, when)
    placed = attrs.evolve(message, scheduled_for=when)
    object.__setattr__(placed, "_checked", True)  # the same checked fields, another instant
    return placed


def _first_after(rule: CronExpression, now: datetime) -> datetime:
    now = to_utc_ms(now, "clock.now()", InvalidMessage)
    when = rule.next_occurrence(now)
    if when is None:
        raise InvalidMessage(f"cron {rule} has no instant after {now.isoformat()}")
    return when


def _check_message_name(name: object, schedule_id: uuid.UUID | None) -> uuid.UUID:
    """The id to use: a named message's is its name's, which ``schedule_id`` must match."""
    if name is None:
        return schedule_id if schedule_id is not None else new_schedule_id()
    try:
        derived = name_id(check_name(name))
    except InvalidArgument as exc:
        raise InvalidMessage(str(exc)) from None
    if schedule_id is not None and schedule_id != derived:
        raise InvalidMessage(
            f"schedule_id {schedule_id} is not the id of name {name!r} ({derived});"
            " a named schedule's id is derived from its name"
        )
    return derived


@attrs.frozen(kw_only=True)
class ScheduledMessage:
    """A message to deliver on a trigger; build it with :meth:`delay`, :meth:`cron` or
    :meth:`every`. The payload is any JSON value, stored as JSON text.

    .. versionadded:: 0.1.0"""

    schedule_id: uuid.UUID
    """The schedule's id, a UUIDv7 minted when the message is built."""
    event_type: str
    """What the message is, 1 to 64 characters; a bus publishes it as the message type."""
    payload: Any = attrs.field(eq=False)
    """The decoded JSON payload."""
    payload_json: str
    """The payload as stored: compact JSON text."""
    target: Target
    trigger: Trigger
    scheduled_for: datetime
    """The instant of the next (or only) firing, UTC, millisecond precision."""
    name: str | None = None
    """The schedule's name (see :mod:`hexeract_lite.names`), or None; a named schedule's
    id is ``name_id(name)``."""
    misfire_grace: timedelta | None = None
    """How late a worker may find a firing and still deliver it (None: no limit). Later, a
    one-shot is dead-lettered and a recurring schedule skips to its next instant."""
    policy: SchedulePolicy | None = None
    """A recurring schedule's end, jitter and catch-up (:mod:`hexeract_lite.policy`)."""
    _checked: bool = attrs.field(default=False, init=False, eq=False, repr=False)
    # built by delay(), cron() or every(), every field checked: validate_message passes it
    _first_from_clock: bool = attrs.field(default=False, init=False, eq=False, repr=False)
    # cron() placed the first firing from its clock: the store places it again (place_first)

    @classmethod
    def delay(
        cls,
        target: Target,
        at: datetime,
        event_type: str,
        payload: Any,
        *,
        schedule_id: uuid.UUID | None = None,
        name: str | None = None,
        misfire_grace: timedelta | None = None,
    ) -> ScheduledMessage:
        """A message delivered once, at ``at`` (aware; rounded up to the millisecond).

        With ``name``, its id is :func:`~hexeract_lite.names.name_id` of it."""
        when = to_utc_ms(at, "at", InvalidMessage, round_up=True)
        trigger = Trigger("delay", at=when)
        return cls._build(
            target, trigger, when, event_type, payload, schedule_id, name, misfire_grace
        )

    @classmethod
    def cron(
        cls,
        target: Target,
        expression: str | CronExpression,
        first_occurrence: datetime | None = None,
        event_type: str | None = None,
        payload: Any = None,
        *,
        schedule_id: uuid.UUID | None = None,
        name: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
        tz: str | None = None,
        misfire_grace: timedelta | None = None,
        end_at: datetime | None = None,
        max_firings: int | None = None,
        jitter: timedelta | None = None,
        catch_up: CatchUp | None = None,
        catch_up_limit: int | None = None,
    ) -> ScheduledMessage:
        """A message delivered at ``first_occurrence`` (default: the rule's first instant
        after now on the store's clock), then at every instant of the cron ``expression``.

        ``event_type`` is required. ``tz``: the IANA zone the rule is read on (default: its
        ``CRON_TZ=`` prefix, else UTC). ``end_at`` ... ``catch_up_limit``: the
        :class:`~hexeract_lite.policy.SchedulePolicy`."""
        policy = policy_of(end_at, max_firings, jitter, catch_up, catch_up_limit)
        trigger = Trigger.cron(expression, tz=tz)
        if event_type is None:
            raise InvalidMessage("ScheduledMessage.cron needs an event_type")
        if first_occurrence is None:
            assert trigger.cron_expression is not None  # carries the zone
            when = _first_after(trigger.cron_expression, clock.now())
        else:
            when = to_utc_ms(first_occurrence, "first_occurrence", InvalidMessage, round_up=True)
        message = cls._build(
            target, trigger, when, event_type, payload, schedule_id, name, misfire_grace, policy
        )
        if first_occurrence is None:
            object.__setattr__(message, "_first_from_clock", True)
        return message

    @classmethod
    def every(
        cls,
        target: Target,
        every: timedelta | str,
        anchor: datetime,
        event_type: str,
        payload: Any,
        *,
        schedule_id: uuid.UUID | None = None,
        name: str | None = None,
        misfire_grace: timedelta | None = None,
        end_at: datetime | None = None,
        max_firings: int | None = None,
        jitter: timedelta | None = None,
        catch_up: CatchUp | None = None,
        catch_up_limit: int | None = None,
    ) -> ScheduledMessage:
        """A message delivered at ``anchor`` (aware), then every ``every`` (a timedelta of
        whole milliseconds or ``"90m"``) on a fixed grid. The other arguments: see :meth:`cron`."""
        policy = policy_of(end_at, max_firings, jitter, catch_up, catch_up_limit)
        trigger = Trigger.every(every, anchor)
        assert trigger.interval is not None
        when = trigger.interval.anchor
        return cls._build(
            target, trigger, when, event_type, payload, schedule_id, name, misfire_grace, policy
        )

    @classmethod
    def _build(
        cls,
        target: Target,
        trigger: Trigger,
        when: datetime,
        event_type: str,
        payload: Any,
        schedule_id: uuid.UUID | None,
        name: str | None = None,
        misfire_grace: timedelta | None = None,
        policy: SchedulePolicy | None = None,
    ) -> ScheduledMessage:
        check_grace(misfire_grace)
        if not isinstance(target, Target):
            raise InvalidMessage(f"target must be a Target, got {target!r}")
        if schedule_id is not None and not isinstance(schedule_id, uuid.UUID):
            raise InvalidMessage(f"schedule_id must be a uuid.UUID, got {schedule_id!r}")
        schedule_id = _check_message_name(name, schedule_id)
        text = encode_payload(payload)
        message = cls(
            schedule_id=schedule_id,
            event_type=_check_event_type(event_type),
            payload=json.loads(text),
            payload_json=text,
            target=target,
            trigger=trigger,
            scheduled_for=when,
            name=name,
            misfire_grace=misfire_grace,
            policy=policy,
        )
        if policy is not None:
            first_firing(schedule_id, trigger, policy, when)  # never one after the end
        object.__setattr__(message, "_checked", True)
        return message

    def occurrence_id(self) -> OccurrenceId:
        """The id of this firing: ``OccurrenceId.derive(schedule_id, scheduled_for)``."""
        return OccurrenceId.derive(self.schedule_id, self.scheduled_for)

    def at(self, scheduled_for: datetime) -> ScheduledMessage:
        """The same schedule, firing at ``scheduled_for`` (aware)."""
        scheduled_for = to_utc_ms(scheduled_for, "scheduled_for", InvalidMessage, round_up=True)
        trigger = self.trigger
        if trigger.kind == "delay":
            trigger = Trigger("delay", at=scheduled_for)
        return attrs.evolve(self, trigger=trigger, scheduled_for=scheduled_for)
