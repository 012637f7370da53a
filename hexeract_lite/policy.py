"""Schedule policies (docs/concepts/schedule-policies.md): a recurring schedule's end,
jitter and catch-up, as pure functions."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any, Literal

import attrs

from ._time import check_whole_ms, rfc3339, to_utc_ms
from .errors import InvalidArgument
from .occurrence import OccurrenceId
from .trigger import Trigger

CatchUp = Literal["latest", "skip", "all"]
CATCH_UP_POLICIES: tuple[CatchUp, ...] = ("latest", "skip", "all")
DEFAULT_CATCH_UP_LIMIT = 100
"""How many missed instants ``catch_up="all"`` delivers at most, by default."""
MAX_CATCH_UP_LIMIT = 100_000
"""The largest ``catch_up_limit`` accepted."""
MAX_FIRINGS = 2**62
"""The largest ``max_firings`` accepted (it is stored in a 64-bit integer)."""

_MS = timedelta(milliseconds=1)
_ZERO = timedelta(0)


def _check_jitter(jitter: object) -> timedelta | None:
    jitter = check_whole_ms("jitter", jitter, InvalidArgument)
    if jitter is None:
        return None
    if jitter > timedelta(days=366 * 100):
        raise InvalidArgument(f"jitter must be at most 100 years, got {jitter!r}")
    return jitter or None


def _check_count(name: str, value: object, top: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
        raise InvalidArgument(f"{name} must be an integer from 1 to {top}, got {value!r:.100}")
    return value


@attrs.frozen(kw_only=True)
class SchedulePolicy:
    """A recurring schedule's end, jitter and catch-up; build it with :meth:`of`.

    .. versionadded:: 0.2.0"""

    end_at: datetime | None = None
    """No firing is due after this instant; the schedule then completes. None: no end."""
    max_firings: int | None = None
    """The schedule completes after this many deliveries; None: no limit."""
    jitter: timedelta | None = None
    """Each firing is due later than its rule's instant by an offset in ``[0, jitter)``."""
    catch_up: CatchUp = "latest"
    """Missed firings: ``"latest"`` delivers one, ``"skip"`` none, ``"all"`` each in order
    (at most ``catch_up_limit``, within the misfire grace)."""
    catch_up_limit: int = DEFAULT_CATCH_UP_LIMIT
    """Under ``catch_up="all"``: how many missed instants are delivered at most."""

    @classmethod
    def of(
        cls,
        *,
        end_at: datetime | None = None,
        max_firings: int | None = None,
        jitter: timedelta | None = None,
        catch_up: str | None = None,
        catch_up_limit: int | None = None,
    ) -> SchedulePolicy | None:
        """The policy of these arguments, checked (:class:`InvalidArgument`); None when
        they are all defaults. ``catch_up_limit`` goes with ``catch_up="all"`` only."""
        if end_at is not None:
            end_at = to_utc_ms(end_at, "end_at", InvalidArgument)
        max_firings = _check_count("max_firings", max_firings, MAX_FIRINGS)
        jitter = _check_jitter(jitter)
        if catch_up is None:
            catch_up = "latest"
        if catch_up not in CATCH_UP_POLICIES:
            raise InvalidArgument(
                f"catch_up must be 'latest', 'skip' or 'all', got {catch_up!r:.100}"
            )
        limit = _check_count("catch_up_limit", catch_up_limit, MAX_CATCH_UP_LIMIT)
        if limit is not None and catch_up != "all":
            raise InvalidArgument(
                f"catch_up_limit goes with catch_up='all', got catch_up_limit={limit}"
                f" with catch_up={catch_up!r}"
            )
        policy = cls(
            end_at=end_at,
            max_firings=max_firings,
            jitter=jitter,
            catch_up=catch_up,
            catch_up_limit=DEFAULT_CATCH_UP_LIMIT if limit is None else limit,
        )
        return None if policy == _NONE else policy


_NONE = SchedulePolicy()

POLICY_FIELDS = ("end_at", "max_firings", "jitter", "catch_up", "catch_up_limit")
"""The policy's fields, in the order :func:`policy_of` takes them."""


