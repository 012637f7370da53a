"""Schedule one message and claim it when it is due (in-memory store, frozen-free)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hexeract_lite import InMemoryScheduleStore, ScheduledMessage, Target


def main() -> int:
    store = InMemoryScheduleStore()
    now = datetime.now(UTC)
    msg = ScheduledMessage.delay(Target.outbox(), now, "hello", {"to": "world"})
    store.insert(msg, max_attempts=3)
    print(f"scheduled {msg.schedule_id} for {msg.scheduled_for.isoformat()}")
    [occ] = store.claim_due(now + timedelta(milliseconds=1), 10, timedelta(seconds=30))
    print(f"claimed occurrence {occ.occurrence_id()} (attempt {occ.attempts}/{occ.max_attempts})")
    assert store.mark_delivered(msg.schedule_id, occ.leased_until)
    print(f"status: {store.inspect(msg.schedule_id).status}")  # type: ignore[union-attr]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
