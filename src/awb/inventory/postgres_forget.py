"""What the PostgreSQL inventory forgets for good (awb.forget): soft-deleted and long-archived tools with
everything recorded about them; a part `PostgresStore` mixes in.

Several servers may purge the same tools at once (each delete past `max_deleted_tools` purges, and so
does every `awb inventory purge`). A tool is removed only while it is still as the purge read it, in a
statement that waits for any other purge of it to commit, so exactly one server removes (and announces)
each tool, and a tool that a call brought back from the archive meanwhile stays.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from awb.inventory.models import Tool
from awb.inventory.postgres_notify import send
from awb.inventory.rows import SELECT_TOOLS, iso, row_to_tool

#: Of the listed tools, those still holding the status and updated_at they were read with, locked.
_UNCHANGED = (
    "SELECT t.tool_id FROM tools t JOIN unnest(%s::text[], %s::text[], %s::text[]) AS d(tool_id, status, updated_at) "
    "ON t.tool_id = d.tool_id AND t.status = d.status AND t.updated_at = d.updated_at ORDER BY t.tool_id "
    "FOR UPDATE OF t"
)


class PostgresForgetting:
    """Needs the store's pool, its origin and `_written`."""

    _pool: Any
    origin: str

    def _written(self, tool_ids: list[str]) -> None:
        raise NotImplementedError

    def delete_forever(self, tool_ids: list[str]) -> int:
        if not tool_ids:
            return 0
        with self._pool.connection() as conn, conn.transaction():
            removed = self._remove(conn, tool_ids)
        self._written(tool_ids)
        return removed

    def purge(self, doomed: Sequence[Tool]) -> list[str]:
        if not doomed:
            return []
        columns = [[t.tool_id for t in doomed], [t.status for t in doomed], [iso(t.updated_at) for t in doomed]]
        with self._pool.connection() as conn, conn.transaction():
            # The tools' rows first, in id order, then what hangs off them: the order of every write to a
            # tool and its versions (a call's UPDATE of tools runs before its UPDATE of tool_versions), so
            # none deadlocks with this. A purge that got there first holds the rows until it commits, and
            # then they are gone and this one finds nothing to remove.
            unchanged = [row[0] for row in conn.execute(_UNCHANGED, columns).fetchall()]
            self._remove(conn, unchanged)
        if unchanged:
            self._written(unchanged)
        return unchanged

    def _remove(self, conn: Any, tool_ids: list[str]) -> int:
        """Remove the tools and what is recorded about them, and tell the other servers, in the caller's
        transaction."""
        if not tool_ids:
            return 0
        for table in ("calls", "tool_versions", "staged_writes"):
            conn.execute(f"DELETE FROM {table} WHERE tool_id = ANY(%s)", (tool_ids,))
        removed = conn.execute("DELETE FROM tools WHERE tool_id = ANY(%s)", (tool_ids,)).rowcount
        send(conn, self.origin, "purged", tool_ids, equipped=True)
        return int(removed)

    def purge_candidates(self, *, archived_before: datetime | None, deleted: bool) -> list[Tool]:
        where: list[str] = []
        args: list[Any] = []
        if archived_before is not None:
            where.append("(t.status = 'archived' AND t.updated_at < %s)")
            args.append(iso(archived_before))
        if deleted:
            where.append("t.status = 'deleted'")
        if not where:
            return []
        with self._pool.connection() as conn:
            rows = conn.execute(f"{SELECT_TOOLS} WHERE {' OR '.join(where)} ORDER BY t.seq", args).fetchall()
        return [row_to_tool(r) for r in rows]

    def deleted_past(self, keep: int) -> list[Tool]:
        """Soft-deleted tools past the `keep` most recently deleted, the longest-deleted first."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                f"{SELECT_TOOLS} WHERE t.status = 'deleted' ORDER BY t.updated_at DESC, t.seq DESC OFFSET %s", (keep,)
            ).fetchall()
        return [row_to_tool(r) for r in reversed(rows)]


__all__ = ["PostgresForgetting"]
