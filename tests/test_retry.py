"""RetryPolicy and settlement_for: the retry and settlement rules, without a store."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hexeract_lite import InvalidConfiguration, LeasedOccurrence, ScheduledMessage, Target
from hexeract_lite.config import SchedulerWorkerConfig
from hexeract_lite.retry import RetryPolicy
from hexeract_lite.settle import (
    LEASE_EXPIRED,
    MAX_ERROR_CHARS,
    NOT_DISPATCHED,
    SUCCEEDED,
    DispatchOutcome,
    DispatchResult,
    error_text,
    outcome_of,
    settlement_for,
)
from hexeract_lite.settlement import Settlement, SettlementKind

S = timedelta(seconds=1)
T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
LEASE = T0 + 300 * S


class Top:
    """An rng that always draws the top of the range."""

    def uniform(self, a: float, b: float) -> float:
        return b


def leased(message: ScheduledMessage, attempts: int = 1, max_attempts: int = 3) -> LeasedOccurrence:
    return LeasedOccurrence(
        message=message, attempts=attempts, max_attempts=max_attempts, leased_until=LEASE
    )


def one_shot(at: datetime = T0) -> ScheduledMessage:
    return ScheduledMessage.delay(Target.outbox(), at, "reminder", {"n": 1})


# -- RetryPolicy ---------------------------------------------------------------------------


def test_defaults_and_from_config() -> None:
    assert RetryPolicy() == RetryPolicy(base_delay=S, max_delay=300 * S, jitter=True)
    cfg = SchedulerWorkerConfig(retry_base_delay=2 * S, retry_max_delay=9 * S, jitter=False)
    assert RetryPolicy.from_config(cfg) == RetryPolicy(
        base_delay=2 * S, max_delay=9 * S, jitter=False
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base_delay": timedelta(0)}, "base_delay must be > 0, got base_delay=0 s"),
        ({"base_delay": 1.0}, "base_delay must be a datetime.timedelta, got base_delay=1.0"),
        ({"max_delay": -S}, "max_delay must be > 0, got max_delay=-1 s"),
        ({"base_delay": 5 * S, "max_delay": 2 * S}, "max_delay must be >= base_delay (5 s)"),
        ({"jitter": 1}, "jitter must be True or False, got jitter=1"),
    ],
)
def test_bad_values_are_refused_naming_field_and_value(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidConfiguration) as info:
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_the_formula_without_jitter() -> None:
    policy = RetryPolicy(jitter=False)
    delays = [policy.next_delay(a).total_seconds() for a in (-3, 0, 1, 2, 3, 8, 9, 10_000)]
    assert delays == [1, 1, 2, 4, 8, 256, 300, 300]


def test_jitter_draws_from_zero_to_the_cap_with_the_given_rng() -> None:
    policy = RetryPolicy(max_delay=20 * S)
    assert policy.next_delay(3, Top()) == 8 * S
    assert policy.next_delay(50, Top()) == 20 * S
    drawn, expected = random.Random(7), random.Random(7)
    for attempts in range(1, 8):
        capped = min(2**attempts, 20)
        assert policy.next_delay(attempts, drawn) == timedelta(seconds=expected.uniform(0, capped))


@given(
    attempts=st.integers(min_value=-(2**70), max_value=2**70),
    base_ms=st.integers(min_value=1, max_value=10**9),
    spread=st.integers(min_value=0, max_value=10**12),
)
def test_no_jitter_is_the_capped_doubling_and_never_overflows(
    attempts: int, base_ms: int, spread: int
) -> None:
    base = timedelta(milliseconds=base_ms)
    cap = base + timedelta(milliseconds=spread)
    policy = RetryPolicy(base_delay=base, max_delay=cap, jitter=False)
    delay = policy.next_delay(attempts)
    capped_us = min(base_ms * 1000 * 2 ** min(max(attempts, 0), 200), (base_ms + spread) * 1000)
    assert delay == timedelta(microseconds=capped_us)
    assert base <= delay <= cap
    assert policy.next_delay(attempts + 1) >= delay  # never shrinks as attempts grow


@given(
    attempts=st.integers(min_value=0, max_value=200),
    seed=st.integers(min_value=0, max_value=2**32),
    cap_s=st.integers(min_value=1, max_value=10**6),
)
def test_jitter_stays_within_zero_and_the_capped_delay(
    attempts: int, seed: int, cap_s: int
) -> None:
    with_jitter = RetryPolicy(max_delay=cap_s * S)
    without = RetryPolicy(max_delay=cap_s * S, jitter=False)
    delay = with_jitter.next_delay(attempts, random.Random(seed))
    assert timedelta(0) <= delay <= without.next_delay(attempts)
    assert delay == with_jitter.next_delay(attempts, random.Random(seed))  # pure given the rng


def test_an_rng_answering_out_of_range_is_clamped() -> None:
    class Wild:
        def __init__(self, value: float) -> None:
            self.value = value

        def uniform(self, a: float, b: float) -> float:
            return self.value

    policy = RetryPolicy()
    assert policy.next_delay(2, Wild(-5.0)) == timedelta(0)
    assert policy.next_delay(2, Wild(1e9)) == 4 * S


# -- settlement_for ------------------------------------------------------------------------


def test_success_of_a_one_shot_is_delivered() -> None:
    occ = leased(one_shot())
    assert settlement_for(occ, SUCCEEDED, T0, RetryPolicy()) == Settlement.delivered(
        occ.message.schedule_id, LEASE
    )


def test_success_of_a_cron_reschedules_to_the_first_instant_after_now_and_its_own() -> None:
    msg = ScheduledMessage.cron(Target.outbox(), "*/5 * * * *", T0, "tick", None)
    occ = leased(msg)
    late = T0 + timedelta(minutes=17)  # three ticks missed: one catch-up, then 12:20
    settlement = settlement_for(occ, SUCCEEDED, late, RetryPolicy())
    assert settlement == Settlement.reschedule(
        msg.schedule_id, T0 + timedelta(minutes=20), LEASE, counted=True
    )
    on_time = settlement_for(occ, SUCCEEDED, T0, RetryPolicy())
    assert on_time is not None and on_time.next == T0 + timedelta(minutes=5)


def test_success_of_a_cron_without_a_next_instant_is_delivered() -> None:
    end = datetime(9999, 12, 31, 23, 0, tzinfo=UTC)
    msg = ScheduledMessage.cron(Target.outbox(), "0 23 31 12 *", end, "last", None)
    settlement = settlement_for(leased(msg), SUCCEEDED, end, RetryPolicy())
    assert settlement is not None and settlement.kind is SettlementKind.DELIVERED


def test_a_failure_with_budget_left_is_retried_after_the_policy_delay() -> None:
    occ = leased(one_shot(), attempts=2, max_attempts=3)
    result = DispatchResult.failed(ValueError("boom"))
    settlement = settlement_for(occ, result, T0, RetryPolicy(jitter=False))
    assert settlement == Settlement.failed(
        occ.message.schedule_id, 4 * S, "ValueError: boom", LEASE
    )


def test_an_exhausted_failure_is_dead_lettered_with_its_error() -> None:
    for attempts in (3, 4):
        occ = leased(one_shot(), attempts=attempts, max_attempts=3)
        settlement = settlement_for(occ, DispatchResult.failed("gave up"), T0, RetryPolicy())
        assert settlement == Settlement.dead_lettered(occ.message.schedule_id, "gave up", LEASE)


def test_not_dispatched_is_released_and_an_expired_lease_records_nothing() -> None:
    occ = leased(one_shot())
    assert settlement_for(occ, NOT_DISPATCHED, T0, RetryPolicy()) == Settlement.released(
        occ.message.schedule_id, LEASE
    )
    assert settlement_for(occ, LEASE_EXPIRED, T0, RetryPolicy()) is None


@given(
    attempts=st.integers(min_value=1, max_value=30),
    max_attempts=st.integers(min_value=1, max_value=30),
    result=st.sampled_from(
        [SUCCEEDED, NOT_DISPATCHED, LEASE_EXPIRED, DispatchResult.failed(OSError("disk"))]
    ),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_every_settlement_is_fenced_by_the_claim_and_matches_its_result(
    attempts: int, max_attempts: int, result: DispatchResult, seed: int
) -> None:
    occ = leased(one_shot(), attempts=attempts, max_attempts=max_attempts)
    settlement = settlement_for(occ, result, T0, RetryPolicy(), random.Random(seed))
    if result is LEASE_EXPIRED:
        assert settlement is None
        assert outcome_of(settlement) is DispatchOutcome.SKIPPED
        return
    assert settlement is not None
    assert (settlement.schedule_id, settlement.lease) == (occ.message.schedule_id, LEASE)
    expected = {
        SUCCEEDED: DispatchOutcome.DELIVERED,
        NOT_DISPATCHED: DispatchOutcome.RELEASED,
    }.get(
        result,
        DispatchOutcome.DEAD_LETTERED if attempts >= max_attempts else DispatchOutcome.RETRIED,
    )
    assert outcome_of(settlement) is expected
    assert outcome_of(settlement, applied=False) is DispatchOutcome.LEASE_LOST
    if expected is DispatchOutcome.RETRIED:
        assert settlement.retry_in is not None
        assert timedelta(0) <= settlement.retry_in <= RetryPolicy().max_delay


def test_error_text() -> None:
    assert error_text(ValueError("bad")) == "ValueError: bad"
    assert error_text(KeyboardInterrupt()) == "KeyboardInterrupt"
    assert error_text("plain") == "plain"
    long = error_text("x" * (MAX_ERROR_CHARS + 10))
    assert len(long) == MAX_ERROR_CHARS and long.endswith("…")


@pytest.mark.parametrize("attempts", ["x", "3", 2.5, None, True])
def test_next_delay_refuses_an_attempts_that_is_not_an_int(attempts: object) -> None:
    """attempts must be an int: a str, a float, None or a bool is InvalidArgument naming it,
    never coerced."""
    from hexeract_lite import InvalidArgument, RetryPolicy

    with pytest.raises(InvalidArgument, match="attempts"):
        RetryPolicy(jitter=False).next_delay(attempts)  # type: ignore[arg-type]
