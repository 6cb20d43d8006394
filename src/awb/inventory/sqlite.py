"""The embedded inventory: one SQLite file in WAL mode, FTS5 kept in step by triggers.

WAL plus a busy timeout lets `awb start` and the CLI use the same file at once. The schema carries a
version and only moves forward, one migration at a time.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from awb.errors import ConfigError, LimitExceeded, OutputExceeded
from awb.inventory.feed_sql import FEED_SQL
from awb.inventory.models import CallRecord, Example, MemoryLevel, Tool, ToolCounters, ToolSummary, ToolVersion
from awb.inventory.sessions_sql import SESSIONS_SQL
from awb.inventory.text_index import TextIndex
from awb.inventory.vectors import VECTORS_SQL
from awb.search.fts import or_expression, split_identifier

BUSY_TIMEOUT_MS = 5000
#: Journal rows kept (`append_event`): enough for any reader that was away a minute or two.
EVENTS_KEPT = 5000

_V1 = """
CREATE TABLE tools (
    rowid INTEGER PRIMARY KEY,
    tool_id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    search_name TEXT NOT NULL,
    description TEXT NOT NULL,
    language TEXT NOT NULL,
    runtime TEXT NOT NULL,
    code TEXT NOT NULL,
    input_schema TEXT NOT NULL,
    output_schema TEXT,
    examples TEXT NOT NULL DEFAULT '[]',
    tags TEXT NOT NULL DEFAULT '[]',
    tags_text TEXT NOT NULL DEFAULT '',
    problem TEXT NOT NULL DEFAULT '',
    created_by_agent TEXT NOT NULL DEFAULT '',
    capabilities TEXT NOT NULL DEFAULT '{}',
    version INTEGER NOT NULL DEFAULT 1,
    parent_version INTEGER,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    last_used_at TEXT,
    usage_count INTEGER NOT NULL DEFAULT 0,
    success_count INTEGER NOT NULL DEFAULT 0,
    failure_count INTEGER NOT NULL DEFAULT 0,
    memory_level TEXT NOT NULL DEFAULT 'short_term',
    status TEXT NOT NULL DEFAULT 'active',
    equipped INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX tools_live_name ON tools(name) WHERE status != 'deleted';
CREATE INDEX tools_level ON tools(status, memory_level);
CREATE INDEX tools_equipped ON tools(equipped) WHERE equipped = 1;

CREATE TABLE tool_versions (
    tool_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    code TEXT NOT NULL,
    description TEXT NOT NULL,
    input_schema TEXT NOT NULL,
    output_schema TEXT,
    examples TEXT NOT NULL DEFAULT '[]',
    runtime TEXT NOT NULL,
    created_at TEXT NOT NULL,
    usage_count INTEGER NOT NULL DEFAULT 0,
    failure_count INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tool_id, version)
);

CREATE TABLE calls (
    id INTEGER PRIMARY KEY,
    tool_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    at TEXT NOT NULL,
    duration_ms REAL NOT NULL,
    ok INTEGER NOT NULL,
    error_code TEXT
);
CREATE INDEX calls_tool ON calls(tool_id, id);

CREATE TABLE staged_writes (
    id INTEGER PRIMARY KEY,
    tool_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    path TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending'
);

CREATE VIRTUAL TABLE tools_fts USING fts5(
    search_name, description, problem, tags_text,
    content='tools', content_rowid='rowid', tokenize='porter unicode61 remove_diacritics 2'
);
INSERT INTO tools_fts(tools_fts, rank) VALUES ('rank', 'bm25(4.0, 1.0, 1.0, 2.0)');
CREATE TRIGGER tools_fts_insert AFTER INSERT ON tools BEGIN
    INSERT INTO tools_fts(rowid, search_name, description, problem, tags_text)
    VALUES (new.rowid, new.search_name, new.description, new.problem, new.tags_text);
END;
CREATE TRIGGER tools_fts_delete AFTER DELETE ON tools BEGIN
    INSERT INTO tools_fts(tools_fts, rowid, search_name, description, problem, tags_text)
    VALUES ('delete', old.rowid, old.search_name, old.description, old.problem, old.tags_text);
