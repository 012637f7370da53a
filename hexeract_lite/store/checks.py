"""The argument checks every store shares: each raises the contract's error naming the
argument and the value, before anything is written."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from .._time import MIN_LEASE, lease_too_short, to_utc_ms
from ..errors import DuplicateSchedule, InvalidArgument, InvalidConfiguration, InvalidMessage
from ..message import (
    ScheduledMessage,
    Target,
    _check_event_type,
    check_grace,
    encode_payload,
    place_first,
    validate_message,
)
from ..settlement import Settlement, SettlementKind
from ..trigger import CronExpression
from .changes import Change
from .columns import ColumnKind, columns_of_kind
from .record import ScheduleRecord

MAX_INT32 = 2**31 - 1
"""The largest attempt budget and batch size: the reference's INTEGER columns hold int32."""


def _check_count(name: str, value: object) -> int:
    """``value`` if it is an int from 1 to :data:`MAX_INT32`; else :class:`InvalidConfiguration`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_INT32:
        raise InvalidConfiguration(
            f"{name} must be an integer from 1 to {MAX_INT32}, got {value!r}"
        )
    return value


def no_transactions(store: object, connection: object) -> InvalidArgument:
    """The refusal of a store that cannot write inside an application's transaction."""
    return InvalidArgument(
        f"{type(store).__name__} cannot write inside an application's transaction"
        f" (connection= is for the SQLite, PostgreSQL and MySQL stores), got {connection!r:.100}"
    )


def bad_connection(what: str, problem: str) -> InvalidArgument:
    """The refusal of an application's connection that ``problem`` describes."""
    return InvalidArgument(f"{what}: the connection {problem}; nothing was written")


def duplicate(message: ScheduledMessage) -> DuplicateSchedule:
    """The refusal of ``message``, whose id is stored already: naming its name, if any."""
    return DuplicateSchedule(message.schedule_id, message.name)


def first_duplicate(
    messages: Sequence[ScheduledMessage], stored: Callable[[uuid.UUID], object]
) -> DuplicateSchedule | None:
    """The refusal of the first message whose id is repeated in ``messages`` or already
    ``stored``; None: none."""
    seen: set[uuid.UUID] = set()
    for message in messages:
        sid = message.schedule_id
        if sid in seen or stored(sid):
            return duplicate(message)
        seen.add(sid)
    return None


def check_flag(name: str, value: object) -> bool:
    """``value`` if it is True or False (a truthy string is refused)."""
    if value is not True and value is not False:
        raise InvalidConfiguration(f"{name} must be True or False, got {value!r}")
    return value


def check_max_attempts(max_attempts: object) -> int:
    """``max_attempts`` must be an int from 1 to 2**31 - 1."""
    return _check_count("max_attempts", max_attempts)


def check_int32_counts(record: ScheduleRecord, engine: str) -> None:
    """Refuse ``attempts`` or ``max_attempts`` above 2**31 - 1 (``engine`` cannot hold it)."""
    for name in ("attempts", "max_attempts"):
        if getattr(record, name) > MAX_INT32:
            raise InvalidConfiguration(
                f"record {record.schedule_id}: {name} must be at most {MAX_INT32} on"
                f" {engine}, got {getattr(record, name)}"
            )


def check_claim(now: datetime, batch_size: object, lease: object) -> datetime:
    """Validate ``claim_due``'s arguments; return ``now`` normalised."""
    _check_count("batch_size", batch_size)
    if not isinstance(lease, timedelta) or lease < MIN_LEASE:
        raise lease_too_short(repr(lease))
    now = to_utc_ms(now, "now", InvalidConfiguration)
    try:
        now + lease
    except OverflowError:
        raise InvalidConfiguration(
            f"lease {lease!r} from now={now.isoformat()} is past the year 9999"
        ) from None
    return now


_LONGEST = datetime.max.replace(tzinfo=UTC) - datetime.min.replace(tzinfo=UTC)
"""The span of every instant a store can hold: a longer delay is past the year 9999
from any now."""


