"""The embedded inventory: one SQLite file in WAL mode, FTS5 kept in step by triggers.

WAL plus a busy timeout lets `awb start` and the CLI use the same file at once. The schema carries a
version and only moves forward, one migration at a time (awb.inventory.sqlite_schema). Listing and
search (awb.inventory.sqlite_listing), calls, staged writes and the event journal
(awb.inventory.sqlite_records) and the panel's sign-outs (awb.inventory.panel_sign_outs) are mixed into
the store; rows map to records as in PostgreSQL (awb.inventory.rows).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from awb.errors import ConfigError
from awb.inventory.models import CallRecord, Tool, ToolVersion
from awb.inventory.names import NEXT_VARIANT, VARIANT_NAMES, grouped, holder_query, name_taken
from awb.inventory.panel_sign_outs import SQLiteSignOuts
from awb.inventory.read_cache import MISSING
from awb.inventory.rows import (
    SELECT_TOOLS,
    VERSION_COLUMNS,
    chunks,
    field_values,
    first_version,
    inventory_full,
    iso,
    maintainable_where,
    row_to_tool,
    row_to_version,
    snapshot_condition,
    tool_values,
    version_values,
    versions_past,
)
from awb.inventory.sqlite_cache import ToolCache
from awb.inventory.sqlite_listing import SQLiteListing
from awb.inventory.sqlite_records import EVENTS_KEPT, SQLiteRecords
from awb.inventory.sqlite_schema import BM25_WEIGHTS, MIGRATIONS, SCHEMA_VERSION, statements
from awb.inventory.text_index import TextIndex
from awb.inventory.versioning import NewVersion, current_fields, next_number, refusal

BUSY_TIMEOUT_MS = 5000
#: How long opening waits for the write lock when the schema is behind: another process may be migrating,
#: which reads every row an index covers (schema 9 on 2 GB of staged writes: ~11 s from a cold disk).
MIGRATION_WAIT_MS = 120_000
#: Rows an import writes per statement.
IMPORT_BATCH = 1000

#: Columns of `tools` that the FTS index reads: writing one re-reads the row into the text index.
_SEARCHED_COLUMNS = frozenset({"search_name", "description", "problem", "tags_text"})
_INSERT_VERSION = f"INSERT INTO tool_versions (tool_id, {VERSION_COLUMNS}) VALUES ({', '.join('?' * 11)})"


class SQLiteStore(SQLiteListing, SQLiteRecords, SQLiteSignOuts):
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
        self._tools = ToolCache(self._db)

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One write transaction under the lock (BEGIN IMMEDIATE: the file's write lock is taken first)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    # --- schema -------------------------------------------------------------------------------

    def _migrate(self) -> None:
        with self._lock:
            # A current schema needs no write lock, which another process may hold for a while.
            if self._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
                return
        self._db.execute(f"PRAGMA busy_timeout = {MIGRATION_WAIT_MS}")
        try:
            self._migrate_locked()
        finally:
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")

    def _migrate_locked(self) -> None:
        with self._writing() as db:
            # Read the version inside the write lock: another process may have migrated meanwhile.
            current = db.execute("PRAGMA user_version").fetchone()[0]
            if current > SCHEMA_VERSION:
                raise ConfigError(
                    f"inventory {self.path} has schema {current}, newer than this awb ({SCHEMA_VERSION}); "
                    "upgrade agent-workbench",
                    path=self.path,
                )
            for version in range(current, SCHEMA_VERSION):
                for statement in statements(MIGRATIONS[version]):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {version + 1}")

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
            raise inventory_full(max_active)

    def add_tool(self, tool: Tool, *, max_active: int | None = None, keep_case_variants: bool = False) -> None:
        """Insert a tool; with `max_active`, only while fewer live tools are stored (checked inside the
        write transaction, so concurrent crafts, from any process, cannot pass the cap together). A live
        tool's name must be free ignoring case (`name_conflict` names its holder) unless
        `keep_case_variants` (a search index of other servers' tools, whose names are case-sensitive)."""
        with self._writing() as db:
            if max_active is not None:
                live = db.execute("SELECT count(*) FROM tools WHERE status != 'deleted'").fetchone()[0]
                if live >= max_active:
                    raise inventory_full(max_active)
            variant = self._case_variant(tool, keep=keep_case_variants)
            self._insert_tool(tool, [first_version(tool)], variant)

    def _case_variant(self, tool: Tool, *, keep: bool) -> int:
        """The `case_variant` a new row takes, read in the caller's write transaction (the file's write
        lock: no other process writes between this read and the insert)."""
        if tool.status == "deleted":
            return 0
        if keep:
            return int(self._db.execute(NEXT_VARIANT.format(mark="?"), (tool.name,)).fetchone()[0])
        holder = self._db.execute(
            holder_query("SELECT t.name, t.tool_id FROM tools t", "?"),
            (tool.name, tool.name),
        ).fetchone()
        if holder is not None:
            raise name_taken(tool.name, holder[0], holder[1])
        return 0

    def _insert_tool(self, tool: Tool, versions: list[ToolVersion], case_variant: int = 0) -> None:
        """The tool's row and its versions (in the caller's transaction)."""
        values = {**tool_values(tool, sqlite=True), "case_variant": case_variant}
        marks = ", ".join("?" for _ in values)
        cursor = self._db.execute(f"INSERT INTO tools ({', '.join(values)}) VALUES ({marks})", list(values.values()))
        self._text.mark([int(cursor.lastrowid or 0)])
        self._db.executemany(_INSERT_VERSION, [version_values(tool.tool_id, v) for v in versions])

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
        with self._writing():
            self._insert_tool(tool, versions, self._case_variant(tool, keep=True))
            for batch in chunks(calls, IMPORT_BATCH):
                self._insert_calls(batch)
            for writes in chunks(staged, IMPORT_BATCH):
                self._insert_staged(writes)

    def get(self, tool_id: str) -> Tool | None:
        with self._lock:
            self._tools.check()
            cached = self._tools.tools.get(tool_id)
            if cached is None:
                row = self._db.execute(f"{SELECT_TOOLS} WHERE t.tool_id = ?", (tool_id,)).fetchone()
                cached = MISSING if row is None else row_to_tool(row)
                self._tools.put_tool(self._tools.generation(), tool_id, cached)
        return None if cached is MISSING else cached

    def get_many(self, tool_ids: Sequence[str]) -> dict[str, Tool]:
        found: dict[str, Tool] = {}
        for batch in chunks(dict.fromkeys(tool_ids), 500):
            marks = ", ".join("?" * len(batch))
            with self._lock:
                rows = self._db.execute(f"{SELECT_TOOLS} WHERE t.tool_id IN ({marks})", batch).fetchall()
            found.update((tool.tool_id, tool) for tool in map(row_to_tool, rows))
        return found

    def get_by_name(self, name: str, *, include_deleted: bool = False) -> Tool | None:
        live = "" if include_deleted else " AND t.status != 'deleted'"
        with self._lock:
            self._tools.check()
            cached = self._tools.tool_named(name)
            if cached is not None and cached is not MISSING and cached.status != "deleted":
                return cached  # type: ignore[no-any-return]
            row = self._db.execute(
                f"{SELECT_TOOLS} WHERE t.name = ?{live} ORDER BY t.status = 'deleted', t.rowid DESC LIMIT 1", (name,)
            ).fetchone()
            tool = None if row is None else row_to_tool(row)
            if tool is not None:
                self._tools.put_tool(self._tools.generation(), tool.tool_id, tool)
        return tool

    def name_holder(self, name: str) -> Tool | None:
        """The live tool named `name` ignoring case (that very name first): who holds it for a new tool."""
        with self._lock:
            row = self._db.execute(
                holder_query(SELECT_TOOLS, "?"),
                (name, name),
            ).fetchone()
        return None if row is None else row_to_tool(row)

    def case_variants(self) -> list[list[str]]:
        """Names of live tools that equal one another ignoring case (kept from before the rule)."""
        with self._lock:
            rows = self._db.execute(VARIANT_NAMES.format(order="rowid")).fetchall()
        return grouped(rows)

    def update(self, tool_id: str, **fields: Any) -> None:
        self.update_if(tool_id, {}, **fields)

    def update_if(self, tool_id: str, expected: Mapping[str, Any], **fields: Any) -> bool:
        """Set `fields` only while the tool's columns still hold the `expected` values, in one statement
        (a compare-and-set: a change another connection committed since they were read wins)."""
        return self._update_where(tool_id, expected, fields)

    def update_to_version(self, tool_id: str, expected: Mapping[str, Any], **fields: Any) -> bool:
        """`update_if`, and only while version `fields["version"]` is still stored: one statement, so a
        pruning `add_version` (one write transaction) is wholly before or after it."""
        return self._update_where(
            tool_id,
            expected,
            fields,
            " AND status != 'deleted' AND EXISTS (SELECT 1 FROM tool_versions WHERE tool_id = ? AND version = ?)",
            [tool_id, fields["version"]],
        )

    def _update_where(
        self,
        tool_id: str,
        expected: Mapping[str, Any],
        fields: Mapping[str, Any],
        extra: str = "",
        extra_args: Sequence[Any] = (),
    ) -> bool:
        if not fields:
            return False
        values = field_values(dict(fields), sqlite=True)
        condition, args = snapshot_condition(expected, sqlite=True)
        assignments = ", ".join(f"{k} = ?" for k in values)
        with self._lock:
            cursor = self._db.execute(
                f"UPDATE tools SET {assignments} WHERE tool_id = ? AND {condition}{extra}",
                [*values.values(), tool_id, *args, *extra_args],
            )
            if cursor.rowcount and _SEARCHED_COLUMNS & values.keys():
                self._text.mark(self._rowids([tool_id]))
        return cursor.rowcount == 1

    def _rowids(self, tool_ids: list[str]) -> list[int]:
        marks = ", ".join("?" for _ in tool_ids)
        return [r[0] for r in self._db.execute(f"SELECT rowid FROM tools WHERE tool_id IN ({marks})", tool_ids)]

    def delete_forever(self, tool_ids: list[str]) -> int:
        """Remove tools and everything recorded about them."""
        with self._writing() as db:
            return self._remove(db, tool_ids)

    def purge(self, doomed: Sequence[Tool]) -> list[str]:
        """`delete_forever` of those of `doomed` still as read (status, updated_at), in one write
        transaction: another process on this file may have purged one, or called one back, meanwhile."""
        with self._writing() as db:
            kept = [
                t.tool_id
                for t in doomed
                if db.execute(
                    "SELECT 1 FROM tools WHERE tool_id = ? AND status = ? AND updated_at = ?",
                    (t.tool_id, t.status, iso(t.updated_at)),
                ).fetchone()
            ]
            self._remove(db, kept)
        return kept

    def _remove(self, db: sqlite3.Connection, tool_ids: list[str]) -> int:
        if not tool_ids:
            return 0
        marks = ", ".join("?" for _ in tool_ids)
        for table in ("calls", "tool_versions", "staged_writes"):
            db.execute(f"DELETE FROM {table} WHERE tool_id IN ({marks})", tool_ids)
        self._text.mark(self._rowids(tool_ids))
        return int(db.execute(f"DELETE FROM tools WHERE tool_id IN ({marks})", tool_ids).rowcount)

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
            rows = self._db.execute(f"{SELECT_TOOLS} WHERE {' OR '.join(where)} ORDER BY t.rowid", args).fetchall()
        return [row_to_tool(r) for r in rows]

    def deleted_past(self, keep: int) -> list[Tool]:
        """Soft-deleted tools past the `keep` most recently deleted, the longest-deleted first."""
        with self._lock:
            rows = self._db.execute(
                f"{SELECT_TOOLS} WHERE t.status = 'deleted' ORDER BY t.updated_at DESC, t.rowid DESC LIMIT -1 OFFSET ?",
                (keep,),
            ).fetchall()
        return [row_to_tool(r) for r in reversed(rows)]

    def iter_maintainable(self, idle_before: Mapping[str, str] | None = None) -> Iterator[Tool]:
        where, values = maintainable_where(idle_before, "?")
        with self._lock:
            rows = self._db.execute(f"{SELECT_TOOLS} WHERE {where}", values).fetchall()
        return iter([row_to_tool(r) for r in rows])

    # --- versions -----------------------------------------------------------------------------

    def add_version(self, tool_id: str, version: ToolVersion, *, keep: int | None = None) -> list[int]:
        """Store a new version; with `keep`, remove the tool's oldest versions past `keep` in the same
        write transaction, never its current one (read inside it) nor this one. The numbers removed."""
        with self._writing() as db:
            db.execute(_INSERT_VERSION, version_values(tool_id, version))
            if keep is None:
                return []
            row = db.execute("SELECT version FROM tools WHERE tool_id = ?", (tool_id,)).fetchone()
            numbers = [r[0] for r in db.execute("SELECT version FROM tool_versions WHERE tool_id = ?", (tool_id,))]
            doomed = versions_past(numbers, keep, {version.version, *(row or ())})
            for batch in chunks(doomed, 500):
                marks = ", ".join("?" for _ in batch)
                db.execute(f"DELETE FROM tool_versions WHERE tool_id = ? AND version IN ({marks})", [tool_id, *batch])
        return doomed

    def add_current_version(
        self, tool_id: str, based_on: int, version: ToolVersion, *, keep: int | None = None
    ) -> NewVersion:
        """One write transaction (the file's write lock, so other processes on it too): the tool's status
        and current version are checked, the number chosen, the version stored and made current."""
        with self._writing() as db:
            row = db.execute("SELECT status, version FROM tools WHERE tool_id = ?", (tool_id,)).fetchone()
            refused = refusal(row, based_on)
            if refused is not None:
                return refused
            numbers = [r[0] for r in db.execute("SELECT version FROM tool_versions WHERE tool_id = ?", (tool_id,))]
            new = version.model_copy(update={"version": next_number(numbers, row[1])})
            db.execute(_INSERT_VERSION, version_values(tool_id, new))
            values = field_values(current_fields(new, based_on), sqlite=True)
            db.execute(
                f"UPDATE tools SET {', '.join(f'{k} = ?' for k in values)} WHERE tool_id = ?",
                [*values.values(), tool_id],
            )
            self._text.mark(self._rowids([tool_id]))
            doomed = [] if keep is None else versions_past([*numbers, new.version], keep, {new.version})
            for batch in chunks(doomed, 500):
                marks = ", ".join("?" for _ in batch)
                db.execute(f"DELETE FROM tool_versions WHERE tool_id = ? AND version IN ({marks})", [tool_id, *batch])
        return NewVersion("added", new.version, tuple(doomed))

    def versions(self, tool_id: str) -> list[ToolVersion]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {VERSION_COLUMNS} FROM tool_versions WHERE tool_id = ? ORDER BY version", (tool_id,)
            ).fetchall()
        return [row_to_version(r) for r in rows]


__all__ = ["BUSY_TIMEOUT_MS", "EVENTS_KEPT", "MIGRATIONS", "SCHEMA_VERSION", "SQLiteStore", "iso"]
