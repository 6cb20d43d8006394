"""The shared inventory: the `Store` protocol on PostgreSQL, for many servers on one database.

Each server keeps a psycopg 3 connection pool. The database enforces what must hold across servers:
live names are unique (a partial unique index), `max_tools` is checked under an advisory lock in the
inserting transaction, and usage counters and tier changes are single `UPDATE ... SET n = n + 1`
statements on a locked row. Text search reads PostgreSQL's full-text documents (weighted tsvector), so
every server ranks from the same index; vectors live in `tool_vectors` and each server searches its
own in-memory copy, kept in step by the change feed (awb.inventory.postgres_notify), unless the server
has pgvector: then they are mirrored into HNSW indexes that search asks (awb.inventory.postgres_vectors).

Listing, search and vectors (awb.inventory.postgres_listing), calls, staged writes and the event
journal (awb.inventory.postgres_records), purges (awb.inventory.postgres_forget), versions
(awb.inventory.postgres_versions) and the panel's sign-outs (awb.inventory.panel_sign_outs) are mixed
into the store; rows map to records as in SQLite (awb.inventory.rows). The connection pool is set up in awb.inventory.postgres_pool.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, cast

from awb.inventory import postgres_pool
from awb.inventory.models import CallRecord, Tool, ToolVersion
from awb.inventory.names import NEXT_VARIANT, VARIANT_NAMES, grouped, holder_query, name_taken
from awb.inventory.panel_sign_outs import PostgresSignOuts
from awb.inventory.postgres_forget import PostgresForgetting
from awb.inventory.postgres_listing import PostgresListing
from awb.inventory.postgres_migrations import SCHEMA_VERSION, applied_versions
from awb.inventory.postgres_notify import CHANNEL, Change, ChangeListenerThread, payload, send
from awb.inventory.postgres_pool import POOL_MAX, POOL_WAIT_SECONDS, connect, open_pool, psycopg_modules, redacted
from awb.inventory.postgres_records import CALLS_CACHED, PostgresRecords
from awb.inventory.postgres_text import PostgresTextIndex
from awb.inventory.postgres_vectors import PgVectorMirror, PgVectorSetting
from awb.inventory.postgres_versions import INSERT_VERSION, PostgresVersions
from awb.inventory.read_cache import MISSING, ReadCache
from awb.inventory.rows import (
    SELECT_TOOLS,
    chunks,
    field_values,
    first_version,
    inventory_full,
    maintainable_where,
    row_to_tool,
    snapshot_condition,
    tool_values,
    version_values,
)

#: Advisory lock key serialising inserts while `max_tools` is checked ("awb_add" in ASCII).
ADD_LOCK = 0x6177625F616464
#: Fields whose new values this server can put into its cached record as they are (delete, equip,
#: tier changes); any other write makes it read the record again.
_RECORD_FIELDS = frozenset({"status", "equipped", "updated_at", "memory_level", "last_used_at"})
#: Rows an import writes per statement.
IMPORT_BATCH = 1000


class PostgresStore(PostgresListing, PostgresRecords, PostgresForgetting, PostgresVersions, PostgresSignOuts):
    """The `Store` protocol (and the vector, staging and journal methods) on a PostgreSQL database."""

    def __init__(
        self,
        url: str,
        *,
        max_tools: int | None = None,
        pool_size: int = POOL_MAX,
        migrate_schema: bool = True,
        text_search: Literal["bm25", "fts"] = "bm25",
        durable: bool = False,
        pgvector: PgVectorSetting = "auto",
        pool_wait: float = POOL_WAIT_SECONDS,
        statement_timeout: float | None = None,
    ) -> None:
        psycopg_modules()
        self.url = url
        self.max_tools = max_tools
        self.durable = durable
        #: Tags this process's change messages, so its own listener ignores them.
        self.origin = uuid.uuid4().hex
        self._connect: Callable[[str], Any] = connect
        #: Seconds a statement may run (None: `postgres_pool.STATEMENT_SECONDS`, read when needed).
        self._statement_timeout = statement_timeout
        self._pool = open_pool(
            url,
            max_size=pool_size,
            migrate_schema=migrate_schema,
            durable=durable,
            wait=pool_wait,
            statement=statement_timeout,
        )
        self._feed = ChangeListenerThread(url, self.origin, self._connect)
        #: Bumped when another process made a change too broad to follow tool by tool (see `data_version`).
        self._resyncs = 0
        self._following = False
        self._follow_lock = threading.Lock()
        #: "bm25" ranks in memory (awb.inventory.postgres_text); "fts" asks PostgreSQL's ts_rank (kept
        #: for the retrieval benchmark, which compares the two).
        self.text_search = text_search
        self._text = PostgresTextIndex(self._pool)
        self._cache = ReadCache()
        self._text_lock = threading.Lock()
        self._vectors = PgVectorMirror.open(self._pool, pgvector)

    @property
    def where(self) -> str:
        """The URL without its password, for messages."""
        return redacted(self.url)

    @property
    def answer_within(self) -> float:
        """How long a request waits for this store's work at most (awb.inventory.lane): the wait for a
        pooled connection, then a statement's `statement_timeout`; past it, `unavailable`."""
        statement = self._statement_timeout
        return float(self._pool.wait) + (postgres_pool.STATEMENT_SECONDS if statement is None else statement)

    def connection(self) -> AbstractContextManager[Any]:
        """One of the store's pooled connections (autocommit), for the blueprint runtime's sessions."""
        return cast("AbstractContextManager[Any]", self._pool.connection())

    # --- life cycle, schema and the change feed ---------------------------------------------------

    def close(self) -> None:
        if self._feed.running:
            self._feed.stop()
            try:
                self.announce("stop", [])  # wakes our own listener now (others ignore "stop")
            except Exception:  # the database is gone: the listener notices within its wait anyway
                pass
        self._feed.close()
        self._pool.close()

    def schema_version(self) -> int:
        with self._pool.connection() as conn:
            return max(applied_versions(conn), default=0)

    def data_version(self) -> int:
        """Changes by other servers arrive on the feed and are followed one tool at a time; this
        number moves only on a `resync` (a reconnect, a bulk import), when caches must reload."""
        return self._resyncs

    def _on_change(self, change: Change) -> None:
        """The store's own caches follow every change another server commits."""
        if change.kind == "resync":
            self._resyncs += 1
            self._text.mark_all()
            self._cache.clear()
        elif change.kind == "called":
            self._cache.invalidate(change.tool_ids, counts=False)
        elif change.kind != "vector":
            self._text.mark_tools(change.tool_ids)
            self._cache.invalidate(change.tool_ids)

    def _written(self, tool_ids: list[str]) -> None:
        """This server wrote these tools: its caches re-read them."""
        self._text.mark_tools(tool_ids)
        self._cache.invalidate(tool_ids)

    def _follow(self) -> None:
        """Start following the change feed (once), before any cache is filled."""
        if self._following:
            return
        with self._follow_lock:
            if not self._following:
                self._feed.subscribe(self._on_change)
                self._following = True

    def subscribe_changes(self, listener: Callable[[Change], None]) -> Callable[[], None]:
        """Call `listener` (on the feed's thread) for every change another process commits."""
        self._follow()
        return self._feed.subscribe(listener)

    def announce(self, kind: str, tool_ids: list[str], *, equipped: bool = False) -> None:
        """Tell the other servers about a change made outside the usual methods (bulk import)."""
        with self._pool.connection() as conn:
            send(conn, self.origin, kind, tool_ids, equipped=equipped)

    def server_info(self) -> dict[str, Any]:
        """What `awb doctor` and `awb db status` show: server version, migrations, vector search path."""
        with self._pool.connection() as conn:
            version = str(conn.execute("SHOW server_version").fetchone()[0])
            applied = applied_versions(conn)
        return {
            "server_version": version,
            "schema": max(applied, default=0),
            "schema_expected": SCHEMA_VERSION,
            "migrations": applied,
            "pgvector_active": self._vectors.active,
            "vector_search": self._vectors.state.path,
        }

    # --- tools --------------------------------------------------------------------------------

    def check_room(self, max_active: int) -> None:
        """Raise `limit_exceeded` when `max_active` live tools are already stored (an early check)."""
        if self.count_active() >= max_active:
            raise inventory_full(max_active)

    def add_tool(self, tool: Tool, *, max_active: int | None = None, keep_case_variants: bool = False) -> None:
        """Insert a tool (see `SQLiteStore.add_tool`). The name is checked ignoring case in the inserting
        transaction, and the unique index on `(lower(name), case_variant)` refuses the second of two
        servers' inserts that both passed their check."""
        limit = max_active if max_active is not None else self.max_tools
        first = first_version(tool)
        with self._pool.connection() as conn, conn.transaction():
            if limit is not None:
                # One inserter at a time: the count and the insert are then one atomic step across servers.
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADD_LOCK,))
                live = conn.execute("SELECT count FROM awb_live_tools").fetchone()[0]
                if live >= limit:
                    raise inventory_full(limit)
            self._insert_tool(conn, tool, [first], _case_variant(conn, tool, keep=keep_case_variants))
            send(conn, self.origin, "crafted", [tool.tool_id], equipped=tool.equipped)
        generation = self._cache.generation()
        self._written([tool.tool_id])
        # Write-through: the server that crafted a tool is the one most likely to use it next.
        self._cache.put_tool(generation + 1, tool.tool_id, tool)
        self._cache.put(generation + 1, self._cache.versions, tool.tool_id, [first])
        self._cache.put(generation + 1, self._cache.calls, tool.tool_id, (CALLS_CACHED, []))

    @staticmethod
    def _insert_tool(conn: Any, tool: Tool, versions: list[ToolVersion], case_variant: int = 0) -> None:
        """The tool's row and its versions, in the caller's transaction."""
        values = {**tool_values(tool, sqlite=False), "case_variant": case_variant}
        marks = ", ".join("%s" for _ in values)
        conn.execute(f"INSERT INTO tools ({', '.join(values)}) VALUES ({marks})", list(values.values()))
        with conn.cursor() as cursor:
            cursor.executemany(INSERT_VERSION, [version_values(tool.tool_id, v) for v in versions])

    def import_tool(
        self,
        tool: Tool,
        versions: list[ToolVersion],
        *,
        calls: Iterable[CallRecord] = (),
        staged: Iterable[dict[str, Any]] = (),
    ) -> None:
        """Insert a tool, its versions, its call history and its staged writes exactly as exported
        (`awb inventory import`), in one transaction. Case-variants the export holds (an older
        inventory's) are all kept, as the migration kept them."""
        with self._pool.connection() as conn, conn.transaction():
            self._insert_tool(conn, tool, versions, _case_variant(conn, tool, keep=True))
            for batch in chunks(calls, IMPORT_BATCH):
                self._insert_calls(conn, batch)
            for writes in chunks(staged, IMPORT_BATCH):
                self._insert_staged(conn, writes)
        self._written([tool.tool_id])

    def get(self, tool_id: str) -> Tool | None:
        return self.get_many([tool_id]).get(tool_id)

    def cached(self, ref: str) -> Tool | None:
        """The live record `ref` (a tool_id, else a name) names, as this server's cache holds it (kept in
        step by the change feed), without asking the database; None when the cache cannot say."""
        if not self._following:
            return None
        found = self._cache.tools.get(ref) if ref.startswith("tool_") else self._cache.tool_named(ref)
        if found is None or found is MISSING or found.status == "deleted":
            return None
        return found  # type: ignore[no-any-return]

    def get_many(self, tool_ids: Sequence[str]) -> dict[str, Tool]:
        """Cached records as they are; the others in one round trip (a search's window of results)."""
        self._follow()
        found: dict[str, Tool] = {}
        wanted: list[str] = []
        for tool_id in dict.fromkeys(tool_ids):
            cached = self._cache.tools.get(tool_id)
            if cached is None:
                wanted.append(tool_id)
            elif cached is not MISSING:
                found[tool_id] = cached
        if wanted:
            generation = self._cache.generation()
            with self._pool.connection() as conn:
                rows = conn.execute(f"{SELECT_TOOLS} WHERE t.tool_id = ANY(%s)", (wanted,)).fetchall()
            read = {tool.tool_id: tool for tool in map(row_to_tool, rows)}
            for tool_id in wanted:
                self._cache.put_tool(generation, tool_id, read.get(tool_id, MISSING))
            found.update(read)
        return found

    def reread(self, tool_id: str) -> Tool | None:
        """The tool with counters as fresh as the database's: a record this server's own calls kept warm
        may trail another server's call whose announcement has not arrived yet, so it is read again;
        any other cached record is as fresh as the change feed keeps it."""
        if tool_id in self._cache.warmed:
            self._cache.invalidate([tool_id], counts=False)
        return self.get(tool_id)

    def get_by_name(self, name: str, *, include_deleted: bool = False) -> Tool | None:
        self._follow()
        cached = self._cache.tool_named(name)
        if cached is not None and cached is not MISSING and cached.status != "deleted":
            return cached  # type: ignore[no-any-return]
        generation = self._cache.generation()
        live = "" if include_deleted else " AND t.status <> 'deleted'"
        with self._pool.connection() as conn:
            row = conn.execute(
                f"{SELECT_TOOLS} WHERE t.name = %s{live} ORDER BY t.status = 'deleted', t.seq DESC LIMIT 1", (name,)
            ).fetchone()
        tool = None if row is None else row_to_tool(row)
        if tool is not None:
            self._cache.put_tool(generation, tool.tool_id, tool)
        return tool

    def name_holder(self, name: str) -> Tool | None:
        """The live tool named `name` ignoring case (that very name first): who holds it for a new tool."""
        with self._pool.connection() as conn:
            row = conn.execute(
                holder_query(SELECT_TOOLS, "%s"),
                (name, name),
            ).fetchone()
        return None if row is None else row_to_tool(row)

    def case_variants(self) -> list[list[str]]:
        """Names of live tools that equal one another ignoring case (kept from before the rule)."""
        with self._pool.connection() as conn:
            rows = conn.execute(VARIANT_NAMES.format(order="seq")).fetchall()
        return grouped(rows)

    def update(self, tool_id: str, **fields: Any) -> None:
        self.update_if(tool_id, {}, **fields)

    def update_if(self, tool_id: str, expected: Mapping[str, Any], **fields: Any) -> bool:
        """Set `fields` only while the tool's columns still hold the `expected` values, in one statement
        with its announcement (a compare-and-set: a change another server committed since they were read
        wins, and nothing is announced)."""
        if not fields:
            return False
        kind = "deleted" if fields.get("status") == "deleted" else "updated"
        message = payload(self.origin, kind, [tool_id], equipped="equipped" in fields)
        values = field_values(dict(fields), sqlite=False)
        condition, args = snapshot_condition(expected, sqlite=False)
        assignments = ", ".join(f"{k} = %s" for k in values)
        with self._pool.connection() as conn:
            # One statement: the update and its announcement commit together, in one round trip.
            moved = conn.execute(
                f"WITH u AS (UPDATE tools SET {assignments} WHERE tool_id = %s AND {condition} RETURNING 1) "
                "SELECT pg_notify(%s, %s) FROM u",
                [*values.values(), tool_id, *args, CHANNEL, message],
            ).fetchall()
        self._text.mark_tools([tool_id])
        if moved and set(fields) <= _RECORD_FIELDS:
            self._cache.updated(tool_id, dict(fields))
        else:
            self._cache.invalidate([tool_id])
        return len(moved) == 1

    def iter_maintainable(self, idle_before: Mapping[str, str] | None = None) -> Iterator[Tool]:
        where, values = maintainable_where(idle_before, "%s")
        with self._pool.connection() as conn:
            rows = conn.execute(f"{SELECT_TOOLS} WHERE {where}", values).fetchall()
        return iter([row_to_tool(r) for r in rows])


def _case_variant(conn: Any, tool: Tool, *, keep: bool) -> int:
    """The `case_variant` a new row takes, read in the inserting transaction; `name_conflict` naming the
    holder of the name when it is taken ignoring case and not `keep`."""
    if tool.status == "deleted":
        return 0
    if keep:
        return int(conn.execute(NEXT_VARIANT.format(mark="%s"), (tool.name,)).fetchone()[0])
    holder = conn.execute(
        holder_query("SELECT t.name, t.tool_id FROM tools t", "%s"),
        (tool.name, tool.name),
    ).fetchone()
    if holder is not None:
        raise name_taken(tool.name, holder[0], holder[1])
    return 0


__all__ = ["PostgresStore"]
