"""Where sessions (message/response exchanges) and run logs live: a small store protocol of their own, kept
in the inventory's database (the SQLite file or the PostgreSQL inventory: awb.blueprints.session_tables)
and in memory for ephemeral use.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel

from awb.blueprints.compile import Turn
from awb.blueprints.journal import LogEntry
from awb.errors import InvalidParams, check_unicode

#: Sessions the panel's overview lists, newest first.
SESSIONS_SHOWN = 100
#: What a session id may be, from any face: the REST API's pattern, and a path segment of the panel's
#: `/runs/<id>` (a `/` in an id run from the CLI made a session no page or query could open; so did `.` and
#: `..`, which a browser resolves away, escaped or not). Written without a lookahead, which the REST
#: API's regex engine lacks: an id that starts with no dot, or with one dot and then no dot, or with two
#: and then anything.
SESSION_ID_PATTERN = (
    r"^(?:[A-Za-z0-9_:-][A-Za-z0-9_.:-]{0,127}|\.[A-Za-z0-9_:-][A-Za-z0-9_.:-]{0,126}|\.\.[A-Za-z0-9_.:-]{1,126})$"
)
#: The ids whose logs may be read: those an older awb took too (`.`, `..`), which no page shows.
SESSION_LOOKUP_PATTERN = r"^[A-Za-z0-9_.:-]{1,128}$"
_SESSION_ID = re.compile(SESSION_ID_PATTERN)
#: Longest message one run takes.
MAX_MESSAGE_CHARS = 100_000
#: Log entries one page of a session's log holds unless asked for fewer, and at most: a run logs up to
#: `blueprints.log_run_chars` (256,000 characters by default) and a session's runs are not counted, so a
#: whole log in one reply grew without bound.
LOG_PAGE_DEFAULT = 1000
LOG_PAGE_MAX = 10_000
#: Bytes of JSON one page of a session's log holds at most (its first entry aside, which a page always
#: holds): `LOG_PAGE_MAX` entries of values up to `blueprints.log_value_chars` each could be gigabytes.
LOG_PAGE_BYTES = 8 * 1024 * 1024
#: Entries read from the store at a time while a page is filled: a page past `LOG_PAGE_BYTES` is never
#: read whole.
_LOG_CHUNK = 256


def check_run_input(message: str, session_id: str | None) -> None:
    """The rules the REST API's request model holds, for every way a run starts (CLI, Agno target)."""
    if not message or len(message) > MAX_MESSAGE_CHARS:
        raise InvalidParams(
            f"the message must be 1 to {MAX_MESSAGE_CHARS} characters (got {len(message)})", field="message"
        )
    check_unicode(message, "message")
    # fullmatch: Python's `$` also matches before a final newline, which the REST API's pattern refuses.
    if session_id is not None and not _SESSION_ID.fullmatch(session_id):
        raise InvalidParams(
            f"session id {session_id[:140]!r} is not 1 to 128 of A-Z a-z 0-9 _ . : -, nor '.' or '..'",
            field="session_id",
        )


class Exchange(BaseModel):
    """One message of a session and the response it got, as stored (what an export carries)."""

    blueprint_id: str
    at: datetime
    message: str
    response: str


class SessionSummary(BaseModel):
    """A session as the panel lists it: its runs and log entries, first and last moments."""

    session_id: str
    runs: int
    entries: int
    first_at: str
    last_at: str


class SessionStore(Protocol):
    def history(self, session_id: str, limit: int) -> list[Turn]:
        """The last `limit` exchanges of the session, oldest first."""
        ...

    def add_exchange(self, session_id: str, blueprint_id: str, at: datetime, message: str, response: str) -> None: ...

    def append_logs(self, session_id: str, entries: Sequence[LogEntry]) -> None: ...

    def logs(self, session_id: str) -> list[LogEntry]:
        """Every log entry of the session, in the order it was written."""
        ...

    def log_page(self, session_id: str, *, after: int = 0, limit: int = LOG_PAGE_DEFAULT) -> list[tuple[int, LogEntry]]:
        """At most `limit` log entries of the session written after the one numbered `after` (0: from the
        first), in order, each with its number (increasing; what `after` takes to read on)."""
        ...

    def newest_logs(self, session_id: str, limit: int) -> list[LogEntry]:
        """The session's last `limit` log entries, in the order they were written."""
        ...

    def sessions(self, limit: int = SESSIONS_SHOWN) -> list[SessionSummary]:
        """Sessions with run logs, the most recently logged first."""
        ...

    def session_ids(self) -> list[str]:
        """Every session with an exchange or a log entry (what an export walks)."""
        ...

    def exchanges(self, session_id: str) -> list[Exchange]:
        """Every exchange of the session, oldest first."""
        ...

    def exchange_page(
        self, session_id: str, *, after: int = 0, limit: int = LOG_PAGE_DEFAULT
    ) -> list[tuple[int, Exchange]]:
        """At most `limit` exchanges of the session after the one numbered `after`, oldest first, each with
        its number (as `log_page`)."""
        ...

    def import_session(self, session_id: str, exchanges: Iterable[Exchange], logs: Iterable[LogEntry]) -> bool:
        """Write an exported session in one go, reading `exchanges` to its end before `logs` (both may be
        read from the file as they are written); False (and neither read) when the session already has
        records here, so an import can be re-run."""
        ...

    def close(self) -> None: ...


