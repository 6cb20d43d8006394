"""Agent runs for the panel: the blueprint runtime's run logs (`awb.blueprints.sessions`), per session,
from the inventory's own database (the SQLite file or the PostgreSQL inventory)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from awb.blueprints.journal import LogEntry
from awb.blueprints.session_tables import open_session_store
from awb.blueprints.sessions import SESSIONS_SHOWN, SessionStore, SessionSummary

if TYPE_CHECKING:
    from awb.workbench import Workbench

#: Log entries one session page shows (the newest ones when there are more).
ENTRIES_SHOWN = 500


class RunLogs:
    """Read-only view of the run logs in a session store."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store

    def sessions(self) -> list[SessionSummary]:
        return self._store.sessions(SESSIONS_SHOWN)

    def logs(self, session_id: str) -> list[LogEntry]:
        return self._store.newest_logs(session_id, ENTRIES_SHOWN)

    def close(self) -> None:
        self._store.close()


def run_logs(workbench: Workbench) -> RunLogs | None:
    """The run logs beside the workbench's inventory; None for an in-memory one (runs are not kept) or a
    file not created yet."""
    config = workbench.config
    if config.inventory_url:
        return RunLogs(open_session_store(config, inventory=workbench.store))
    path = str(getattr(workbench.store, "path", ":memory:"))
    if path == ":memory:" or not Path(path).exists():
        return None
    from awb.blueprints.session_tables import SQLiteSessionStore

    # The workbench's store opened (migrated) the file: its session tables are there.
    return RunLogs(SQLiteSessionStore(path))


__all__ = ["ENTRIES_SHOWN", "RunLogs", "SessionSummary", "run_logs"]
