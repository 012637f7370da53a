"""OccurrenceId: the stable identity of one firing of a schedule."""

from __future__ import annotations

import uuid
from datetime import datetime
from functools import total_ordering

from ._time import EPOCH
from .errors import InvalidArgument

OCCURRENCE_NAMESPACE = uuid.UUID("6b9d1c2e-7a44-4f8e-9c10-2d3b4c5d6e7f")
"""The UUIDv5 namespace of occurrence ids, shared with hexeract (Rust)."""

_NAMESPACE_BYTES = OCCURRENCE_NAMESPACE.bytes


@total_ordering
class OccurrenceId:
    """The id of one firing: UUIDv5 of (schedule id, scheduled_for).

    ``derive(schedule_id, scheduled_for)`` hashes, with SHA-1 under
    :data:`OCCURRENCE_NAMESPACE`, the 33-byte name
    ``schedule_id.bytes + sign + abs(offset_ns).to_bytes(16, "big")``, where
    ``offset_ns`` is ``scheduled_for`` minus the Unix epoch in nanoseconds and
    ``sign`` is ``1`` when the offset is >= 0 (the epoch included) and ``0``
    before it. It equals hexeract's ``OccurrenceId::derive`` bit for bit: the same
    firing has the same id everywhere, the key consumers deduplicate on.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_uuid",)

    def __init__(self, value: uuid.UUID) -> None:
        if not isinstance(value, uuid.UUID):
            raise TypeError(f"OccurrenceId wraps a uuid.UUID, got {value!r}")
        self._uuid = value

    @classmethod
    def derive(cls, schedule_id: uuid.UUID, scheduled_for: datetime) -> OccurrenceId:
        """The id of the firing of ``schedule_id`` at ``scheduled_for`` (aware)."""
        if not isinstance(schedule_id, uuid.UUID):
            raise InvalidArgument(f"schedule_id must be a uuid.UUID, got {schedule_id!r}")
        if not isinstance(scheduled_for, datetime) or scheduled_for.utcoffset() is None:
            raise InvalidArgument(
                f"scheduled_for must be a timezone-aware datetime, got naive {scheduled_for!r}"
            )
        delta = scheduled_for - EPOCH
        offset = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
        sign = b"\x01" if offset >= 0 else b"\x00"
        name = schedule_id.bytes + sign + abs(offset).to_bytes(16, "big")
        from hashlib import sha1  # OpenSSL loads on first use, not on import

        digest = bytearray(sha1(_NAMESPACE_BYTES + name).digest()[:16])
        digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
        digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
        return cls(uuid.UUID(bytes=bytes(digest)))

    def as_uuid(self) -> uuid.UUID:
        """The id as a :class:`uuid.UUID`."""
        return self._uuid

    def __str__(self) -> str:
        return str(self._uuid)

    def __repr__(self) -> str:
        return f"OccurrenceId('{self._uuid}')"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, OccurrenceId):
            return self._uuid == other._uuid
        return NotImplemented

    def __lt__(self, other: object) -> bool:
        if isinstance(other, OccurrenceId):
            return self._uuid < other._uuid
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._uuid)
