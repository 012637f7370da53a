"""ServerStore: what the PostgreSQL and MySQL stores share over :class:`.store.SqlScheduleStore`:
a pool of connections (``_db``), its sessions, and the store's lifetime."""

from __future__ import annotations

import abc
import importlib
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from types import ModuleType
from typing import Any, TypeVar

from ...clock import Clock
from ...errors import InvalidConfiguration
from ...message import ScheduledMessage
from ...snapshot import LeasedOccurrence
from ..changes import Plan
from ..checks import check_flag, check_max_attempts, check_messages, check_schedule_id
from ..record import ScheduleRecord
from ..schema import validate_table_name
from .statements import INSERT_COLUMNS
from .store import SqlScheduleStore

_T = TypeVar("_T")

NAME_HELD = "a unique name is held by another schedule"
"""What an insert that broke a unique index says when no id of it is stored: the name
index's (a row another tool wrote holds the name under another id)."""


def check_open(table: str, clock: object, create: object) -> None:
    """The arguments every server store's ``open`` checks first."""
    validate_table_name(table)
    if not isinstance(clock, Clock):
        raise InvalidConfiguration(f"clock must have a now() method, got {clock!r}")
    check_flag("create", create)


def check_count(name: str, value: object, least: int) -> int:
    """``value``, an integer >= ``least`` (else :class:`InvalidConfiguration`)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidConfiguration(f"{name} must be an integer >= {least}, got {value!r}")
    return value


class ServerSession:
    """A pooled connection inside one transaction (or one statement)
    (:class:`~.dialect.Session`); ``others``: notify other processes after the commit."""

    __slots__ = ("conn", "others", "woken")

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.woken = False
        self.others = False

    execute: Callable[..., int]
    fetch: Callable[..., list[Any]]

    def execute_each(self, statements: list[tuple[Any, Any]]) -> list[int]:
        """Run each statement in turn; the rows each changed."""
        return [self.execute(statement, params) for statement, params in statements]

    def wake(self, others: bool = True) -> None:
        """After the commit: the store's change signal; with ``others``, other processes."""
        self.woken = True
        self.others = self.others or others


class ServerStore(SqlScheduleStore):
    """The SQL base over a connection pool: ``_db`` has ``connection(what)``, ``where``,
    ``close()`` and ``closed``; the dialect's ``transaction`` module (:meth:`_shared`)
    has ``Runner``, ``insert_within``, ``within`` (the caller's connection checked, in a
    savepoint) and ``notify`` (other processes, inside the caller's transaction)."""

    _db: Any
    _session: Callable[[Any], ServerSession]
    _transaction_module: str
    """The dialect's ``transaction`` module's name (imported when first needed: a
    listing never needs it)."""

    @property
    def _where(self) -> str:
        return str(self._db.where)

    @property
    def _place(self) -> str:  # type: ignore[override]
        return f"table {self._table!r} at {self._where}"

    _name: str
    """The store class's public name, for its repr (a subclass's too)."""

    def __repr__(self) -> str:
        return f"{self._name}({self._where!r}, table={self._table!r})"

    def _shared(self) -> ModuleType:
        """The dialect's ``transaction`` module."""
        return importlib.import_module(self._transaction_module)

    @abc.abstractmethod
    def _transaction(self, conn: Any, atomic: bool, worker: bool) -> AbstractContextManager[Any]:
        """Where ``_write`` runs its statements on ``conn``: a transaction, or autocommit."""

    def _announce(self, conn: Any) -> None:
        """After a commit that woke other processes' workers: tell them."""

    @contextmanager
    def _write(
        self, what: str, *, worker: bool = False, atomic: bool = True
    ) -> Iterator[ServerSession]:
        with self._db.connection(what) as conn:
            tx = self._session(conn)
            with self._transaction(conn, atomic, worker):
                yield tx
            if tx.others:
                self._announce(conn)
        if tx.woken:
            self.changes.notify()

    def _read(self, what: str, statement: Any, params: Any) -> list[Any]:
        with self._db.connection(what) as conn:
            return self._session(conn).fetch(statement, params)

    def _leased(self, row: Sequence[Any], claim: Any) -> LeasedOccurrence:
        return self._codec.decode(row).leased()

    def _prune_statements(self, column: str) -> tuple[Any, Any]:
        return self._sql.prune(column)  # type: ignore[no-any-return]

    def _replay_statements(self, ids: list[uuid.UUID], now: datetime) -> list[tuple[Any, Any]]:
        codec = self._codec
        params = {"ids": [codec.encode_id(sid) for sid in ids], "now": codec.encode_instant(now)}
        return [(self._sql.replay_many, params)]

    def insert_many(
        self,
        messages: Sequence[ScheduledMessage],
        max_attempts: int,
        *,
        connection: object = None,
    ) -> None:
        """See :meth:`ScheduleStore.insert_many`; ``connection``: inside the caller's
        transaction (:meth:`ScheduleStore.insert`)."""
        check_max_attempts(max_attempts)
        taken = self._now()  # one reading: the placement's and created_at's
        messages = check_messages(messages, taken)
        self._check_payloads(messages)
        if not messages and connection is None:
            return
        rows = []
        for m in messages:
            params = self._row_params(ScheduleRecord.new(m, 1, m.scheduled_for))
            rows.append({name: params[name] for name in INSERT_COLUMNS})
        bound = self._insert_params(rows, max_attempts, taken)
        if connection is not None:
            self._shared().insert_within(self, connection, messages, bound)
            return
        if len({m.schedule_id for m in messages}) != len(messages):
            raise self._first_duplicate(messages, "insert", "a duplicate id vanished")
        self._insert(messages, bound)
        self.changes.notify()

    def _check_payloads(self, messages: Sequence[ScheduledMessage]) -> None:
        """Refuse a payload the engine cannot store (:class:`InvalidMessage`)."""

    @abc.abstractmethod
    def _insert_params(self, rows: list[dict[str, Any]], max_attempts: int, now: datetime) -> Any:
        """The insert's parameters: ``rows`` (the bound :data:`~.statements.INSERT_COLUMNS`
        of each message), ``max_attempts`` and ``now``."""

    @abc.abstractmethod
    def _insert(self, messages: Sequence[ScheduledMessage], params: Any) -> None:
        """Insert ``messages`` (bound as ``params``) in one transaction, told other
        processes; an id stored already: :class:`DuplicateSchedule`."""

    def _runner_type(self) -> Callable[..., Any]:
        return self._shared().Runner  # type: ignore[no-any-return]

    def modify_within(self, connection: object, schedule_id: uuid.UUID, plan: Plan[_T]) -> _T:
        """See :meth:`ScheduleStore.modify_within`: the row locked ``FOR UPDATE``."""
        sid = check_schedule_id(schedule_id)
        shared = self._shared()
        with shared.within(self, connection, "modify") as conn:
            tx = self._session(conn)
            answer: _T = self._modified(tx, sid, plan)
            if tx.woken:
                shared.notify(conn, self)
        return answer

    def close(self) -> None:
        """Close the pooled connections; later calls raise :class:`StoreError`. Idempotent."""
        self._db.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return bool(self._db.closed)
