"""The workbench's events as a feed other processes can follow (the web panel's live toasts).

Every `Workbench` journals its events into its store (`append_event`), so a craft made by any client in
any process lands in the inventory. A reader follows that journal from a cursor:

- `SQLiteEventFeed`, on a connection of its own to the inventory file, looks every `POLL_SECONDS`
  (SQLite cannot tell another process that something was written);
- `PostgresEventFeed` reads the shared database's journal and is woken by LISTEN/NOTIFY the moment
  any server appends (this one included), so it neither polls nor queries while nothing happens;
- `BusFeed` serves a store that keeps no journal (an in-memory inventory: only this process's events
  exist), woken by the event bus.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import anyio
from pydantic import BaseModel, Field

from awb.events import Event, EventBus
from awb.inventory.sqlite import BUSY_TIMEOUT_MS, SQLiteStore
from awb.wakeup import Wakeup

#: How often a reader of a SQLite journal looks for news: the bound on a toast's delay there.
POLL_SECONDS = 0.25
#: Longest wait of a woken feed when nothing happens (the stream then checks its browser is still there).
QUIET_SECONDS = 1.0


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

    async def wait(self, cursor: int) -> None:
        """Return once events newer than `cursor` may be there, or after a quiet spell of at most a
        second (so a caller can look around: is its reader still there?)."""
        ...

    def close(self) -> None: ...


def _event(row: tuple[int, str, str, str | None, str]) -> FeedEvent:
    return FeedEvent(id=row[0], at=row[1], kind=row[2], tool_id=row[3], data=json.loads(row[4]))


class SQLiteEventFeed:
    """Follows the `workbench_events` journal of an inventory file, whichever process writes it.

    Polls are cheap: `PRAGMA data_version` tells whether any other connection committed since the last
    look, and only then does an indexed `id > cursor` query run."""

    def __init__(self, path: Path | str, *, migrated: bool = False) -> None:
        if not migrated:  # opening the store runs the migrations that create the journal
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
        return [_event(r) for r in rows]

    async def wait(self, cursor: int) -> None:
        await anyio.sleep(POLL_SECONDS)

    def close(self) -> None:
        with self._lock:
            self._db.close()


class NotifyingJournal(Protocol):
    """What `PostgresEventFeed` needs of a store (awb.inventory.postgres_records)."""

    def events_after(self, cursor: int, limit: int = 100) -> list[tuple[int, str, str, str | None, str]]: ...

    def events_head(self) -> int: ...

    def subscribe_journal(self, listener: Callable[[], None]) -> Callable[[], None]: ...


class PostgresEventFeed:
    """Follows the journal every server on one PostgreSQL inventory appends to.

    The store's LISTEN connection rings on every append (and after a reconnect, when some may have been
    missed). Until it rings, `after` answers from what it knows without a query and `wait` sleeps; a
    ring wakes every waiting stream at once."""

    def __init__(self, journal: NotifyingJournal) -> None:
        self._journal = journal
        self._wakeup = Wakeup()
        self._lock = threading.Lock()
        #: (ring count, cursor) of the last complete answer: nothing newer exists until the next ring.
        self._seen: tuple[int, int] | None = None
        self._unsubscribe = journal.subscribe_journal(self._wakeup.ring)

    def head(self) -> int:
        return self._journal.events_head()

    def after(self, cursor: int, limit: int = 100) -> list[FeedEvent]:
        rung = self._wakeup.count  # read first: a ring during the query makes the next call look again
        with self._lock:
            if self._seen == (rung, cursor):
                return []
        rows = self._journal.events_after(cursor, limit)
        if len(rows) < limit:
            with self._lock:
                self._seen = (rung, rows[-1][0] if rows else cursor)
        return [_event(r) for r in rows]

    async def wait(self, cursor: int) -> None:
        await self._wakeup.wait(lambda: self._seen != (self._wakeup.count, cursor), QUIET_SECONDS)

    def close(self) -> None:
        self._unsubscribe()


class BusFeed:
    """This process's events only, kept in a ring: the feed of a store that journals nothing."""

    def __init__(self, bus: EventBus, *, keep: int = 1000) -> None:
        self._events: deque[FeedEvent] = deque(maxlen=keep)
        self._next = 1
        self._lock = threading.Lock()
        self._wakeup = Wakeup()
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
        self._wakeup.ring()

    def head(self) -> int:
        with self._lock:
            return self._next - 1

    def after(self, cursor: int, limit: int = 100) -> list[FeedEvent]:
        with self._lock:
            return [e for e in self._events if e.id > cursor][:limit]

    async def wait(self, cursor: int) -> None:
        await self._wakeup.wait(lambda: self.head() > cursor, QUIET_SECONDS)

    def close(self) -> None:
        self._unsubscribe()


def open_feed(store: object, bus: EventBus) -> EventFeed:
    """The feed for a workbench's store: the inventory's journal when it keeps one, else this process's bus."""
    if isinstance(store, SQLiteStore) and store.path != ":memory:":
        # That store opened (migrated) the file. Opening it again would check its schema again, and
        # refuse it once a newer awb has migrated it meanwhile (an upgrade while this server runs),
        # leaving the panel without a feed while MCP serves on, on the store this server holds.
        return SQLiteEventFeed(store.path, migrated=True)
    if callable(getattr(store, "subscribe_journal", None)):
        journal: Any = store
        return PostgresEventFeed(journal)
    return BusFeed(bus)
