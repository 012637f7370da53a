"""Listing filters with keyset pages, and bulk replay of dead letters."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

from hexeract_lite import (
    InMemoryScheduleStore,
    ScheduledMessage,
    ScheduleStatus,
    ScheduleStore,
    SqliteScheduleStore,
    Target,
)
from hexeract_lite.cli import main
from hexeract_lite.errors import InvalidArgument
from hexeract_lite.settlement import Settlement
from hexeract_lite.snapshot import MalformedSchedule, ScheduleSnapshot
from hexeract_lite.upkeep import replay_all
from hexeract_lite.worker import SchedulerWorker

from .conftest import T0, FrozenTime

S = timedelta(seconds=1)


def msg(event: str, at: timedelta = -S) -> ScheduledMessage:
    return ScheduledMessage.delay(Target.outbox(), T0 + at, event, {"e": event})


def dead_letters(store: ScheduleStore, events: list[str]) -> list[ScheduledMessage]:
    msgs = [msg(e) for e in events]
    store.insert_many(msgs, 1)
    claimed = store.claim_due(T0, len(msgs), 30 * S)
    assert all(
        store.settle(
            [
                Settlement.dead_lettered(c.message.schedule_id, "boom", c.leased_until)
                for c in claimed
            ]
        )
    )
    return msgs


def ids(listed: Sequence[object]) -> list[uuid.UUID]:
    return [s.schedule_id for s in listed if isinstance(s, ScheduleSnapshot)]


def test_list_by_status_glob_and_pages(store: ScheduleStore, frozen: FrozenTime) -> None:
    dead = dead_letters(store, ["invoice.send", "invoice.void", "mail.send"])
    pending = [msg("invoice.send", 60 * S), msg("report", 60 * S)]
    store.insert_many(pending, 3)
    paused, cancelled = msg("invoice.x", 5 * S), msg("c", 5 * S)
    store.insert_many([paused, cancelled], 3)
    store.set_paused(paused.schedule_id, True)
    store.cancel(cancelled.schedule_id)
    everything = sorted(m.schedule_id for m in [*dead, *pending, paused, cancelled])
    assert ids(store.list_schedules(limit=100)) == everything
    assert ids(store.list_schedules(status="all", limit=100)) == everything
    assert ids(store.list_schedules(status="dead-lettered")) == sorted(m.schedule_id for m in dead)
    assert ids(store.list_schedules(status=ScheduleStatus.PAUSED)) == [paused.schedule_id]
    assert ids(store.list_schedules(status="cancelled")) == [cancelled.schedule_id]
    assert ids(store.list_schedules(status="pending")) == sorted(m.schedule_id for m in pending)
    assert ids(store.list_schedules(status="delivered")) == []
    invoices = store.list_schedules(event_type="invoice.*", limit=100)
    assert sorted(s.event_type for s in invoices) == [  # type: ignore[union-attr]
        "invoice.send",
        "invoice.send",
        "invoice.void",
        "invoice.x",
    ]
    assert ids(store.list_schedules(event_type="*.s?nd", status="dead-lettered")) == sorted(
        m.schedule_id for m in dead if m.event_type.endswith(".send")
    )
    assert store.list_schedules(event_type="nothing*") == []
    assert store.list_schedules(event_type="invoice") == [], "a glob matches the whole text"
    assert store.list_schedules(event_type="invoice[") == []
    # keyset pages walk every row exactly once
    seen: list[uuid.UUID] = []
    after = None
    while page := store.list_schedules(after=after, limit=3):
        seen += ids(page)
        after = seen[-1]
    assert seen == everything


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"status": "done"}, "'done'"),
        ({"status": 3}, "3"),
        ({"event_type": ""}, "''"),
        ({"after": "not-a-uuid"}, "not-a-uuid"),
    ],
)
def test_bad_listing_arguments_name_the_value(
    store: ScheduleStore, kwargs: dict[str, object], named: str
) -> None:
    with pytest.raises(InvalidArgument, match=named):
        store.list_schedules(**kwargs)  # type: ignore[arg-type]


def test_bulk_replay_in_batches(store: ScheduleStore, frozen: FrozenTime) -> None:
    events = [f"invoice.{i}" for i in range(7)] + ["mail.1", "mail.2"]
    dead = dead_letters(store, events)
    totals: list[int] = []
    assert replay_all(store, event_type="invoice.*", batch_size=3, progress=totals.append) == 7
    assert totals == [3, 6, 7]
    for m in dead:
        snap = store.inspect(m.schedule_id)
        assert snap is not None
        expected = (
            ScheduleStatus.DEAD_LETTERED
            if m.event_type.startswith("mail")
            else (ScheduleStatus.PENDING)
        )
        assert snap.status is expected
        if expected is ScheduleStatus.PENDING:
            assert snap.attempts == 0 and snap.last_error is None and snap.scheduled_for == T0
    assert replay_all(store) == 2
    assert replay_all(store) == 0
    # fenced: an id that is no longer dead-lettered is skipped, not an error
    assert store.replay_dead_letters([dead[0].schedule_id, uuid.uuid4()]) == 0


def test_cli_list_filters_and_json_payload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], frozen: FrozenTime
) -> None:
    db = tmp_path / "l.db"
    with SqliteScheduleStore.open(db) as store:
        dead = dead_letters(store, ["invoice.send", "mail.send"])
    conn = ["--conn", str(db)]
    assert main(["scheduler", "list", *conn, "--status", "dead-lettered", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["event_type"] for r in rows} == {"invoice.send", "mail.send"}
    assert {json.dumps(r["payload"]) for r in rows} == {
        '{"e": "invoice.send"}',
        '{"e": "mail.send"}',
    }
    assert main(["scheduler", "list", *conn, "--status", "all", "--event-type", "zzz*"]) == 0
    assert capsys.readouterr().out == "no matching schedules\n"
    first = min(m.schedule_id for m in dead)
    assert main(["scheduler", "list", *conn, "--status", "all", "--after", str(first)]) == 0
    out = capsys.readouterr().out
    assert str(max(m.schedule_id for m in dead)) in out and str(first) not in out
    assert main(["scheduler", "list", *conn, "--status", "done"]) == 2
    assert "'done'" in capsys.readouterr().err
    assert main(["scheduler", "list", *conn, "--after", "nope"]) == 2
    assert "nope" in capsys.readouterr().err


def test_cli_replay_all(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], frozen: FrozenTime
) -> None:
    db = tmp_path / "r.db"
    with SqliteScheduleStore.open(db) as store:
        dead_letters(store, ["invoice.1", "invoice.2", "mail.1"])
    conn = ["--conn", str(db)]
    argv = ["scheduler", "dead-letter", "replay", "--all", *conn]
    assert main([*argv, "--event-type", "invoice.*", "--batch-size", "1"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "Replayed 2 dead-lettered schedules.\n"
    assert captured.err == "", "no progress when stderr is not a terminal"
    assert main(argv) == 0
    assert capsys.readouterr().out == "Replayed 1 dead-lettered schedule.\n"
    assert main(["scheduler", "dead-letter", "replay", *conn]) != 0
    assert "--all" in capsys.readouterr().err
    assert main(["scheduler", "dead-letter", "replay", str(uuid.uuid4()), "--all", *conn]) != 0


def test_progress_shows_on_a_terminal_only() -> None:
    import io
    import os
    import time

    from hexeract_lite.upkeep import Progress

    quiet = io.StringIO()
    progress = Progress("pruned", quiet)
    progress(10)
    progress.done()
    assert quiet.getvalue() == ""
    master, slave = os.openpty()
    with os.fdopen(slave, "w") as tty:
        progress = Progress("pruned", tty)
        progress(500)
        time.sleep(0.21)
        progress(1000)
        progress.done()
    import select

    shown = ""
    while select.select([master], [], [], 0.5)[0]:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the terminal's other end is closed: all was read
            break
        if not chunk:
            break
        shown += chunk.decode()
    os.close(master)
    assert "pruned: 500" in shown and "pruned: 1000 (" in shown and "/s)" in shown


def test_migrate_reports_progress(tmp_path: Path) -> None:
    from hexeract_lite.migrate import migrate

    source, dest = InMemoryScheduleStore(), InMemoryScheduleStore()
    source.insert_many([msg(f"e{i}") for i in range(25)], 3)
    seen: list[int] = []
    assert migrate(source, dest, batch_size=10, progress=seen.append).copied == 25
    assert seen == [10, 20, 25]


def test_list_by_name_glob(store: ScheduleStore, frozen: FrozenTime, tmp_path: Path) -> None:
    daily = ScheduledMessage.cron(Target.outbox(), "0 3 * * *", event_type="b", name="app.backup")
    weekly = ScheduledMessage.cron(Target.outbox(), "0 3 * * 1", event_type="r", name="app.report")
    other = ScheduledMessage.cron(Target.outbox(), "0 3 * * 1", event_type="r", name="ops.x")
    store.insert_many([daily, weekly, other, msg("anonymous")], 3)
    names = [s.name for s in store.list_schedules(name="app.*") if isinstance(s, ScheduleSnapshot)]
    assert sorted(n or "" for n in names) == ["app.backup", "app.report"]
    assert ids(store.list_schedules(name="*.x", event_type="r")) == [other.schedule_id]
    assert store.list_schedules(name="nothing*") == []
    with pytest.raises(InvalidArgument, match="name"):
        store.list_schedules(name="")


def test_cli_list_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], frozen: FrozenTime
) -> None:
    db = tmp_path / "n.db"
    with SqliteScheduleStore.open(db) as store:
        named = ScheduledMessage.cron(Target.outbox(), "0 3 * * *", event_type="b", name="app.b")
        store.insert_many([named, msg("anonymous")], 3)
    argv = ["scheduler", "list", "--conn", str(db), "--name", "app.*", "--format", "json"]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["schedule_id"] for r in rows] == [str(named.schedule_id)]


def test_replay_all_goes_on_past_a_page_of_malformed_dead_letters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bulk replay goes on past a page holding only malformed dead letters (left alone,
    and named): every good dead letter after it is replayed."""
    db = tmp_path / "r.db"
    with SqliteScheduleStore.open(db) as store:
        due = datetime.now(UTC) - timedelta(seconds=1)
        msgs = [ScheduledMessage.delay(Target.outbox(), due, "e", {"n": n}) for n in range(5)]
        store.insert_many(msgs, 1)
        SchedulerWorker(store, lambda _: 1 / 0).run_once()
        assert store.stats().dead_lettered == 5
        lowest = sorted(msgs, key=lambda m: m.schedule_id.bytes)
        conn = apsw.Connection(str(db))
        for msg in lowest[:2]:
            conn.execute(
                "UPDATE scheduled_messages SET target_kind = 'email' WHERE schedule_id = ?",
                (msg.schedule_id.bytes,),
            )
        conn.close()
        left: list[MalformedSchedule] = []
        assert replay_all(store, batch_size=2, on_malformed=left.append) == 3
        stats = store.stats()
        assert (stats.pending, stats.dead_lettered) == (3, 2), "the malformed ones left alone"
        assert [m.schedule_id for m in left] == [m.schedule_id for m in lowest[:2]]
        assert all("target_kind" in m.reason for m in left)
    for msg in lowest[2:]:  # dead again, and the CLI replays them all, naming the others
        conn = apsw.Connection(str(db))
        conn.execute(
            "UPDATE scheduled_messages SET dead_lettered_at = created_at WHERE schedule_id = ?",
            (msg.schedule_id.bytes,),
        )
        conn.close()
    assert main(["scheduler", "dead-letter", "replay", "--all", "--conn", str(db)]) == 0
    out, err = capsys.readouterr()
    assert out == "Replayed 3 dead-lettered schedules.\n"
    assert "Left 2 malformed dead letters alone" in err
    assert all(str(m.schedule_id) in err and "target_kind" in err for m in lowest[:2])


