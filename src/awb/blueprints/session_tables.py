"""Sessions and run logs in the inventory's own database: the SQLite file (tables from its migration 5)
or the PostgreSQL inventory (migration 2). Both keep the same two tables, in insertion order (the ids
are the chronology), and map rows alike; PostgreSQL keeps message and response texts as JSON text,
since its TEXT cannot hold a NUL character that a person or a model may well send.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awb.blueprints.compile import Turn
from awb.blueprints.journal import LogEntry, masked_as_read
from awb.blueprints.sessions import (
    LOG_PAGE_DEFAULT,
    SESSIONS_SHOWN,
    Exchange,
    MemorySessionStore,
    SessionStore,
    SessionSummary,
)

if TYPE_CHECKING:
    from awb.config import Config

#: Connections a PostgreSQL session store of its own keeps (a run writes two statements).
POOL_MAX = 4

_HISTORY = "SELECT message, response FROM blueprint_messages WHERE session_id = {m} ORDER BY id DESC LIMIT {m}"
_ADD = (
    "INSERT INTO blueprint_messages(session_id, blueprint_id, at, message, response) VALUES ({m}, {m}, {m}, {m}, {m})"
)
_EXCHANGES = "SELECT blueprint_id, at, message, response FROM blueprint_messages WHERE session_id = {m} ORDER BY id"
_EXCHANGE_PAGE = (
    "SELECT id, blueprint_id, at, message, response FROM blueprint_messages "
    "WHERE session_id = {m} AND id > {m} ORDER BY id LIMIT {m}"
)
_APPEND = "INSERT INTO blueprint_run_logs(session_id, run_id, at, kind, data) VALUES ({m}, {m}, {m}, {m}, {m})"
_LOGS = "SELECT run_id, at, kind, data FROM blueprint_run_logs WHERE session_id = {m} ORDER BY id"
_LOG_PAGE = "SELECT id, run_id, at, kind, data FROM blueprint_run_logs WHERE session_id = {m} AND id > {m} ORDER BY id LIMIT {m}"
_NEWEST_LOGS = "SELECT run_id, at, kind, data FROM blueprint_run_logs WHERE session_id = {m} ORDER BY id DESC LIMIT {m}"
_SESSIONS = (
    "SELECT session_id, count(DISTINCT run_id), count(*), min(at), max(at) FROM blueprint_run_logs "
    "GROUP BY session_id ORDER BY max(id) DESC LIMIT {m}"
)
_SESSION_IDS = (
    "SELECT session_id FROM blueprint_messages UNION SELECT session_id FROM blueprint_run_logs ORDER BY session_id"
)
_HAS_RECORDS = (
    "SELECT EXISTS (SELECT 1 FROM blueprint_messages WHERE session_id = {m}) "
    "OR EXISTS (SELECT 1 FROM blueprint_run_logs WHERE session_id = {m})"
)


def _log_row(session_id: str, entry: LogEntry) -> tuple[str, str, str, str, str]:
    return (session_id, entry.run_id, entry.at.isoformat(), entry.kind, json.dumps(entry.data, default=str))


def _entry(row: Sequence[Any]) -> LogEntry:
    # Every reader (the REST log, the panel, an export) gets an entry masked, whenever it was logged.
    data = masked_as_read(json.loads(row[3]))
    return LogEntry.model_validate({"run_id": row[0], "at": row[1], "kind": row[2], "data": data})


def _summary(row: Sequence[Any]) -> SessionSummary:
    return SessionSummary(
        session_id=str(row[0]), runs=int(row[1]), entries=int(row[2]), first_at=str(row[3]), last_at=str(row[4])
    )


class _SessionTables:
    """The session store over one database; subclasses say how to reach it, how a statement marks its
    parameters and how texts are kept."""

    mark = "?"

    def _statement(self) -> AbstractContextManager[Any]:
        """A connection for one statement (committed on its own)."""
        raise NotImplementedError

    def _transaction(self) -> AbstractContextManager[Any]:
        """A connection in a transaction, with `executemany`."""
        raise NotImplementedError

    def _text_in(self, text: str) -> str:
        return text

    def _text_out(self, stored: str) -> str:
        return stored

    def _sql(self, template: str) -> str:
        return template.format(m=self.mark)

    def history(self, session_id: str, limit: int) -> list[Turn]:
        with self._statement() as db:
            rows = db.execute(self._sql(_HISTORY), (session_id, limit)).fetchall()
        return [Turn(user=self._text_out(m), assistant=self._text_out(r)) for m, r in reversed(rows)]

    def add_exchange(self, session_id: str, blueprint_id: str, at: datetime, message: str, response: str) -> None:
        with self._statement() as db:
            db.execute(
                self._sql(_ADD),
                (session_id, blueprint_id, at.isoformat(), self._text_in(message), self._text_in(response)),
            )

    def exchanges(self, session_id: str) -> list[Exchange]:
        with self._statement() as db:
            rows = db.execute(self._sql(_EXCHANGES), (session_id,)).fetchall()
        return [
            Exchange(blueprint_id=r[0], at=r[1], message=self._text_out(r[2]), response=self._text_out(r[3]))
            for r in rows
        ]

    def exchange_page(
        self, session_id: str, *, after: int = 0, limit: int = LOG_PAGE_DEFAULT
    ) -> list[tuple[int, Exchange]]:
        with self._statement() as db:
            rows = db.execute(self._sql(_EXCHANGE_PAGE), (session_id, after, limit)).fetchall()
        return [
            (
                int(r[0]),
                Exchange(blueprint_id=r[1], at=r[2], message=self._text_out(r[3]), response=self._text_out(r[4])),
            )
            for r in rows
        ]

    def append_logs(self, session_id: str, entries: Sequence[LogEntry]) -> None:
        with self._transaction() as db:
            db.executemany(self._sql(_APPEND), [_log_row(session_id, e) for e in entries])

    def logs(self, session_id: str) -> list[LogEntry]:
        with self._statement() as db:
            rows = db.execute(self._sql(_LOGS), (session_id,)).fetchall()
        return [_entry(r) for r in rows]

    def log_page(self, session_id: str, *, after: int = 0, limit: int = LOG_PAGE_DEFAULT) -> list[tuple[int, LogEntry]]:
        with self._statement() as db:
            rows = db.execute(self._sql(_LOG_PAGE), (session_id, after, limit)).fetchall()
        return [(int(r[0]), _entry(r[1:])) for r in rows]

    def newest_logs(self, session_id: str, limit: int) -> list[LogEntry]:
        with self._statement() as db:
            rows = db.execute(self._sql(_NEWEST_LOGS), (session_id, limit)).fetchall()
        return [_entry(r) for r in reversed(rows)]

    def sessions(self, limit: int = SESSIONS_SHOWN) -> list[SessionSummary]:
        with self._statement() as db:
            rows = db.execute(self._sql(_SESSIONS), (limit,)).fetchall()
        return [_summary(r) for r in rows]

    def session_ids(self) -> list[str]:
        with self._statement() as db:
            return [str(r[0]) for r in db.execute(_SESSION_IDS).fetchall()]

    def import_session(self, session_id: str, exchanges: Iterable[Exchange], logs: Iterable[LogEntry]) -> bool:
        with self._transaction() as db:
            if db.execute(self._sql(_HAS_RECORDS), (session_id, session_id)).fetchone()[0]:
                return False
            # Rows as they are read: a session's records need not all be in memory at once.
            rows = (
                (session_id, e.blueprint_id, e.at.isoformat(), self._text_in(e.message), self._text_in(e.response))
                for e in exchanges
            )
            db.executemany(self._sql(_ADD), rows)
            db.executemany(self._sql(_APPEND), (_log_row(session_id, e) for e in logs))
        return True


class SQLiteSessionStore(_SessionTables):
    """Sessions in the inventory file, on a connection of its own (the tool store's lock is untouched).
    The inventory store must have opened (migrated) the file first: see `open`."""

    def __init__(self, path: Path | str) -> None:
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA busy_timeout = 5000")
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path | str) -> SQLiteSessionStore:
        from awb.inventory.sqlite import SQLiteStore

        SQLiteStore(path).close()  # its migrations create the session tables
        return cls(path)

    @contextmanager
    def _statement(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._db

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        with self._lock:
            self._db.close()


class _PsycopgWriter:
    """A psycopg connection inside a transaction, with the `executemany` sqlite3 connections have."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self._conn.execute(sql, args)

    def executemany(self, sql: str, rows: Iterable[Any]) -> None:
        with self._conn.cursor() as cursor:
            cursor.executemany(sql, rows)


class PostgresSessionStore(_SessionTables):
    """Sessions in the PostgreSQL inventory, on the tool store's connections (`connection`) or on a
    pool of its own (`open`)."""

    mark = "%s"

    def __init__(
        self, connection: Callable[[], AbstractContextManager[Any]], *, on_close: Callable[[], None] = lambda: None
    ) -> None:
        self._connection = connection
        self._on_close = on_close

    @classmethod
    def open(cls, url: str) -> PostgresSessionStore:
        """A store on connections of its own (migrating the database, as opening the inventory would)."""
        from awb.inventory.postgres_pool import open_pool

        pool = open_pool(url, max_size=POOL_MAX)
        return cls(pool.connection, on_close=pool.close)

    def _statement(self) -> AbstractContextManager[Any]:
        return self._connection()

    @contextmanager
    def _transaction(self) -> Iterator[_PsycopgWriter]:
        with self._connection() as conn, conn.transaction():
            yield _PsycopgWriter(conn)

    def _text_in(self, text: str) -> str:
        return json.dumps(text)

    def _text_out(self, stored: str) -> str:
        text: str = json.loads(stored)
        return text

    def close(self) -> None:
        self._on_close()


__all__ = ["PostgresSessionStore", "SQLiteSessionStore"]


def open_session_store(where: Config | Path | str, *, inventory: object | None = None) -> SessionStore:
    """The session store beside the inventory `where` names (a config, or a SQLite file's path): its
    PostgreSQL database when the config has an `inventory_url` (on `inventory`'s connections when that is
    the open PostgreSQL store), else the SQLite file; an in-memory inventory gets an in-memory store."""
    if isinstance(where, Path | str):
        path: Path | str = where
    elif where.inventory_url:
        connection = getattr(inventory, "connection", None)
        if callable(connection) and getattr(inventory, "url", None) == where.inventory_url:
            return PostgresSessionStore(connection)
        return PostgresSessionStore.open(where.inventory_url)
    else:
        path = where.inventory_path
    if str(path) == ":memory:":
        return MemorySessionStore()
    if getattr(inventory, "path", None) == str(path):
        # The open inventory migrated the file: opening it again would check its schema again, and
        # refuse it once a newer awb has migrated it since (an upgrade while this server runs).
        return SQLiteSessionStore(path)
    return SQLiteSessionStore.open(path)
