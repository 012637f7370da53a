"""SchedulerWorkerConfig: how a worker polls, claims, times out and retries."""

from __future__ import annotations

from datetime import timedelta

import attrs

from ._time import MIN_LEASE, lease_too_short, seconds_text
from .errors import InvalidConfiguration

_ZERO = timedelta(0)

DEFAULT_MAX_SNOOZES = 100
"""How often one occurrence may snooze by default (``max_snoozes``)."""

LONGEST_SETTING = timedelta(days=36500)
"""The longest duration a worker setting takes (about 100 years)."""


def check_duration(
    name: str,
    value: object,
    *,
    allow_zero: bool = False,
    longest: timedelta | None = LONGEST_SETTING,
) -> timedelta:
    """``value`` if a timedelta > 0 (>= 0 with ``allow_zero``) of at most ``longest``;
    else :class:`InvalidConfiguration` naming ``name``."""
    if not isinstance(value, timedelta):
        raise InvalidConfiguration(f"{name} must be a datetime.timedelta, got {name}={value!r}")
    if value < _ZERO or (value == _ZERO and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidConfiguration(f"{name} must be {bound}, got {name}={seconds_text(value)}")
    if longest is not None and value > longest:
        raise InvalidConfiguration(
            f"{name} must be at most {longest.days} days (about 100 years),"
            f" got {name}={_days(value)}"
        )
    return value


def _days(value: timedelta) -> str:
    return str(value) if value % timedelta(days=1) else f"{value.days} days"


def _check_count(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidConfiguration(f"{name} must be an integer >= {low}, got {name}={value!r}")
    return value


@attrs.frozen(kw_only=True)
class SchedulerWorkerConfig:
    """How a :class:`~hexeract_lite.SchedulerWorker` polls, claims, times out and retries:
    each field, its default and its rule are in the configuration reference
    (docs/reference/configuration.md). Checked at construction (:class:`InvalidConfiguration`
    naming the field and the value); no duration may exceed :data:`LONGEST_SETTING`.

    .. versionadded:: 0.1.0
    """

    poll_interval: timedelta = timedelta(milliseconds=100)
    batch_size: int = 10
    lease: timedelta = timedelta(seconds=300)
    retry_base_delay: timedelta = timedelta(seconds=1)
    retry_max_delay: timedelta = timedelta(seconds=300)
    jitter: bool = True
    min_cycle_delay: timedelta = timedelta(milliseconds=2)
    dispatch_timeout: timedelta = timedelta(seconds=30)
    heartbeat: timedelta | None = None
    """The period on which the worker extends the leases of its batch in flight, or None."""
    max_snoozes: int = DEFAULT_MAX_SNOOZES
    """How often one occurrence may snooze; the next snooze dead-letters its schedule."""

    def __attrs_post_init__(self) -> None:
        check_duration("poll_interval", self.poll_interval)
        batch = _check_count("batch_size", self.batch_size, 1)
        check_duration("lease", self.lease)
        if self.lease < MIN_LEASE:  # what claim_due refuses
            raise lease_too_short(f"lease={seconds_text(self.lease)}")
        check_duration("retry_base_delay", self.retry_base_delay)
        check_duration("retry_max_delay", self.retry_max_delay)
        if not isinstance(self.jitter, bool):
            raise InvalidConfiguration(f"jitter must be True or False, got jitter={self.jitter!r}")
        check_duration("min_cycle_delay", self.min_cycle_delay, allow_zero=True)
        # at most the lease (checked below), which is at most LONGEST_SETTING
        check_duration("dispatch_timeout", self.dispatch_timeout, longest=None)
        if self.retry_max_delay < self.retry_base_delay:
            raise InvalidConfiguration(
                "retry_max_delay must be >= retry_base_delay"
                f" ({seconds_text(self.retry_base_delay)}),"
                f" got retry_max_delay={seconds_text(self.retry_max_delay)}"
            )
        _check_count("max_snoozes", self.max_snoozes, 0)
        if self.heartbeat is not None:
            check_duration("heartbeat", self.heartbeat, longest=None)
            if self.heartbeat >= self.lease:
                raise InvalidConfiguration(
                    f"heartbeat must be shorter than the lease ({seconds_text(self.lease)})"
                    f" it renews, got heartbeat={seconds_text(self.heartbeat)}"
                )
            check_duration("dispatch_timeout", self.dispatch_timeout)
            return  # the heartbeat keeps the batch's leases alive
        try:
            needed: timedelta | None = self.dispatch_timeout * batch
        except OverflowError:  # past timedelta.max: no lease can cover it
            needed = None
        if needed is None or self.lease < needed:
            product = "more than timedelta.max" if needed is None else seconds_text(needed)
            raise InvalidConfiguration(
                f"lease must be >= batch_size * dispatch_timeout ({batch} *"
                f" {seconds_text(self.dispatch_timeout)} = {product}), so"
                " that a whole batch can be dispatched within one lease;"
                f" got lease={seconds_text(self.lease)}"
            )
