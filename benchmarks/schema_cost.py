"""What does the table cost an insert? A runnable experiment, not a unit test (issue 17).

    python benchmarks/schema_cost.py                   # synchronous=FULL, as the targets
    python benchmarks/schema_cost.py --sync off        # no fsync: the CPU of the b-trees
    python benchmarks/schema_cost.py --rows 2000 --batches 20 --rounds 5

The own floor (``_floor``) inserts into the store's table with every index; the physical
floor (``_physical``) into a 6-column table with one partial index. This runs both of
their insert shapes, raw apsw with prebuilt parameters, against a ladder of tables in
between, so the ratios say what each piece of the schema costs:

- ``physical``: ``_physical``'s table (no auto-vacuum, as ``_physical`` makes it);
- ``physical+av``: the same in a file with ``auto_vacuum=INCREMENTAL`` (as the store
  makes every new file);
- ``ref17``: the reference's 17-column table and its two indexes (``idx_<t>_pending``,
  ``idx_<t>_dead_letter``), the floor's 14-value INSERT;
- ``t20+ref2``: this project's 20-column table with the reference's two indexes only,
  the store's INSERT (``SqliteStatements.insert``, 18 values);
- ``t20+ref2+<x>``: that plus one of this project's indexes;
- ``full``: the store's own file (``SqliteScheduleStore.open``): every index;
- ``full-noav``: the same DDL in a file without auto-vacuum;
- ``full-reordered``: every index, the WHERE of ``leased``, ``exhausted`` and ``paused``
  led by the term a new row fails (``leased_until IS NOT NULL``, ...);
- ``full-minus-<x>``: every index but one; ``t20+ref2+due-narrow``: ``due`` on
  ``(scheduled_for)`` alone; ``t20+ref2+due+name``: the indexes a new row touches.

Every variant gets a fresh file; the same ids, instants and payloads go into each. The
variants are interleaved in turns (enqueue: ``--block`` autocommit INSERTs into each file
in turn; turns of one row make every fsync dearer, for every variant alike) and **batch by batch** (``executemany`` of ``--per-txn`` rows in
``BEGIN IMMEDIATE ... COMMIT``), so a shared machine's drift hits every variant alike.
Each round starts afresh; the table shows medians over the rounds and the median of the
per-round ratios to ``physical``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))

import apsw  # noqa: E402
from _common import connect, ts, utcnow  # noqa: E402
from _floor import INSERT as FLOOR_INSERT  # noqa: E402
from _floor import _params as floor_params  # noqa: E402
from _physical import DDL as PHYSICAL_DDL  # noqa: E402
from _physical import INSERT as PHYSICAL_INSERT  # noqa: E402

from hexeract_lite.store.schema import (  # noqa: E402
    sqlite_extra_index_ddl,
    sqlite_reference_index_ddl,
    sqlite_retention_index_ddl,
    sqlite_table_ddl,
    sqlite_unique_index_ddl,
)
from hexeract_lite.store.sqlite import SqliteScheduleStore  # noqa: E402
from hexeract_lite.store.sqlite.statements import SqliteStatements  # noqa: E402

T = "scheduled_messages"
REF17_DDL = f"""
CREATE TABLE {T} (
    schedule_id BLOB PRIMARY KEY NOT NULL,
    event_type TEXT NOT NULL,
    payload TEXT NOT NULL,
    trigger_kind TEXT NOT NULL,
    cron_expr TEXT,
    scheduled_for TEXT NOT NULL,
    target_kind TEXT NOT NULL,
    target_routing_key TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    leased_until TEXT,
    paused INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    delivered_at TEXT,
    cancelled_at TEXT,
    dead_lettered_at TEXT
);
"""
OURS = {
    re.search(rf"idx_{T}_(\w+)", ddl).group(1): ddl  # type: ignore[union-attr]
    for ddl in [
        *sqlite_extra_index_ddl(T),
        *sqlite_unique_index_ddl(T),
        *sqlite_retention_index_ddl(T),
    ]
}
"""This project's indexes by short name (due, leased, exhausted, paused, ...)."""
STORE_INSERT = SqliteStatements(T).insert
REF17_3BIND = (
    f"INSERT INTO {T} (schedule_id, event_type, payload, trigger_kind, scheduled_for,"
    " target_kind, attempts, max_attempts, paused, created_at)"
    " VALUES (?1, 'bench.noop', ?3, 'delay', ?2, 'mediator', 0, 5, 0, '2026-01-01T00:00:00.000Z')"
)
"""The reference's row with three bound values (what the physical INSERT binds)."""


