"""Listing, text search and vectors of the PostgreSQL inventory: the read side `PostgresStore` mixes in.

Text search ranks with BM25 in this server's memory over PostgreSQL's own documents
(awb.inventory.postgres_text); `text_search="fts"` asks PostgreSQL's ts_rank instead (kept for the
retrieval benchmark, which compares the two).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Literal

from awb.inventory.models import MemoryLevel, Tool, ToolSummary
from awb.inventory.postgres_notify import send
from awb.inventory.postgres_text import PostgresTextIndex
from awb.inventory.postgres_vectors import PgVectorIndex, PgVectorMirror
from awb.inventory.read_cache import ReadCache
from awb.inventory.rows import SELECT_TOOLS, SUMMARY_COLUMNS, TOOL_FIELDS, relative_to_best, row_to_summary, row_to_tool

#: ts_rank weights for {D, C, B, A} = {problem, description, tags, name}: SQLite's BM25 column weights.
RANK_WEIGHTS = "{0.25, 0.25, 0.5, 1.0}"
#: ts_rank normalisation 1: divide by 1 + log(document length), so long descriptions do not win by size.
RANK_NORMALISATION = 1
_ORDER = "tier, usage_count DESC, seq DESC"


class PostgresListing:
    """Needs the store's pool, its read cache, its text index and `_follow` (the change feed)."""

    _pool: Any
    _cache: ReadCache
    _text: PostgresTextIndex
    _text_lock: threading.Lock
    text_search: Literal["bm25", "fts"]
    origin: str
    _vectors: PgVectorMirror

    def _follow(self) -> None:
        raise NotImplementedError

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
        sql = f"{SELECT_TOOLS} WHERE {where} ORDER BY {_ORDER} LIMIT %s"
        with self._pool.connection() as conn:
            rows = conn.execute(sql, [*args, limit]).fetchall()
        return [row_to_tool(r) for r in rows]

    def list_summaries(
        self, *, memory_level: MemoryLevel | None = None, tag: str | None = None, limit: int = 50, offset: int = 0
    ) -> list[ToolSummary]:
        return self.page_summaries(memory_level=memory_level, tag=tag, limit=limit, offset=offset)[0]

    def page_summaries(
        self, *, memory_level: MemoryLevel | None = None, tag: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[list[ToolSummary], int]:
        where, args = _summary_filter(memory_level, tag)
        sql = f"SELECT {SUMMARY_COLUMNS} FROM tools WHERE {where} ORDER BY {_ORDER} LIMIT %s OFFSET %s"
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
        return [row_to_summary(r, None) for r in rows], total

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
        rows = self._search(words, max(candidates, limit), SUMMARY_COLUMNS, enough=limit)
        live = [r for r in rows if r[4] != "archived"]
        archived = [r for r in rows if r[4] == "archived"]
        chosen = (live + archived)[:limit]
        relative = relative_to_best([float(r[-1]) for r in chosen])
        return [row_to_summary(r[1:-1], score) for r, score in zip(chosen, relative, strict=True)]

    def search_text(self, words: Sequence[str], limit: int) -> list[tuple[Tool, float]]:
        return [(row_to_tool(r[1:-1]), float(r[-1])) for r in self._search(words, limit, TOOL_FIELDS)]

    def text_scores(self, words: Sequence[str], limit: int) -> list[tuple[str, float]]:
        if self.text_search == "fts":
            return [(str(r[1]), float(r[-1])) for r in self._search(words, limit, "t.tool_id")]
        # Ranked in memory, named and filtered in memory too: hybrid search reads the records it keeps
        # in one query afterwards, so a liveness round trip here would be a second one.
        if not words:
            return []
        self._follow()
        with self._text_lock:
            return self._text.live_ids(self._text.top(words, limit) or [])

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
            self._vectors.put(conn, tool_id, model_id, values)
            send(conn, self.origin, "vector", [tool_id])

    @property
    def vector_search_path(self) -> str:
        """Which path vector search takes on this store (pgvector or in memory, and why), for `awb doctor`."""
        return self._vectors.state.path

    def nearest_index(self, model_id: str, dim: int) -> PgVectorIndex | None:
        """The database's HNSW index when the pgvector path is active, else None (search keeps vectors
        in memory)."""
        return self._vectors.index(self._pool, model_id, dim)

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

    def tools_without_vector(self, model_id: str, limit: int) -> list[str]:
        """Live tools with no vector by `model_id`, oldest first."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT t.tool_id FROM tools t LEFT JOIN tool_vectors v ON v.tool_id = t.tool_id AND v.model_id = %s "
                "WHERE t.status <> 'deleted' AND v.tool_id IS NULL ORDER BY t.seq LIMIT %s",
                (model_id, limit),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def vector_model_ids(self) -> dict[str, int]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT v.model_id, count(*) FROM tool_vectors v JOIN tools t ON t.tool_id = v.tool_id "
                "WHERE t.status <> 'deleted' GROUP BY v.model_id"
            ).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}


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


__all__ = ["RANK_NORMALISATION", "RANK_WEIGHTS", "PostgresListing"]
