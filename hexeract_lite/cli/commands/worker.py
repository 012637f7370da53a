"""``hexeract scheduler worker``: run a worker in the foreground. Loads the sink,
routes logs to stderr (passwords scrubbed) and turns SIGINT/SIGTERM into a clean stop,
then an abort."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any, cast

from ..._log import package_logger
from ...connect import ConnTarget, parse_conn, scrub
from ...errors import InvalidConfiguration, SchedulerError, UsageError
from ..args import parse_sink_spec
from ..context import EXIT_OK, Context
from ..options import DURATION, CommandTree, N, arg, given

if TYPE_CHECKING:
    from ...message import ScheduledMessage
    from ...sinks import ScheduleSink

log = package_logger("hexeract_lite.cli")


_DURATIONS = (
    ("--poll-interval", "the longest sleep between polls (default: 100ms)"),
    ("--lease", "how long a claim holds an occurrence (default: 300s)"),
    ("--dispatch-timeout", "the longest one dispatch may take (default: 30s)"),
    ("--retry-base-delay", "base of the exponential retry backoff (default: 1s)"),
    ("--retry-max-delay", "cap of the retry backoff (default: 300s)"),
    ("--min-cycle-delay", "the pause after a cycle that claimed a full batch (default: 2ms)"),
    ("--heartbeat", "extend the leases of the batch in flight on this period (default: off)"),
)


def add_parser(tree: CommandTree) -> None:
    """Add ``worker``."""
    sub = tree.command(
        "worker",
        "run a worker in the foreground, delivering due messages to a sink",
        [
            "hexeract scheduler worker --sink myapp.scheduling:sink"
            " --conn sqlite:////var/lib/myapp/scheduler.db",
        ],
        [tree.conn],
        _run,
        description="Run a worker in the foreground: claim due occurrences and hand each to"
        " the sink, at least once, retrying with backoff and dead-lettering what keeps"
        " failing. Logs go to stderr. SIGINT or SIGTERM stops it cleanly: the occurrences in"
        " hand are settled first, the rest of the batch released, and it exits 0. A second"
        " signal stops it at once: the dispatch in flight is abandoned (recorded as a"
        " failure), what was never dispatched is released with its attempt given back, and"
        " it exits 128+signal (143 for SIGTERM) within a few seconds. Creates the database"
        " when it does not exist.",
    )
    help_text = (
        "the sink the application exposes: a ScheduleSink, or a callable taking the"
        " ScheduledMessage"
    )
    arg(sub, "--sink", (parse_sink_spec, "MODULE:ATTR"), help_text, required=True)
    help_text = "put DIR first on the import path to find the sink module (default: .)"
    arg(sub, "--app-dir", None, help_text, default=".", metavar="DIR")
    settings = sub.add_argument_group("worker settings (durations: 100ms, 5s, 2m, 1h)")
    for flag, help_text in _DURATIONS:
        arg(settings, flag, DURATION, help_text)
    arg(settings, "--batch-size", N, "occurrences claimed per poll (default: 10)")
    help_text = "snoozes of one occurrence before its schedule is dead-lettered (default: 100)"
    arg(settings, "--max-snoozes", (int, "N"), help_text)
    settings.add_argument(
        "--no-jitter",
        dest="jitter",
        action="store_false",
        default=None,
        help="retry after exactly the backoff delay instead of a random draw below it",
    )
    settings.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        type=str.lower,
        help="log verbosity on stderr (default: info)",
    )


def load_sink(spec: str, app_dir: str) -> ScheduleSink:
    """Import ``MODULE:ATTR`` and return a sink: a ScheduleSink as is, a callable
    wrapped in :class:`CallableSink`."""
    from ...sinks import CallableSink, ScheduleSink  # the worker command's alone

    module_name, _, attr_path = spec.partition(":")
    path = os.path.abspath(app_dir)
    if path not in sys.path:
        sys.path.insert(0, path)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
        if missing is not None and (module_name + ".").startswith(missing + "."):
            raise UsageError(f"cannot import sink module {module_name!r}: {exc}") from None
        raise SchedulerError(f"importing sink module {module_name!r} failed: {exc!r}") from exc
    obj: object = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(
                f"sink module {module_name!r} has no attribute {attr_path!r}"
            ) from None
    if isinstance(obj, type):
        raise UsageError(
            f"sink {spec!r} is a class: expose an instance, e.g. {attr_path.split('.')[-1].lower()}"
            f" = {attr_path.split('.')[-1]}()"
        )
    if isinstance(obj, ScheduleSink):
        return obj
    if callable(obj):
        return CallableSink(cast("Callable[[ScheduledMessage], Any]", obj))
    raise UsageError(
        f"sink {spec!r} is a {type(obj).__name__}: expected a ScheduleSink or a callable"
        " taking the message"
    )


_SETTINGS = (
    *(flag[2:].replace("-", "_") for flag, _ in _DURATIONS),
    "batch_size",
    "jitter",
    "max_snoozes",
)
"""The worker settings' names: the destinations of the settings' flags."""

_SETTING_NAME = re.compile(r"\b(" + "|".join(_SETTINGS) + r")\b")


class _ScrubbingFormatter(logging.Formatter):
    """Formats a record, then removes any password the connection string carries."""

    def __init__(self, target: ConnTarget | None) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self._target = target

    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record), self._target)


@contextlib.contextmanager
def _logging_to_stderr(level: str, target: ConnTarget | None) -> Iterator[None]:
    """Route log records to stderr for the worker's lifetime, then restore the root."""
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_ScrubbingFormatter(target))
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