class Variant:
    """A table shape: how to make its file, its INSERT, its parameters from a floor row."""

    def __init__(
        self,
        name: str,
        make: Callable[[Path], None],
        insert: str,
        shape: Callable[[tuple[Any, ...]], tuple[Any, ...]],
    ) -> None:
        self.name, self.make, self.insert, self.shape = name, make, insert, shape


def _ddl_file(ddl: str, *, auto_vacuum: bool) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        conn = apsw.Connection(str(path))
        if auto_vacuum:
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(ddl)
        conn.close()

    return make


def _store_file(path: Path) -> None:
    SqliteScheduleStore.open(path, table=T).close()


def _physical_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return (row[0], row[5], row[2])


def _store_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    # what SqliteScheduleStore.insert binds: id, event_type, payload, trigger_kind,
    # cron_expr, scheduled_for, target_kind, routing_key, max_attempts, created_at,
    # name, misfire_grace_ms, then the policy's six columns
    return (*row[:8], row[9], row[13], *(None,) * 8)


def _as_is(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return row


def variants() -> list[Variant]:
    ref_idx = sqlite_reference_index_ddl(T)
    t20 = sqlite_table_ddl(T) + "\n" + "\n".join(sqlite_reference_index_ddl(T))
    out = [
        Variant(
            "physical", _ddl_file(PHYSICAL_DDL, auto_vacuum=False), PHYSICAL_INSERT, _physical_row
        ),
        Variant(
            "physical+av", _ddl_file(PHYSICAL_DDL, auto_vacuum=True), PHYSICAL_INSERT, _physical_row
        ),
        Variant(
            "ref17",
            _ddl_file(REF17_DDL + "\n".join(sqlite_reference_index_ddl(T)), auto_vacuum=True),
            FLOOR_INSERT,
            _as_is,
        ),
        Variant(
            "ref17-noav",
            _ddl_file(REF17_DDL + "\n".join(sqlite_reference_index_ddl(T)), auto_vacuum=False),
            FLOOR_INSERT,
            _as_is,
        ),
        Variant("ref17-noidx", _ddl_file(REF17_DDL, auto_vacuum=True), FLOOR_INSERT, _as_is),
        Variant(
            "ref17-noidx-3bind", _ddl_file(REF17_DDL, auto_vacuum=True), REF17_3BIND, _physical_row
        ),
        Variant(
            "ref17+pending",
            _ddl_file(REF17_DDL + ref_idx[0], auto_vacuum=True),
            FLOOR_INSERT,
            _as_is,
        ),
        Variant("t20+ref2", _ddl_file(t20, auto_vacuum=True), STORE_INSERT, _store_row),
    ]
    for short, ddl in OURS.items():
        out.append(
            Variant(
                f"t20+ref2+{short}",
                _ddl_file(t20 + "\n" + ddl, auto_vacuum=True),
                STORE_INSERT,
                _store_row,
            )
        )
    full_ddl = t20 + "\n" + "\n".join(OURS.values())
    out.append(Variant("full", _store_file, STORE_INSERT, _store_row))
    out.append(
        Variant("full-noav", _ddl_file(full_ddl, auto_vacuum=False), STORE_INSERT, _store_row)
    )
    reordered = dict(OURS)
    for short, first in (
        ("leased", "leased_until IS NOT NULL"),
        ("exhausted", "attempts >= max_attempts"),
        ("paused", "paused <> 0"),
    ):
        head, where = OURS[short].split("WHERE ")
        terms = [t for t in where.rstrip(";").split(" AND ") if t != first]
        reordered[short] = f"{head}WHERE {first} AND {' AND '.join(terms)};"
    out.append(
        Variant(
            "full-reordered",
            _ddl_file(t20 + "\n" + "\n".join(reordered.values()), auto_vacuum=True),
            STORE_INSERT,
            _store_row,
        )
    )
    for short in ("due", "noncanonical"):
        rest = [ddl for name, ddl in OURS.items() if name != short]
        out.append(
            Variant(
                f"full-minus-{short}",
                _ddl_file(t20 + "\n" + "\n".join(rest), auto_vacuum=True),
                STORE_INSERT,
                _store_row,
            )
        )
    narrow = OURS["due"].replace("(scheduled_for, schedule_id)", "(scheduled_for)")
    out.append(
        Variant(
            "t20+ref2+due-narrow",
            _ddl_file(t20 + "\n" + narrow, auto_vacuum=True),
            STORE_INSERT,
            _store_row,
        )
    )
    out.append(
        Variant(
            "t20+ref2+due+name",
            _ddl_file(t20 + "\n" + OURS["due"] + "\n" + OURS["name"], auto_vacuum=True),
            STORE_INSERT,
            _store_row,
        )
    )
    return out


def _open(path: Path, sync: str) -> apsw.Connection:
    conn = connect(path)
    conn.execute(f"PRAGMA synchronous={sync}")
    return conn


def one_round(
    chosen: list[Variant],
    rows: int,
    block: int,
    batches: int,
    per_txn: int,
    sync: str,
    tmp: Path,
    cpu: bool = False,
) -> dict[str, dict[str, float]]:
    """Enqueue and executemany rows/s for each variant, interleaved."""
    base = floor_params(rows + batches * per_txn)
    enq_rows = base[:rows]
    many_rows = base[rows:]
    conns = {}
    for v in chosen:
        path = tmp / f"{v.name}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        v.make(path)
        conns[v.name] = _open(path, sync)
    shaped_enq = {v.name: [v.shape(r) for r in enq_rows] for v in chosen}
    shaped_many = {v.name: [v.shape(r) for r in many_rows] for v in chosen}
    spent = {v.name: 0.0 for v in chosen}
    clock = time.thread_time if cpu else time.perf_counter
    for lo in range(0, rows, block):
        for v in chosen:
            conn, insert = conns[v.name], v.insert
            t0 = clock()
            for row in shaped_enq[v.name][lo : lo + block]:
                conn.execute(insert, row)
            spent[v.name] += clock() - t0
    out = {v.name: {"enqueue": rows / spent[v.name]} for v in chosen}
    spent = {v.name: 0.0 for v in chosen}
    for b in range(batches):
        lo, hi = b * per_txn, (b + 1) * per_txn
        for v in chosen:
            conn, chunk = conns[v.name], shaped_many[v.name][lo:hi]
            t0 = clock()
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(v.insert, chunk)
            conn.execute("COMMIT")
            spent[v.name] += clock() - t0
    for v in chosen:
        out[v.name]["many"] = batches * per_txn / spent[v.name]
        conns[v.name].close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1000, help="one-row inserts per variant")
    parser.add_argument(
        "--block",
        type=int,
        default=100,
        help="one-row inserts into one file before the next file's turn",
    )
    parser.add_argument("--batches", type=int, default=20, help="executemany calls per variant")
    parser.add_argument("--per-txn", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--sync", default="FULL", choices=["FULL", "NORMAL", "OFF", "full", "normal", "off"]
    )
    parser.add_argument(
        "--clock",
        default="wall",
        choices=["wall", "cpu"],
        help="cpu: this thread's CPU time (time.thread_time), which other processes' load"
        " and fsync waits do not inflate",
    )
    parser.add_argument("--only", action="append", default=[], help="variant names")
    parser.add_argument("--tmpdir", default=None)
    args = parser.parse_args()
    chosen = [v for v in variants() if not args.only or v.name in args.only or v.name == "physical"]
    results: list[dict[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory(dir=args.tmpdir) as tmp:
        for r in range(args.rounds):
            order = chosen[r % len(chosen) :] + chosen[: r % len(chosen)]
            results.append(
                one_round(
                    order,
                    args.rows,
                    args.block,
                    args.batches,
                    args.per_txn,
                    args.sync.upper(),
                    Path(tmp),
                    args.clock == "cpu",
                )
            )
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    print(
        f"sync={args.sync.upper()}, {args.rows} one-row inserts (turns of {args.block}) and {args.batches} x "
        f"executemany({args.per_txn}) per variant per round, {args.rounds} rounds; "
        f"{args.clock} clock; started {ts(utcnow())}; SQLite {apsw.sqlite_lib_version()}"
    )
    print()
    print(
        "| variant | enqueue rows/s | x physical | spread | executemany rows/s |"
        " x physical | spread |"
    )
    print("|---|---|---|---|---|---|---|")
    for v in chosen:
        line = [v.name]
        for key in ("enqueue", "many"):
            vals = [res[v.name][key] for res in results]
            ratios = [res[v.name][key] / res["physical"][key] for res in results]
            med = statistics.median(vals)
            spread = (max(ratios) - min(ratios)) / statistics.median(ratios)
            line += [f"{med:,.0f}", f"{statistics.median(ratios):.2f}x", f"{spread:.0%}"]
        print("| " + " | ".join(line) + " |")


if __name__ == "__main__":
    main()