def check_retry_in(retry_in: object) -> timedelta:
    """``retry_in``: a timedelta >= 0 within the span of storable instants."""
    if not isinstance(retry_in, timedelta) or retry_in < timedelta(0):
        raise InvalidConfiguration(f"retry_in must be a timedelta >= 0, got {retry_in!r}")
    if retry_in > _LONGEST:
        raise InvalidConfiguration(f"retry_in {retry_in!r} puts the retry past the year 9999")
    return retry_in


def retry_deadline(now: datetime, retry_in: timedelta) -> datetime:
    """``now + retry_in`` in ms; past the year 9999: :class:`InvalidConfiguration`."""
    try:
        return to_utc_ms(now + retry_in, "retry deadline")
    except OverflowError:
        raise InvalidConfiguration(
            f"retry_in {retry_in!r} from now={now.isoformat()} is past the year 9999"
        ) from None


def check_limit(limit: object, name: str = "limit") -> int:
    """A listing limit (or another count, ``name``) must be an int >= 1."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidConfiguration(f"{name} must be an integer >= 1, got {limit!r}")
    return limit


def check_messages(messages: Iterable[ScheduledMessage], now: datetime) -> list[ScheduledMessage]:
    """The messages as a list, each validated and placed on ``now``."""
    if isinstance(messages, (str, bytes, ScheduledMessage)):
        raise InvalidMessage(f"expected a sequence of ScheduledMessage, got {messages!r:.200}")
    return [place_first(validate_message(message), now) for message in messages]


def check_export(after: object, limit: object) -> uuid.UUID | None:
    """Validate ``export_records``' arguments; return ``after``."""
    if after is not None and not isinstance(after, uuid.UUID):
        raise InvalidArgument(f"after must be a uuid.UUID or None, got {after!r}")
    check_limit(limit)
    return after


def _int_below(bound: float, optional: bool = True) -> Callable[[object], bool]:
    return lambda v: (
        (optional and v is None)
        or (isinstance(v, int) and not isinstance(v, bool) and 0 <= v < bound)
    )


_TEXTS = (ColumnKind.TEXT, ColumnKind.JSON)
_RECORD_FIELDS: tuple[tuple[tuple[str, ...], Callable[[object], bool]], ...] = (
    (columns_of_kind(*_TEXTS, required=True), lambda v: isinstance(v, str)),
    (columns_of_kind(*_TEXTS, required=False), lambda v: v is None or isinstance(v, str)),
    (columns_of_kind(ColumnKind.INT, required=True), _int_below(math.inf, optional=False)),
    (columns_of_kind(ColumnKind.INT, required=False), _int_below(2**31)),
    (columns_of_kind(ColumnKind.BIGINT, required=False), _int_below(2**63)),
    (columns_of_kind(ColumnKind.BOOL), lambda v: isinstance(v, bool)),
)
"""Each column's check of an imported value, in the order they are checked."""
_RECORD_INSTANTS = columns_of_kind(ColumnKind.INSTANT, required=True)
_RECORD_OPTIONAL_INSTANTS = columns_of_kind(ColumnKind.INSTANT, required=False)


def _utc_ms(
    value: object, name: str, error: type[Exception], record: uuid.UUID | None = None
) -> datetime:
    """``value`` itself when already an instant in UTC ms (the common case), else
    normalised; an error names ``name`` (of ``record``, when given)."""
    if isinstance(value, datetime) and value.tzinfo is UTC and not value.microsecond % 1000:
        return value
    return to_utc_ms(value, name if record is None else f"record {record}: {name}", error)


def check_records(records: Sequence[ScheduleRecord]) -> list[ScheduleRecord]:
    """``import_records``' records, each field of its column's type, instants
    normalised to UTC ms (a copy when needed); else :class:`InvalidConfiguration`.
    """
    checked: list[ScheduleRecord] = []
    for record in records:
        if not isinstance(record, ScheduleRecord) or not isinstance(record.schedule_id, uuid.UUID):
            raise InvalidConfiguration(f"expected ScheduleRecord, got {record!r:.200}")
        sid = record.schedule_id
        for names, valid in _RECORD_FIELDS:
            for name in names:
                value = getattr(record, name)
                if not valid(value):
                    raise InvalidConfiguration(f"record {sid}: invalid {name} {value!r:.200}")
        changes: dict[str, Any] = {}
        for name in (*_RECORD_INSTANTS, *_RECORD_OPTIONAL_INSTANTS):
            value = getattr(record, name)
            if value is None and name in _RECORD_OPTIONAL_INSTANTS:
                continue
            instant = _utc_ms(value, name, InvalidConfiguration, sid)
            if instant is not value:
                changes[name] = instant
        checked.append(attrs.evolve(record, **changes) if changes else record)
    return checked


