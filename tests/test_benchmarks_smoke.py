"""Keeps ``benchmarks/run.py`` from rotting: a short run of two cheap rows.

No timing is asserted (the machine decides that); only that the script runs, measures
hexeract_lite and its floor, and writes the JSON it promises.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import background

REPO = Path(__file__).resolve().parent.parent
_REFERENCE = Path(
    os.environ.get("HEXERACT_REFERENCE_STATEMENTS")
    or REPO.parent / "shared" / "vectors" / "reference_sqlite_statements.tsv"
)


def _quick(folder: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = folder / "results.json"
    proc = subprocess.run(
        background.command(
            [
                sys.executable,
                str(REPO / "benchmarks" / "run.py"),
                "--quick",
                "--only",
                "enqueue/hexeract,claim/hexeract-10k",
                "--tmpdir",
                str(folder),
                "--out",
                str(out),
            ]
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc, out


def _postgres_row(folder: Path) -> tuple[str, str, dict[str, object]]:
    return _run(folder, "claim/hexeract-pg-none", dict(os.environ))


def background_runs(items: list[pytest.Item]) -> dict[str, background.Run]:
    """The two longest runs, to start with the session (:mod:`tests.background`)."""
    names = {item.name for item in items}
    runs: dict[str, background.Run] = {}
    if "test_quick_benchmark_runs" in names:
        runs["benchmarks:quick"] = _quick
    if "test_a_postgres_row_runs" in names:
        runs["benchmarks:postgres-row"] = _postgres_row
    return runs


@pytest.mark.slow
def test_quick_benchmark_runs(tmp_path: Path) -> None:
    proc, out = background.result("benchmarks:quick", _quick, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| measurement |" in proc.stdout
    doc = json.loads(out.read_text())
    names = [
        "enqueue/floor",
        "enqueue/hexeract",
        "enqueue/physical",
        "claim/floor-10k",
        "claim/hexeract-10k",
    ]
    if _REFERENCE.exists():  # the reference floor needs the reference's own statements
        names.append("enqueue/reference")
    else:
        assert "are not at" in doc["medians"]["enqueue/reference"]["skipped"]
    for name in names:
        result = doc["medians"][name]
        assert result.get("value", 0) > 0, (name, result)
    assert doc["machine"]["sqlite"]
    assert "| issue 30 target |" in proc.stdout


def _run(tmp_path: Path, only: str, env: dict[str, str]) -> tuple[str, str, dict[str, object]]:
    out = tmp_path / "results.json"
    proc = subprocess.run(
        background.command(
            [
                sys.executable,
                str(REPO / "benchmarks" / "run.py"),
                *("--quick", "--only", only, "--tmpdir", str(tmp_path), "--out", str(out)),
            ]
        ),
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc: dict[str, object] = json.loads(out.read_text())
    return proc.stdout, proc.stderr, doc


def test_the_postgres_rows_are_skipped_without_a_server(tmp_path: Path) -> None:
    """Without ``HEXERACT_TEST_POSTGRES_URL`` the PostgreSQL rows are left out, with a
    line saying so, and their targets read "not measured"."""
    env = {k: v for k, v in os.environ.items() if k != "HEXERACT_TEST_POSTGRES_URL"}
    stdout, stderr, doc = _run(tmp_path, "pg_drain,lag/hexeract-pg-otherprocess", env)
    assert "PostgreSQL rows skipped (7)" in stderr
    assert "HEXERACT_TEST_POSTGRES_URL is not set" in stdout
    assert doc["medians"] == {}
    line = next(x for x in stdout.splitlines() if "≥ 2x Procrastinate [pg_drain/hexeract-4" in x)
    assert line.endswith("| not measured |")


@pytest.mark.skipif(not os.environ.get("HEXERACT_TEST_POSTGRES_URL"), reason="no PostgreSQL server")
def test_a_postgres_row_runs(tmp_path: Path) -> None:
    """The cheapest PostgreSQL row measures a claim on the server it is given."""
    stdout, _, doc = background.result("benchmarks:postgres-row", _postgres_row, tmp_path)
    medians = doc["medians"]
    assert isinstance(medians, dict)
    assert medians["claim/hexeract-pg-none"]["value"] > 0, medians
    assert "server: PostgreSQL" in stdout


def test_schema_cost_runs(tmp_path: Path) -> None:
    """``benchmarks/schema_cost.py`` (the table's cost per insert): a tiny run prints a
    row for every table shape, with its ratio to the physical floor."""
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "schema_cost.py"),
            *("--rows", "4", "--block", "2", "--batches", "2", "--per-txn", "3"),
            *("--rounds", "1", "--sync", "off", "--clock", "cpu", "--tmpdir", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    names = [line.split("|")[1].strip() for line in rows[1:]]
    for name in ("physical", "ref17", "t20+ref2", "t20+ref2+due", "full"):
        assert name in names, proc.stdout
    assert "| physical | " in proc.stdout and "1.00x" in rows[1]
