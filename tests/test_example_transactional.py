"""examples/07_transactional.py and benchmarks/transactional.py, run as a user runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "07_transactional.py"


@pytest.mark.parametrize("driver", ["apsw", "sqlite3"])
def test_the_transactional_example_runs_to_success(tmp_path: Path, driver: str) -> None:
    db = tmp_path / "orders.db"
    result = subprocess.run(
        [sys.executable, "-W", "error", str(EXAMPLE), "--db", str(db), "--driver", driver],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
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
    root = Path(__file__).resolve().parent.parent
    db = tmp_path / "orders.db"
    for run in (1, 2):
        result = subprocess.run(
            [sys.executable, str(root / "examples" / "07_transactional.py"), "--db", str(db)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=root,
            check=False,
        )
        assert result.returncode == 0, f"run {run}: {result.stdout}{result.stderr}"
        assert "3 orders committed, 3 reminders scheduled" in result.stdout
        for item in ("book", "lamp", "chair"):
            assert f"{item}: 1 reminder(s) sent" in result.stdout