def test_a_status_is_listed_alike_from_its_index_or_by_walking_every_row(
    tmp_path: Path, frozen: FrozenTime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A status with few rows is read from its partial index and sorted; with many, by
    a walk in id order: the same pages either way, as the memory store lists them."""
    import hexeract_lite.store.sqlite.store as sqlite_store

    memory = InMemoryScheduleStore()
    with SqliteScheduleStore.open(tmp_path / "l.db") as store:
        dead = [msg(f"dead.{n}") for n in range(9)]
        later = [msg(f"later.{n}", 60 * S) for n in range(11)]
        paused = [msg(f"paused.{n}", 60 * S) for n in range(5)]
        for s in (store, memory):
            s.insert_many(dead, 1)
            for c in s.claim_due(T0, 10, 30 * S):
                assert s.mark_dead_lettered(c.message.schedule_id, "boom", c.leased_until)
            s.insert_many(later + paused, 3)
            for m in paused:
                s.set_paused(m.schedule_id, True)

        def pages(s: ScheduleStore, status: str) -> list[list[uuid.UUID]]:
            out, after = [], None
            while page := ids(s.list_schedules(status=status, after=after, limit=4)):
                out.append(page)
                after = page[-1]
            return out

        for status in ("pending", "paused", "dead-lettered"):
            indexed = pages(store, status)
            monkeypatch.setattr(sqlite_store, "FEW_ROWS", 1)
            walked = pages(store, status)
            monkeypatch.undo()
            assert indexed == walked == pages(memory, status), status
            assert sum(map(len, indexed)) == {"pending": 11, "paused": 5}.get(status, 9)
