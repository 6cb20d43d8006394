"""Agent runs for the panel: the blueprint runtime's run logs (`awb.blueprints.sessions`), per session.

The session store has no "list sessions" call, so the overview reads its table with a connection of its
own; one session's log comes from the store itself.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

from awb.blueprints.journal import LogEntry
from awb.blueprints.sessions import SQLiteSessionStore
from awb.inventory.sqlite import BUSY_TIMEOUT_MS

#: Sessions the overview lists, newest first.
SESSIONS_SHOWN = 100
#: Log entries one session page shows (the newest ones when there are more).
ENTRIES_SHOWN = 500


@dataclass(frozen=True)
class SessionSummary:
    session_id: str
    runs: int
    entries: int
    first_at: str
    last_at: str


class RunLogs:
    """Read-only view of the run logs in an inventory file."""

    def __init__(self, path: Path | str) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._store = SQLiteSessionStore(path)

    def sessions(self) -> list[SessionSummary]:
        with self._lock:
            rows = self._db.execute(
                "SELECT session_id, count(DISTINCT run_id), count(*), min(at), max(at) FROM blueprint_run_logs "
                "GROUP BY session_id ORDER BY max(id) DESC LIMIT ?",
                (SESSIONS_SHOWN,),
            ).fetchall()
        return [SessionSummary(str(r[0]), int(r[1]), int(r[2]), str(r[3]), str(r[4])) for r in rows]

    def logs(self, session_id: str) -> list[LogEntry]:
        return self._store.logs(session_id)[-ENTRIES_SHOWN:]

    def close(self) -> None:
        with self._lock:
            self._db.close()
        self._store.close()