END;
CREATE TRIGGER tools_fts_update AFTER UPDATE OF search_name, description, problem, tags_text ON tools BEGIN
    INSERT INTO tools_fts(tools_fts, rowid, search_name, description, problem, tags_text)
    VALUES ('delete', old.rowid, old.search_name, old.description, old.problem, old.tags_text);
    INSERT INTO tools_fts(rowid, search_name, description, problem, tags_text)
    VALUES (new.rowid, new.search_name, new.description, new.problem, new.tags_text);
END;
"""

_TIER_ORDER = "CASE memory_level WHEN 'long_term' THEN 0 WHEN 'medium_term' THEN 1 WHEN 'short_term' THEN 2 ELSE 3 END"

# Listing walks this index in order and stops at LIMIT instead of sorting every live tool.
_V2 = f"""
CREATE INDEX tools_hot ON tools({_TIER_ORDER}, usage_count DESC, rowid DESC) WHERE status != 'deleted';
"""

# Each call gets the id its staged writes carry; calls recorded before ids existed keep NULL.
_V4 = """
ALTER TABLE calls ADD COLUMN call_id TEXT;
CREATE UNIQUE INDEX calls_call_id ON calls(call_id) WHERE call_id IS NOT NULL;
"""

#: Forward migrations: MIGRATIONS[n] is the SQL that takes a database from schema n to n + 1.
MIGRATIONS: list[str] = [_V1, _V2, VECTORS_SQL, _V4, SESSIONS_SQL, FEED_SQL]
SCHEMA_VERSION = len(MIGRATIONS)

# BM25 column weights (name, description, problem, tags): a word in the name says more than one
# in a long description.
BM25_WEIGHTS = (4.0, 1.0, 1.0, 2.0)

_JSON_FIELDS = {"input_schema", "output_schema", "examples", "capabilities"}
_TOOL_COLUMNS = (
    "tool_id name description language runtime code input_schema output_schema examples tags problem "
    "created_by_agent capabilities version parent_version created_at updated_at last_used_at usage_count "
    "success_count failure_count memory_level status equipped"
).split()
_TOOL_FIELDS = ", ".join(f"t.{c}" for c in _TOOL_COLUMNS)
_SELECT = f"SELECT {_TOOL_FIELDS} FROM tools t"


def _inventory_full(max_active: int) -> LimitExceeded:
    return LimitExceeded(f"the inventory holds its maximum of {max_active} tools; delete some first", limit="max_tools")


def _statements(script: str) -> Iterator[str]:
    """Split a script into statements without `executescript`, which would commit our transaction."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""
    if buffer.strip():
        yield buffer.strip()


def iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat(timespec="microseconds")


def _row_to_tool(row: Sequence[Any]) -> Tool:
    data = dict(zip(_TOOL_COLUMNS, row, strict=True))
    for key in _JSON_FIELDS:
        if data[key] is not None:
            data[key] = json.loads(data[key])
    data["metadata"] = {
        "tags": json.loads(data.pop("tags")),
        "problem": data.pop("problem"),
        "created_by_agent": data.pop("created_by_agent"),
    }
    data["equipped"] = bool(data["equipped"])
    return Tool.model_validate(data)


#: Columns of `tools` that the FTS index reads: writing one re-reads the row into the text index.
_SEARCHED_COLUMNS = frozenset({"search_name", "description", "problem", "tags_text"})

_SUMMARY_COLUMNS = "tool_id, name, description, memory_level, usage_count, tags, status, equipped"


def _row_to_summary(row: tuple[Any, ...], score: float | None) -> ToolSummary:
    # The hot path of list and search. pydantic-core validates these few fields in about half the time
    # that `model_construct`'s Python loop takes to skip validating them.
    return ToolSummary.model_validate(
        {
            "tool_id": row[0],
            "name": row[1],
            "description": row[2],
            "memory_level": row[3],
            "usage_count": row[4],
            "tags": json.loads(row[5]),
            "status": row[6],
            "equipped": bool(row[7]),
            "score": None if score is None else round(score, 4),
        }
    )


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
        return iso(value)
    if isinstance(value, bool):
        return int(value)
    return value


