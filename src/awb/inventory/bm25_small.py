"""BM25 postings in plain dicts for small inventories, and the index that picks them or numpy's.

Importing numpy costs a fresh process 0.05-0.1 s: more than ranking a few thousand rows in Python takes,
and a one-shot command (`awb inventory search --text`) pays it for a single query. Below `SMALL_ROWS`
rows the postings are dicts; past it `Bm25Index` moves them into the numpy arrays of
`awb.inventory.bm25` (a query there costs a few vectorised passes however many rows match). Both give
the same scores to the last bit: the same float64 operations in the same order (a test holds them to
it), so ranking never depends on which one answered.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence

from awb.inventory.bm25 import K1, B, Bm25Postings

#: Rows kept in dicts; the row that passes this moves the index into numpy arrays (until `clear`).
#: A query over 2,000 rows whose terms match all of them costs ~1 ms per term in Python.
SMALL_ROWS = 2000


class SmallBm25Postings:
    """`Bm25Postings` with dicts: the same methods, the same scores. Not thread-safe on its own."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        #: Each row's token instances `(term, column)` in the order given: the numpy postings are
        #: built again from them, so that frequencies add up in the same order.
        self._instances: dict[int, list[tuple[str, str]]] = {}
        self._postings: dict[str, dict[int, float]] = {}
        #: Each row's token count, as a float64 like the numpy postings' (the same value, the same sums).
        self._lengths: dict[int, float] = {}
        self._total_tokens = 0

    @property
    def rows(self) -> int:
        return len(self._instances)

    @property
    def total_tokens(self) -> int:
        return self._total_tokens

    def __contains__(self, rowid: object) -> bool:
        return rowid in self._instances

    def add_row(self, rowid: int) -> None:
        self._instances.setdefault(rowid, [])

    def add(self, instances: Iterable[tuple[str, int, str]], weights: Mapping[str, float]) -> None:
        """Token instances `(term, rowid, column)`, all of each row's at once: a row that already has
        terms loses them first. A term's frequency in a row adds up its instances' column weights."""
        by_row: dict[int, list[tuple[str, str]]] = {}
        for term, rowid, column in instances:
            found = by_row.get(rowid)
            if found is None:
                found = by_row[rowid] = []
            found.append((term, column))
        postings = self._postings
        for rowid, tokens in by_row.items():
            if self._instances.get(rowid):
                self.remove(rowid)
            self._instances[rowid] = tokens
            self._lengths[rowid] = float(len(tokens))
            self._total_tokens += len(tokens)
            for term, column in tokens:
                entries = postings.get(term)
                if entries is None:
                    entries = postings[term] = {}
                entries[rowid] = entries.get(rowid, 0.0) + weights[column]

    def remove(self, rowid: int) -> None:
        """Forget a row (no-op for an unknown one)."""
        tokens = self._instances.pop(rowid, None)
        if tokens is None:
            return
        self._total_tokens -= len(tokens)
        self._lengths.pop(rowid, None)
        for term in {term for term, _ in tokens}:
            entries = self._postings[term]
            del entries[rowid]
            if not entries:
                del self._postings[term]

    def instances(self) -> list[tuple[str, int, str]]:
        """Every token instance held, row by row in the order given (to rebuild the numpy postings)."""
        return [(term, rowid, column) for rowid, tokens in self._instances.items() for term, column in tokens]

    def row_ids(self) -> list[int]:
        return list(self._instances)

    def top(self, terms: Sequence[str], k: int) -> list[tuple[int, float]]:
        """The `k` best rows for the OR of `terms` as (rowid, bm25), best first, ties by rowid; the
        formula and the order of its operations are `Bm25Postings.top`'s."""
        rows = len(self._instances)
        if not rows or k <= 0:
            return []
        average = self._total_tokens / rows if self._total_tokens else 1.0
        constant, per_token = K1 * (1 - B), K1 * B / average
        lengths = self._lengths
        scores: dict[int, float] = {}
        for term in terms:
            entries = self._postings.get(term)
            if not entries:
                continue
            hits = len(entries)
            idf = math.log((rows - hits + 0.5) / (hits + 0.5))
            factor = (idf if idf > 0 else 1e-6) * (K1 + 1)
            get = scores.get
            for rowid, freq in entries.items():
                scores[rowid] = get(rowid, 0.0) + factor * freq / (freq + constant + per_token * lengths[rowid])
        if len(scores) > k:
            return heapq.nsmallest(k, scores.items(), key=_best_first)
        return sorted(scores.items(), key=_best_first)


def _best_first(hit: tuple[int, float]) -> tuple[float, int]:
    return -hit[1], hit[0]


class Bm25Index:
    """BM25 postings that live in dicts while there are at most `SMALL_ROWS` rows, then in numpy
    arrays: the owner's one object for `awb.inventory.text_index` and the PostgreSQL store."""

    def __init__(self, small_rows: int | None = None) -> None:
        self._small_rows = SMALL_ROWS if small_rows is None else small_rows
        self._weights: Mapping[str, float] = {}
        self._postings: SmallBm25Postings | Bm25Postings = SmallBm25Postings()

    @property
    def uses_numpy(self) -> bool:
        return isinstance(self._postings, Bm25Postings)

    def clear(self) -> None:
        """Forget every row; a rebuild that follows starts in dicts again."""
        self._postings = SmallBm25Postings()

    @property
    def rows(self) -> int:
        return self._postings.rows

    @property
    def total_tokens(self) -> int:
        return self._postings.total_tokens

    def __contains__(self, rowid: object) -> bool:
        return rowid in self._postings

    def add_row(self, rowid: int) -> None:
        self._postings.add_row(rowid)
        self._outgrown()

    def add(self, instances: Iterable[tuple[str, int, str]], weights: Mapping[str, float]) -> None:
        self._postings.add(instances, weights)
        self._weights = weights
        self._outgrown()

    def remove(self, rowid: int) -> None:
        self._postings.remove(rowid)

    def top(self, terms: Sequence[str], k: int) -> list[tuple[int, float]]:
        return self._postings.top(terms, k)

    def _outgrown(self) -> None:
        small = self._postings
        if not isinstance(small, SmallBm25Postings) or small.rows <= self._small_rows:
            return
        large = Bm25Postings()
        for rowid in small.row_ids():
            large.add_row(rowid)
        instances = small.instances()
        if instances:
            large.add(instances, self._weights)
        self._postings = large


__all__ = ["SMALL_ROWS", "Bm25Index", "SmallBm25Postings"]