_ABORT_GRACE_S = 5.0
"""After a second stop signal, how long the worker has to settle its batch before the
process exits regardless (its leases then expire and another worker redelivers)."""


class _StopSignals:
    """The stop signals the worker command received."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.deadline: float | None = None
        """Set by the second signal: the process exits by then."""

    @property
    def exit_code(self) -> int:
        """``128 + signal`` of the signal that aborted the worker."""
        return 128 + self.received[-1]


@contextlib.contextmanager
def _stop_on_signals(
    stop: threading.Event, wake: Callable[[], None], abort: Callable[[], None]
) -> Iterator[_StopSignals]:
    """SIGINT and SIGTERM (main thread only): the first sets ``stop`` and wakes the
    worker, the second calls ``abort`` (exit ``128 + signal`` within
    :data:`_ABORT_GRACE_S`), a third exits at once."""
    signals = _StopSignals()
    if threading.current_thread() is not threading.main_thread():
        yield signals
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        signals.received.append(signum)
        name = signal.Signals(signum).name
        if len(signals.received) == 1:
            log.info("%s received: stopping after the occurrences in hand", name)
            stop.set()
            wake()
        elif len(signals.received) == 2:
            log.warning(
                "second %s: abandoning the dispatch in flight, releasing the rest of the batch",
                name,
            )
            signals.deadline = time.monotonic() + _ABORT_GRACE_S
            abort()  # safe here: the main thread only joins the worker's thread
        else:
            log.warning("%s again: exiting without waiting", name)
            os._exit(128 + signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield signals
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from ...worker import SchedulerWorker, SchedulerWorkerConfig  # asyncio: only workers need it

    try:
        config = SchedulerWorkerConfig(**given(args, _SETTINGS))
    except InvalidConfiguration as exc:  # name the flags, not the fields
        flags = _SETTING_NAME.sub(lambda m: "--" + m.group(1).replace("_", "-"), str(exc))
        raise UsageError(flags) from None
    sink = load_sink(args.sink, args.app_dir)
    target = parse_conn(ctx.conn)
    with _logging_to_stderr(args.log_level, target), ctx.store(create=True) as store:
        worker = SchedulerWorker(store, sink, config=config)
        stop = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                worker.run(stop)
            except BaseException as exc:  # reported by the main thread
                failure.append(exc)

        thread = threading.Thread(target=run, name="hexeract-worker", daemon=True)
        log.info(
            "worker started: database %s, table %s, sink %s",
            target.display(),
            ctx.table,
            args.sink,
        )
        with _stop_on_signals(stop, store.changes.notify, worker.abort) as signals:
            thread.start()
            while thread.is_alive():
                thread.join(0.2 if signals.deadline is None else 0.05)
                if signals.deadline is not None and time.monotonic() > signals.deadline:
                    log.error(
                        "the worker did not settle its batch within %g s; exiting, its"
                        " leases will expire and another worker redelivers",
                        _ABORT_GRACE_S,
                    )
                    sys.stderr.flush()
                    os._exit(signals.exit_code)
        if failure:
            raise failure[0]
        if signals.deadline is not None:
            log.warning("worker aborted: exiting %d", signals.exit_code)
            return signals.exit_code
        log.info("worker stopped")
    return EXIT_OK
