"""The web console in a real browser: headless Chromium (Debian's ``chromium``) driven
by Playwright, against ``hexeract scheduler ui`` serving a SQLite file.

Read-only: every page loads, refreshes itself, shows the store's numbers, runs none of
the hostile strings stored in a schedule, and the file (with any ``-wal``/``-shm``) is
byte-identical afterwards. With ``--allow-actions``: replaying a dead letter from its
page leaves it pending. The screenshots go to a temporary directory, or to the one
``HEXERACT_SCREENSHOTS`` names (``HEXERACT_SCREENSHOTS=docs/screenshots`` refreshes the
ones the documentation shows). Without Chromium or Playwright these tests skip, except in CI
(``CI=true``), where they fail."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hexeract_lite.store.sqlite import SqliteScheduleStore
from tests.pg import in_ci
from tests.web_support import fill_history, filled_file, web_or_skip

web_or_skip()

from hexeract_lite.web.app import REFRESH_SECONDS  # noqa: E402
from hexeract_lite.web.history import FAILURES  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(
    os.environ.get("HEXERACT_SCREENSHOTS") or Path(tempfile.gettempdir()) / "hexeract-screenshots"
)


def _require_browser() -> None:
    why = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        why = "Playwright is not installed (pip install -e '.[browser]')"
    if why is None and not CHROMIUM.exists():
        why = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    if why is not None:
        if in_ci():
            pytest.fail(f"CI=true but the browser tests cannot run: {why}", pytrace=False)
        pytest.skip(why)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serving(db: Path, *flags: str) -> Iterator[str]:
    """``hexeract scheduler ui`` on ``db`` in a subprocess; its URL."""
    port = _free_port()
    argv = [sys.executable, "-m", "hexeract_lite", "scheduler", "ui", "--conn", str(db)]
    proc = subprocess.Popen(
        [*argv, "--port", str(port), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HEXERACT_UI_TOKEN": ""},
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                _, err = proc.communicate(timeout=5)
                pytest.fail(f"the console did not start: {err[-2000:]}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture
def demo(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    path, ids = filled_file(tmp_path)
    fill_history(path, datetime.now(UTC))
    return path, ids


def _watch(page: Any) -> list[str]:
    """Collect what must never happen on a page: a dialog, a script error, a console
    error (a CSP violation among them)."""
    problems: list[str] = []

    def dialog(d: Any) -> None:
        problems.append(f"dialog: {d.message}")
        d.dismiss()

    def console(m: Any) -> None:
        if m.type == "error":
            problems.append(f"console: {m.text}")

    page.on("dialog", dialog)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("console", console)
    return problems


def _tick(page: Any) -> None:
    """Move the page's clock past its refresh period (its timer fires at once, instead
    of after the real seconds) and wait for the live part to be fetched and replaced."""
    page.clock.run_for(REFRESH_SECONDS * 1000 + 100)
    page.wait_for_selector("#live[data-refreshed]", timeout=15000)


def _not_pwned(page: Any) -> None:
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("img[onerror], svg[onload], main script").count() == 0


def test_every_page_in_a_browser_reads_only(
    browser: Any, demo: tuple[Path, dict[str, Any]]
) -> None:
    path, ids = demo
    with SqliteScheduleStore.open(path, readonly=True) as store:
        stats = store.stats()
        dead = [s.schedule_id for s in store.list_dead_letter(100)]
        now = datetime.now(UTC)
        hourly = store.run_counts(now - timedelta(hours=23), now + timedelta(hours=1))
        delivered = sum(n for _, outcome, n in hourly if outcome.value == "delivered")
        failed = sum(n for _, outcome, n in hourly if outcome in FAILURES)
        dead_runs = store.runs(dead[0])
    before = _files(path.parent)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with serving(path) as url:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.clock.install()  # the page's timers, moved on by _tick
        problems = _watch(page)
        page.goto(url + "/")
        counts = {
            key: page.locator(f'[data-count="{key}"] .n').inner_text()
            for key in ("pending", "paused", "delivered", "cancelled", "dead-lettered", "total")
        }
        assert counts == {
            "pending": str(stats.pending),
            "paused": str(stats.paused),
            "delivered": str(stats.delivered),
            "cancelled": str(stats.cancelled),
            "dead-lettered": str(stats.dead_lettered),
            "total": str(stats.total),
        }
        assert page.locator('[data-count="due"] .n').inner_text() == str(stats.due)
        # the chart's totals are the run log's, per hour over the last 24 hours
        assert delivered > 0 and failed > 0
        assert page.locator('[data-total="delivered"]').inner_text() == str(delivered)
        assert page.locator('[data-total="failed"]').inner_text() == str(failed)
        assert page.locator("#hourly rect.bar.delivered").count() == 24
        _tick(page)  # it refreshed itself
        page.screenshot(path=str(SCREENSHOTS / "overview.png"), full_page=True)

        page.goto(url + "/schedules?status=pending")
        rows = page.locator("#schedules tbody tr")
        assert rows.count() == stats.pending
        assert page.get_by_text("billing.reminders.weekday").count() == 1
        page.screenshot(path=str(SCREENSHOTS / "schedules.png"), full_page=True)

        page.goto(url + "/schedules?group=billing")
        assert page.locator("#schedules tbody tr").count() == 2

        page.goto(f"{url}/schedules/{ids['cron']}")
        assert page.locator("#words").inner_text() == "every day at 08:30 (Europe/Paris wall clock)"
        assert page.locator("#firings li").count() == 10
        assert page.locator("#actions").count() == 0
        page.screenshot(path=str(SCREENSHOTS / "schedule.png"), full_page=True)

        page.goto(f"{url}/schedules/{ids['hostile']}")
        page.locator("details summary").click()
        _not_pwned(page)
        assert "⟨U+202E⟩gnp.exe" in page.locator("#payload").inner_text()
        assert "<script>window.__pwned=1</script>" in page.locator("#traceback").inner_text()
        assert "\u202e" not in page.content()
        _tick(page)  # a refresh keeps...
        assert page.locator("#traceback-details").get_attribute("open") is not None  # ...it open
        _not_pwned(page)
        page.screenshot(path=str(SCREENSHOTS / "schedule-hostile.png"), full_page=True)

        page.goto(f"{url}/schedules/{dead[0]}")
        runs = page.locator("#runs tbody tr")
        assert runs.count() == len(dead_runs) == 1
        assert runs.first.get_attribute("data-outcome") == dead_runs[0].outcome.value
        assert f"{dead_runs[0].host}:{dead_runs[0].pid}" in runs.first.inner_text()
        _not_pwned(page)
        page.screenshot(path=str(SCREENSHOTS / "schedule-runs.png"), full_page=True)

        page.goto(url + "/dead-letters")
        assert page.locator("#dead-letters tbody tr").count() == len(dead)
        _not_pwned(page)
        page.screenshot(path=str(SCREENSHOTS / "dead-letters.png"), full_page=True)

        for window in ("24h", "7d"):
            page.goto(f"{url}/timeline?window={window}")
            assert page.locator("#timeline rect.mark").count() > 0
            page.screenshot(path=str(SCREENSHOTS / f"timeline-{window}.png"), full_page=True)

        page.goto(url + "/schedules")
        _not_pwned(page)
        page.close()
        assert problems == []
    assert _files(path.parent) == before


def test_replaying_a_dead_letter_in_a_browser(
    browser: Any, demo: tuple[Path, dict[str, Any]]
) -> None:
    path, ids = demo
    sid = ids["dead"][0]
    with serving(path, "--allow-actions") as url:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        problems = _watch(page)
        page.goto(url + "/dead-letters")
        page.locator(f'tr[data-id="{sid}"] button.replay').click()
        page.wait_for_url(f"{url}/schedules/{sid}?done=replay")
        assert page.locator("#status").inner_text() == "pending"
        assert page.locator(".notice").inner_text() == "Replayed: pending, due now."
        page.screenshot(path=str(SCREENSHOTS / "schedule-actions.png"), full_page=True)
        page.close()
        assert problems == []
    with SqliteScheduleStore.open(path, readonly=True) as store:
        snapshot = store.inspect(sid)
        assert snapshot is not None and snapshot.status.value == "pending"
