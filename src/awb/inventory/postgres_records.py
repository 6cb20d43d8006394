"""What the PostgreSQL inventory records beside its tools: calls, staged writes and the event journal;
the write side `PostgresStore` mixes in."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from awb.errors import OutputExceeded
from awb.inventory.models import CallRecord, MemoryLevel, ToolCounters
from awb.inventory.postgres_notify import CHANNEL, ChangeListenerThread, payload, send
from awb.inventory.read_cache import ReadCache
from awb.inventory.rows import CALL_COLUMNS, STAGED_COLUMNS, call_values, iso, row_to_call, staged_row
from awb.inventory.store import record_one_at_a_time

#: Advisory lock key serialising staged writes while their byte caps are checked ("awb_stg").
STAGE_LOCK = 0x6177625F737467
#: Journal rows kept (`append_event`), as in the SQLite store.
EVENTS_KEPT = 5000
#: Recent calls kept per cached tool (what `inspect` shows).
CALLS_CACHED = 20

_CALL_MARKS = ", ".join(["%s"] * len(CALL_COLUMNS.split(", ")))
_INSERT_STAGED = (
    "INSERT INTO staged_writes (tool_id, call_id, path, content, created_at, status) VALUES (%s, %s, %s, %s, %s, %s)"
)
#: Every listed tool's calls older than its `keep` most recent, in one statement.
_PRUNE_CALLS = (
    "WITH gone AS (DELETE FROM calls c USING (SELECT t.tool_id, (SELECT id FROM calls WHERE tool_id = t.tool_id "
    "ORDER BY id DESC OFFSET %s LIMIT 1) AS bound FROM unnest(%s::text[]) AS t(tool_id)) k "
    "WHERE c.tool_id = k.tool_id AND c.id <= k.bound RETURNING c.tool_id) "
    "SELECT tool_id, count(*) FROM gone GROUP BY tool_id"
)
_SELECT_STAGED = f"SELECT {', '.join(STAGED_COLUMNS)} FROM staged_writes"


class PostgresRecords:
    """Needs the store's pool, its read cache, its origin, its change feed and `_follow` / `_written`."""

    _pool: Any
    _cache: ReadCache
    _feed: ChangeListenerThread
    origin: str

    def _follow(self) -> None:
        raise NotImplementedError

    def _written(self, tool_ids: list[str]) -> None:
        raise NotImplementedError

    # --- calls --------------------------------------------------------------------------------

    def record_calls(
        self, calls: Sequence[CallRecord], *, level_after: Callable[[MemoryLevel, int], MemoryLevel] | None = None
    ) -> list[ToolCounters | Exception]:
        """Each call in its own statement: one round trip each, as a single record."""
        return record_one_at_a_time(self.record_call, calls, level_after)

    def record_call(
        self, call: CallRecord, *, level_after: Callable[[MemoryLevel, int], MemoryLevel] | None = None
    ) -> ToolCounters:
        """Append the call and move the tool's counters by one in SQL (`x = x + 1`), in one statement:
        many servers calling one tool lose no count. A success brings an archived tool back and, with
        `level_after`, sets the tier the counted usage earns (compare-and-set on the tier)."""
        if call.ok:
            assignments = (
                "usage_count = usage_count + 1, success_count = success_count + 1, last_used_at = %s, "
                "status = CASE status WHEN 'archived' THEN 'active' ELSE status END"
            )
            values: list[Any] = [iso(call.at)]
        else:
            assignments, values = "failure_count = failure_count + 1", []
        # Every part of one statement sees the same snapshot: `old` is the tier before this call.
        sql = (
            f"WITH c AS (INSERT INTO calls ({CALL_COLUMNS}) VALUES ({_CALL_MARKS})), "
            "v AS (UPDATE tool_versions SET usage_count = usage_count + 1, failure_count = failure_count + %s "
            "WHERE tool_id = %s AND version = %s), "
            # Other servers drop their cached copy of the tool (its counters and recent calls moved).
            "n AS (SELECT pg_notify(%s, %s)), "
            "old AS (SELECT memory_level FROM tools WHERE tool_id = %s) "
            f"UPDATE tools t SET {assignments} FROM n, old WHERE t.tool_id = %s "
            "RETURNING t.usage_count, t.success_count, t.failure_count, old.memory_level, t.memory_level, t.status"
        )
        args: list[Any] = [
            *call_values(call, sqlite=False),
            0 if call.ok else 1,
            call.tool_id,
            call.version,
            CHANNEL,
            payload(self.origin, "called", [call.tool_id]),
            call.tool_id,
            *values,
            call.tool_id,
        ]
        with self._pool.connection() as conn:
            row = conn.execute(sql, args).fetchone()
            if row is None:
                self._cache.invalidate([call.tool_id], counts=False)
                return ToolCounters.of_missing_tool()
            counters = ToolCounters(
                usage_count=row[0],
                success_count=row[1],
                failure_count=row[2],
                previous_level=row[3],
                memory_level=row[4],
                status=row[5],
            )
            self._cache.counted(call.tool_id, counters.moved_fields(call))
            if not call.ok or level_after is None:
                return counters
            level = level_after(counters.memory_level, counters.usage_count)
            if level == counters.memory_level:
                return counters
            with conn.transaction():
                # Compare and set: a concurrent call that moved the tier first computed it from a count
                # at least as high, and maintenance may have moved it since; either way theirs stands.
                moved = conn.execute(
                    "UPDATE tools SET memory_level = %s WHERE tool_id = %s AND memory_level = %s",
                    (level, call.tool_id, counters.memory_level),
                ).rowcount
                if moved:
                    send(conn, self.origin, "updated", [call.tool_id])
            self._written([call.tool_id])
        return counters.model_copy(update={"memory_level": level}) if moved else counters

    def calls(self, tool_id: str, limit: int = 20) -> list[CallRecord]:
        self._follow()
        cached = self._cache.calls.get(tool_id)
        if cached is not None and cached[0] >= limit:
            return list(cached[1][:limit])
        generation = self._cache.generation()
        with self._pool.connection() as conn:
            rows = conn.execute(
                f"SELECT {CALL_COLUMNS} FROM calls WHERE tool_id = %s ORDER BY id DESC LIMIT %s", (tool_id, limit)
            ).fetchall()
        records = [row_to_call(r) for r in rows]
        self._cache.put(generation, self._cache.calls, tool_id, (limit, records))
        return list(records)

    def prune_calls(self, keep: int, tool_ids: Sequence[str] | None = None) -> int:
        with self._pool.connection() as conn:
            if tool_ids is None:
                tool_ids = [row[0] for row in conn.execute("SELECT tool_id FROM tools").fetchall()]
            pruned = conn.execute(_PRUNE_CALLS, (keep, list(tool_ids))).fetchall()
        if pruned:  # a cached recent-calls list may hold what went (a `keep` below its length)
            self._cache.invalidate([row[0] for row in pruned], counts=False)
        return sum(int(row[1]) for row in pruned)

    def call_history(self, tool_id: str, *, after: int = 0, limit: int = 1000) -> list[tuple[int, CallRecord]]:
        """(position, call) of a tool's calls, oldest first, from after position `after` (export pages)."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                f"SELECT id, {CALL_COLUMNS} FROM calls WHERE tool_id = %s AND id > %s ORDER BY id LIMIT %s",
                (tool_id, after, limit),
            ).fetchall()
        return [(int(r[0]), row_to_call(r[1:])) for r in rows]

    @staticmethod
    def _insert_calls(conn: Any, calls: list[CallRecord]) -> None:
        """Imported calls, in the caller's transaction; a call id already here is kept."""
        with conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO calls ({CALL_COLUMNS}) VALUES ({_CALL_MARKS}) ON CONFLICT (call_id) DO NOTHING",
                [call_values(c, sqlite=False) for c in calls],
            )

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
    ) -> int:
        """Keep a write for review. The caps count pending writes (per tool, and in all), checked under
        an advisory lock in the inserting transaction, so concurrent calls on any server cannot pass
        them together."""
        size = len(content.encode("utf-8", errors="surrogatepass"))
        with self._pool.connection() as conn, conn.transaction():
            if max_tool_bytes is not None or max_total_bytes is not None:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (STAGE_LOCK,))
            for limit, name, where, args in (
                (max_tool_bytes, "sandbox.max_staged_bytes_per_tool", "AND tool_id = %s", (tool_id,)),
                (max_total_bytes, "sandbox.max_staged_bytes_total", "", ()),
            ):
                if limit is None:
                    continue
                pending = conn.execute(
                    f"SELECT coalesce(sum(octet_length(content)), 0) FROM staged_writes WHERE status = 'pending' {where}",
                    args,
                ).fetchone()[0]
                if pending + size > limit:
                    raise OutputExceeded(
                        f"staging {size} more bytes would pass {name} ({limit} bytes pending at most); "
                        "apply or discard staged writes first",
                        limit=name,
                        pending=int(pending),
                    )
            row = conn.execute(
                "INSERT INTO staged_writes (tool_id, call_id, path, content, created_at) "
                "VALUES (%s, %s, %s, %s, %s) RETURNING id",
                (tool_id, call_id, path, content, iso(at)),
            ).fetchone()
        return int(row[0])

    def staged_writes(self, status: str | None = None, *, tool_id: str | None = None) -> list[dict[str, Any]]:
        """Staged writes, oldest first; all of them, or those with `status` (and of `tool_id`)."""
        where, args = [], []
        if status is not None:
            where.append("status = %s")
            args.append(status)
        if tool_id is not None:
            where.append("tool_id = %s")
            args.append(tool_id)
        query = _SELECT_STAGED + (f" WHERE {' AND '.join(where)}" if where else "")
        with self._pool.connection() as conn:
            rows = conn.execute(query + " ORDER BY id", args).fetchall()
        return [staged_row(r) for r in rows]

    def get_staged(self, staged_id: int) -> dict[str, Any] | None:
        with self._pool.connection() as conn:
            row = conn.execute(f"{_SELECT_STAGED} WHERE id = %s", (staged_id,)).fetchone()
        return None if row is None else staged_row(row)

    def set_staged_status(self, staged_id: int, status: str, *, expected: str | None = None) -> bool:
        query = "UPDATE staged_writes SET status = %s WHERE id = %s"
        args: tuple[Any, ...] = (status, staged_id)
        if expected is not None:
            query += " AND status = %s"
            args = (status, staged_id, expected)
        with self._pool.connection() as conn:
            return int(conn.execute(query, args).rowcount) == 1

    @staticmethod
    def _insert_staged(conn: Any, writes: list[dict[str, Any]]) -> None:
        """Imported staged writes, status kept, in the caller's transaction."""
        with conn.cursor() as cursor:
            cursor.executemany(
                _INSERT_STAGED,
                [(w["tool_id"], w["call_id"], w["path"], w["content"], w["created_at"], w["status"]) for w in writes],
            )

    # --- the event journal (awb.feed follows it on every server) --------------------------------------

    def append_event(self, kind: str, tool_id: str | None, data: dict[str, Any], at: datetime) -> int:
        """Journal one workbench event and wake every journal reader (a NOTIFY on EVENTS_CHANNEL, sent by
        `awb_append_event`, which also keeps ids committing in order); only the newest EVENTS_KEPT stay."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT awb_append_event(%s, %s, %s, %s, %s)",
                (iso(at), kind, tool_id, json.dumps(data, default=str), EVENTS_KEPT),
            ).fetchone()
        return int(row[0])

    def events_after(self, cursor: int, limit: int = 100) -> list[tuple[int, str, str, str | None, str]]:
        """(id, at, kind, tool_id, data as JSON) of the journal's events after `cursor`, oldest first."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, at, kind, tool_id, data FROM workbench_events WHERE id > %s ORDER BY id LIMIT %s",
                (cursor, limit),
            ).fetchall()
        return [(int(r[0]), str(r[1]), str(r[2]), r[3], str(r[4])) for r in rows]

    def events_head(self) -> int:
        """The newest event's id (0 for an empty journal)."""
        with self._pool.connection() as conn:
            return int(conn.execute("SELECT coalesce(max(id), 0) FROM workbench_events").fetchone()[0])

    def subscribe_journal(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` (on the change feed's thread) whenever the journal may have grown: an append
        by any server, this one included, or a reconnect after which some may have been missed."""
        return self._feed.subscribe_journal(listener)


__all__ = ["CALLS_CACHED", "EVENTS_KEPT", "STAGE_LOCK", "PostgresRecords"]
