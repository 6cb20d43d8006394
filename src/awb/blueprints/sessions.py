"""Where sessions (message/response exchanges) and run logs live: a small store protocol of their own,
with the SQLite inventory file as the default home and a memory store for ephemeral use.

The SQLite tables come from the inventory's own migrations (`awb.inventory.sessions_sql`); this module opens a
connection of its own to that file, so the tool store's locking is untouched.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Protocol

from awb.blueprints.compile import Turn
from awb.blueprints.journal import LogEntry
from awb.inventory.sqlite import SQLiteStore


class SessionStore(Protocol):
    def history(self, session_id: str, limit: int) -> list[Turn]:
        """The last `limit` exchanges of the session, oldest first."""
        ...

    def add_exchange(self, session_id: str, blueprint_id: str, at: datetime, message: str, response: str) -> None: ...

    def append_logs(self, session_id: str, entries: Sequence[LogEntry]) -> None: ...

    def logs(self, session_id: str) -> list[LogEntry]:
        """Every log entry of the session, in the order it was written."""
        ...

    def close(self) -> None: ...


class MemorySessionStore:
    def __init__(self) -> None:
        self._turns: dict[str, list[Turn]] = {}
        self._logs: dict[str, list[LogEntry]] = {}
        self._lock = threading.Lock()

    def history(self, session_id: str, limit: int) -> list[Turn]:
        with self._lock:
            return list(self._turns.get(session_id, [])[-limit:])

    def add_exchange(self, session_id: str, blueprint_id: str, at: datetime, message: str, response: str) -> None:
        with self._lock:
            self._turns.setdefault(session_id, []).append(Turn(user=message, assistant=response))

    def append_logs(self, session_id: str, entries: Sequence[LogEntry]) -> None:
        with self._lock:
            self._logs.setdefault(session_id, []).extend(entries)

    def logs(self, session_id: str) -> list[LogEntry]:
        with self._lock:
            return list(self._logs.get(session_id, []))

    def close(self) -> None:
        """Nothing to release."""


class SQLiteSessionStore:
    """Sessions in the inventory file. The inventory store must have opened (migrated) it first."""

    def __init__(self, path: Path | str) -> None:
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA busy_timeout = 5000")
        self._lock = threading.Lock()

    def history(self, session_id: str, limit: int) -> list[Turn]:
        with self._lock:
            rows = self._db.execute(
                "SELECT message, response FROM blueprint_messages WHERE session_id = ? ORDER BY id DESC LIMIT ?",
                (session_id, limit),
            ).fetchall()
        return [Turn(user=m, assistant=r) for m, r in reversed(rows)]

    def add_exchange(self, session_id: str, blueprint_id: str, at: datetime, message: str, response: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO blueprint_messages(session_id, blueprint_id, at, message, response) VALUES (?, ?, ?, ?, ?)",
                (session_id, blueprint_id, at.isoformat(), message, response),
            )

    def append_logs(self, session_id: str, entries: Sequence[LogEntry]) -> None:
        rows = [(session_id, e.run_id, e.at.isoformat(), e.kind, json.dumps(e.data, default=str)) for e in entries]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT INTO blueprint_run_logs(session_id, run_id, at, kind, data) VALUES (?, ?, ?, ?, ?)", rows
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def logs(self, session_id: str) -> list[LogEntry]:
        with self._lock:
            rows = self._db.execute(
                "SELECT run_id, at, kind, data FROM blueprint_run_logs WHERE session_id = ? ORDER BY id",
                (session_id,),
            ).fetchall()
        return [
            LogEntry.model_validate({"run_id": r, "at": a, "kind": k, "data": json.loads(d)}) for r, a, k, d in rows
        ]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def open_session_store(inventory_path: Path | str) -> SessionStore:
    """The store beside the inventory; an in-memory inventory gets an in-memory session store."""
    if str(inventory_path) == ":memory:":
        return MemorySessionStore()
    # Opening the inventory runs its migrations, which create the session tables.
    SQLiteStore(inventory_path).close()
    return SQLiteSessionStore(inventory_path)
