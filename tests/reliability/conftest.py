"""Helpers of the reliability suite: real processes, real files, and how to compare them."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import IO

import apsw
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TABLE = "scheduled_messages"


def file_fingerprint(path: Path) -> str:
    """SHA-256 over the database file and its ``-wal`` (what a reader would see), or
    ``<missing>``. Byte-for-byte: any write to either changes it. (An empty ``-wal``,
    which a read-only reader may leave behind, counts as no ``-wal``.)"""
    digest = hashlib.sha256()
    if not path.exists():
        return "<missing>"
    for part in (path, Path(f"{path}-wal")):
        if part.is_file() and (part == path or part.stat().st_size):  # empty WAL = no WAL
            digest.update(part.name.encode() + b"\0" + part.read_bytes() + b"\0")
    return digest.hexdigest()


def _readonly(path: Path) -> apsw.Connection:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(10_000)  # a SIGKILLed writer may leave recovery to this reader
    return conn


def dump_rows(path: Path, table: str = TABLE) -> list[tuple[object, ...]]:
    """``SELECT * FROM table ORDER BY schedule_id``, read through a read-only connection."""
    conn = _readonly(path)
    try:
        return list(conn.execute(f'SELECT * FROM "{table}" ORDER BY schedule_id'))
    finally:
        conn.close()


def dump_database(path: Path) -> dict[str, object]:
    """Everything a row-for-row comparison needs: the schema, user_version, and every row
    of every table (``sqlite_stat*`` left out: ``PRAGMA optimize`` may refresh them)."""
    conn = _readonly(path)
    try:
        schema = sorted(
            (str(t), str(n), str(s))
            for t, n, s in conn.execute("SELECT type, name, sql FROM sqlite_master")
            if not str(n).startswith("sqlite_stat")
        )
        version = conn.execute("PRAGMA user_version").fetchall()[0][0]
        rows: dict[str, list[tuple[object, ...]]] = {}
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
        ):
            rows[str(name)] = list(conn.execute(f'SELECT * FROM "{name}" ORDER BY 1'))
        return {"schema": schema, "user_version": version, "rows": rows}
    finally:
        conn.close()


def integrity_check(path: Path) -> list[str]:
    """``PRAGMA integrity_check``: ``["ok"]`` for a sound database."""
    conn = _readonly(path)
    try:
        return [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
    finally:
        conn.close()


def log_entries(path: Path) -> list[tuple[str, str, int]]:
    """(occurrence id, schedule id, pid) per delivery of a ``crash_worker.py`` log, in log
    order; a line still being written (no newline yet) is left for the next read."""
    if not path.exists():
        return []
    *lines, _ = path.read_text().split("\n")
    out = []
    for line in lines:
        occurrence, schedule, pid = line.split()
        out.append((occurrence, schedule, int(pid)))
    return out


def read_log(path: Path) -> list[tuple[str, int]]:
    """(occurrence id, pid) per delivery of a ``crash_worker.py`` log, in log order."""
    return [(occurrence, pid) for occurrence, _, pid in log_entries(path)]


def repeats_not_in_flight(
    deliveries: Sequence[tuple[str, int]], killed: Collection[int], batch: int
) -> list[str]:
    """The repeated deliveries a kill does not explain. A repeat is explained when each
    earlier delivery of it was by a process that was then killed, among the last
    ``batch`` lines that process wrote (a worker settles a whole batch in one
    transaction, after dispatching it): it was in flight."""
    lines_of: dict[int, list[str]] = defaultdict(list)
    by_occurrence: dict[str, list[int]] = defaultdict(list)
    for occurrence, pid in deliveries:
        lines_of[pid].append(occurrence)
        by_occurrence[occurrence].append(pid)
    return [
        occurrence
        for occurrence, pids in by_occurrence.items()
        for pid in pids[:-1]
        if pid not in killed or occurrence not in lines_of[pid][-batch:]
    ]


class Processes:
    """Child processes of one test: started with ``sys.executable``, always reaped."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._procs: list[subprocess.Popen[bytes]] = []
        self._files: list[IO[bytes]] = []
        self._count = 0

    def start(self, script: str, *args: str, name: str | None = None) -> subprocess.Popen[bytes]:
        """Run ``tests/reliability/<script>`` with ``args``; stdout and stderr go to files
        ``<name>.out`` / ``<name>.err`` in the work directory (see :meth:`stderr`)."""
        self._count += 1
        name = name or f"{Path(script).stem}-{self._count}"
        out = (self.workdir / f"{name}.out").open("wb")
        err = (self.workdir / f"{name}.err").open("wb")
        self._files += [out, err]
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        env = dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1", TZ="UTC")
        proc = subprocess.Popen(
            [sys.executable, str(HERE / script), *args],
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            cwd=self.workdir,
            env=env,
        )
        proc.name = name  # type: ignore[attr-defined]
        self._procs.append(proc)
        return proc

    def all(self) -> list[subprocess.Popen[bytes]]:
        """Every process started so far."""
        return list(self._procs)

    def output(self, proc: subprocess.Popen[bytes]) -> tuple[str, str]:
        """The stdout and stderr a process wrote so far."""
        name = proc.name  # type: ignore[attr-defined]
        return (
            (self.workdir / f"{name}.out").read_text(errors="replace"),
            (self.workdir / f"{name}.err").read_text(errors="replace"),
        )

    def wait_ready(self, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
        """Wait until the process printed ``ready`` (it has set up its signal handlers)."""
        deadline = time.monotonic() + timeout
        while "ready" not in self.output(proc)[0]:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{proc.name} never got ready: {self.output(proc)}")  # type: ignore[attr-defined]
            time.sleep(0.01)

    def stop(self, procs: Sequence[subprocess.Popen[bytes]], timeout: float = 15.0) -> None:
        """SIGTERM (a clean stop), then wait; SIGKILL whatever does not exit in time."""
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise AssertionError(f"{proc.name} did not stop on SIGTERM") from None  # type: ignore[attr-defined]

    def close(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        for f in self._files:
            f.close()


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    """Start helper scripts as real processes; every one is killed and reaped at the end."""
    p = Processes(tmp_path)
    try:
        yield p
    finally:
        p.close()