def check_change(change: object) -> Change:
    """An ``update``'s :class:`Change`, checked, its payload as compact JSON."""
    if not isinstance(change, Change):
        raise InvalidArgument(f"expected a Change, got {change!r:.200}")
    if change.event_type is not None:
        _check_event_type(change.event_type)
    if change.target is not None and not isinstance(change.target, Target):
        raise InvalidArgument(f"target must be a Target, got {change.target!r:.200}")
    if change.max_attempts is not None:
        check_max_attempts(change.max_attempts)
    if change.cron is not None and not isinstance(change.cron, CronExpression):
        raise InvalidArgument(f"cron must be a CronExpression, got {change.cron!r:.200}")
    if change.set_misfire_grace:
        check_grace(change.misfire_grace)
    if change.payload_json is not None:
        try:
            text = encode_payload(json.loads(change.payload_json))
        except ValueError as exc:
            raise InvalidMessage(f"payload_json is not JSON: {exc}") from exc
        if text != change.payload_json:
            change = attrs.evolve(change, payload_json=text)
    return change


def check_prefix(prefix: object) -> str:
    """A name prefix (of a group) must be a str."""
    if not isinstance(prefix, str):
        raise InvalidArgument(f"prefix must be a str, got {prefix!r:.100}")
    return prefix


def check_schedule_id(schedule_id: object) -> uuid.UUID:
    """A schedule id argument must be a :class:`uuid.UUID`."""
    if not isinstance(schedule_id, uuid.UUID):
        raise InvalidArgument(f"schedule_id must be a uuid.UUID, got {schedule_id!r}")
    return schedule_id


def check_settlements(outcomes: Sequence[Settlement]) -> list[Settlement]:
    """``settle``'s items, checked with the single methods' rules and normalised
    (``kind``, ``next`` in UTC ms, ``error`` a str).
    """
    if isinstance(outcomes, Settlement) or not isinstance(outcomes, Sequence):
        raise InvalidArgument(f"settle takes a sequence of Settlement, got {outcomes!r:.200}")
    checked: list[Settlement] = []
    for item in outcomes:
        if not isinstance(item, Settlement):
            raise InvalidArgument(f"expected Settlement, got {item!r:.200}")
        check_schedule_id(item.schedule_id)
        kind = item.kind
        if kind.__class__ is not SettlementKind:
            try:
                kind = SettlementKind(kind)
            except ValueError:
                raise InvalidArgument(f"unknown settlement kind {kind!r:.100}") from None
        changes: dict[str, Any] = {}
        if kind is SettlementKind.RESCHEDULE:
            nxt = _utc_ms(item.next, "next", InvalidArgument)
            if nxt is not item.next:
                changes["next"] = nxt
        else:
            if kind is SettlementKind.FAILED or kind is SettlementKind.SNOOZED:
                check_retry_in(item.retry_in)
            if kind in _NEEDS_ERROR and item.error.__class__ is not str:
                if item.error is None:
                    raise InvalidArgument(
                        f"a {kind.value} settlement needs an error text, got error=None"
                    )
                changes["error"] = str(item.error)
        if kind is not item.kind:
            changes["kind"] = kind
        checked.append(attrs.evolve(item, **changes) if changes else item)
    return checked


_NEEDS_ERROR = frozenset({SettlementKind.FAILED, SettlementKind.DEAD_LETTERED})


def check_extension(lease: object, until: object) -> datetime:
    """``extend_lease``'s ``until`` in UTC ms: aware and later than ``lease``."""
    if not isinstance(until, datetime) or until.utcoffset() is None:
        raise InvalidArgument(f"until must be an aware datetime, got until={until!r:.100}")
    extended = to_utc_ms(until, "until")
    if isinstance(lease, datetime) and lease.utcoffset() is not None and extended <= lease:
        raise InvalidArgument(
            f"until must be later than the lease it extends ({lease.isoformat()}),"
            f" got until={extended.isoformat()}"
        )
    return extended
