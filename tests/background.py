"""Slow runs a test only waits for, started when the session starts, so that their
waiting (a real clock, a child process) overlaps the other tests instead of adding to
the run's time.

A test module offers them with ``background_runs(items)``: for those of its tests that
were selected, a mapping of a key to a function of a fresh folder, the run the test will
ask for. The conftest starts every offered run once collection is done, a few at a time
in threads; their child processes run at a lower CPU priority (:func:`command`), so the
tests in the foreground, some of them timing-sensitive, keep the processors they had.

A test takes its run with :func:`result`: the started run's result (waiting for it), or,
when nothing was started for that key, the run itself, done then, in the test's own
folder. What the test asserts is the same either way.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

WORKERS = 4
"""Runs at once: they mostly wait, so they overlap well even on two cores."""

NICE = 5
"""How much lower the background's child processes run."""

Run = Callable[[Path], Any]

_local = threading.local()
_started: dict[str, Future[Any]] = {}
_pool: ThreadPoolExecutor | None = None
_folder: tempfile.TemporaryDirectory[str] | None = None
cleanup = contextlib.ExitStack()
"""What to undo once every background run has ended (a database schema, say)."""


def command(argv: list[str]) -> list[str]:
    """``argv``, run at a lower CPU priority when called from a background run."""
    if getattr(_local, "background", False):
        return ["nice", "-n", str(NICE), *argv]
    return argv


def _in_background(key: str, run: Run, folder: Path) -> Any:
    _local.background = True
    try:
        return run(folder)
    finally:
        _local.background = False


def start(runs: dict[str, Run]) -> None:
    """Start each of ``runs`` in a fresh folder of its own (a key already started is
    left alone)."""
    global _pool, _folder
    if _pool is None:
        _pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="test-background")
        _folder = tempfile.TemporaryDirectory(prefix="background-")
    assert _folder is not None
    for key, run in runs.items():
        if key in _started:
            continue
        folder = Path(tempfile.mkdtemp(dir=_folder.name))
        _started[key] = _pool.submit(_in_background, key, run, folder)


def future(key: str) -> Future[Any] | None:
    """The run started for ``key``, or None."""
    return _started.get(key)


def result(key: str, run: Callable[[Path], T], folder: Path) -> T:
    """The background run's result for ``key``, or ``run(folder)`` when none was
    started."""
    future = _started.get(key)
    if future is None:
        return run(folder)
    value: T = future.result()
    return value


def finish() -> None:
    """Wait for every run, then undo :data:`cleanup` and remove the folders."""
    global _pool, _folder
    if _pool is not None:
        _pool.shutdown(wait=True)
    _pool = None
    cleanup.close()
    if _folder is not None:
        _folder.cleanup()
    _folder = None
    _started.clear()


def offered(modules: Iterable[Any], items: list[Any]) -> dict[str, Run]:
    """Every run that ``modules``' ``background_runs`` offer for ``items``."""
    runs: dict[str, Run] = {}
    for module in modules:
        offer = getattr(module, "background_runs", None)
        if offer is not None:
            runs.update(offer([i for i in items if getattr(i, "module", None) is module]))
    return runs
