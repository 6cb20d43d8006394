"""The shared inventory: the `Store` protocol on PostgreSQL, for many servers on one database.

Each server keeps a psycopg 3 connection pool. The database enforces what must hold across servers:
live names are unique (a partial unique index), `max_tools` is checked under an advisory lock in the
inserting transaction, and usage counters and tier changes are single `UPDATE ... SET n = n + 1`
statements on a locked row. Text search reads PostgreSQL's full-text documents (weighted tsvector), so
every server ranks from the same index; vectors live in `tool_vectors` and each server searches its
own in-memory copy, kept in step by the change feed (awb.inventory.postgres_notify).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, Literal

from awb.errors import ConfigError, LimitExceeded, OutputExceeded
from awb.inventory.models import CallRecord, Example, MemoryLevel, Tool, ToolCounters, ToolSummary, ToolVersion
from awb.inventory.postgres_cache import MISSING, ReadCache
from awb.inventory.postgres_migrations import SCHEMA_VERSION, applied_versions, migrate
from awb.inventory.postgres_notify import CHANNEL, Change, ChangeListenerThread, payload, send
from awb.inventory.postgres_text import PostgresTextIndex
from awb.search.fts import split_identifier

#: Advisory lock key serialising inserts while `max_tools` is checked ("awb_add" in ASCII).
ADD_LOCK = 0x6177625F616464
#: Advisory lock key serialising staged writes while their byte caps are checked ("awb_stg").
STAGE_LOCK = 0x6177625F737467
#: ts_rank weights for {D, C, B, A} = {problem, description, tags, name}: SQLite's BM25 column weights.
RANK_WEIGHTS = "{0.25, 0.25, 0.5, 1.0}"
#: ts_rank normalisation 1: divide by 1 + log(document length), so long descriptions do not win by size.
RANK_NORMALISATION = 1
POOL_MAX = 8
#: Recent calls kept per cached tool (what `inspect` shows).
CALLS_CACHED = 20

_JSON_FIELDS = {"input_schema", "output_schema", "examples", "capabilities"}
_TOOL_COLUMNS = (
    "tool_id name description language runtime code input_schema output_schema examples tags problem "
    "created_by_agent capabilities version parent_version created_at updated_at last_used_at usage_count "
    "success_count failure_count memory_level status equipped"
).split()
_TOOL_FIELDS = ", ".join(f"t.{c}" for c in _TOOL_COLUMNS)
_SELECT = f"SELECT {_TOOL_FIELDS} FROM tools t"
_SUMMARY_COLUMNS = "tool_id, name, description, memory_level, usage_count, tags, status, equipped"
_ORDER = "tier, usage_count DESC, seq DESC"
_VERSION_COLUMNS = (
    "version, code, description, input_schema, output_schema, examples, runtime, created_at, usage_count, failure_count"
)


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat(timespec="microseconds")


def _encode(field: str, value: Any) -> Any:
    if field in _JSON_FIELDS:
        if value is None:
            return None
        if isinstance(value, list):
            value = [v.model_dump(mode="json") if isinstance(v, Example) else v for v in value]
        elif hasattr(value, "model_dump"):
            value = value.model_dump(mode="json")
        return json.dumps(value)
    if isinstance(value, datetime):
        return _iso(value)
    return value


def _row_to_tool(row: Sequence[Any]) -> Tool:
    data = dict(zip(_TOOL_COLUMNS, row, strict=True))
    for key in _JSON_FIELDS:
        if data[key] is not None:
            data[key] = json.loads(data[key])
    data["metadata"] = {
        "tags": list(data.pop("tags")),
        "problem": data.pop("problem"),
        "created_by_agent": data.pop("created_by_agent"),
    }
    return Tool.model_validate(data)


def _row_to_summary(row: Sequence[Any], score: float | None) -> ToolSummary:
    return ToolSummary.model_validate(
        {
            "tool_id": row[0],
            "name": row[1],
            "description": row[2],
            "memory_level": row[3],
            "usage_count": row[4],
            "tags": list(row[5]),
            "status": row[6],
            "equipped": row[7],
            "score": None if score is None else round(score, 4),
        }
    )


def _version_of(row: Sequence[Any]) -> ToolVersion:
    return ToolVersion(
        version=row[0],
        code=row[1],
        description=row[2],
        input_schema=json.loads(row[3]),
        output_schema=None if row[4] is None else json.loads(row[4]),
        examples=json.loads(row[5]),
        runtime=row[6],
        created_at=row[7],
        usage_count=row[8],
        failure_count=row[9],
    )


def _summary_filter(memory_level: MemoryLevel | None, tag: str | None) -> tuple[str, list[Any]]:
    where = ["status <> 'deleted'"]
    args: list[Any] = []
    if memory_level is not None:
        where.append("memory_level = %s")
        args.append(memory_level)
    if tag is not None:
        where.append("tags @> ARRAY[%s]::text[]")
        args.append(tag)
    return " AND ".join(where), args


def _query(words: Sequence[str]) -> tuple[str, list[str]]:
    """A tsquery OR-ing every word, each parsed as plain text (never as tsquery syntax)."""
    return " || ".join("plainto_tsquery('english', %s)" for _ in words), list(words)


def _psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError(
            "inventory_url points at PostgreSQL, but psycopg is not installed: pip install 'agent-workbench[postgres]'",
            missing=str(exc.name),
        ) from exc
    return psycopg, psycopg_pool


class PostgresStore:
    """The `Store` protocol (and the vector and staging methods) on a PostgreSQL database."""

    def __init__(
        self,
        url: str,
        *,
        max_tools: int | None = None,
        pool_size: int = POOL_MAX,
        migrate_schema: bool = True,
        text_search: Literal["bm25", "fts"] = "bm25",
        durable: bool = False,
    ) -> None:
        psycopg, psycopg_pool = _psycopg()
        self.url = url
        self.max_tools = max_tools
        self.durable = durable
        #: Tags this process's change messages, so its own listener ignores them.
        self.origin = uuid.uuid4().hex
        self._connect: Callable[[str], Any] = lambda info: psycopg.connect(info, autocommit=True)
        try:
            if migrate_schema:
                with psycopg.connect(url, autocommit=True) as conn:
                    migrate(conn, where=self.where)
            self._pool = psycopg_pool.ConnectionPool(
                url,
                min_size=1,
                max_size=max(pool_size, 1),
                open=True,
                name="awb-inventory",
                # Reads are one round trip (no BEGIN/COMMIT); writes open their own transaction.
                kwargs={"autocommit": True},
                configure=self._configure,
            )
        except psycopg.OperationalError as exc:
            raise ConfigError(f"cannot reach the inventory at {self.where}: {exc}", url=self.where) from exc
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

    def _configure(self, conn: Any) -> None:
        if not self.durable:
            # Like SQLite's WAL with synchronous=NORMAL: a commit returns before its WAL record is on
            # disk. A crash of the database host can lose the last moments of commits, never corrupt
            # or half-apply one; every commit costs a round trip instead of an fsync.
            conn.execute("SET synchronous_commit = off")

    @property
    def where(self) -> str:
        """The URL without its password, for messages."""
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(self.url)
        if parts.password:
            netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
            return urlunsplit(parts._replace(netloc=netloc))
        return self.url

    # --- life cycle, schema and the change feed ---------------------------------------------------

    def close(self) -> None:
        if self._following:
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
            has_pgvector = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
        return {
            "server_version": version,
            "schema": max(applied, default=0),
            "schema_expected": SCHEMA_VERSION,
            "migrations": applied,
            "pgvector_available": has_pgvector is not None,
            "vector_search": "exact in memory per server (float32), kept in step by LISTEN/NOTIFY",
        }

    # --- tools --------------------------------------------------------------------------------

    def check_room(self, max_active: int) -> None:
        """Raise `limit_exceeded` when `max_active` live tools are already stored (an early check)."""
        if self.count_active() >= max_active:
            raise _inventory_full(max_active)

    def add_tool(self, tool: Tool, *, max_active: int | None = None) -> None:
        values = self._tool_values(tool)
        columns = ", ".join(values)
        marks = ", ".join("%s" for _ in values)
        limit = max_active if max_active is not None else self.max_tools
        with self._pool.connection() as conn, conn.transaction():
            if limit is not None:
                # One inserter at a time: the count and the insert are then one atomic step across servers.
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADD_LOCK,))
                live = conn.execute("SELECT count FROM awb_live_tools").fetchone()[0]
                if live >= limit:
                    raise _inventory_full(limit)
            conn.execute(f"INSERT INTO tools ({columns}) VALUES ({marks})", list(values.values()))
            self._insert_version(conn, tool.tool_id, _first_version(tool))
            send(conn, self.origin, "crafted", [tool.tool_id], equipped=tool.equipped)
        generation = self._cache.generation()
        self._written([tool.tool_id])
        # Write-through: the server that crafted a tool is the one most likely to use it next.
        self._cache.put_tool(generation + 1, tool.tool_id, tool)
        self._cache.put(generation + 1, self._cache.versions, tool.tool_id, [_first_version(tool)])
        self._cache.put(generation + 1, self._cache.calls, tool.tool_id, (CALLS_CACHED, []))

    def import_tool(self, tool: Tool, versions: list[ToolVersion]) -> None:
        """Insert a tool and its versions exactly as exported (`awb inventory import`)."""
        values = self._tool_values(tool)
        marks = ", ".join("%s" for _ in values)
        with self._pool.connection() as conn, conn.transaction():
            conn.execute(f"INSERT INTO tools ({', '.join(values)}) VALUES ({marks})", list(values.values()))
            for version in versions:
                self._insert_version(conn, tool.tool_id, version)
        self._written([tool.tool_id])

    @staticmethod
    def _tool_values(tool: Tool) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for column in _TOOL_COLUMNS:
            if column in ("tags", "problem", "created_by_agent"):
                continue
            values[column] = _encode(column, getattr(tool, column))
        values["tags"] = list(tool.metadata.tags)
        values["tags_text"] = " ".join(tool.metadata.tags)
        values["problem"] = tool.metadata.problem
        values["created_by_agent"] = tool.metadata.created_by_agent
        values["search_name"] = split_identifier(tool.name)
        return values

    def get(self, tool_id: str) -> Tool | None:
        self._follow()
        cached = self._cache.tools.get(tool_id)
        if cached is not None:
            return None if cached is MISSING else cached
        generation = self._cache.generation()
        with self._pool.connection() as conn:
            row = conn.execute(f"{_SELECT} WHERE t.tool_id = %s", (tool_id,)).fetchone()
        tool = None if row is None else _row_to_tool(row)
        self._cache.put_tool(generation, tool_id, MISSING if tool is None else tool)
        return tool

    def get_by_name(self, name: str, *, include_deleted: bool = False) -> Tool | None:
        self._follow()
        cached = self._cache.tool_named(name)
        if cached is not None and cached is not MISSING and cached.status != "deleted":
            return cached  # type: ignore[no-any-return]
        generation = self._cache.generation()
        live = "" if include_deleted else " AND t.status <> 'deleted'"
        with self._pool.connection() as conn:
            row = conn.execute(
                f"{_SELECT} WHERE t.name = %s{live} ORDER BY t.status = 'deleted', t.seq DESC LIMIT 1", (name,)
            ).fetchone()
        tool = None if row is None else _row_to_tool(row)
        if tool is not None:
            self._cache.put_tool(generation, tool.tool_id, tool)
        return tool

    @staticmethod
    def _assignments(fields: dict[str, Any]) -> tuple[list[str], list[Any]]:
        if "metadata" in fields:
            meta = fields.pop("metadata")
            fields.update(
                tags=list(meta.tags),
                tags_text=" ".join(meta.tags),
                problem=meta.problem,
                created_by_agent=meta.created_by_agent,
            )
        if "name" in fields:
            fields["search_name"] = split_identifier(fields["name"])
        return [f"{k} = %s" for k in fields], [_encode(k, v) for k, v in fields.items()]

    def update(self, tool_id: str, **fields: Any) -> None:
        if not fields:
            return
        equipped = "equipped" in fields
        kind = "deleted" if fields.get("status") == "deleted" else "updated"
        assignments, values = self._assignments(dict(fields))
        message = payload(self.origin, kind, [tool_id], equipped=equipped)
        with self._pool.connection() as conn:
            # One statement: the update and its announcement commit together, in one round trip.
            conn.execute(
                f"WITH u AS (UPDATE tools SET {', '.join(assignments)} WHERE tool_id = %s RETURNING 1) "
                "SELECT pg_notify(%s, %s) FROM u",
                [*values, tool_id, CHANNEL, message],
            )
        self._written([tool_id])

    def delete_forever(self, tool_ids: list[str]) -> int:
        if not tool_ids:
            return 0
        with self._pool.connection() as conn, conn.transaction():
            for table in ("calls", "tool_versions", "staged_writes"):
                conn.execute(f"DELETE FROM {table} WHERE tool_id = ANY(%s)", (tool_ids,))
            removed = conn.execute("DELETE FROM tools WHERE tool_id = ANY(%s)", (tool_ids,)).rowcount
            send(conn, self.origin, "purged", tool_ids, equipped=True)
        self._written(tool_ids)
        return int(removed)

    def purge_candidates(self, *, archived_before: datetime | None, deleted: bool) -> list[Tool]:
        where: list[str] = []
        args: list[Any] = []
        if archived_before is not None:
            where.append("(t.status = 'archived' AND t.updated_at < %s)")
            args.append(_iso(archived_before))
        if deleted:
            where.append("t.status = 'deleted'")
        if not where:
            return []
        with self._pool.connection() as conn:
            rows = conn.execute(f"{_SELECT} WHERE {' OR '.join(where)} ORDER BY t.seq", args).fetchall()
        return [_row_to_tool(r) for r in rows]

    # --- versions -----------------------------------------------------------------------------

    @staticmethod
    def _insert_version(conn: Any, tool_id: str, version: ToolVersion) -> None:
        conn.execute(
            "INSERT INTO tool_versions (tool_id, version, code, description, input_schema, output_schema, "
            "examples, runtime, created_at, usage_count, failure_count) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                tool_id,
                version.version,
                version.code,
                version.description,
                json.dumps(version.input_schema),
                None if version.output_schema is None else json.dumps(version.output_schema),
                json.dumps([e.model_dump(mode="json") for e in version.examples]),
                version.runtime,
                _iso(version.created_at),
                version.usage_count,
                version.failure_count,
            ),
        )

    def add_version(self, tool_id: str, version: ToolVersion) -> None:
        with self._pool.connection() as conn, conn.transaction():
            self._insert_version(conn, tool_id, version)
            send(conn, self.origin, "version", [tool_id])

    def versions(self, tool_id: str) -> list[ToolVersion]:
        self._follow()
        cached = self._cache.versions.get(tool_id)
        if cached is not None:
            return list(cached)
        generation = self._cache.generation()
        with self._pool.connection() as conn:
            rows = conn.execute(
                f"SELECT {_VERSION_COLUMNS} FROM tool_versions WHERE tool_id = %s ORDER BY version", (tool_id,)
            ).fetchall()
        versions = [_version_of(r) for r in rows]
        self._cache.put(generation, self._cache.versions, tool_id, versions)
        return list(versions)

    # --- listing and search -------------------------------------------------------------------

    def count_active(self) -> int:
        self._follow()
        cached = self._cache.counts.get("live")
        if cached is not None:
            return cached
        generation = self._cache.generation()
        with self._pool.connection() as conn:
            count = int(conn.execute("SELECT count FROM awb_live_tools").fetchone()[0])
        self._cache.put(generation, self._cache.counts, "live", count)
        return count

    def list_tools(
        self,
        *,
        memory_level: MemoryLevel | None = None,
        tag: str | None = None,
        include_archived: bool = True,
        equipped: bool | None = None,
        limit: int = 50,
    ) -> list[Tool]:
        where, args = _summary_filter(memory_level, tag)
        if memory_level is None and not include_archived:
            where += " AND memory_level <> 'archived'"
        if equipped is not None:
            where += " AND equipped = %s"
            args.append(equipped)
        sql = f"{_SELECT} WHERE {where} ORDER BY {_ORDER} LIMIT %s"
        with self._pool.connection() as conn:
            rows = conn.execute(sql, [*args, limit]).fetchall()
        return [_row_to_tool(r) for r in rows]

    def list_summaries(
        self, *, memory_level: MemoryLevel | None = None, tag: str | None = None, limit: int = 50, offset: int = 0
    ) -> list[ToolSummary]:
        return self.page_summaries(memory_level=memory_level, tag=tag, limit=limit, offset=offset)[0]

    def page_summaries(
        self, *, memory_level: MemoryLevel | None = None, tag: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[list[ToolSummary], int]:
        where, args = _summary_filter(memory_level, tag)
        sql = f"SELECT {_SUMMARY_COLUMNS} FROM tools WHERE {where} ORDER BY {_ORDER} LIMIT %s OFFSET %s"
        self._follow()
        generation = self._cache.generation()
        with self._pool.connection() as conn:
            rows = conn.execute(sql, [*args, limit, offset]).fetchall()
            cached = self._cache.counts.get((memory_level, tag))
            if len(rows) < limit and (rows or offset == 0):
                total = offset + len(rows)  # a short page is the last one
            elif cached is not None:
                total = cached
            elif memory_level is None and tag is None:
                total = int(conn.execute("SELECT count FROM awb_live_tools").fetchone()[0])
            else:
                total = int(conn.execute(f"SELECT count(*) FROM tools WHERE {where}", args).fetchone()[0])
                self._cache.put(generation, self._cache.counts, (memory_level, tag), total)
        return [_row_to_summary(r, None) for r in rows], total

    def _ranked(self, words: Sequence[str], k: int) -> list[tuple[int, float]]:
        """(seq, BM25) of the best `k` rows for the OR of `words`, best first (deleted ones included,
        as in SQLite's FTS index: callers drop them)."""
        if not words:
            return []
        self._follow()
        with self._text_lock:
            return self._text.top(words, k) or []

    @staticmethod
    def _live_rows(conn: Any, ranked: Sequence[tuple[int, float]], columns: str) -> list[tuple[Any, ...]]:
        """`columns` of the ranked rows that are not deleted, best score first, each led by its seq."""
        if not ranked:
            return []
        scores = dict(ranked)
        rows = conn.execute(
            f"SELECT t.seq, {columns} FROM tools t WHERE t.seq = ANY(%s) AND t.status <> 'deleted'", (list(scores),)
        ).fetchall()
        return sorted(rows, key=lambda r: (-scores[r[0]], r[0]))

    def _fts_ranked(self, conn: Any, words: Sequence[str], k: int) -> list[tuple[int, float]]:
        """The same, ranked by PostgreSQL's ts_rank over every matching row (text_search="fts")."""
        if not words:
            return []
        query, args = _query(words)
        sql = (
            f"WITH q AS (SELECT {query} AS q) "
            f"SELECT t.seq, ts_rank('{RANK_WEIGHTS}', t.document, q.q, {RANK_NORMALISATION}) AS score "
            "FROM tools t, q WHERE t.document @@ q.q ORDER BY score DESC, t.seq LIMIT %s"
        )
        return [(int(r[0]), float(r[1])) for r in conn.execute(sql, [*args, k])]

    def _search(
        self, words: Sequence[str], k: int, columns: str, *, enough: int | None = None
    ) -> list[tuple[Any, ...]]:
        """Live rows (seq, columns..., score) of the best `k` matches; with `enough`, read in batches and
        stop once that many live (not archived) rows are in hand."""
        with self._pool.connection() as conn:
            ranked = self._fts_ranked(conn, words, k) if self.text_search == "fts" else self._ranked(words, k)
            scores = dict(ranked)
            batch = len(ranked) if enough is None else enough + 5
            rows: list[tuple[Any, ...]] = []
            live = 0
            for start in range(0, len(ranked), max(batch, 1)):
                found = self._live_rows(conn, ranked[start : start + batch], columns)
                rows.extend(found)
                if enough is not None:
                    live += sum(1 for r in found if r[4] != "archived")  # memory_level of a summary row
                    if live >= enough:
                        break
        return [(*r, scores[r[0]]) for r in rows]

    def search_summaries(self, words: Sequence[str], limit: int, *, candidates: int = 50) -> list[ToolSummary]:
        """The best `candidates` live matches by score, archived ones after live ones, `limit` of them."""
        rows = self._search(words, max(candidates, limit), _SUMMARY_COLUMNS, enough=limit)
        live = [r for r in rows if r[4] != "archived"]
        archived = [r for r in rows if r[4] == "archived"]
        return [_row_to_summary(r[1:-1], float(r[-1])) for r in (live + archived)[:limit]]

    def search_text(self, words: Sequence[str], limit: int) -> list[tuple[Tool, float]]:
        return [(_row_to_tool(r[1:-1]), float(r[-1])) for r in self._search(words, limit, _TOOL_FIELDS)]

    def text_scores(self, words: Sequence[str], limit: int) -> list[tuple[str, float]]:
        return [(str(r[1]), float(r[-1])) for r in self._search(words, limit, "t.tool_id")]

    # --- calls --------------------------------------------------------------------------------

    def record_call(
        self, call: CallRecord, *, level_after: Callable[[MemoryLevel, int], MemoryLevel] | None = None
    ) -> ToolCounters:
        """Append the call and move the tool's counters by one in SQL (`x = x + 1`), in one statement:
        many servers calling one tool lose no count. A success brings an archived tool back and, with
        `level_after`, sets the tier the counted usage earns (compare-and-set on the tier)."""
        call_values = (
            call.call_id or None,
            call.tool_id,
            call.version,
            _iso(call.at),
            call.duration_ms,
            call.ok,
            call.error_code,
        )
        if call.ok:
            assignments = (
                "usage_count = usage_count + 1, success_count = success_count + 1, last_used_at = %s, "
                "status = CASE status WHEN 'archived' THEN 'active' ELSE status END"
            )
            values: list[Any] = [_iso(call.at)]
        else:
            assignments, values = "failure_count = failure_count + 1", []
        # Every part of one statement sees the same snapshot: `old` is the tier before this call.
        sql = (
            "WITH c AS (INSERT INTO calls (call_id, tool_id, version, at, duration_ms, ok, error_code) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s)), "
            "v AS (UPDATE tool_versions SET usage_count = usage_count + 1, failure_count = failure_count + %s "
            "WHERE tool_id = %s AND version = %s), "
            # Other servers drop their cached copy of the tool (its counters and recent calls moved).
            "n AS (SELECT pg_notify(%s, %s)), "
            "old AS (SELECT memory_level FROM tools WHERE tool_id = %s) "
            f"UPDATE tools t SET {assignments} FROM n, old WHERE t.tool_id = %s "
            "RETURNING t.usage_count, t.success_count, t.failure_count, old.memory_level, t.memory_level, t.status"
        )
        args: list[Any] = [
            *call_values,
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
            self._cache.invalidate([call.tool_id], counts=False)
            if row is None:
                return ToolCounters(
                    usage_count=0,
                    success_count=0,
                    failure_count=0,
                    previous_level="short_term",
                    memory_level="short_term",
                    status="active",
                )
            counters = ToolCounters(
                usage_count=row[0],
                success_count=row[1],
                failure_count=row[2],
                previous_level=row[3],
                memory_level=row[4],
                status=row[5],
            )
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
        records = self._read_calls(tool_id, limit)
        self._cache.put(generation, self._cache.calls, tool_id, (limit, records))
        return list(records)

    def _read_calls(self, tool_id: str, limit: int) -> list[CallRecord]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT tool_id, version, at, duration_ms, ok, error_code, call_id FROM calls WHERE tool_id = %s "
                "ORDER BY id DESC LIMIT %s",
                (tool_id, limit),
            ).fetchall()
        return [
            CallRecord(
                tool_id=r[0], version=r[1], at=r[2], duration_ms=r[3], ok=r[4], error_code=r[5], call_id=r[6] or ""
            )
            for r in rows
        ]

    def iter_maintainable(self) -> Iterator[Tool]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                f"{_SELECT} WHERE t.status = 'active' AND t.memory_level IN ('short_term', 'medium_term')"
            ).fetchall()
        return iter([_row_to_tool(r) for r in rows])

    # --- vectors --------------------------------------------------------------------------------

    def put_vector(self, tool_id: str, model_id: str, values: list[float]) -> None:
        from awb.inventory.vectors import encode_vector

        with self._pool.connection() as conn, conn.transaction():
            conn.execute(
                "INSERT INTO tool_vectors(tool_id, model_id, dim, vector) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (tool_id) DO UPDATE SET model_id = excluded.model_id, dim = excluded.dim, "
                "vector = excluded.vector",
                (tool_id, model_id, len(values), encode_vector(values)),
            )
            send(conn, self.origin, "vector", [tool_id])

    def load_vectors(self, model_id: str) -> list[tuple[str, int, bytes]]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT v.tool_id, v.dim, v.vector FROM tool_vectors v JOIN tools t ON t.tool_id = v.tool_id "
                "WHERE v.model_id = %s AND t.status <> 'deleted' ORDER BY t.seq",
                (model_id,),
            ).fetchall()
        return [(str(r[0]), int(r[1]), bytes(r[2])) for r in rows]

    def load_vector(self, tool_id: str, model_id: str) -> bytes | None:
        """One live tool's vector by `model_id` (to follow another server's change), or None."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT v.vector FROM tool_vectors v JOIN tools t ON t.tool_id = v.tool_id "
                "WHERE v.tool_id = %s AND v.model_id = %s AND t.status <> 'deleted'",
                (tool_id, model_id),
            ).fetchone()
        return None if row is None else bytes(row[0])

    def vector_model_ids(self) -> dict[str, int]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT v.model_id, count(*) FROM tool_vectors v JOIN tools t ON t.tool_id = v.tool_id "
                "WHERE t.status <> 'deleted' GROUP BY v.model_id"
            ).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

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
                (tool_id, call_id, path, content, _iso(at)),
            ).fetchone()
        return int(row[0])

    def staged_writes(self, status: str | None = None) -> list[dict[str, Any]]:
        query = "SELECT id, tool_id, call_id, path, content, created_at, status FROM staged_writes"
        args: tuple[Any, ...] = ()
        if status is not None:
            query += " WHERE status = %s"
            args = (status,)
        with self._pool.connection() as conn:
            rows = conn.execute(query + " ORDER BY id", args).fetchall()
        return [_staged_row(r) for r in rows]

    def get_staged(self, staged_id: int) -> dict[str, Any] | None:
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT id, tool_id, call_id, path, content, created_at, status FROM staged_writes WHERE id = %s",
                (staged_id,),
            ).fetchone()
        return None if row is None else _staged_row(row)

    def set_staged_status(self, staged_id: int, status: str, *, expected: str | None = None) -> bool:
        query = "UPDATE staged_writes SET status = %s WHERE id = %s"
        args: tuple[Any, ...] = (status, staged_id)
        if expected is not None:
            query += " AND status = %s"
            args = (status, staged_id, expected)
        with self._pool.connection() as conn:
            return int(conn.execute(query, args).rowcount) == 1


def _inventory_full(max_active: int) -> LimitExceeded:
    return LimitExceeded(f"the inventory holds its maximum of {max_active} tools; delete some first", limit="max_tools")


def _staged_row(row: Sequence[Any]) -> dict[str, Any]:
    keys = ("id", "tool_id", "call_id", "path", "content", "created_at", "status")
    return dict(zip(keys, tuple(row), strict=True))


def _first_version(tool: Tool) -> ToolVersion:
    return ToolVersion(
        version=tool.version,
        code=tool.code,
        description=tool.description,
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        examples=tool.examples,
        runtime=tool.runtime,
        created_at=tool.created_at,
    )


__all__ = ["PostgresStore"]
