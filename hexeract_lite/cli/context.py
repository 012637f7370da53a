"""What every command's handler gets and shares: the :class:`Context` (connection,
table, output), the exit codes, and the helpers that resolve ``SCHEDULE_ID`` or
``--name`` and print a change."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TextIO, TypeVar

from ..connect import open_store, parse_conn
from ..errors import (
    DuplicateSchedule,
    InvalidArgument,
    NotChangeable,
    NotReplayable,
    ScheduleNotFound,
    SchedulerError,
    UsageError,
)
from ..store.schema import DEFAULT_TABLE, validate_table_name
from .args import TABLE_ENV

if TYPE_CHECKING:
    import uuid

    from ..control import SchedulerControl
    from ..snapshot import ScheduleSnapshot
    from ..store.base import ScheduleStore

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


class NoneToChange(SchedulerError, LookupError):
    """No schedule the command names (a group) is there to change: exit 1, as an unknown
    name; nothing written."""


_REFUSALS = (
    InvalidArgument,
    ScheduleNotFound,
    NotChangeable,
    NotReplayable,
    DuplicateSchedule,
    NoneToChange,
)
"""What a command that changes a schedule refuses with, in any store."""

_T = TypeVar("_T")


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

    def show(self, data: Callable[[], object], text: Callable[[], str]) -> int:
        """Print ``data()`` as JSON with ``--format json``, else ``text()``; return
        :data:`EXIT_OK`, for the command that ends with it."""
        if self.args.format == "json":
            import json  # the JSON output only

            self.print(json.dumps(data(), indent=2, allow_nan=False))
        else:
            self.print(text())
        return EXIT_OK

    def store(self, *, create: bool, readonly: bool = False) -> ScheduleStore:
        """The store (a context manager closing it); ``readonly`` for the commands that
        only read."""
        return open_store(self.conn, table=self.table, create=create, readonly=readonly)

    def write(
        self,
        act: Callable[[ScheduleStore], _T],
        *,
        ids: Iterable[uuid.UUID],
        named: str | None = None,
        create: bool = False,
        whole: bool = False,
    ) -> _T:
        """Run ``act`` on the store and return its answer; on an existing SQLite file it
        first rehearses on an in-memory copy of the rows ``ids`` (and those named
        ``named...``), so that a refusal (``_REFUSALS``; with ``whole``, a row ``ids``
        names that does not decode) leaves the file untouched."""
        rehearsal = self._copy_of(ids, named, whole)
        if rehearsal is not None:
            try:
                act(rehearsal)
            except _REFUSALS:
                raise
            except Exception:  # the store itself decides below
                pass
        with self.store(create=create) as store:
            return act(store)

    def change(
        self, args: argparse.Namespace, act: Callable[[SchedulerControl, uuid.UUID], _T]
    ) -> tuple[uuid.UUID, _T, ScheduleSnapshot]:
        """Run ``act(control, sid)`` on the schedule SCHEDULE_ID or ``--name`` names,
        through :meth:`write`; return its id, the answer and the schedule after it (a
        row that does not decode: the store's refusal, naming the column; nothing written)."""
        from ..control import SchedulerControl

        def run(store: ScheduleStore) -> tuple[uuid.UUID, _T, ScheduleSnapshot]:
            sid = schedule_id(args, store)
            control = SchedulerControl(store)
            control.inspect(sid)  # a row that does not decode is refused before any write
            answer = act(control, sid)
            return sid, answer, control.inspect(sid)

        return self.write(run, ids=target_ids(args), whole=True)

    def _copy_of(
        self, ids: Iterable[uuid.UUID], named: str | None, whole: bool
    ) -> ScheduleStore | None:
        """An in-memory store holding the rows ``ids`` (and those named ``named...``) of
        an existing SQLite table (read read-only), or None: another database, no such
        file or table, or a row that cannot be read (with ``whole``, a row ``ids`` names
        that does not decode: the store's refusal, raised)."""
        target = parse_conn(self.conn)
        if target.kind != "sqlite":
            return None
        try:
            source = open_store(target, table=self.table, create=False, readonly=True)
        except SchedulerError:  # missing (the real open says so or creates it), unreadable
            return None
        import uuid

        from ..store.memory import InMemoryScheduleStore

        copy = InMemoryScheduleStore()
        ids = list(ids)
        with source:
            for sid in ids if whole else ():
                source.inspect(sid)  # a row that does not decode: refused, naming the column
            try:
                if named is not None:
                    ids = [*ids, *(s.schedule_id for s in source.list_named(named))]
                for sid in ids:
                    after = uuid.UUID(int=sid.int - 1) if sid.int else None
                    rows = source.export_records(after, 1)
                    copy.import_records([r for r in rows if r.schedule_id == sid])
                    copy.inspect(sid)  # decodes the copied row whole: its rule, its target
            except Exception:  # a row another tool wrote, that only the store reads: no copy
                return None
        return copy


def target_ids(args: argparse.Namespace) -> list[uuid.UUID]:
    """The schedule SCHEDULE_ID or ``--name`` names, for :meth:`Context.write`."""
    sid: uuid.UUID | None = getattr(args, "schedule_id", None)
    name: str | None = getattr(args, "schedule_name", None)
    if sid is not None or name is None:
        return [] if sid is None else [sid]
    from ..names import name_id

    return [name_id(name)]


Handler = Callable[[argparse.Namespace, Context], int]
"""A command: the parsed arguments and the context in, the exit code out."""


def schedule_id(args: argparse.Namespace, store: ScheduleStore) -> uuid.UUID:
    """The id the command names: SCHEDULE_ID, or --name's (which must exist)."""
    name: str | None = getattr(args, "schedule_name", None)
    if (args.schedule_id is None) == (name is None):
        raise UsageError("give exactly one of SCHEDULE_ID or --name")
    (sid,) = target_ids(args)
    if name is not None and store.inspect(sid) is None:
        raise ScheduleNotFound(sid, name)
    return sid