def policy_of(*values: Any) -> SchedulePolicy | None:
    """:meth:`SchedulePolicy.of` of the :data:`POLICY_FIELDS` values, in that order."""
    return SchedulePolicy.of(**dict(zip(POLICY_FIELDS, values, strict=True)))


def policy_arguments(policy: SchedulePolicy | None) -> dict[str, Any]:
    """The keyword arguments that build ``policy`` again; none for None."""
    if policy is None:
        return {}
    values = {name: getattr(policy, name) for name in POLICY_FIELDS}
    if policy.catch_up != "all":
        values["catch_up_limit"] = None
    return values


def jitter_offset(
    policy: SchedulePolicy | None, trigger: Trigger, schedule_id: uuid.UUID, instant: datetime
) -> timedelta:
    """How much later than the rule's ``instant`` its firing is due: the occurrence id's
    first 48 bits modulo ``min(jitter, gap to the next instant)`` milliseconds."""
    if policy is None or policy.jitter is None:
        return _ZERO
    span = policy.jitter // _MS
    nxt = trigger.next_after(instant)
    if nxt is not None:
        span = min(span, (nxt - instant) // _MS)
    if span <= 1:
        return _ZERO
    digest = OccurrenceId.derive(schedule_id, instant).as_uuid().bytes
    return timedelta(milliseconds=int.from_bytes(digest[:6], "big") % span)


@attrs.frozen
class Firing:
    """One firing of a recurring schedule, as a row holds it."""

    instant: datetime
    """The rule's instant: the occurrence id and the ``scheduled_for`` a sink sees."""
    offset: timedelta = _ZERO
    """The jitter offset: the firing is due at ``instant + offset``."""
    firings: int = 0
    """Deliveries of the schedule before this firing."""

    @property
    def due(self) -> datetime:
        """When the firing is due: the stored ``scheduled_for``."""
        return self.instant + self.offset


def _late(firing: Firing, now: datetime, grace: timedelta | None) -> bool:
    return grace is not None and now - firing.due > grace


def _ended(policy: SchedulePolicy | None, held: Firing) -> str | None:
    """Why the policy completes the schedule at ``held`` (its end or ``max_firings``)."""
    if policy is not None:
        if policy.end_at is not None and held.due > policy.end_at:
            return f"completed: due {rfc3339(held.due)}, after its end {rfc3339(policy.end_at)}"
        if policy.max_firings is not None and held.firings >= policy.max_firings:
            return f"completed: {held.firings} firings of at most {policy.max_firings}"
    return None


@attrs.frozen
class Rule:
    """What the policy rules read of a schedule, and the decisions they make."""

    schedule_id: uuid.UUID
    trigger: Trigger
    policy: SchedulePolicy | None
    grace: timedelta | None

    def firing(self, instant: datetime | None, firings: int) -> Firing | None:
        """The firing at ``instant``, jittered; None when there is none or it is after the end."""
        if instant is None:
            return None
        offset = jitter_offset(self.policy, self.trigger, self.schedule_id, instant)
        end = None if self.policy is None else self.policy.end_at
        if end is not None and instant + offset > end:
            return None
        return Firing(instant, offset, firings)

    def ahead(self, after: datetime, now: datetime, firings: int) -> Firing | None:
        """The first firing after ``after`` that is due after ``now``; None before the end."""
        jitter = _ZERO if self.policy is None else self.policy.jitter or _ZERO
        instant = self.trigger.next_after(max(after, now - jitter))
        while instant is not None:
            firing = self.firing(instant, firings)
            if firing is None or firing.due > now:
                return firing
            instant = self.trigger.next_after(instant)
        return None

    def instants(self, start: datetime) -> Iterator[Firing]:
        """Every firing from the rule's first instant at or after ``start`` to the end."""
        instant = self.trigger.next_after(start - _MS)
        while (firing := self.firing(instant, 0)) is not None:
            yield firing
            instant = self.trigger.next_after(firing.instant)

    def _catch_up_start(self, held: Firing, now: datetime) -> Firing | None:
        """Under ``catch_up="all"``: the earliest of the latest ``catch_up_limit`` firings
        from ``held`` due by ``now`` within the grace, else the first due after ``now``."""
        policy = self.policy
        assert policy is not None
        limit = policy.catch_up_limit
        low = held.instant
        if self.grace is not None:
            low = max(low, now - self.grace - (policy.jitter or _ZERO))
        # Find a window [start, now] holding at least `limit` due firings (or reaching
        # `low`), doubling it back from now, so a long outage costs about 2 x limit steps.
        back = timedelta(seconds=1)
        while True:
            start = max(low, now - back)
            window: list[Firing] = []
            for firing in self.instants(start):
                if firing.due > now:
                    break
                if not _late(firing, now, self.grace):
                    window.append(firing)
            if len(window) >= limit or start == low:
                break
            back *= 2
        if window:
            first = window[max(0, len(window) - limit)]
            return self.firing(first.instant, held.firings)
        return self.ahead(held.instant - _MS, now, held.firings)

    def missed_reason(self, held: Firing, now: datetime, *, retrying: bool = False) -> str | None:
        """Why the firing ``held``, found at ``now``, is not delivered; None: deliver it."""
        policy, grace = self.policy, self.grace
        ended = _ended(policy, held)
        if ended is not None or retrying:
            return ended
        if _late(held, now, grace):
            return (
                f"missed: due {rfc3339(held.due)}, found {rfc3339(now)}, {now - held.due} late,"
                f" beyond its misfire grace of {grace}; not delivered"
            )
        catch_up = "latest" if policy is None else policy.catch_up
        if catch_up == "skip":
            nxt = self.firing(self.trigger.next_after(held.instant), held.firings)
            if nxt is not None and nxt.due <= now:
                return (
                    f"skipped: due {rfc3339(held.due)}, found {rfc3339(now)} after the next"
                    f" firing {rfc3339(nxt.due)} came due (catch_up='skip'); not delivered"
                )
        elif catch_up == "all":
            start = self._catch_up_start(held, now)
            if start is None or start.instant > held.instant:
                return (
                    f"skipped: due {rfc3339(held.due)}, found {rfc3339(now)}, older than the"
                    f" {policy.catch_up_limit if policy else 0} latest missed firings it"
                    " catches up (catch_up='all'); not delivered"
                )
        return None

    def after_firing(self, held: Firing, now: datetime) -> Firing | None:
        """The firing after ``held`` was delivered at ``now``; None: the schedule completes."""
        policy = self.policy
        if not self.trigger.is_recurring:
            return None
        fired = held.firings + 1
        if policy is not None and policy.max_firings is not None and fired >= policy.max_firings:
            return None
        if policy is not None and policy.catch_up == "all":
            nxt = self.firing(self.trigger.next_after(held.instant), fired)
            if nxt is None or nxt.due > now:
                return nxt
            start = self._catch_up_start(nxt, now)
            return None if start is None else attrs.evolve(start, firings=fired)
        return self.ahead(held.instant, now, fired)

    def after_miss(self, held: Firing, now: datetime) -> Firing | None:
        """The firing after ``held`` was found at ``now`` and not delivered; None: none."""
        if not self.trigger.is_recurring or _ended(self.policy, held) is not None:
            return None
        if self.policy is not None and self.policy.catch_up == "all":
            return self._catch_up_start(held, now)
        return self.ahead(held.instant, now, held.firings)


def first_firing(
    schedule_id: uuid.UUID, trigger: Trigger, policy: SchedulePolicy | None, instant: datetime
) -> Firing:
    """A new schedule's first firing, jittered; :class:`InvalidArgument` when it would be
    due after the policy's end."""
    offset = jitter_offset(policy, trigger, schedule_id, instant)
    end = None if policy is None else policy.end_at
    if end is not None and instant + offset > end:
        raise InvalidArgument(
            f"end_at {rfc3339(end)} is before the first firing {rfc3339(instant + offset)}:"
            " the schedule would never fire"
        )
    return Firing(instant, offset)
