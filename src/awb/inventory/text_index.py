"""BM25 ranking over an in-memory copy of the FTS5 index's terms.

FTS5 stays the index of record: triggers keep `tools_fts` in step with `tools`, and every term here is
read back from it (`fts5vocab`) or cut by its own tokenizer, so stemming and Unicode rules are FTS5's.
What moves into Python is the ranking. FTS5 computes `bm25()` through its auxiliary-function API for
every matching row, about a microsecond each: ~0.9 ms for the ~700 rows a three-word query matches
among 10,000 tools. Here each posting already holds its column-weighted term frequency and the same
formula costs a fraction of that. Scores equal FTS5's `bm25()` with the same weights (a test holds them
to it), so ranking does not change, only its price.

The copy follows the table: the store marks rows it writes (`mark`), and a search first re-reads
those rows; a commit by another process (the CLI beside `awb start`) or an unmarked write to the FTS
table (its structure record changes) rebuilds the copy, ~130 ms at 10,000 tools.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Iterable, Sequence
from operator import itemgetter

#: FTS5's bm25() constants (fts5_aux.c).
K1 = 1.2
B = 0.75
#: Query words whose FTS5 tokens are remembered; queries repeat the same few thousand words.
TOKEN_CACHE_SIZE = 20_000
#: Terms whose per-row bm25 shares are kept between queries (until the table changes).
SHARES_CACHE_SIZE = 5_000
_STRUCTURE_ROWID = 10  # FTS5 keeps its segment structure (changed by every write) in this record.


class TextIndex:
    """Postings `term -> {rowid: weighted term frequency}` and token counts of every row of an FTS5 table.

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
        self._postings: dict[str, dict[int, float]] = {}
        self._lengths: dict[int, int] = {}
        self._terms_of: dict[int, tuple[str, ...]] = {}
        self._total_tokens = 0
        self._shares: dict[str, dict[int, float]] = {}
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
        self._postings, self._lengths, self._terms_of, self._total_tokens = {}, {}, {}, 0
        # Rows without a single token still count in FTS5's row total (and so in every IDF).
        for (rowid,) in self._db.execute(f"SELECT rowid FROM {self._content}"):
            self._lengths[rowid] = 0
        instances = self._db.execute(f"SELECT term, doc, col FROM temp.{self._table}_i")
        self._add_instances(instances)

    def _add_instances(self, instances: Iterable[tuple[str, int, str]]) -> None:
        weights, postings, lengths = self._weights, self._postings, self._lengths
        terms_of: dict[int, set[str]] = {}
        added = 0
        for term, rowid, column in instances:
            posting = postings.get(term)
            if posting is None:
                posting = postings[term] = {}
            posting[rowid] = posting.get(rowid, 0.0) + weights[column]
            lengths[rowid] = lengths.get(rowid, 0) + 1
            added += 1
            seen = terms_of.get(rowid)
            if seen is None:
                terms_of[rowid] = {term}
            else:
                seen.add(term)
        for rowid, terms in terms_of.items():
            self._terms_of[rowid] = tuple(terms)
        self._total_tokens += added
        self._shares = {}

    def _remove(self, rowid: int) -> None:
        for term in self._terms_of.pop(rowid, ()):
            posting = self._postings[term]
            del posting[rowid]
            if not posting:
                del self._postings[term]
        self._total_tokens -= self._lengths.pop(rowid, 0)
        self._shares = {}

    def _refresh(self, rowids: set[int]) -> None:
        for rowid in rowids:
            self._remove(rowid)
        marks = ", ".join("?" for _ in rowids)
        rows = self._db.execute(
            f"SELECT rowid, {', '.join(self._columns)} FROM {self._content} WHERE rowid IN ({marks})",
            list(rowids),
        ).fetchall()
        for row in rows:
            self._lengths[row[0]] = 0
        self._add_instances(self._tokenize_rows(rows))

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
        rows = len(self._lengths)
        if not rows:
            return []
        # Two words with one stem stay two terms, as they are two phrases to FTS5.
        terms = [t[0] for t in tokens if t]
        # Copy the largest share table (in C) and add the smaller ones into it (in Python).
        parts = sorted((self._term_scores(term) for term in terms), key=len, reverse=True)
        scores = dict(parts[0]) if parts else {}
        for part in parts[1:]:
            get = scores.get
            for rowid, score in part.items():
                scores[rowid] = get(rowid, 0.0) + score
        # A C sort of every match beats heapq.nlargest's Python loop at these sizes.
        return sorted(scores.items(), key=itemgetter(1), reverse=True)[:k]

    def _term_scores(self, term: str) -> dict[int, float]:
        """One term's share of bm25 in every row that has it. It depends on nothing but the table, so
        it is kept until the table changes; a query then only adds up shares.

        bm25 = sum over terms of idf * f * (k1 + 1) / (f + k1 * (1 - b + b * |D| / avgdl)), f the
        column-weighted frequency of the term in the row, |D| the row's token count (fts5_aux.c).
        """
        cached = self._shares.get(term)
        if cached is not None:
            return cached
        posting = self._postings.get(term, {})
        rows, lengths = len(self._lengths), self._lengths
        hits = len(posting)
        idf = math.log((rows - hits + 0.5) / (hits + 0.5))
        factor = (idf if idf > 0 else 1e-6) * (K1 + 1)
        average = self._total_tokens / rows if self._total_tokens else 1.0
        constant, per_token = K1 * (1 - B), K1 * B / average
        shares = {rowid: factor * f / (f + constant + per_token * lengths[rowid]) for rowid, f in posting.items()}
        if len(self._shares) >= SHARES_CACHE_SIZE:
            self._shares.clear()
        self._shares[term] = shares
        return shares


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
