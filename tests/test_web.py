"""The web console without a browser: every page through the ASGI app in process, the
numbers against the store, escaping, actions with their CSRF token, the access token,
the query plans of the statements the pages run, and the ``ui`` command's refusals."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from hexeract_lite.store.sqlite import SqliteScheduleStore
from tests.web_support import HOSTILE_NAME, call, fill, filled_file, web_or_skip

web_or_skip()

from hexeract_lite.web import create_app  # noqa: E402
from hexeract_lite.web.app import TOKEN_COOKIE  # noqa: E402


@pytest.fixture
def filled(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    return filled_file(tmp_path)


@pytest.fixture
def readonly(filled: tuple[Path, dict[str, Any]]) -> Iterator[SqliteScheduleStore]:
    with SqliteScheduleStore.open(filled[0], readonly=True) as store:
        yield store


def _pages(ids: dict[str, Any]) -> list[str]:
    return [
        "/",
        "/schedules",
        "/schedules?status=pending&group=app",
        "/schedules?name=app.*&status=pending",
        *(f"/schedules/{sid}" for key, sid in ids.items() if key != "dead"),
        f"/schedules/{ids['dead'][0]}",
        "/dead-letters",
        "/timeline",
        "/timeline?window=7d",
    ]


def _count(html: str, key: str) -> str:
    match = re.search(rf'data-count="{re.escape(key)}"><span class="n[^"]*">([^<]*)<', html)
    assert match, key
    return match.group(1)


def test_every_page_answers_and_the_overview_counts_are_the_stores(
    readonly: SqliteScheduleStore, filled: tuple[Path, dict[str, Any]]
) -> None:
    app = create_app(readonly)
    for page in _pages(filled[1]):
        response = call(app, "GET", page)
        assert response.status == 200, (page, response.text[:500])
        assert "app;dur=" in response.headers["server-timing"]
        assert "script-src 'self'" in response.headers["content-security-policy"]
    html = call(app, "GET", "/").text
    stats = readonly.stats()
    for key, value in [
        ("pending", stats.pending),
        ("paused", stats.paused),
        ("delivered", stats.delivered),
        ("cancelled", stats.cancelled),
        ("dead-lettered", stats.dead_lettered),
        ("total", stats.total),
        ("due", stats.due),
        ("in-flight", stats.in_flight),
        ("in-backoff", stats.in_backoff),
    ]:
        assert _count(html, key) == str(value), key
    # the run log's counts: the three dead letters and the hostile one, one delivery
    runs = readonly.runs(limit=100)
    assert sum(r.outcome.value == "dead_lettered" for r in runs) == 4
    assert 'data-total="failed">4<' in html
    assert 'data-total="delivered">1<' in html
    assert "dispatch attempts in the run log" in html


def test_the_pages_show_what_the_store_holds(
    readonly: SqliteScheduleStore, filled: tuple[Path, dict[str, Any]]
) -> None:
    app = create_app(readonly)
    ids = filled[1]
    page = call(app, "GET", f"/schedules/{ids['cron']}").text
    assert "every day at 08:30 (Europe/Paris wall clock)" in page
    assert page.count("<li><time") == 10
    assert "CET</small>" in page and "<small>UTC · Europe/Paris</small>" in page
    assert "No runs recorded for this schedule yet." in page, "the cron never fired"
    dead = ids["dead"][0]
    [run] = readonly.runs(dead)
    page = call(app, "GET", f"/schedules/{dead}").text
    rows = re.findall(r'<tr data-outcome="([a-z_]+)">', page)
    assert rows == ["dead_lettered"] == [run.outcome.value]
    assert f"<td>{run.attempt}</td>" in page and f"{run.host}:{run.pid}" in page
    assert "RuntimeError: &lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    delivered = call(app, "GET", f"/schedules/{ids['delivered']}").text
    assert "<small>UTC</small>" in delivered and "UTC</small>" not in delivered.replace(
        "<small>UTC</small>", ""
    ), "a UTC schedule's instants are shown once, in UTC"
    assert re.findall(r'<tr data-outcome="([a-z_]+)">', delivered) == ["delivered"]
    listing = call(app, "GET", "/schedules?status=paused").text
    assert str(ids["paused"]) in listing and str(ids["cron"]) not in listing
    dead = call(app, "GET", "/dead-letters").text
    assert all(str(sid) in dead for sid in ids["dead"])
    assert "<form" not in dead  # no action without allow_actions
    missing = call(app, "GET", f"/schedules/{uuid.uuid4()}")
    assert missing.status == 404
    assert call(app, "GET", "/schedules/nope").status == 400
    assert call(app, "GET", "/timeline?window=1y").status == 400


def test_the_timeline_reads_past_paused_schedules_that_sort_first(tmp_path: Path) -> None:
    """100 paused one-shots due in a minute sort before a pending hourly rule: its lane is
    still drawn (the page reads on past them)."""
    from datetime import UTC, datetime, timedelta

    from hexeract_lite import ScheduledMessage, SchedulerControl, Target

    with SqliteScheduleStore.open(tmp_path / "t.db") as store:
        control = SchedulerControl(store)
        soon = datetime.now(UTC) + timedelta(minutes=1)
        for i in range(100):
            msg = ScheduledMessage.delay(Target.outbox(), soon, "paused.one", {"i": i})
            store.insert(msg, 3)
            store.set_paused(msg.schedule_id, True)
        control.ensure("app.later", cron="0 * * * *", event_type="tick")
        page = call(create_app(store), "GET", "/timeline").text
    assert "nothing fires in this window" not in page
    assert "app.later" in page and "paused.one" not in page


def test_the_schedule_page_shows_a_pause_note_and_a_backfill(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from hexeract_lite import SchedulerControl

    with SqliteScheduleStore.open(tmp_path / "web.db") as store:
        control = SchedulerControl(store)
        for name in ("app.a", "app.b"):
            control.ensure(name, cron="0 * * * *", event_type="e")
        control.pause("app.a", note="<b>db</b> move")
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        control.backfill("app.b", hour - timedelta(hours=3), hour - timedelta(hours=2))
        app = create_app(store)
        paused = call(app, "GET", f"/schedules/{control.id_of('app.a')}").text
        assert '<td id="pause-note">&lt;b&gt;db&lt;/b&gt; move</td>' in paused
        backfilling = call(app, "GET", f"/schedules/{control.id_of('app.b')}").text
        assert "<th>backfilling until</th>" in backfilling and "pause-note" not in backfilling
        first = (hour - timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        assert f'<li><time datetime="{first}">' in backfilling  # the window comes first


def test_the_schedule_page_shows_the_schedule_s_policy(tmp_path: Path) -> None:
    """End, firings left, jitter (with this firing's offset) and catch-up, as inspect
    says them; a schedule without a policy shows none of those rows."""
    from datetime import UTC, datetime, timedelta

    from hexeract_lite import SchedulerControl

    with SqliteScheduleStore.open(tmp_path / "web.db") as store:
        control = SchedulerControl(store)
        end = datetime(2027, 6, 1, tzinfo=UTC)
        control.ensure(
            "app.p",
            cron="0 3 * * *",
            event_type="e",
            end_at=end,
            max_firings=30,
            jitter=timedelta(minutes=10),
            catch_up="all",
        )
        control.ensure("app.plain", cron="0 3 * * *", event_type="e")
        app = create_app(store)
        page = call(app, "GET", f"/schedules/{control.id_of('app.p')}").text
        assert '<th>end</th><td class="policy">2027-06-01T00:00:00.000Z</td>' in page
        assert '<th>firings</th><td class="policy">0 of at most 30 (30 left)</td>' in page
        assert '<th>jitter</th><td class="policy">up to 10m (this firing: +' in page
        assert '<th>catch-up</th><td class="policy">all (at most 100)</td>' in page
        plain = call(app, "GET", f"/schedules/{control.id_of('app.plain')}").text
        assert 'class="policy"' not in plain


def test_a_fragment_request_gets_only_the_live_part(readonly: SqliteScheduleStore) -> None:
    app = create_app(readonly)
    fragment = call(app, "GET", "/", headers={"X-Hexeract-Fragment": "1"}).text
    assert "<h1>Overview" in fragment
    assert "<html" not in fragment and "<nav" not in fragment


def test_hostile_strings_are_escaped_everywhere(
    readonly: SqliteScheduleStore, filled: tuple[Path, dict[str, Any]]
) -> None:
    app = create_app(readonly)
    for page in _pages(filled[1]):
        html = call(app, "GET", page).text
        assert "<script>window" not in html, page
        assert "<img src=x" not in html and "<svg onload" not in html, page
        assert "\u202e" not in html, page
        assert not re.search(r"<[^>]*\bon(error|load)=", html), page
    page = call(app, "GET", f"/schedules/{filled[1]['hostile']}").text
    assert "⟨U+202E⟩gnp.exe" in page
    assert "&lt;script&gt;window.__pwned=3&lt;/script&gt;" in page
    assert HOSTILE_NAME not in page


def test_actions_are_off_unless_allowed(
    readonly: SqliteScheduleStore, filled: tuple[Path, dict[str, Any]]
) -> None:
    app = create_app(readonly)
    sid = filled[1]["dead"][0]
    response = call(app, "POST", f"/schedules/{sid}/replay", form={"csrf": "x"})
    assert response.status == 403
    assert call(app, "GET", f"/schedules/{sid}/replay").status == 405
    with pytest.raises(Exception, match="needs a store opened for writing"):
        create_app(readonly, allow_actions=True)


def _csrf(app: Any, page: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', call(app, "GET", page).text)
    assert match
    return match.group(1)


def test_actions_go_through_the_control_with_a_csrf_token(
    filled: tuple[Path, dict[str, Any]],
) -> None:
    path, ids = filled
    with SqliteScheduleStore.open(path) as store:
        app = create_app(store, allow_actions=True)
        dead = ids["dead"][0]
        csrf = _csrf(app, "/dead-letters")
        assert call(app, "POST", f"/schedules/{dead}/replay", form={}).status == 403
        wrong = call(app, "POST", f"/schedules/{dead}/replay", form={"csrf": csrf + "x"})
        assert wrong.status == 403
        other = call(
            app,
            "POST",
            f"/schedules/{dead}/replay",
            form={"csrf": csrf},
            headers={"origin": "http://evil.example"},
        )
        assert other.status == 403
        assert store.inspect(dead).status.value == "dead-lettered"  # type: ignore[union-attr]
        done = call(app, "POST", f"/schedules/{dead}/replay", form={"csrf": csrf})
        assert done.status == 303
        assert done.headers["location"] == f"/schedules/{dead}?done=replay"
        assert store.inspect(dead).status.value == "pending"  # type: ignore[union-attr]
        again = call(app, "POST", f"/schedules/{dead}/replay", form={"csrf": csrf})
        assert again.status == 409 and "not replayable" in again.text
        sid = ids["soon"]
        for action, status in [("pause", "paused"), ("resume", "pending"), ("run-now", "pending")]:
            answer = call(app, "POST", f"/schedules/{sid}/{action}", form={"csrf": csrf})
            assert answer.status == 303
            assert store.inspect(sid).status.value == status  # type: ignore[union-attr]
        at = "2031-01-02T03:04:05Z"
        moved = call(app, "POST", f"/schedules/{sid}/reschedule", form={"csrf": csrf, "at": at})
        assert moved.status == 303
        assert store.inspect(sid).scheduled_for.year == 2031  # type: ignore[union-attr]
        bad = call(app, "POST", f"/schedules/{sid}/reschedule", form={"csrf": csrf, "at": "soon"})
        assert bad.status == 400  # a bad value, not a refused action
        naive = {"csrf": csrf, "at": "2032-01-02T03:04:05"}
        bad = call(app, "POST", f"/schedules/{sid}/reschedule", form=naive)
        assert bad.status == 400 and "has no offset" in bad.text
        assert call(app, "POST", "/schedules/nope/pause", form={"csrf": csrf}).status == 400
        assert store.inspect(sid).scheduled_for.year == 2031  # type: ignore[union-attr]
        assert call(app, "POST", f"/schedules/{sid}/cancel", form={"csrf": csrf}).status == 303
        assert store.inspect(sid).status.value == "cancelled"  # type: ignore[union-attr]
        every = call(app, "POST", "/dead-letters/replay-all", form={"csrf": csrf})
        assert every.status == 303 and every.headers["location"] == "/dead-letters?replayed=3"
        assert store.stats().dead_lettered == 0
        assert "Replayed 3 dead letters." in call(app, "GET", "/dead-letters?replayed=3").text


def test_with_a_token_every_request_must_carry_it(readonly: SqliteScheduleStore) -> None:
    app = create_app(readonly, token="s3cret-token")
    assert call(app, "GET", "/").status == 401
    assert call(app, "GET", "/?token=wrong").status == 401
    first = call(app, "GET", "/schedules?status=pending&token=s3cret-token")
    assert first.status == 303
    assert first.headers["location"] == "/schedules?status=pending"
    away = call(app, "GET", "//evil.example/?token=s3cret-token")
    assert away.status == 303 and away.headers["location"] == "/evil.example/", "not off-site"
    cookie = first.headers["set-cookie"]
    assert cookie.startswith(f"{TOKEN_COOKIE}=s3cret-token;")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    by_cookie = call(app, "GET", "/", headers={"cookie": f"{TOKEN_COOKIE}=s3cret-token"})
    assert by_cookie.status == 200
    by_header = call(app, "GET", "/", headers={"authorization": "Bearer s3cret-token"})
    assert by_header.status == 200
    assert call(app, "GET", "/static/console.css").status == 401


def test_the_app_mounts_under_a_prefix(readonly: SqliteScheduleStore) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    host = Starlette(routes=[Mount("/scheduler", app=create_app(readonly))])
    html = call(host, "GET", "/scheduler/schedules").text
    assert 'href="/scheduler/dead-letters"' in html
    assert 'src="/scheduler/static/console.js"' in html
    assert call(host, "GET", "/scheduler/static/console.js").status == 200


def test_the_pages_statements_use_indexes(filled: tuple[Path, dict[str, Any]]) -> None:
    path, ids = filled
    statements: dict[str, Any] = {}

    def hook(conn: apsw.Connection) -> None:
        def trace(cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
            statements[sql] = bindings
            return True

        conn.exec_trace = trace

    apsw.connection_hooks.append(hook)
    try:
        with SqliteScheduleStore.open(path, readonly=True) as store:
            app = create_app(store)
            statements.clear()
            for page in _pages(ids):
                assert call(app, "GET", page).status == 200
    finally:
        apsw.connection_hooks.remove(hook)
    reads = {
        sql: bindings
        for sql, bindings in statements.items()
        if "scheduled_messages" in sql and sql.lstrip().startswith("SELECT")
    }
    assert len(reads) >= 5
    check = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        for sql, bindings in reads.items():
            plan = [str(row[3]) for row in check.execute(f"EXPLAIN QUERY PLAN {sql}", bindings)]
            scans = [p for p in plan if p.startswith("SCAN scheduled_messages")]
            assert all("INDEX" in p for p in scans), (sql, plan)
    finally:
        check.close()


def test_readonly_pages_leave_the_file_byte_identical(
    filled: tuple[Path, dict[str, Any]],
) -> None:
    path, ids = filled
    before = {p.name: p.read_bytes() for p in path.parent.iterdir()}
    with SqliteScheduleStore.open(path, readonly=True) as store:
        app = create_app(store)
        for page in _pages(ids):
            assert call(app, "GET", page).status == 200
    assert {p.name: p.read_bytes() for p in path.parent.iterdir()} == before


def _ui(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "hexeract_lite", "scheduler", "ui", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_ui_refuses_a_non_loopback_host_without_a_token(tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    result = _ui("--conn", db, "--host", "0.0.0.0", env={"HEXERACT_UI_TOKEN": ""})
    assert result.returncode == 2
    assert "--host 0.0.0.0 is not a loopback address: set HEXERACT_UI_TOKEN" in result.stderr
    assert not (tmp_path / "x.db").exists()


def test_ui_on_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    result = _ui("--conn", str(tmp_path / "x.db"))
    assert result.returncode == 1
    assert "no database at" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_ui_refuses_a_port_past_65535_as_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hexeract_lite.cli import main

    SqliteScheduleStore.open(tmp_path / "x.db").close()
    assert main(["scheduler", "ui", "--conn", str(tmp_path / "x.db"), "--port", "99999"]) == 2
    out, err = capsys.readouterr()
    assert "argument --port: invalid value '99999': expected an integer >= 1 and <= 65535" in err
    assert "Serving" not in out


def test_ui_on_a_port_in_use_says_so_naming_it_before_announcing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    from hexeract_lite.cli import main

    SqliteScheduleStore.open(tmp_path / "x.db").close()
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        assert main(["scheduler", "ui", "--conn", str(tmp_path / "x.db"), "--port", port]) == 1
    out, err = capsys.readouterr()
    assert f"error: cannot listen on http://127.0.0.1:{port}/: Address already in use" in err
    assert out == "" and "Traceback" not in err


def test_importing_the_package_does_not_import_the_console() -> None:
    code = (
        "import sys, hexeract_lite, hexeract_lite.cli.parser as p; p.build_parser();"
        " print(sorted(m for m in sys.modules if m.startswith(('starlette', 'uvicorn',"
        " 'jinja2', 'hexeract_lite.web'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _memory_store() -> Any:
    from hexeract_lite.store.memory import InMemoryScheduleStore

    return InMemoryScheduleStore()


def _postgres_store() -> Any:
    from tests.pg import open_scratch_store

    return open_scratch_store()


@pytest.mark.parametrize(
    "opener",
    [
        pytest.param(_memory_store, id="memory"),
        pytest.param(_postgres_store, id="postgres", marks=pytest.mark.postgres),
    ],
)
def test_every_page_and_action_on_the_other_stores(opener: Any) -> None:
    store = opener()
    try:
        ids = fill(store)
        app = create_app(store, allow_actions=True)
        for page in _pages(ids):
            response = call(app, "GET", page)
            assert response.status == 200, (page, response.text[:500])
            assert "<script>window" not in response.text and "\u202e" not in response.text
        overview = call(app, "GET", "/").text
        assert _count(overview, "dead-lettered") == "4"
        assert 'data-total="failed">4<' in overview
        assert 'data-total="delivered">1<' in overview, "from the run log"
        dead = call(app, "GET", f"/schedules/{ids['dead'][0]}").text
        assert re.findall(r'<tr data-outcome="([a-z_]+)">', dead) == ["dead_lettered"]
        csrf = _csrf(app, "/dead-letters")
        sid = ids["dead"][0]
        assert call(app, "POST", f"/schedules/{sid}/replay", form={"csrf": csrf}).status == 303
        assert store.inspect(sid).status.value == "pending"
    finally:
        store.close()


@pytest.mark.parametrize(
    "conn",
    [
        "postgresql://alice:s3cr3t-Pa55w0rd@127.0.0.1:1/app",
        "host=127.0.0.1 port=1 user=alice password=s3cr3t-Pa55w0rd",
    ],
    ids=["url", "libpq"],
)
def test_ui_never_prints_a_password(conn: str, capsys: pytest.CaptureFixture[str]) -> None:
    from hexeract_lite.cli import main

    assert main(["scheduler", "ui", "--conn", conn]) == 1
    out, err = capsys.readouterr()
    assert err.strip() and "s3cr3t-Pa55w0rd" not in out + err