class MemorySessionStore:
    def __init__(self) -> None:
        self._exchanges: dict[str, list[Exchange]] = {}
        self._logs: dict[str, list[LogEntry]] = {}
        self._lock = threading.Lock()

    def history(self, session_id: str, limit: int) -> list[Turn]:
        with self._lock:
            kept = self._exchanges.get(session_id, [])[-limit:]
        return [Turn(user=e.message, assistant=e.response) for e in kept]

    def add_exchange(self, session_id: str, blueprint_id: str, at: datetime, message: str, response: str) -> None:
        exchange = Exchange(blueprint_id=blueprint_id, at=at, message=message, response=response)
        with self._lock:
            self._exchanges.setdefault(session_id, []).append(exchange)

    def append_logs(self, session_id: str, entries: Sequence[LogEntry]) -> None:
        with self._lock:
            # Re-inserted last: the dict's order is the order sessions were last logged in.
            self._logs[session_id] = [*self._logs.pop(session_id, []), *entries]

    def logs(self, session_id: str) -> list[LogEntry]:
        with self._lock:
            return list(self._logs.get(session_id, []))

    def log_page(self, session_id: str, *, after: int = 0, limit: int = LOG_PAGE_DEFAULT) -> list[tuple[int, LogEntry]]:
        # An entry's number is its place in the session's log, from 1: entries are only ever appended.
        start = max(after, 0)
        with self._lock:
            kept = self._logs.get(session_id, [])[start : start + limit]
        return list(enumerate(kept, start=start + 1))

    def newest_logs(self, session_id: str, limit: int) -> list[LogEntry]:
        with self._lock:
            return self._logs.get(session_id, [])[-limit:] if limit > 0 else []

    def sessions(self, limit: int = SESSIONS_SHOWN) -> list[SessionSummary]:
        with self._lock:
            logged = list(self._logs.items())[::-1][:limit]
        return [
            SessionSummary(
                session_id=session_id,
                runs=len({e.run_id for e in entries}),
                entries=len(entries),
                first_at=min(e.at for e in entries).isoformat(),
                last_at=max(e.at for e in entries).isoformat(),
            )
            for session_id, entries in logged
            if entries
        ]

    def session_ids(self) -> list[str]:
        with self._lock:
            return sorted(self._exchanges.keys() | self._logs.keys())

    def exchanges(self, session_id: str) -> list[Exchange]:
        with self._lock:
            return list(self._exchanges.get(session_id, []))

    def exchange_page(
        self, session_id: str, *, after: int = 0, limit: int = LOG_PAGE_DEFAULT
    ) -> list[tuple[int, Exchange]]:
        start = max(after, 0)
        with self._lock:
            kept = self._exchanges.get(session_id, [])[start : start + limit]
        return list(enumerate(kept, start=start + 1))

    def import_session(self, session_id: str, exchanges: Iterable[Exchange], logs: Iterable[LogEntry]) -> bool:
        with self._lock:
            if session_id in self._exchanges or session_id in self._logs:
                return False
            if kept_exchanges := list(exchanges):
                self._exchanges[session_id] = kept_exchanges
            if kept_logs := list(logs):
                self._logs[session_id] = kept_logs
        return True

    def close(self) -> None:
        """Nothing to release."""


def log_page_within(
    store: SessionStore, session_id: str, *, after: int, limit: int, max_bytes: int = LOG_PAGE_BYTES
) -> tuple[list[LogEntry], int | None]:
    """At most `limit` entries after the one numbered `after`, as many as fit in `max_bytes` of JSON (and
    at least one), and the number to read on from: None when these end the log. A page that ends early
    for its size gives that number as a page that ends at `limit` does."""
    page: list[LogEntry] = []
    size = 0
    cursor = after
    while True:
        asked = min(limit - len(page), _LOG_CHUNK) + 1  # one more says whether another page follows
        rows = store.log_page(session_id, after=cursor, limit=asked)
        for number, entry in rows:
            # As the reply lists it: its JSON and a comma.
            weight = len(entry.model_dump_json().encode()) + 1
            if len(page) == limit or (page and size + weight > max_bytes):
                return page, cursor
            page.append(entry)
            size += weight
            cursor = number
        if len(rows) < asked:
            return page, None
