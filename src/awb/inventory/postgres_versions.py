"""A tool's versions in the PostgreSQL inventory: stored, pruned, made current; a part `PostgresStore`
mixes in.

Lock order, the same in every write that touches a tool and its versions (calls, purges, updates,
rollbacks): the tool's row first, then its versions. Two transactions that took them in opposite orders
could each wait for the other, and PostgreSQL would abort one with a deadlock error. Under the tool's
row lock every version that was ever added is visible to a new statement, since each is added under it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from awb.inventory.models import ToolVersion
from awb.inventory.postgres_notify import CHANNEL, payload, send
from awb.inventory.read_cache import ReadCache
from awb.inventory.rows import (
    VERSION_COLUMNS,
    field_values,
    row_to_version,
    snapshot_condition,
    version_values,
    versions_past,
)
from awb.inventory.versioning import NewVersion, current_fields, next_number, refusal

INSERT_VERSION = f"INSERT INTO tool_versions (tool_id, {VERSION_COLUMNS}) VALUES ({', '.join(['%s'] * 11)})"


class PostgresVersions:
    """Needs the store's pool, its read cache, its text index, its origin and `_follow`."""

    _pool: Any
    _cache: ReadCache
    _text: Any
    origin: str

    def _follow(self) -> None:
        raise NotImplementedError

    def update_to_version(self, tool_id: str, expected: Mapping[str, Any], **fields: Any) -> bool:
        """`update_if`, and only while version `fields["version"]` is still stored and the tool is not
        deleted. The tool's row is locked before the version is looked for (in a statement of its own, so
        it sees what a pruning `add_version` that held the lock committed): the version cannot go between
        the look and the write."""
        values = field_values(dict(fields), sqlite=False)
        condition, args = snapshot_condition(expected, sqlite=False)
        assignments = ", ".join(f"{k} = %s" for k in values)
        message = payload(self.origin, "updated", [tool_id])
        with self._pool.connection() as conn, conn.transaction():
            held = conn.execute(
                f"SELECT 1 FROM tools WHERE tool_id = %s AND {condition} AND status <> 'deleted' FOR UPDATE",
                [tool_id, *args],
            ).fetchone()
            kept = (
                held
                and conn.execute(
                    "SELECT 1 FROM tool_versions WHERE tool_id = %s AND version = %s", (tool_id, fields["version"])
                ).fetchone()
            )
            if kept:
                conn.execute(f"UPDATE tools SET {assignments} WHERE tool_id = %s", [*values.values(), tool_id])
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, message))
        self._text.mark_tools([tool_id])
        self._cache.invalidate([tool_id])
        return bool(kept)

    def add_version(self, tool_id: str, version: ToolVersion, *, keep: int | None = None) -> list[int]:
        """Store a new version; with `keep`, remove the tool's oldest versions past `keep` in the same
        transaction, never its current one nor this one. The tool's row is locked first: a rollback
        (`update_to_version`) on any server then either made its target current before this reads the
        current version, or finds the target gone once this commits. The numbers removed."""
        doomed: list[int] = []
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute("SELECT version FROM tools WHERE tool_id = %s FOR UPDATE", (tool_id,)).fetchone()
            conn.execute(INSERT_VERSION, version_values(tool_id, version))
            if keep is not None:
                numbers = [
                    r[0] for r in conn.execute("SELECT version FROM tool_versions WHERE tool_id = %s", (tool_id,))
                ]
                doomed = versions_past(numbers, keep, {version.version, *(row or ())})
                self._prune(conn, tool_id, doomed)
            send(conn, self.origin, "version", [tool_id])
        # This server's cached versions of the tool may have been read between its update and now.
        self._cache.invalidate([tool_id], counts=False)
        return doomed

    def add_current_version(
        self, tool_id: str, based_on: int, version: ToolVersion, *, keep: int | None = None
    ) -> NewVersion:
        """One transaction holding the tool's row: its status and current version are checked, the number
        chosen from the versions stored (all visible under the lock), the version stored and made current,
        the oldest past `keep` removed, and the change announced with it."""
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute("SELECT status, version FROM tools WHERE tool_id = %s FOR UPDATE", (tool_id,)).fetchone()
            refused = refusal(row, based_on)
            if refused is not None:
                return refused
            numbers = [r[0] for r in conn.execute("SELECT version FROM tool_versions WHERE tool_id = %s", (tool_id,))]
            new = version.model_copy(update={"version": next_number(numbers, row[1])})
            conn.execute(INSERT_VERSION, version_values(tool_id, new))
            values = field_values(current_fields(new, based_on), sqlite=False)
            conn.execute(
                f"UPDATE tools SET {', '.join(f'{k} = %s' for k in values)} WHERE tool_id = %s",
                [*values.values(), tool_id],
            )
            doomed = [] if keep is None else versions_past([*numbers, new.version], keep, {new.version})
            self._prune(conn, tool_id, doomed)
            send(conn, self.origin, "updated", [tool_id])
        self._text.mark_tools([tool_id])
        self._cache.invalidate([tool_id])
        return NewVersion("added", new.version, tuple(doomed))

    @staticmethod
    def _prune(conn: Any, tool_id: str, doomed: list[int]) -> None:
        if doomed:
            conn.execute("DELETE FROM tool_versions WHERE tool_id = %s AND version = ANY(%s)", (tool_id, doomed))

    def versions(self, tool_id: str) -> list[ToolVersion]:
        self._follow()
        cached = self._cache.versions.get(tool_id)
        if cached is not None:
            return list(cached)
        generation = self._cache.generation()
        with self._pool.connection() as conn:
            rows = conn.execute(
                f"SELECT {VERSION_COLUMNS} FROM tool_versions WHERE tool_id = %s ORDER BY version", (tool_id,)
            ).fetchall()
        versions = [row_to_version(r) for r in rows]
        self._cache.put(generation, self._cache.versions, tool_id, versions)
        return list(versions)


__all__ = ["INSERT_VERSION", "PostgresVersions"]
