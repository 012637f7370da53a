"""examples/07_transactional.py and benchmarks/transactional.py, run as a user runs them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import background

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "07_transactional.py"


DRIVERS = ["apsw", "sqlite3"]
Done = subprocess.CompletedProcess[str]


def _example(driver: str) -> Callable[[Path], Done]:
    def run(folder: Path) -> Done:
        db = folder / "orders.db"
        return subprocess.run(
            background.command(
                [sys.executable, "-W", "error", str(EXAMPLE), "--db", str(db), "--driver", driver]
            ),
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            check=False,
        )

    return run


def _twice(folder: Path) -> list[Done]:
    db = folder / "orders.db"
    return [
        subprocess.run(
            background.command([sys.executable, str(EXAMPLE), "--db", str(db)]),
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            check=False,
        )
        for _ in (1, 2)
    ]


def background_runs(items: list[pytest.Item]) -> dict[str, background.Run]:
    """The example's runs, to start with the session (:mod:`tests.background`)."""
    runs: dict[str, background.Run] = {}
    for item in items:
        if item.name.startswith("test_the_transactional_example_runs_to_success["):
            driver = item.name.split("[")[1].rstrip("]")
            runs[f"tx-example:{driver}"] = _example(driver)
        elif item.name == "test_the_transactional_example_runs_twice_on_one_database":
            runs["tx-example:twice"] = _twice
    return runs


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_transactional_example_runs_to_success(tmp_path: Path, driver: str) -> None:
    result = background.result(f"tx-example:{driver}", _example(driver), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert f"the app and the store use {driver}" in out
    assert "order 'kettle' rolled back" in out
    assert "3 orders committed, 3 reminders scheduled" in out
    assert "crashed once" in out
    for item in ("book", "lamp", "chair"):
        assert f"{item}: 1 reminder(s) sent" in out
    assert "kettle:" not in out
    assert out.rstrip().endswith("OK")


def test_the_transactional_benchmark_runs() -> None:
    script = ROOT / "benchmarks" / "transactional.py"
    result = subprocess.run(
        [sys.executable, str(script), "-n", "40", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ratio transactional / plain:" in result.stdout


def test_the_transactional_example_runs_twice_on_one_database(tmp_path: Path) -> None:
    """Its docstring offers --db PATH: a second run on the same file checks the orders and
    reminders it made, not every row of the file."""
    for run, result in enumerate(background.result("tx-example:twice", _twice, tmp_path), 1):
        assert result.returncode == 0, f"run {run}: {result.stdout}{result.stderr}"
        assert "3 orders committed, 3 reminders scheduled" in result.stdout
        for item in ("book", "lamp", "chair"):
            assert f"{item}: 1 reminder(s) sent" in result.stdout