class SQLiteStore:
    """The `Store` protocol on one SQLite file. Safe to share between threads (one lock)."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute("PRAGMA foreign_keys = ON")
        self._migrate()
        self._text = TextIndex(self._db, "tools_fts", BM25_WEIGHTS)

    # --- schema -------------------------------------------------------------------------------

    def _migrate(self) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                # Read the version inside the write lock: another process may have migrated meanwhile.
                current = self._db.execute("PRAGMA user_version").fetchone()[0]
                if current > SCHEMA_VERSION:
                    raise ConfigError(
                        f"inventory {self.path} has schema {current}, newer than this awb ({SCHEMA_VERSION}); "
                        "upgrade agent-workbench",
                        path=self.path,
                    )
                for version in range(current, SCHEMA_VERSION):
                    for statement in _statements(MIGRATIONS[version]):
                        self._db.execute(statement)
                    self._db.execute(f"PRAGMA user_version = {version + 1}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def schema_version(self) -> int:
        with self._lock:
            return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def data_version(self) -> int:
        with self._lock:
            return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- tools --------------------------------------------------------------------------------

    def check_room(self, max_active: int) -> None:
        """Raise `limit_exceeded` when `max_active` live tools are already stored."""
        if self.count_active() >= max_active:
            raise _inventory_full(max_active)

    def add_tool(self, tool: Tool, *, max_active: int | None = None) -> None:
        """Insert a tool; with `max_active`, only while fewer live tools are stored (checked inside the
        write transaction, so concurrent crafts, from any process, cannot pass the cap together)."""
        values = self._tool_values(tool)
        columns = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if max_active is not None:
                    live = self._db.execute("SELECT count(*) FROM tools WHERE status != 'deleted'").fetchone()[0]
                    if live >= max_active:
                        raise _inventory_full(max_active)
                cursor = self._db.execute(f"INSERT INTO tools ({columns}) VALUES ({marks})", list(values.values()))
                self._text.mark([int(cursor.lastrowid or 0)])
                self._insert_version(
                    tool.tool_id,
                    ToolVersion(
                        version=tool.version,
                        code=tool.code,
                        description=tool.description,
                        input_schema=tool.input_schema,
                        output_schema=tool.output_schema,
                        examples=tool.examples,
                        runtime=tool.runtime,
                        created_at=tool.created_at,
                    ),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    @staticmethod
    def _tool_values(tool: Tool) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for column in _TOOL_COLUMNS:
            if column in ("tags", "problem", "created_by_agent"):
                continue
            values[column] = _encode(column, getattr(tool, column))
        values["tags"] = json.dumps(tool.metadata.tags)
        values["tags_text"] = " ".join(tool.metadata.tags)
        values["problem"] = tool.metadata.problem
        values["created_by_agent"] = tool.metadata.created_by_agent
        values["search_name"] = split_identifier(tool.name)
        return values

    def get(self, tool_id: str) -> Tool | None:
        with self._lock:
            row = self._db.execute(f"{_SELECT} WHERE t.tool_id = ?", (tool_id,)).fetchone()
        return None if row is None else _row_to_tool(row)

    def get_by_name(self, name: str, *, include_deleted: bool = False) -> Tool | None:
        live = "" if include_deleted else " AND t.status != 'deleted'"
        with self._lock:
            row = self._db.execute(
                f"{_SELECT} WHERE t.name = ?{live} ORDER BY t.status = 'deleted', t.rowid DESC LIMIT 1", (name,)
            ).fetchone()
        return None if row is None else _row_to_tool(row)

    def update(self, tool_id: str, **fields: Any) -> None:
        if not fields:
            return
        if "metadata" in fields:
            meta = fields.pop("metadata")
            fields.update(
                tags=json.dumps(meta.tags),
                tags_text=" ".join(meta.tags),
                problem=meta.problem,
                created_by_agent=meta.created_by_agent,
            )
        if "name" in fields:
            fields["search_name"] = split_identifier(fields["name"])
        assignments = ", ".join(f"{k} = ?" for k in fields)
        values = [_encode(k, v) for k, v in fields.items()]
        with self._lock:
            self._db.execute(f"UPDATE tools SET {assignments} WHERE tool_id = ?", [*values, tool_id])
            if _SEARCHED_COLUMNS & fields.keys():
                self._text.mark(self._rowids([tool_id]))

    def _rowids(self, tool_ids: list[str]) -> list[int]:
        marks = ", ".join("?" for _ in tool_ids)
        return [r[0] for r in self._db.execute(f"SELECT rowid FROM tools WHERE tool_id IN ({marks})", tool_ids)]

    def delete_forever(self, tool_ids: list[str]) -> int:
        """Remove tools and everything recorded about them. Used by purge only."""
        if not tool_ids:
            return 0
        marks = ", ".join("?" for _ in tool_ids)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for table in ("calls", "tool_versions", "staged_writes"):
                    self._db.execute(f"DELETE FROM {table} WHERE tool_id IN ({marks})", tool_ids)
                self._text.mark(self._rowids(tool_ids))
                removed = self._db.execute(f"DELETE FROM tools WHERE tool_id IN ({marks})", tool_ids).rowcount
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return int(removed)

    def purge_candidates(self, *, archived_before: datetime | None, deleted: bool) -> list[Tool]:
        """Archived tools last changed before `archived_before`, and (if asked) every soft-deleted tool."""
        where: list[str] = []
        args: list[Any] = []
        if archived_before is not None:
            where.append("(t.status = 'archived' AND t.updated_at < ?)")
            args.append(iso(archived_before))
        if deleted:
            where.append("t.status = 'deleted'")
        if not where:
            return []
        with self._lock:
            rows = self._db.execute(f"{_SELECT} WHERE {' OR '.join(where)} ORDER BY t.rowid", args).fetchall()
        return [_row_to_tool(r) for r in rows]

    # --- versions -----------------------------------------------------------------------------

    def _insert_version(self, tool_id: str, version: ToolVersion) -> None:
        self._db.execute(
            "INSERT INTO tool_versions (tool_id, version, code, description, input_schema, output_schema, "
            "examples, runtime, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                tool_id,
                version.version,
                version.code,
                version.description,
                json.dumps(version.input_schema),
                None if version.output_schema is None else json.dumps(version.output_schema),
                json.dumps([e.model_dump(mode="json") for e in version.examples]),
                version.runtime,
                iso(version.created_at),
            ),
        )

    def add_version(self, tool_id: str, version: ToolVersion) -> None:
        with self._lock:
            self._insert_version(tool_id, version)

    def versions(self, tool_id: str) -> list[ToolVersion]:
        with self._lock:
            rows = self._db.execute(
                "SELECT version, code, description, input_schema, output_schema, examples, runtime, created_at, "
                "usage_count, failure_count FROM tool_versions WHERE tool_id = ? ORDER BY version",
                (tool_id,),
            ).fetchall()
        return [
            ToolVersion(
                version=r[0],
                code=r[1],
                description=r[2],
                input_schema=json.loads(r[3]),
                output_schema=None if r[4] is None else json.loads(r[4]),
                examples=json.loads(r[5]),
                runtime=r[6],
                created_at=r[7],
                usage_count=r[8],
                failure_count=r[9],
            )
            for r in rows
        ]

    # --- listing and search -------------------------------------------------------------------

    def count_active(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM tools WHERE status != 'deleted'").fetchone()[0])

    def list_tools(
        self,
        *,
        memory_level: MemoryLevel | None = None,
        tag: str | None = None,
        include_archived: bool = True,
        equipped: bool | None = None,
        limit: int = 50,
    ) -> list[Tool]:
        where = ["t.status != 'deleted'"]
        args: list[Any] = []
        if memory_level is not None:
            where.append("t.memory_level = ?")
            args.append(memory_level)
        elif not include_archived:
            where.append("t.memory_level != 'archived'")
        if tag is not None:
            where.append("EXISTS (SELECT 1 FROM json_each(t.tags) WHERE json_each.value = ?)")
            args.append(tag)
        if equipped is not None:
            where.append("t.equipped = ?")
            args.append(int(equipped))
        # Hot tiers first, then most used, then newest: the order an agent wants to scan.
        sql = (
            f"{_SELECT} WHERE {' AND '.join(where)} ORDER BY {_TIER_ORDER.replace('memory_level', 't.memory_level')}, "
            "t.usage_count DESC, t.rowid DESC LIMIT ?"
        )
        with self._lock:
            rows = self._db.execute(sql, [*args, limit]).fetchall()
        return [_row_to_tool(r) for r in rows]

    def list_summaries(
        self, *, memory_level: MemoryLevel | None = None, tag: str | None = None, limit: int = 50, offset: int = 0
    ) -> list[ToolSummary]:
        """`list_tools` for listings: summary columns only, hot tiers first, no full records built."""
        where, args = _summary_filter(memory_level, tag)
        sql = (
            f"SELECT {_SUMMARY_COLUMNS} FROM tools WHERE {where} "
            f"ORDER BY {_TIER_ORDER}, usage_count DESC, rowid DESC LIMIT ? OFFSET ?"
        )
        with self._lock:
            rows = self._db.execute(sql, [*args, limit, offset]).fetchall()
        return [_row_to_summary(r, None) for r in rows]

    def page_summaries(
        self, *, memory_level: MemoryLevel | None = None, tag: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[list[ToolSummary], int]:
        """One page of `list_summaries` and the number of all matches."""
        where, args = _summary_filter(memory_level, tag)
        order = f"ORDER BY {_TIER_ORDER}, usage_count DESC, rowid DESC LIMIT ? OFFSET ?"
        count = f"SELECT count(*) FROM tools WHERE {where}"
        with self._lock:
            if tag is None:
                # The hot-tier index serves the page without reading the table.
                sql = f"SELECT {_SUMMARY_COLUMNS}, NULL FROM tools WHERE {where} {order}"
            else:
                # A tag filter reads every row anyway: the count comes with the page, in the same pass.
                sql = f"SELECT {_SUMMARY_COLUMNS}, count(*) OVER () FROM tools WHERE {where} {order}"
            rows = self._db.execute(sql, [*args, limit, offset]).fetchall()
            if rows and rows[0][-1] is not None:
                total = int(rows[0][-1])
            elif len(rows) < limit and (rows or offset == 0):
                total = offset + len(rows)  # a short page is the last one
            else:
                total = int(self._db.execute(count, args).fetchone()[0])
        return [_row_to_summary(r, None) for r in rows], total

    def _ranked(self, words: Sequence[str], k: int) -> list[tuple[int, float]]:
        """(rowid, BM25) of the best `k` rows of the FTS index for the OR of `words`, best first."""
        ranked = self._text.top(words, k)
        if ranked is not None:
            return ranked
        # A word FTS5 reads as a phrase: FTS5 ranks (same scores, its own price).
        match = or_expression(list(words))
        if match is None:
            return []
        sql = "SELECT rowid, -rank FROM tools_fts WHERE tools_fts MATCH ? ORDER BY rank LIMIT ?"
        return [(int(r[0]), float(r[1])) for r in self._db.execute(sql, (match, k))]

    def _live_rows(self, ranked: Sequence[tuple[int, float]], columns: str) -> list[tuple[Any, ...]]:
        """`columns` of the ranked rows that are not deleted, best score first, each row led by its
        rowid. Called under the lock."""
        if not ranked:
            return []
        scores = dict(ranked)
        marks = ", ".join("?" for _ in scores)
        rows = self._db.execute(
            f"SELECT t.rowid, {columns} FROM tools t WHERE t.rowid IN ({marks}) AND t.status != 'deleted'",
            list(scores),
        ).fetchall()
        return sorted(rows, key=lambda r: (-scores[r[0]], r[0]))

    def search_summaries(self, words: Sequence[str], limit: int, *, candidates: int = 50) -> list[ToolSummary]:
        """Live tools matching any of `words` as summaries with BM25 scores: the best `candidates` by
        score, then archived ones after live ones, `limit` of them."""
        live: list[tuple[Any, ...]] = []
        archived: list[tuple[Any, ...]] = []
        with self._lock:
            ranked = self._ranked(words, max(candidates, limit))
            # Archived tools go after every live candidate, so reading the best rows a few more than
            # `limit` at a time usually answers from the first batch.
            batch = limit + 5
            for start in range(0, len(ranked), batch):
                for row in self._live_rows(ranked[start : start + batch], _SUMMARY_COLUMNS):
                    (archived if row[4] == "archived" else live).append(row)
                if len(live) >= limit:
                    break
        scores = dict(ranked)
        return [_row_to_summary(row[1:], scores[row[0]]) for row in (live + archived)[:limit]]

    def search_text(self, words: Sequence[str], limit: int) -> list[tuple[Tool, float]]:
        with self._lock:
            ranked = self._ranked(words, limit)
            rows = self._live_rows(ranked, _TOOL_FIELDS)
        scores = dict(ranked)
        return [(_row_to_tool(r[1:]), scores[r[0]]) for r in rows]

    # --- calls --------------------------------------------------------------------------------

    def record_call(
        self, call: CallRecord, *, level_after: Callable[[MemoryLevel, int], MemoryLevel] | None = None
    ) -> ToolCounters:
        """Append a call record and move the tool's counters in SQL (`x = x + 1`), in one write
        transaction: concurrent calls from any process never lose an update. A success also brings an
        archived tool back and, with `level_after`, sets the tier its counted usage earns."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "INSERT INTO calls (call_id, tool_id, version, at, duration_ms, ok, error_code, peak_memory_bytes) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        call.call_id or None,
                        call.tool_id,
                        call.version,
                        iso(call.at),
                        call.duration_ms,
                        int(call.ok),
                        call.error_code,
                        call.peak_memory_bytes,
                    ),
                )
                self._db.execute(
                    "UPDATE tool_versions SET usage_count = usage_count + 1, failure_count = failure_count + ? "
                    "WHERE tool_id = ? AND version = ?",
                    (0 if call.ok else 1, call.tool_id, call.version),
                )
                before = self._db.execute(
                    "SELECT memory_level FROM tools WHERE tool_id = ?", (call.tool_id,)
                ).fetchone()
                if call.ok:
                    self._db.execute(
                        "UPDATE tools SET usage_count = usage_count + 1, success_count = success_count + 1, "
                        "last_used_at = ?, status = CASE status WHEN 'archived' THEN 'active' ELSE status END "
                        "WHERE tool_id = ?",
                        (iso(call.at), call.tool_id),
                    )
                else:
                    self._db.execute(
                        "UPDATE tools SET failure_count = failure_count + 1 WHERE tool_id = ?", (call.tool_id,)
                    )
                row = self._db.execute(
                    "SELECT usage_count, success_count, failure_count, memory_level, status FROM tools "
                    "WHERE tool_id = ?",
                    (call.tool_id,),
                ).fetchone()
                counters = ToolCounters(
                    usage_count=row[0] if row else 0,
                    success_count=row[1] if row else 0,
                    failure_count=row[2] if row else 0,
                    previous_level=before[0] if before else "short_term",
                    memory_level=row[3] if row else "short_term",
                    status=row[4] if row else "active",
                )
                if row and call.ok and level_after is not None:
                    level = level_after(counters.memory_level, counters.usage_count)
                    if level != counters.memory_level:
                        self._db.execute("UPDATE tools SET memory_level = ? WHERE tool_id = ?", (level, call.tool_id))
                        counters = counters.model_copy(update={"memory_level": level})
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return counters

    def calls(self, tool_id: str, limit: int = 20) -> list[CallRecord]:
        with self._lock:
            rows = self._db.execute(
                "SELECT tool_id, version, at, duration_ms, ok, error_code, call_id, peak_memory_bytes FROM calls "
                "WHERE tool_id = ? "
                "ORDER BY id DESC LIMIT ?",
                (tool_id, limit),
            ).fetchall()
        return [
            CallRecord(
                tool_id=r[0],
                version=r[1],
                at=r[2],
                duration_ms=r[3],
                ok=bool(r[4]),
                error_code=r[5],
                call_id=r[6] or "",
                peak_memory_bytes=r[7],
            )
            for r in rows
        ]

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
        """Keep a write for review. The caps count pending writes (per tool, and in all) and are checked
        in the write transaction, so concurrent calls cannot pass them together."""
        size = len(content.encode("utf-8", errors="surrogatepass"))
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for limit, name, where, args in (
                    (max_tool_bytes, "sandbox.max_staged_bytes_per_tool", "AND tool_id = ?", (tool_id,)),
                    (max_total_bytes, "sandbox.max_staged_bytes_total", "", ()),
                ):
                    if limit is None:
                        continue
                    pending = self._db.execute(
                        f"SELECT coalesce(sum(length(CAST(content AS BLOB))), 0) FROM staged_writes "
                        f"WHERE status = 'pending' {where}",
                        args,
                    ).fetchone()[0]
                    if pending + size > limit:
                        raise OutputExceeded(
                            f"staging {size} more bytes would pass {name} ({limit} bytes pending at most); "
                            "apply or discard staged writes first",
                            limit=name,
                            pending=pending,
                        )
                cursor = self._db.execute(
                    "INSERT INTO staged_writes (tool_id, call_id, path, content, created_at) VALUES (?, ?, ?, ?, ?)",
                    (tool_id, call_id, path, content, iso(at)),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return int(cursor.lastrowid or 0)

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

    def iter_maintainable(self) -> Iterator[Tool]:
        with self._lock:
            rows = self._db.execute(
                f"{_SELECT} WHERE t.status = 'active' AND t.memory_level IN ('short_term', 'medium_term')"
            ).fetchall()
        return iter([_row_to_tool(r) for r in rows])

    # --- vectors (awb.inventory.vectors; table from migration 2) -----------------------------------

    def put_vector(self, tool_id: str, model_id: str, values: list[float]) -> None:
        from awb.inventory import vectors

        with self._lock:
            vectors.put_vector(self._db, tool_id, model_id, values)

    def load_vectors(self, model_id: str) -> list[tuple[str, int, bytes]]:
        """(tool_id, dim, little-endian float32 bytes) of live tools embedded by `model_id`."""
        from awb.inventory import vectors

        with self._lock:
            return vectors.load_vectors(self._db, model_id)

    def vector_model_ids(self) -> dict[str, int]:
        """Live tools with a vector, counted per embedding model."""
        from awb.inventory import vectors

        with self._lock:
            return vectors.vector_model_ids(self._db)

    def text_scores(self, words: Sequence[str], limit: int) -> list[tuple[str, float]]:
        """(tool_id, BM25) of the best live matches, without loading the records (hybrid search fuses ids)."""
        with self._lock:
            ranked = self._ranked(words, limit)
            rows = self._live_rows(ranked, "t.tool_id")
        scores = dict(ranked)
        return [(str(r[1]), scores[r[0]]) for r in rows]

    # --- staged writes (used by awb.sandbox.staging) ----------------------------------------------

    def staged_writes(self, status: str | None = None) -> list[dict[str, Any]]:
        """Staged writes, oldest first; all of them, or those with `status`."""
        query = "SELECT id, tool_id, call_id, path, content, created_at, status FROM staged_writes"
        args: tuple[Any, ...] = ()
        if status is not None:
            query += " WHERE status = ?"
            args = (status,)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY id", args).fetchall()
        return [self._staged_row(r) for r in rows]

    def get_staged(self, staged_id: int) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT id, tool_id, call_id, path, content, created_at, status FROM staged_writes WHERE id = ?",
                (staged_id,),
            ).fetchone()
        return None if row is None else self._staged_row(row)

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

    def import_tool(self, tool: Tool, versions: list[ToolVersion]) -> None:
        """Insert a tool and its versions exactly as exported (`awb inventory import`)."""
        values = self._tool_values(tool)
        marks = ", ".join("?" for _ in values)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                cursor = self._db.execute(
                    f"INSERT INTO tools ({', '.join(values)}) VALUES ({marks})", list(values.values())
                )
                self._text.mark([int(cursor.lastrowid or 0)])
                for version in versions:
                    self._insert_version(tool.tool_id, version)
                    self._db.execute(
                        "UPDATE tool_versions SET usage_count = ?, failure_count = ? WHERE tool_id = ? AND version = ?",
                        (version.usage_count, version.failure_count, tool.tool_id, version.version),
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    @staticmethod
    def _staged_row(row: Any) -> dict[str, Any]:
        keys = ("id", "tool_id", "call_id", "path", "content", "created_at", "status")
        return dict(zip(keys, tuple(row), strict=True))


def _summary_filter(memory_level: MemoryLevel | None, tag: str | None) -> tuple[str, list[Any]]:
    """The WHERE clause (and its arguments) shared by listing and counting."""
    where = ["status != 'deleted'"]
    args: list[Any] = []
    if memory_level is not None:
        where.append("memory_level = ?")
        args.append(memory_level)
    if tag is not None:
        where.append("EXISTS (SELECT 1 FROM json_each(tags) WHERE json_each.value = ?)")
        args.append(tag)
    return " AND ".join(where), args
