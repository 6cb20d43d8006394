"""BM25 ranking over an in-memory copy of the FTS5 index's terms.

FTS5 stays the index of record: triggers keep `tools_fts` in step with `tools`, and every term here is
read back from it (`fts5vocab`) or cut by its own tokenizer, so stemming and Unicode rules are FTS5's.
What moves out of SQLite is the ranking. FTS5 computes `bm25()` through its auxiliary-function API for
every matching row, about a microsecond each, and a natural-language query ORs words that match a
large share of the inventory. Here the postings are numpy arrays (`awb.inventory.bm25`) and the same
formula runs over all matching rows at once; a small inventory's stay in dicts, so that a one-shot
command does not import numpy for one query (`awb.inventory.bm25_small`). Scores equal FTS5's `bm25()` with the same weights (a
test holds them to it), so ranking does not change, only its price.

The copy follows the table: the store marks rows it writes (`mark`), and a search first re-reads
those rows; a commit by another process (the CLI beside `awb start`) or an unmarked write to the FTS
table (its structure record changes) rebuilds the copy.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence

from awb.inventory.bm25_small import Bm25Index

#: Query words whose FTS5 tokens are remembered; queries repeat the same few thousand words.
TOKEN_CACHE_SIZE = 20_000
_STRUCTURE_ROWID = 10  # FTS5 keeps its segment structure (changed by every write) in this record.


class TextIndex:
    """The BM25 postings (column-weighted term frequencies) and token counts of every row of an FTS5 table.

    Not thread-safe on its own: the store calls it under the lock that guards its connection.
    """

    def __init__(self, db: sqlite3.Connection, table: str, weights: Sequence[float]) -> None:
        self._db = db
        self._table = table
        columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
        self._weights = dict(zip(columns, weights, strict=True))
        tokenizer = _tokenizer_of(db, table)
        # FTS5 itself cuts query words and re-read rows into tokens: a scratch table with the same
        # tokenizer, and an fts5vocab view listing every token instance in it.
        scratch = f"awb_tokens_{table}"
        db.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{scratch} USING fts5({', '.join(columns)}, tokenize={tokenizer})"
        )
        db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{scratch}_i USING fts5vocab(temp, {scratch}, 'instance')")
        db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_i USING fts5vocab(main, {table}, 'instance')")
        self._scratch = scratch
        self._columns = columns
        self._content = _content_table_of(db, table)
        self._bm25 = Bm25Index()
        #: None until the first build; then the `data_version` the copy was last checked at.
        self._data_version: int | None = None
        self._structure: bytes | None = None
        self._dirty: set[int] = set()
        self._token_cache: dict[str, tuple[str, ...]] = {}

    # --- keeping in step ------------------------------------------------------------------------

    def mark(self, rowids: Iterable[int]) -> None:
        """Rows this connection inserted, changed or deleted: re-read before the next search."""
        self._dirty.update(rowids)

    def _fresh(self) -> None:
        data_version = int(self._db.execute("PRAGMA data_version").fetchone()[0])
        structure = self._read_structure()
        dirty, self._dirty = self._dirty, set()
        if self._data_version is None or data_version != self._data_version:
            # Another connection committed. Only its FTS writes matter, and with none of ours
            # pending an unchanged structure record says it made none.
            if self._data_version is None or dirty or structure != self._structure:
                self._rebuild()
        elif dirty:
            self._refresh(dirty)
        elif structure != self._structure:
            self._rebuild()  # a write to the table that nobody marked: never trust the copy then
        self._data_version = data_version
        self._structure = structure

    def _read_structure(self) -> bytes | None:
        try:
            row = self._db.execute(f"SELECT block FROM {self._table}_data WHERE id = ?", (_STRUCTURE_ROWID,)).fetchone()
        except sqlite3.Error:
            return None
        return None if row is None else bytes(row[0])

    def _rebuild(self) -> None:
        bm25 = self._bm25
        bm25.clear()
        # Rows without a single token still count in FTS5's row total (and so in every IDF).
        for (rowid,) in self._db.execute(f"SELECT rowid FROM {self._content}"):
            bm25.add_row(rowid)
        bm25.add(self._db.execute(f"SELECT term, doc, col FROM temp.{self._table}_i"), self._weights)

    def _refresh(self, rowids: set[int]) -> None:
        for rowid in rowids:
            self._bm25.remove(rowid)
        marks = ", ".join("?" for _ in rowids)
        rows = self._db.execute(
            f"SELECT rowid, {', '.join(self._columns)} FROM {self._content} WHERE rowid IN ({marks})",
            list(rowids),
        ).fetchall()
        for row in rows:
            self._bm25.add_row(row[0])
        self._bm25.add(self._tokenize_rows(rows), self._weights)

    def _tokenize_rows(self, rows: Sequence[Sequence[object]]) -> list[tuple[str, int, str]]:
        if not rows:
            return []
        marks = ", ".join("?" for _ in range(len(self._columns) + 1))
        self._db.executemany(
            f"INSERT INTO temp.{self._scratch}(rowid, {', '.join(self._columns)}) VALUES ({marks})", rows
        )
        try:
            return self._db.execute(f"SELECT term, doc, col FROM temp.{self._scratch}_i").fetchall()
        finally:
            self._db.execute(f"DELETE FROM temp.{self._scratch}")

    # --- ranking --------------------------------------------------------------------------------

    def tokens(self, words: Sequence[str]) -> list[tuple[str, ...]] | None:
        """Each query word as FTS5 tokenizes it (stemmed), or None when one becomes several tokens:
        FTS5 would read that word as a phrase, which only FTS5 itself can match."""
        cache = self._token_cache
        unknown = [w for w in dict.fromkeys(words) if w not in cache]
        if unknown:
            if len(cache) + len(unknown) > TOKEN_CACHE_SIZE:
                cache.clear()
            padding = (None,) * (len(self._columns) - 1)
            rows = [(i, word, *padding) for i, word in enumerate(unknown)]
            found: dict[int, list[str]] = {}
            for term, i, _column in self._tokenize_rows(rows):
                found.setdefault(i, []).append(term)
            for i, word in enumerate(unknown):
                cache[word] = tuple(found.get(i, ()))
        result = [cache[w] for w in words]
        return None if any(len(t) > 1 for t in result) else result

    def top(self, words: Sequence[str], k: int) -> list[tuple[int, float]] | None:
        """The `k` best rows for the OR of `words` as (rowid, BM25 score), best first; None when FTS5
        has to answer (see `tokens`)."""
        self._fresh()
        tokens = self.tokens(words)
        if tokens is None:
            return None
        # Two words with one stem stay two terms, as they are two phrases to FTS5.
        return self._bm25.top([t[0] for t in tokens if t], k)


def _declaration(db: sqlite3.Connection, table: str) -> str:
    row = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    if row is None:
        raise LookupError(f"no FTS5 table {table!r}")
    return str(row[0])


def _tokenizer_of(db: sqlite3.Connection, table: str) -> str:
    found = re.search(r"tokenize\s*=\s*('(?:[^']|'')*'|\"[^\"]*\"|\w+)", _declaration(db, table))
    return found.group(1) if found else "'unicode61'"


def _content_table_of(db: sqlite3.Connection, table: str) -> str:
    # An external-content FTS5 table names its content table in its declaration.
    found = re.search(r"content\s*=\s*'?(\w+)'?", _declaration(db, table))
    return found.group(1) if found else table


__all__ = ["TextIndex"]
