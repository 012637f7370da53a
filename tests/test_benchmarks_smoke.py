"""Keeps ``benchmarks/run.py`` from rotting: a short run of two cheap rows.

No timing is asserted (the machine decides that); only that the script runs, measures
hexeract_lite and its floor, and writes the JSON it promises.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_quick_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "run.py"),
            "--quick",
            "--only",
            "enqueue/hexeract,claim/hexeract-10k",
            "--tmpdir",
            str(tmp_path),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| measurement |" in proc.stdout
    doc = json.loads(out.read_text())
    for name in ("enqueue/floor", "enqueue/hexeract", "claim/floor-10k", "claim/hexeract-10k"):
        result = doc["medians"][name]
        assert result.get("value", 0) > 0, (name, result)
    assert doc["machine"]["sqlite"]
