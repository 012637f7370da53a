"""RetryPolicy: how long a failed occurrence waits before it is claimable again."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Protocol

import attrs

from ._time import seconds_text
from .config import SchedulerWorkerConfig, check_duration
from .errors import InvalidArgument, InvalidConfiguration

__all__ = ["RandomSource", "RetryPolicy"]

_US = timedelta(microseconds=1)
_MAX_EXPONENT = 128
"""``base * 2**128`` is past any cap a timedelta can hold: larger exponents change nothing."""


class RandomSource(Protocol):
    """Where jitter is drawn from: a :class:`random.Random`, or anything alike."""

    def uniform(self, a: float, b: float) -> float:
        """A number drawn from ``[a, b]``."""
        ...


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """Exponential backoff, capped, with optional full jitter; ``base_delay`` > 0,
    ``max_delay`` >= it, ``jitter`` a bool, else :class:`InvalidConfiguration`.
    :meth:`from_config` builds a worker config's policy.

    .. versionadded:: 0.2.0"""

    base_delay: timedelta = timedelta(seconds=1)
    max_delay: timedelta = timedelta(seconds=300)
    jitter: bool = True

    def __attrs_post_init__(self) -> None:
        check_duration("base_delay", self.base_delay)
        check_duration("max_delay", self.max_delay)
        if not isinstance(self.jitter, bool):
            raise InvalidConfiguration(f"jitter must be True or False, got jitter={self.jitter!r}")
        if self.max_delay < self.base_delay:
            raise InvalidConfiguration(
                f"max_delay must be >= base_delay ({seconds_text(self.base_delay)}),"
                f" got max_delay={seconds_text(self.max_delay)}"
            )

    @classmethod
    def from_config(cls, config: SchedulerWorkerConfig) -> RetryPolicy:
        """The policy of ``retry_base_delay``, ``retry_max_delay`` and ``jitter``."""
        return cls(
            base_delay=config.retry_base_delay,
            max_delay=config.retry_max_delay,
            jitter=config.jitter,
        )

    def next_delay(self, attempts: int, rng: RandomSource | None = None) -> timedelta:
        """The wait after a failure with ``attempts`` consumed: ``min(base_delay *
        2**attempts, max_delay)``, with ``jitter`` a uniform draw from ``[0, that]`` from
        ``rng`` (default: :mod:`random`). Negative ``attempts`` count as 0; not an int:
        :class:`InvalidArgument`."""
        if isinstance(attempts, bool) or not isinstance(attempts, int):
            raise InvalidArgument(f"attempts must be an integer, got attempts={attempts!r:.100}")
        base_us = self.base_delay // _US
        max_us = self.max_delay // _US
        exponent = min(max(attempts, 0), _MAX_EXPONENT)
        capped_us = min(base_us << exponent, max_us)
        if not self.jitter:
            return timedelta(microseconds=capped_us)
        source: RandomSource = rng if rng is not None else random
        capped_s = capped_us / 1e6
        drawn = source.uniform(0.0, capped_s)
        return timedelta(seconds=min(max(drawn, 0.0), capped_s))
