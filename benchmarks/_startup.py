"""Start-up: whole fresh processes, timed from the parent (wall clock, fork to exit).

Every figure is the median over ``runs`` launches of the same interpreter, flags and
environment as the benchmark itself. One launch of each command runs first, untimed, so
the bytecode caches exist (as they do in an installed application: pip compiles them);
the launches run without ``PYTHONDONTWRITEBYTECODE``, which would otherwise make every
launch compile the package from source again (about 50-60 ms for hexeract_lite, nothing
for a C extension such as apsw). After that nothing is discarded. Each measurement also launches a bare ``python -c pass`` between its own
launches, so the interpreter's own start-up is known from the same moments.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from _common import LIVE, TABLE

# What the ``hexeract`` console script does (setuptools' entry-point wrapper).
CLI = "import sys\nfrom hexeract_lite.cli import main\nsys.argv[0] = 'hexeract'\nsys.exit(main())"

_COLUMNS = (
    "schedule_id, event_type, payload, trigger_kind, cron_expr, scheduled_for, target_kind,"
    " target_routing_key, attempts, max_attempts, leased_until, paused, last_error,"
    " created_at, delivered_at, cancelled_at, dead_lettered_at"
)

# The CLI's list query, written plainly: the 50 soonest live rows, pending and paused
# alike, every column. Two limited walks (not paused / paused) so SQLite can take each
# from a partial index when the schema has one, merged.
LIST_QUERY = (
    f"SELECT {_COLUMNS} FROM ("
    f" SELECT * FROM (SELECT {_COLUMNS} FROM {TABLE} WHERE {LIVE} AND paused = 0"
    "  ORDER BY scheduled_for, schedule_id LIMIT 50)"
    " UNION ALL"
    f" SELECT * FROM (SELECT {_COLUMNS} FROM {TABLE} WHERE {LIVE} AND paused <> 0"
    "  ORDER BY scheduled_for, schedule_id LIMIT 50))"
    " ORDER BY scheduled_for, schedule_id LIMIT 50"
)

# The smallest program that opens the file and prints what the query returns.
APSW_LIST = (
    "import sys, apsw\n"
    "conn = apsw.Connection(sys.argv[1], flags=apsw.SQLITE_OPEN_READWRITE)\n"
    f"for row in conn.execute({LIST_QUERY!r}):\n"
    "    print(*row)\n"
)


# Launches may write bytecode caches (see the module docstring).
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _launch(argv: list[str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=_ENV)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"{argv[1:3]} exited {proc.returncode}: {tail}")
    return elapsed, proc.stdout


def _measure(argv: list[str], runs: int) -> dict[str, object]:
    """Median wall time of ``argv`` over ``runs`` launches, each followed by a bare
    interpreter launch; ``net_ms`` is the difference of the two medians."""
    bare = [sys.executable, "-c", "pass"]
    _launch(argv)
    _launch(bare)
    times, bare_times = [], []
    out = ""
    for _ in range(runs):
        elapsed, out = _launch(argv)
        times.append(elapsed * 1000)
        bare_times.append(_launch(bare)[0] * 1000)
    value = statistics.median(times)
    python_ms = statistics.median(bare_times)
    return {
        "value": value,
        "unit": "ms",
        "python_ms": python_ms,
        "net_ms": value - python_ms,
        "min_ms": min(times),
        "runs": runs,
        "lines": len(out.splitlines()),
    }


def import_time(directory: str, module: str, runs: int) -> dict[str, object]:
    """``python -c "import <module>"`` in a fresh process."""
    return _measure([sys.executable, "-c", f"import {module}"], runs)


def cli_list(path: str, runs: int) -> dict[str, object]:
    """``hexeract scheduler list --conn <path>``, the whole process (default limit 50)."""
    return _measure([sys.executable, "-c", CLI, "scheduler", "list", "--conn", path], runs)


def apsw_list(path: str, runs: int) -> dict[str, object]:
    """A minimal apsw script: open the file, run the list query, print the rows."""
    result = _measure([sys.executable, "-c", APSW_LIST, path], runs)
    import apsw

    conn = apsw.Connection(path)
    result["plan"] = " | ".join(
        str(r[-1]) for r in conn.execute("EXPLAIN QUERY PLAN " + LIST_QUERY).fetchall()
    )
    conn.close()
    return result
