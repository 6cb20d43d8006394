"""What the SQLite inventory records beside its tools: calls, staged writes and the event journal; the
write side `SQLiteStore` mixes in."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from awb.inventory.call_groups import GroupMoves, by_tool, one_by_one, per_version
from awb.inventory.models import CallRecord, MemoryLevel, ToolCounters
from awb.inventory.rows import (
    CALL_COLUMNS,
    SELECT_STAGED,
    StagingCaps,
    call_values,
    iso,
    row_to_call,
    staged_page_query,
    staged_row,
)
from awb.inventory.sqlite_cache import ToolCache
from awb.inventory.sqlite_schema import STAGED_SIZE
from awb.inventory.store import record_one_at_a_time

#: Journal rows kept (`append_event`): enough for any reader that was away a minute or two.
EVENTS_KEPT = 5000

_INSERT_CALL = f"INSERT INTO calls ({CALL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
#: An imported call whose id is already here (an earlier import of the same history) is kept as it is.
_IMPORT_CALL = _INSERT_CALL.replace("INSERT INTO", "INSERT OR IGNORE INTO", 1)
#: Several calls of one tool counted at once: successes and failures, the last success's time. What it
#: returns is the counters after all of them. It leaves `status` alone: a statement that sets a column
#: rewrites every index that holds it or is partial on it, and four of the tools table's are (measured:
#: 9 pages written to the WAL for a one-call record, 6 without), so the rare success of an archived tool
#: sets it back apart (`_UNARCHIVE`), in the same transaction.
_COUNT_CALLS = (
    "UPDATE tools SET usage_count = usage_count + ?, success_count = success_count + ?, "
    "failure_count = failure_count + ?, last_used_at = coalesce(?, last_used_at) WHERE tool_id = ? "
    "RETURNING usage_count, success_count, failure_count, memory_level, status"
)
#: A success brings an archived tool back.
_UNARCHIVE = "UPDATE tools SET status = 'active' WHERE tool_id = ? AND status = 'archived'"
_COUNT_VERSION = (
    "UPDATE tool_versions SET usage_count = usage_count + ?, failure_count = failure_count + ? "
    "WHERE tool_id = ? AND version = ?"
)
#: Up to ?3 of a tool's calls older than its ?2 most recent (the bound is the newest call past those;
#: with none past them, nothing goes).
_PRUNE_CALLS = (
    "DELETE FROM calls WHERE id IN (SELECT id FROM calls WHERE tool_id = ?1 AND id <= "
    "(SELECT id FROM calls WHERE tool_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2) ORDER BY id LIMIT ?3)"
)
#: Calls deleted per write transaction: a first prune of a long history must not hold the store's lock
#: (and every call waiting on it) for seconds.
PRUNE_CHUNK = 5000


class SQLiteRecords:
    """Needs the store's connection and its lock."""

    _db: sqlite3.Connection
    _lock: threading.RLock
    _tools: ToolCache

    # --- calls --------------------------------------------------------------------------------

    def record_call(
        self, call: CallRecord, *, level_after: Callable[[MemoryLevel, int], MemoryLevel] | None = None
    ) -> ToolCounters:
        """Append a call record and move the tool's counters in SQL (`x = x + 1`), in one write
        transaction: concurrent calls from any process never lose an update. A success also brings an
        archived tool back and, with `level_after`, sets the tier its counted usage earns."""
        [counters] = self._record_together([call], level_after)
        return counters

    def record_calls(
        self, calls: Sequence[CallRecord], *, level_after: Callable[[MemoryLevel, int], MemoryLevel] | None = None
    ) -> list[ToolCounters | Exception]:
        """Several calls in one write transaction: their records go in with one statement and each tool's
        counters move once for all its calls, so the pages they share (the calls table's last page and
        indexes, the tool's row) are written once, not once a call. Each call still gets the counters
        and tier it would have read back alone (the status a call reports is the tool's after the
        group). If the transaction fails, each call is recorded on its own, so one bad record costs only
        itself."""
        try:
            return list(self._record_together(calls, level_after))
        except Exception as exc:
            if len(calls) == 1:
                return [exc]
        return record_one_at_a_time(self.record_call, calls, level_after)

    def _record_together(
        self, calls: Sequence[CallRecord], level_after: Callable[[MemoryLevel, int], MemoryLevel] | None
    ) -> list[ToolCounters]:
        with self._lock:
            changes_before = self._db.total_changes
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(_INSERT_CALL, [call_values(call, sqlite=True) for call in calls])
                recorded: list[ToolCounters] = [ToolCounters.of_missing_tool()] * len(calls)
                moves = [self._count(calls, group, recorded, level_after) for group in by_tool(calls)]
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._tools.counted_in(changes_before, [move for move in moves if move is not None])
        return recorded

    def _count(
        self,
        calls: Sequence[CallRecord],
        group: list[int],
        recorded: list[ToolCounters],
        level_after: Callable[[MemoryLevel, int], MemoryLevel] | None,
    ) -> tuple[str, dict[str, Any]] | None:
        """Move the counters of the tool that the calls at `group` (indexes into `calls`, in call order)
        ran, once for all of them, inside the caller's transaction; fill in each call's own counters
        (what one call at a time would have read back) and return the fields the tool's record moved."""
        moves = GroupMoves.of(calls, group)
        self._db.executemany(
            _COUNT_VERSION,
            [(uses, failed, moves.tool_id, version) for version, (uses, failed) in per_version(calls, group).items()],
        )
        last_used = iso(moves.last_used.at) if moves.last_used is not None else None
        rows = self._db.execute(
            _COUNT_CALLS, (moves.ok, moves.ok, moves.failed, last_used, moves.tool_id)
        ).fetchall()  # all of it: a RETURNING statement left unfinished would block the COMMIT
        if not rows:
            return None  # no such tool (purged meanwhile): its calls count nothing
        counted = rows[0]
        if moves.ok and counted[4] == "archived":
            self._db.execute(_UNARCHIVE, (moves.tool_id,))
            counted = (*counted[:4], "active")
        # The update leaves memory_level alone, so what it returned is also the tier before the first call.
        before = counted[3]
        level, fields = one_by_one(calls, group, moves, counted, recorded, level_after)
        if level != before:
            self._db.execute("UPDATE tools SET memory_level = ? WHERE tool_id = ?", (level, moves.tool_id))
        return moves.tool_id, fields

    def calls(self, tool_id: str, limit: int = 20) -> list[CallRecord]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {CALL_COLUMNS} FROM calls WHERE tool_id = ? ORDER BY id DESC LIMIT ?", (tool_id, limit)
            ).fetchall()
        return [row_to_call(r) for r in rows]

    def prune_calls(self, keep: int, tool_ids: Sequence[str] | None = None) -> int:
        if tool_ids is None:
            with self._lock:
                tool_ids = [row[0] for row in self._db.execute("SELECT tool_id FROM tools")]
        pruned = 0
        for tool_id in tool_ids:
            while True:
                with self._lock:  # each statement its own transaction (the connection autocommits)
                    gone = self._db.execute(_PRUNE_CALLS, (tool_id, keep, PRUNE_CHUNK)).rowcount
                pruned += gone
                if gone < PRUNE_CHUNK:
                    break
        return pruned

    def call_history(self, tool_id: str, *, after: int = 0, limit: int = 1000) -> list[tuple[int, CallRecord]]:
        """(position, call) of a tool's calls, oldest first, from after position `after` (export pages)."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT id, {CALL_COLUMNS} FROM calls WHERE tool_id = ? AND id > ? ORDER BY id LIMIT ?",
                (tool_id, after, limit),
            ).fetchall()
        return [(int(r[0]), row_to_call(r[1:])) for r in rows]

    def _insert_calls(self, calls: list[CallRecord]) -> None:
        """Imported calls, under the lock, in the caller's transaction."""
        self._db.executemany(_IMPORT_CALL, [call_values(c, sqlite=True) for c in calls])

    # --- staged writes (awb.sandbox.staging) ------------------------------------------------------

    def stage_write(
        self,
        tool_id: str,
        path: str,
        content: str,
        at: datetime,
        *,
        call_id: str,
        max_tool_bytes: int | None = None,
        max_total_bytes: int | None = None,
        max_tool_writes: int | None = None,
        max_total_writes: int | None = None,
    ) -> int:
        """Keep a write for review. The caps count pending writes and their bytes (per tool, and in all)
        and are checked in the write transaction, so concurrent calls cannot pass them together."""
        size = len(content.encode("utf-8", errors="surrogatepass"))
        caps = StagingCaps(max_tool_bytes, max_total_bytes, max_tool_writes, max_total_writes)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for query, args, limits, scope in caps.checks(tool_id, "?", STAGED_SIZE):
                    caps.refuse_past(size, self._db.execute(query, args).fetchone(), limits, scope)
                cursor = self._db.execute(
                    "INSERT INTO staged_writes (tool_id, call_id, path, content, created_at) VALUES (?, ?, ?, ?, ?)",
                    (tool_id, call_id, path, content, iso(at)),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return int(cursor.lastrowid or 0)

    def staged_writes(
        self,
        status: str | None = None,
        *,
        tool_id: str | None = None,
        after_id: int | None = None,
        before_id: int | None = None,
        limit: int | None = None,
        preview: int | None = None,
    ) -> list[dict[str, Any]]:
        """Staged writes, oldest first; all of them, or those with `status` (and of `tool_id`). A page:
        at most `limit`, the first ones with an id past `after_id`, or the last ones before `before_id`.
        With `preview`, each content's first `preview` bytes (as bytes), and its whole `size` in bytes."""
        query, args = staged_page_query(
            "?",
            status,
            tool_id,
            after_id,
            before_id,
            limit,
            preview=preview,
            utf8="CAST(content AS BLOB)",
            size=STAGED_SIZE,
        )
        with self._lock:
            rows = self._db.execute(query, args).fetchall()
        return sorted((staged_row(r) for r in rows), key=lambda row: int(row["id"]))

    def get_staged(self, staged_id: int) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute(f"{SELECT_STAGED} WHERE id = ?", (staged_id,)).fetchone()
        return None if row is None else staged_row(row)

    def set_staged_status(self, staged_id: int, status: str, *, expected: str | None = None) -> bool:
        """Set a staged write's status; with `expected`, only if it currently has that status."""
        query = "UPDATE staged_writes SET status = ? WHERE id = ?"
        args: tuple[Any, ...] = (status, staged_id)
        if expected is not None:
            query += " AND status = ?"
            args = (status, staged_id, expected)
        with self._lock:
            cursor = self._db.execute(query, args)
        return cursor.rowcount == 1

    def _insert_staged(self, writes: list[dict[str, Any]]) -> None:
        """Imported staged writes, status kept (under the lock, in the caller's transaction)."""
        self._db.executemany(
            "INSERT INTO staged_writes (tool_id, call_id, path, content, created_at, status) VALUES (?, ?, ?, ?, ?, ?)",
            [(w["tool_id"], w["call_id"], w["path"], w["content"], w["created_at"], w["status"]) for w in writes],
        )

    # --- the event journal (awb.feed reads it from other connections and processes) ------------------

    def append_event(self, kind: str, tool_id: str | None, data: dict[str, Any], at: datetime) -> int:
        """Journal one workbench event; only the newest EVENTS_KEPT stay."""
        with self._lock:
            cursor = self._db.execute(
                "INSERT INTO workbench_events (at, kind, tool_id, data) VALUES (?, ?, ?, ?)",
                (iso(at), kind, tool_id, json.dumps(data, default=str)),
            )
            event_id = int(cursor.lastrowid or 0)
            if event_id % 100 == 0:
                self._db.execute("DELETE FROM workbench_events WHERE id <= ?", (event_id - EVENTS_KEPT,))
        return event_id


__all__ = ["EVENTS_KEPT", "SQLiteRecords"]
