"""What the PostgreSQL inventory records beside its tools: calls, staged writes and the event journal;
the write side `PostgresStore` mixes in."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from awb.inventory.call_groups import GroupMoves, by_tool, one_by_one, per_version
from awb.inventory.models import CallRecord, MemoryLevel, ToolCounters
from awb.inventory.postgres_notify import CHANNEL, ChangeListenerThread, payload, send
from awb.inventory.read_cache import ReadCache
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
from awb.inventory.store import record_one_at_a_time

log = logging.getLogger("awb.inventory")

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
#: Calls recorded together (`record_calls`): the calls go in, each (tool, version) and each tool moves
#: once, other servers hear once. The tools are locked first, in tool id order (`old` is materialised
#: and read before any tool is updated), and `old` is each tool's tier before these calls.
_RECORD_TOGETHER = (
    f"WITH c AS (INSERT INTO calls ({CALL_COLUMNS}) SELECT * FROM unnest(%s::text[], %s::int[], %s::text[], "
    "%s::float8[], %s::bool[], %s::text[], %s::text[], %s::bigint[])), "
    "v AS (UPDATE tool_versions tv SET usage_count = tv.usage_count + x.uses, "
    "failure_count = tv.failure_count + x.failed "
    "FROM unnest(%s::text[], %s::int[], %s::int[], %s::int[]) AS x(tool_id, version, uses, failed) "
    "WHERE tv.tool_id = x.tool_id AND tv.version = x.version), "
    "n AS (SELECT pg_notify(%s, %s)), "
    "d AS (SELECT * FROM unnest(%s::text[], %s::int[], %s::int[], %s::text[]) AS d(tool_id, ok, failed, last_used)), "
    "old AS MATERIALIZED (SELECT t.tool_id, t.memory_level FROM tools t WHERE t.tool_id IN (SELECT tool_id FROM d) "
    "ORDER BY t.tool_id FOR UPDATE) "
    "UPDATE tools t SET usage_count = t.usage_count + d.ok, success_count = t.success_count + d.ok, "
    "failure_count = t.failure_count + d.failed, last_used_at = coalesce(d.last_used, t.last_used_at), "
    "status = CASE WHEN d.ok > 0 AND t.status = 'archived' THEN 'active' ELSE t.status END "
    "FROM d, old, n WHERE t.tool_id = d.tool_id AND old.tool_id = d.tool_id "
    "RETURNING t.tool_id, t.usage_count, t.success_count, t.failure_count, old.memory_level, t.status"
)


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
        """Several calls in one statement (one round trip, one commit): their records go in together and
        each tool's counters move once for all its calls. Each call still gets the counters and tier it
        would have read back alone. If the statement fails, nothing of it was written and each call is
        recorded on its own, so one bad record costs only itself."""
        if len(calls) < 2:
            return record_one_at_a_time(self.record_call, calls, level_after)
        # Tools (and versions) in one order on every server: two groups locking the same tools take
        # their locks in the same order and so never deadlock each other.
        groups = sorted(by_tool(calls), key=lambda group: calls[group[0]].tool_id)
        moves = [GroupMoves.of(calls, group) for group in groups]
        try:
            after = self._write_together(calls, groups, moves)
        except Exception as exc:  # nothing of the statement was written
            log.debug("recording %d calls together failed (%s); one at a time", len(calls), exc)
            return record_one_at_a_time(self.record_call, calls, level_after)
        recorded: list[ToolCounters | Exception] = [ToolCounters.of_missing_tool()] * len(calls)
        for m, group in zip(moves, groups, strict=True):
            found = after.get(m.tool_id)
            if found is None:  # no such tool (purged meanwhile): its calls count nothing
                self._cache.invalidate([m.tool_id], counts=False)
                continue
            level, fields = one_by_one(calls, group, m, found, recorded, level_after)
            self._cache.counted(m.tool_id, fields)
            if level != found[3] and not self._set_tier(m.tool_id, found[3], level):
                for i in group:  # the tier did not move (another server moved it first): theirs stands
                    counted = recorded[i]
                    assert isinstance(counted, ToolCounters)
                    recorded[i] = counted.model_copy(update={"memory_level": found[3]})
        return recorded

    def _write_together(
        self, calls: Sequence[CallRecord], groups: list[list[int]], moves: list[GroupMoves]
    ) -> dict[str, tuple[Any, ...]]:
        """Run `_RECORD_TOGETHER`: {tool id: (usage, successes, failures, tier before, status)} of the
        tools found."""
        versions = sorted(
            (m.tool_id, version, uses, failed)
            for m, group in zip(moves, groups, strict=True)
            for version, (uses, failed) in per_version(calls, group).items()
        )
        rows = [call_values(call, sqlite=False) for call in calls]
        args = [
            *(list(column) for column in zip(*rows, strict=True)),
            *(list(column) for column in zip(*versions, strict=True)),
            CHANNEL,
            payload(self.origin, "called", [m.tool_id for m in moves]),
            [m.tool_id for m in moves],
            [m.ok for m in moves],
            [m.failed for m in moves],
            [iso(m.last_used.at) if m.last_used is not None else None for m in moves],
        ]
        with self._pool.connection() as conn:
            return {row[0]: tuple(row[1:]) for row in conn.execute(_RECORD_TOGETHER, args).fetchall()}

    def _set_tier(self, tool_id: str, before: MemoryLevel, level: MemoryLevel) -> bool:
        """Compare and set: a concurrent call that moved the tier first computed it from a count at
        least as high, and maintenance may have moved it since; either way theirs stands. The calls are
        recorded already, so a failure here leaves the tier for the next call or maintenance to move."""
        try:
            with self._pool.connection() as conn, conn.transaction():
                moved = conn.execute(
                    "UPDATE tools SET memory_level = %s WHERE tool_id = %s AND memory_level = %s",
                    (level, tool_id, before),
                ).rowcount
                if moved:
                    send(conn, self.origin, "updated", [tool_id])
        except Exception as exc:
            log.warning("the tier of %s did not move to %s: %s", tool_id, level, exc)
            moved = 0
        self._written([tool_id])
        return bool(moved)

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
        if level == counters.memory_level or not self._set_tier(call.tool_id, counters.memory_level, level):
            return counters
        return counters.model_copy(update={"memory_level": level})

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
        max_tool_writes: int | None = None,
        max_total_writes: int | None = None,
    ) -> int:
        """Keep a write for review. The caps count pending writes and their bytes (per tool, and in all),
        checked under an advisory lock in the inserting transaction, so concurrent calls on any server
        cannot pass them together."""
        size = len(content.encode("utf-8", errors="surrogatepass"))
        caps = StagingCaps(max_tool_bytes, max_total_bytes, max_tool_writes, max_total_writes)
        with self._pool.connection() as conn, conn.transaction():
            checks = list(caps.checks(tool_id, "%s", "octet_length(content)"))
            if checks:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (STAGE_LOCK,))
            for query, args, limits, scope in checks:
                caps.refuse_past(size, conn.execute(query, args).fetchone(), limits, scope)
            row = conn.execute(
                "INSERT INTO staged_writes (tool_id, call_id, path, content, created_at) "
                "VALUES (%s, %s, %s, %s, %s) RETURNING id",
                (tool_id, call_id, path, content, iso(at)),
            ).fetchone()
        return int(row[0])

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
            "%s",
            status,
            tool_id,
            after_id,
            before_id,
            limit,
            preview=preview,
            utf8="convert_to(content, 'UTF8')",
            size="octet_length(content)",
        )
        with self._pool.connection() as conn:
            rows = conn.execute(query, args).fetchall()
        return sorted((staged_row(r) for r in rows), key=lambda row: int(row["id"]))

    def get_staged(self, staged_id: int) -> dict[str, Any] | None:
        with self._pool.connection() as conn:
            row = conn.execute(f"{SELECT_STAGED} WHERE id = %s", (staged_id,)).fetchone()
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
