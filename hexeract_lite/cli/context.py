"""What every command's handler gets and shares: the :class:`Context` (connection,
table, output), the exit codes, and the helpers that resolve ``SCHEDULE_ID`` or
``--name`` and print a change."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

from ..connect import open_store
from ..errors import InvalidArgument, ScheduleNotFound, UsageError
from ..store.schema import DEFAULT_TABLE, validate_table_name
from .args import TABLE_ENV
from .output import dump_json, snapshot_json

if TYPE_CHECKING:
    import uuid

    from ..snapshot import ScheduleSnapshot
    from ..store.base import ScheduleStore

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


class Context:
    """What every command needs: the resolved connection and table, and the output."""

    def __init__(self, args: argparse.Namespace, out: TextIO) -> None:
        self.args = args
        self.out = out
        self.conn: str | None = getattr(args, "conn", None)
        table = getattr(args, "table", None)
        if table is None:
            env = os.environ.get(TABLE_ENV) or None
            if env is not None:
                try:
                    table = validate_table_name(env)
                except InvalidArgument as exc:
                    raise UsageError(f"${TABLE_ENV}: {exc}") from None
        self.table: str = table or DEFAULT_TABLE

    def print(self, text: str) -> None:
        """Write ``text`` and a newline to the output."""
        print(text, file=self.out)

    @contextlib.contextmanager
    def store(self, *, create: bool, readonly: bool = False) -> Iterator[ScheduleStore]:
        """The store, closed on exit; ``readonly`` for the commands that only read."""
        store = open_store(self.conn, table=self.table, create=create, readonly=readonly)
        try:
            yield store
        finally:
            store.close()


Handler = Callable[[argparse.Namespace, Context], int]
"""A command: the parsed arguments and the context in, the exit code out."""


def schedule_id(args: argparse.Namespace, store: ScheduleStore) -> uuid.UUID:
    """The id the command names: SCHEDULE_ID, or --name's (which must exist)."""
    sid: uuid.UUID | None = args.schedule_id
    name: str | None = getattr(args, "schedule_name", None)
    if (sid is None) == (name is None):
        raise UsageError("give exactly one of SCHEDULE_ID or --name")
    if name is None:
        assert sid is not None
        return sid
    from ..names import name_id

    sid = name_id(name)
    if store.inspect(sid) is None:
        raise ScheduleNotFound(sid, name)
    return sid


def print_change(
    ctx: Context, args: argparse.Namespace, snapshot: ScheduleSnapshot, result: str, text: str
) -> None:
    """Print a change: ``text``, or with ``--format json`` the result and the schedule."""
    if args.format == "json":
        ctx.print(dump_json({"result": result, "schedule": snapshot_json(snapshot, detail=True)}))
    else:
        ctx.print(text)
