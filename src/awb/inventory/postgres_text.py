"""BM25 over PostgreSQL's own full-text documents, ranked in each server's memory.

PostgreSQL ranks with `ts_rank` on every matching row: natural-language queries OR their words, match
a large share of the inventory and take 100+ ms at 100,000 tools. So PostgreSQL stays the index of
record (the weighted `document` tsvector, its stemming and stop words) and each server keeps a copy
of the postings and ranks with the same BM25 as the SQLite store (awb.inventory.bm25_small). The copy
follows the table: this server's writes and every change another server announces on the change feed
mark rows to re-read before the next search; a `resync` (reconnect, bulk import) rebuilds it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

from awb.inventory.bm25_small import Bm25Index
from awb.inventory.text_index import TextIndex

#: Column weights by tsvector label: name A, tags B, description C, problem D (as SQLite's 4:2:1:1).
LABEL_WEIGHTS = {"A": 4.0, "B": 2.0, "C": 1.0, "D": 1.0}
TOKEN_CACHE_SIZE = 20_000

_INSTANCES = (
    "SELECT t.seq, t.tool_id, t.status = 'deleted', u.lexeme, u.weights "
    "FROM tools t LEFT JOIN LATERAL unnest(t.document) u ON true"
)


class PostgresTextIndex(TextIndex):
    """The BM25 postings of the `tools.document` column, keyed by `tools.seq`.

    Call `top` under one lock per index (the store's text lock); `mark` and `mark_all` may come from
    any thread (the change feed)."""

    def __init__(self, pool: Any) -> None:  # the SQLite index's set-up reads FTS5 tables: not called
        self._pool = pool
        self._weights = dict(LABEL_WEIGHTS)
        self._bm25 = Bm25Index()
        self._token_cache: dict[str, tuple[str, ...]] = {}
        self._seq_of: dict[str, int] = {}
        #: Each row's tool and whether it is deleted, as of its last read: hybrid search names its text
        #: matches from here, without a round trip (the index follows every change like the postings).
        self._tool_of: dict[int, str] = {}
        self._deleted: set[int] = set()
        self._pending: set[str] = set()
        self._rebuild_needed = True
        self._pending_lock = threading.Lock()

    # --- keeping in step ------------------------------------------------------------------------

    def mark_tools(self, tool_ids: Iterable[str]) -> None:
        """Tools written here or by another server: re-read before the next search."""
        with self._pending_lock:
            self._pending.update(tool_ids)

    def mark_all(self) -> None:
        with self._pending_lock:
            self._rebuild_needed = True

    def _fresh(self) -> None:
        with self._pending_lock:
            rebuild, self._rebuild_needed = self._rebuild_needed, False
            pending, self._pending = self._pending, set()
        if rebuild:
            self._bm25.clear()
            self._seq_of, self._tool_of, self._deleted = {}, {}, set()
            with self._pool.connection() as conn:
                self._load(conn.execute(_INSTANCES))
        elif pending:
            for tool_id in pending:
                seq = self._seq_of.pop(tool_id, None)
                if seq is not None:
                    self._bm25.remove(seq)
                    self._tool_of.pop(seq, None)
                    self._deleted.discard(seq)
            with self._pool.connection() as conn:
                self._load(conn.execute(_INSTANCES + " WHERE t.tool_id = ANY(%s)", (list(pending),)))

    def _load(self, rows: Iterable[tuple[int, str, bool, str | None, Sequence[str] | None]]) -> None:
        instances: list[tuple[str, int, str]] = []
        for seq, tool_id, deleted, lexeme, labels in rows:
            if tool_id not in self._seq_of:
                self._seq_of[tool_id] = seq
                self._tool_of[seq] = tool_id
                if deleted:
                    self._deleted.add(seq)
                self._bm25.add_row(seq)  # a row without a token still counts in every IDF
            if lexeme is not None and labels:
                instances.extend((lexeme, seq, label) for label in labels)
        self._bm25.add(instances, self._weights)

    def live_ids(self, ranked: Sequence[tuple[int, float]]) -> list[tuple[str, float]]:
        """(tool_id, score) of ranked rows (from `top`, under the same lock) that are not deleted."""
        return [
            (self._tool_of[seq], score) for seq, score in ranked if seq in self._tool_of and seq not in self._deleted
        ]

    # --- query words ----------------------------------------------------------------------------

    def tokens(self, words: Sequence[str]) -> list[tuple[str, ...]] | None:
        """Each word as PostgreSQL's english configuration stems it; a word it splits into several
        lexemes searches for each of them (OR), as stop words become none."""
        cache = self._token_cache
        unknown = [w for w in dict.fromkeys(words) if w not in cache]
        if unknown:
            if len(cache) + len(unknown) > TOKEN_CACHE_SIZE:
                cache.clear()
            with self._pool.connection() as conn:
                rows = conn.execute(
                    "SELECT w, ARRAY(SELECT lexeme FROM unnest(to_tsvector('english', w))) "
                    "FROM unnest(%s::text[]) AS w",
                    (unknown,),
                ).fetchall()
            for word, lexemes in rows:
                cache[word] = tuple(lexemes or ())
        return [(lexeme,) for w in words for lexeme in cache.get(w, ())]


__all__ = ["LABEL_WEIGHTS", "PostgresTextIndex"]
