"""Running the ``hexeract`` command: :func:`main` parses the command line, runs the
command's handler and turns what it raises into an exit code and a message on stderr
(a usage error: 2, argparse-style; any other error: 1; passwords scrubbed from both)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from ..connect import DATABASE_URL_ENV, scrub
from ..errors import InvalidArgument, SchedulerError
from .context import EXIT_ERROR, EXIT_OK, EXIT_USAGE, Context, Handler
from .parser import parser_for


def _prog() -> str:
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return name if name.startswith("hexeract") else "hexeract"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``hexeract`` command with ``argv`` (default: ``sys.argv[1:]``); return the
    exit code: 0 success, 1 runtime error, 2 usage error."""
    arguments = list(argv) if argv is not None else sys.argv[1:]
    parser = parser_for(_prog(), arguments)
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exc:  # --help, --version, or a usage error
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR if exc.code else EXIT_OK
    cmd_parser: argparse.ArgumentParser = args.cmd_parser
    handler: Handler = args.handler
    # What to scrub from any message: every connection string in use, wherever it came
    # from (migrate has two).
    conns = [
        getattr(args, "conn", None) or os.environ.get(DATABASE_URL_ENV),
        getattr(args, "from_conn", None),
        getattr(args, "to_conn", None),
    ]

    def clean(text: str) -> str:
        for conn in conns:
            if conn:
                text = scrub(text, conn)
        return scrub(text, None)

    try:
        return handler(args, Context(args, sys.stdout))
    except InvalidArgument as exc:  # UsageError included
        return _usage_error(cmd_parser, clean(str(exc)))
    except SchedulerError as exc:
        return _runtime_error(parser.prog, clean(str(exc)))
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        import traceback  # an unexpected error only

        detail = clean("".join(traceback.format_exception(exc)))
        sys.stderr.write(detail)
        return _runtime_error(parser.prog, clean(f"unexpected {type(exc).__name__}: {exc}"))


def _usage_error(parser: argparse.ArgumentParser, message: str) -> int:
    try:
        parser.error(message)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE


def _runtime_error(prog: str, message: str) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _silence_stdout() -> None:
    """After a closed pipe (``hexeract ... | head``), stop Python from complaining at exit."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
