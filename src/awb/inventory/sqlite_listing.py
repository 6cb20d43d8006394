"""Listing and text search of the SQLite inventory (BM25 over FTS5, ranked in memory by
`awb.inventory.text_index`), and its vectors: the read side `SQLiteStore` mixes in."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

from awb.inventory.models import MemoryLevel, Tool, ToolSummary
from awb.inventory.rows import SELECT_TOOLS, SUMMARY_COLUMNS, TOOL_FIELDS, relative_to_best, row_to_summary, row_to_tool
from awb.inventory.sqlite_schema import TIER_ORDER
from awb.inventory.text_index import TextIndex
from awb.search.fts import or_expression


class SQLiteListing:
    """Needs the store's connection, its lock and its text index."""

    _db: sqlite3.Connection
    _lock: threading.RLock
    _text: TextIndex

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
            where.append("t.rowid IN (SELECT tool_rowid FROM tool_tags WHERE tag = ?)")
            args.append(tag)
        if equipped is not None:
            where.append("t.equipped = ?")
            args.append(int(equipped))
        # Hot tiers first, then most used, then newest: the order an agent wants to scan.
        sql = (
            f"{SELECT_TOOLS} WHERE {' AND '.join(where)} ORDER BY {TIER_ORDER.replace('memory_level', 't.memory_level')}, "
            "t.usage_count DESC, t.rowid DESC LIMIT ?"
        )
        with self._lock:
            rows = self._db.execute(sql, [*args, limit]).fetchall()
        return [row_to_tool(r) for r in rows]

    def list_summaries(
        self, *, memory_level: MemoryLevel | None = None, tag: str | None = None, limit: int = 50, offset: int = 0
    ) -> list[ToolSummary]:
        """`list_tools` for listings: summary columns only, hot tiers first, no full records built."""
        where, args = _summary_filter(memory_level, tag)
        sql = (
            f"SELECT {SUMMARY_COLUMNS} FROM tools WHERE {where} "
            f"ORDER BY {TIER_ORDER}, usage_count DESC, rowid DESC LIMIT ? OFFSET ?"
        )
        with self._lock:
            rows = self._db.execute(sql, [*args, limit, offset]).fetchall()
        return [row_to_summary(r, None) for r in rows]

    def page_summaries(
        self, *, memory_level: MemoryLevel | None = None, tag: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[list[ToolSummary], int]:
        """One page of `list_summaries` and the number of all matches."""
        where, args = _summary_filter(memory_level, tag)
        order = f"ORDER BY {TIER_ORDER}, usage_count DESC, rowid DESC LIMIT ? OFFSET ?"
        count = f"SELECT count(*) FROM tools WHERE {where}"
        with self._lock:
            if tag is None:
                # The hot-tier index serves the page without reading the table.
                sql = f"SELECT {SUMMARY_COLUMNS}, NULL FROM tools WHERE {where} {order}"
            else:
                # The tag's own tools (tool_tags), then the page; the count comes with it, in the same pass.
                sql = f"SELECT {SUMMARY_COLUMNS}, count(*) OVER () FROM tools WHERE {where} {order}"
            rows = self._db.execute(sql, [*args, limit, offset]).fetchall()
            if rows and rows[0][-1] is not None:
                total = int(rows[0][-1])
            elif len(rows) < limit and (rows or offset == 0):
                total = offset + len(rows)  # a short page is the last one
            else:
                total = int(self._db.execute(count, args).fetchone()[0])
        return [row_to_summary(r, None) for r in rows], total

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
                for row in self._live_rows(ranked[start : start + batch], SUMMARY_COLUMNS):
                    (archived if row[4] == "archived" else live).append(row)
                if len(live) >= limit:
                    break
        scores = dict(ranked)
        chosen = (live + archived)[:limit]
        relative = relative_to_best([scores[row[0]] for row in chosen])
        return [row_to_summary(row[1:], score) for row, score in zip(chosen, relative, strict=True)]

    def search_text(self, words: Sequence[str], limit: int) -> list[tuple[Tool, float]]:
        with self._lock:
            ranked = self._ranked(words, limit)
            rows = self._live_rows(ranked, TOOL_FIELDS)
        scores = dict(ranked)
        return [(row_to_tool(r[1:]), scores[r[0]]) for r in rows]

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

    def tools_without_vector(self, model_id: str, limit: int) -> list[str]:
        """Live tools with no vector by `model_id`, oldest first."""
        from awb.inventory import vectors

        with self._lock:
            return vectors.tools_without_vector(self._db, model_id, limit)

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


def _summary_filter(memory_level: MemoryLevel | None, tag: str | None) -> tuple[str, list[Any]]:
    """The WHERE clause (and its arguments) shared by listing and counting."""
    where = ["status != 'deleted'"]
    args: list[Any] = []
    if memory_level is not None:
        where.append("memory_level = ?")
        args.append(memory_level)
    if tag is not None:
        where.append("rowid IN (SELECT tool_rowid FROM tool_tags WHERE tag = ?)")
        args.append(tag)
    return " AND ".join(where), args


__all__ = ["SQLiteListing"]
