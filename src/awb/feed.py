"""The workbench's events as a feed other processes can follow (the web panel's live toasts).

Every `Workbench` journals its events into its store (`SQLiteStore.append_event`), so a craft made by
any client in any process lands in the inventory file. A reader follows that journal from a cursor:
`SQLiteEventFeed` on a connection of its own to the same file; `BusFeed` for a store that keeps no
journal (an in-memory inventory: only this process's events exist). A store with a native notification
channel (PostgreSQL LISTEN/NOTIFY) implements the same small `EventFeed` protocol.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field

from awb.events import Event, EventBus
from awb.inventory.sqlite import BUSY_TIMEOUT_MS, SQLiteStore


class FeedEvent(BaseModel):
    id: int
    at: str
    kind: str
    tool_id: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class EventFeed(Protocol):
    def head(self) -> int:
        """The cursor after the newest event: `after(head())` returns only what comes next."""
        ...

    def after(self, cursor: int, limit: int = 100) -> list[FeedEvent]:
        """Events newer than `cursor`, oldest first, at most `limit`."""
        ...

    def close(self) -> None: ...


class SQLiteEventFeed:
    """Follows the `workbench_events` journal of an inventory file, whichever process writes it.

    Polls are cheap: `PRAGMA data_version` tells whether any other connection committed since the last
    look, and only then does an indexed `id > cursor` query run."""

    def __init__(self, path: Path | str) -> None:
        # Opening the store runs the migrations that create the journal.
        SQLiteStore(path).close()
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._seen_version: int | None = None
        self._last_cursor = -1

    def head(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT coalesce(max(id), 0) FROM workbench_events").fetchone()[0])

    def after(self, cursor: int, limit: int = 100) -> list[FeedEvent]:
        with self._lock:
            version = int(self._db.execute("PRAGMA data_version").fetchone()[0])
            if version == self._seen_version and cursor == self._last_cursor:
                return []
            rows = self._db.execute(
                "SELECT id, at, kind, tool_id, data FROM workbench_events WHERE id > ? ORDER BY id LIMIT ?",
                (cursor, limit),
            ).fetchall()
            # Only a complete answer lets the next poll skip on an unchanged data_version.
            if len(rows) < limit:
                self._seen_version, self._last_cursor = version, rows[-1][0] if rows else cursor
        return [FeedEvent(id=r[0], at=r[1], kind=r[2], tool_id=r[3], data=json.loads(r[4])) for r in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()


class BusFeed:
    """This process's events only, kept in a ring: the feed of a store that journals nothing."""

    def __init__(self, bus: EventBus, *, keep: int = 1000) -> None:
        self._events: deque[FeedEvent] = deque(maxlen=keep)
        self._next = 1
        self._lock = threading.Lock()
        self._unsubscribe = bus.subscribe(self._on_event)

    def _on_event(self, event: Event) -> None:
        with self._lock:
            self._events.append(
                FeedEvent(
                    id=self._next,
                    at=datetime.now(UTC).isoformat(),
                    kind=event.kind,
                    tool_id=event.tool_id,
                    data=dict(event.data),
                )
            )
            self._next += 1

    def head(self) -> int:
        with self._lock:
            return self._next - 1

    def after(self, cursor: int, limit: int = 100) -> list[FeedEvent]:
        with self._lock:
            return [e for e in self._events if e.id > cursor][:limit]

    def close(self) -> None:
        self._unsubscribe()


def open_feed(store: object, bus: EventBus) -> EventFeed:
    """The feed for a workbench's store: the file's journal when it has one, else this process's bus."""
    if isinstance(store, SQLiteStore) and store.path != ":memory:":
        return SQLiteEventFeed(store.path)
    return BusFeed(bus)
