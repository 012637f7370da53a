"""Shared by the console's tests: a store filled with every kind of schedule (hostile
strings among them), and an in-process ASGI client that needs no server."""

from __future__ import annotations

import asyncio
import urllib.parse
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hexeract_lite import ScheduledMessage, SchedulerControl, SchedulerWorker, Target
from hexeract_lite.store.base import ScheduleStore
from hexeract_lite.store.sqlite import SqliteScheduleStore

HOSTILE = '<script>window.__pwned=1</script>"><img src=x onerror="window.__pwned=2">\u202egnp.exe'
"""A payload and an error no page may run or show unescaped (a bidi override in it)."""
HOSTILE_NAME = 'evil.<script>window.__pwned=3</script>"><img src=x onerror=window.__pwned=4>'
"""A name no page may run or show unescaped (names and event types are printable)."""
HOSTILE_EVENT = '"><svg onload=window.__pwned=5><b>bold</b>'


def web_or_skip() -> None:
    """Skip the calling module unless the web extra is installed (fail it in CI)."""
    from tests.pg import in_ci

    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
    except ImportError:
        if in_ci():
            pytest.fail("CI=true but the web extra is not installed", pytrace=False)
        pytest.skip("the web extra is not installed (pip install -e '.[web]')")


def fill(store: ScheduleStore, now: datetime | None = None) -> dict[str, Any]:
    """Schedules of every status, kind and zone, hostile strings among them; the ids
    by role."""
    now = now or datetime.now(UTC)
    control = SchedulerControl(store)
    ids: dict[str, Any] = {}
    ids["cron"] = control.schedule(
        ScheduledMessage.cron(
            Target.mediator(),
            "30 8 * * *",
            None,
            "reminder.morning",
            {"who": "me"},
            name="app.reminders.morning",
            tz="Europe/Paris",
        )
    )
    ids["every"] = control.schedule(
        ScheduledMessage.every(
            Target.mediator(), "15m", now, "report.tick", {"n": 1}, name="app.tick"
        )
    )
    ids["soon"] = control.schedule(
        ScheduledMessage.delay(Target.outbox(), now + timedelta(hours=2), "invoice.send", {"id": 7})
    )
    paused = control.schedule(
        ScheduledMessage.delay(Target.mediator(), now + timedelta(hours=5), "paused.one", None)
    )
    control.pause(paused)
    ids["paused"] = paused
    hostile = control.schedule(
        ScheduledMessage.delay(
            Target.mediator(),
            now - timedelta(seconds=1),
            HOSTILE_EVENT,
            {"html": HOSTILE},
            name=HOSTILE_NAME,
        ),
        max_attempts=1,
    )
    ids["hostile"] = hostile
    dead = []
    for i in range(3):
        dead.append(
            control.schedule(
                ScheduledMessage.delay(
                    Target.outbox(), now - timedelta(seconds=1), f"mail.send.{i}", {"i": i}
                ),
                max_attempts=1,
            )
        )
    ids["dead"] = dead
    done = control.schedule(
        ScheduledMessage.delay(Target.mediator(), now - timedelta(seconds=1), "done.one", None)
    )

    def sink(message: ScheduledMessage) -> None:  # every one fails but done.one
        if message.schedule_id != done:
            raise RuntimeError(HOSTILE)

    # the worker settles them, so the run log has their runs
    report = SchedulerWorker(store, sink, clock=MovableClock(now)).run_once()
    assert (report.dead_lettered, report.delivered) == (4, 1)
    ids["delivered"] = done
    gone = control.schedule(
        ScheduledMessage.delay(Target.mediator(), now + timedelta(days=1), "gone.one", None)
    )
    control.cancel(gone)
    ids["cancelled"] = gone
    return ids


def filled_file(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A SQLite file holding :func:`fill`'s schedules, closed."""
    path = tmp_path / "console.db"
    with SqliteScheduleStore.open(path) as store:
        ids = fill(store)
    return path, ids


class Response:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def text(self) -> str:
        return self.body.decode()


def call(
    app: Any,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    form: dict[str, str] | None = None,
) -> Response:
    """One request through the ASGI ``app``, in process."""
    raw_path, _, query = path.partition("?")
    body = urllib.parse.urlencode(form).encode() if form is not None else b""
    hdrs = {"host": "127.0.0.1:8765", **(headers or {})}
    if form is not None:
        hdrs["content-type"] = "application/x-www-form-urlencoded"
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": urllib.parse.unquote(raw_path),
        "raw_path": raw_path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in hdrs.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8765),
    }
    sent: list[dict[str, Any]] = []
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    headers_out = {k.decode().lower(): v.decode() for k, v in start.get("headers", [])}
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return Response(start["status"], headers_out, payload)


class MovableClock:
    """A clock a test sets: ``now`` is whatever ``at`` holds."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at


def _failing(ids: set[Any]) -> Any:
    def sink(message: ScheduledMessage) -> None:
        if message.schedule_id in ids:
            raise TimeoutError("the mail relay did not answer in 30s")

    return sink


def fill_history(path: Path, now: datetime) -> None:
    """Add a day of history to the file: one-shot schedules delivered (and a few
    dead-lettered) by a worker in each of the last 24 hours, so the run log has their
    runs, and some cron and interval schedules for the timeline."""
    clock = MovableClock(now)
    with SqliteScheduleStore.open(path, clock=clock) as store:
        control = SchedulerControl(store)
        for hours_ago in range(23, -1, -1):
            clock.at = now - timedelta(hours=hours_ago, minutes=7)
            deliveries = 3 + (hours_ago * 7) % 11
            failures = 1 if hours_ago % 5 == 2 else 0
            ids = [
                control.schedule(
                    ScheduledMessage.delay(
                        Target.outbox(), clock.at, f"order.shipped.{i % 3}", {"order": i}
                    ),
                    max_attempts=1,
                )
                for i in range(deliveries + failures)
            ]
            failing = set(ids[:failures])
            SchedulerWorker(store, _failing(failing), clock=clock).run_once()
        clock.at = now
        for name, cron, zone in [
            ("billing.invoices.nightly", "0 2 * * *", "UTC"),
            ("billing.reminders.weekday", "30 8 * * 1-5", "Europe/Paris"),
            ("ops.backup.hourly", "15 * * * *", "UTC"),
            ("ops.report.tokyo", "0 9 * * *", "Asia/Tokyo"),
        ]:
            control.ensure(name, event_type=name.rsplit(".", 1)[0], cron=cron, tz=zone)
        control.ensure("ops.heartbeat", event_type="ops.heartbeat", every="2h")
