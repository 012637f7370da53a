"""Review round 3b: defects found by exercising the README from outside."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from hexeract_lite.errors import InvalidArgument
from hexeract_lite.store.memory import InMemoryScheduleStore


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hexeract_lite", "scheduler", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_prune_older_than_before_year_one_is_a_usage_error_naming_the_value(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "s.db")
    assert _cli("add", "--conn", db, "--in", "5m", "--event-type", "a.b").returncode == 0
    done = _cli("prune", "--conn", db, "--older-than", "99999999d", "--dry-run")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "OverflowError" not in done.stderr
    assert "older_than" in done.stderr


def test_store_prune_older_than_before_year_one_raises_invalid_argument() -> None:
    store = InMemoryScheduleStore()
    with pytest.raises(InvalidArgument, match="older_than"):
        store.prune(timedelta(days=99_999_999))
