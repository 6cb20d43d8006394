"""BM25 postings in numpy arrays: FTS5's `bm25()` for the OR of some terms, over every row at once.

A query's cost is a few vectorised passes over the postings of its terms (a common word's run to tens of
thousands of rows at 100,000 tools) and one over a dense score array, instead of a Python loop per
matching row. Scores equal FTS5's: the same formula, term by term, in the same float64 operations.

Layout: every row gets a dense slot. The postings of all terms sit in one block sorted by (term, slot),
with a row-major index beside it (each row's terms); rows written since the block was built sit in
small per-term dicts. Removing a row finds its entries in the block by binary search and zeroes their
frequency; its slot stays retired (never matched) until the block is rebuilt from its live entries and
the dicts, once those changes outweigh a fraction of it. So a write costs O(its terms) amortised.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from awb.search.numpy_once import ensure_numpy

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Ints = npt.NDArray[np.int64]
    Floats = npt.NDArray[np.float64]
    Flags = npt.NDArray[np.bool_]

#: FTS5's bm25() constants (fts5_aux.c).
K1 = 1.2
B = 0.75
#: Changes (entries written outside the block, or zeroed in it) the block takes before it is rebuilt:
#: this share of its entries, and at least COMPACT_MIN. Rebuilding costs a few passes over the block.
COMPACT_SHARE = 0.125
COMPACT_MIN = 4096
#: A batch of added entries this large goes straight into the block (a bulk load) instead of the dicts.
BULK_ENTRIES = 2048
#: Below (slots / this) matching entries, a query sums by sorting its entries, not over every slot.
SPARSE_RATIO = 8


class Bm25Postings:
    """Column-weighted term frequencies and token counts of rows, ranked with FTS5's bm25.

    Not thread-safe: the owner calls it under one lock."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self._slot_of: dict[int, int] = {}
        self._free: list[int] = []
        #: Slots of removed rows that still have (zeroed) entries in the block: free once it is rebuilt.
        self._retired: list[int] = []
        self._next_slot = 0
        self._total_tokens = 0
        self._term_id: dict[str, int] = {}
        self._zeroed = 0
        # Entries written since the block was built: term id -> {slot: frequency}, and each row's terms.
        self._recent: dict[int, dict[int, float]] = {}
        self._recent_terms: dict[int, list[int]] = {}
        self._recent_entries = 0
        self._recent_arrays: dict[int, tuple[Ints, Floats]] = {}
        # The arrays wait for the first row: opening a store (every CLI command) does not import numpy.
        self._arrays_ready = False

    def _arrays(self) -> None:
        ensure_numpy()
        import numpy as np

        if self._arrays_ready:
            return
        self._rowid_at: Ints = np.zeros(16, dtype=np.int64)
        self._lengths: Floats = np.zeros(16, dtype=np.float64)
        self._live: Flags = np.zeros(16, dtype=bool)
        self._hits: Ints = np.zeros(16, dtype=np.int64)
        # The block: term t's postings are _block_slots[_offsets[t]:_offsets[t + 1]] (and _block_freqs),
        # in slot order; _block_keys (t * _key_base + slot) finds an entry by binary search.
        self._offsets: Ints = np.zeros(1, dtype=np.int64)
        self._block_slots: Ints = np.zeros(0, dtype=np.int64)
        self._block_freqs: Floats = np.zeros(0, dtype=np.float64)
        self._block_keys: Ints = np.zeros(0, dtype=np.int64)
        self._key_base = 1
        # Row s's terms in the block are _row_terms[_row_offsets[s]:_row_offsets[s + 1]].
        self._row_offsets: Ints = np.zeros(1, dtype=np.int64)
        self._row_terms: Ints = np.zeros(0, dtype=np.int64)
        self._arrays_ready = True

    @property
    def rows(self) -> int:
        return len(self._slot_of)

    @property
    def total_tokens(self) -> int:
        return self._total_tokens

    def __contains__(self, rowid: object) -> bool:
        return rowid in self._slot_of

    # --- writing --------------------------------------------------------------------------------

    def add_row(self, rowid: int) -> None:
        """A row with no tokens (yet): it still counts in the row total, and so in every IDF."""
        if rowid not in self._slot_of:
            self._arrays()
            self._slot(rowid)

    def add(self, instances: Iterable[tuple[str, int, str]], weights: Mapping[str, float]) -> None:
        """Token instances `(term, rowid, column)` of rows, all of each row's at once: a row that
        already has terms loses them first. A column's weight multiplies each of its instances."""
        ensure_numpy()
        import numpy as np

        self._arrays()
        listed = instances if isinstance(instances, list) else list(instances)
        if not listed:
            return
        # Column by column through C-level maps: a rebuild passes a million instances at 100,000 tools.
        terms, rowids, columns = zip(*listed, strict=True)
        slot_of = self._slot_of
        for rowid in dict.fromkeys(rowids):
            held = slot_of.get(rowid)
            if held is not None and self._lengths[held] > 0:  # it has tokens, so terms
                self.remove(rowid)
                held = None
            if held is None:
                self._slot(rowid)
        term_id = self._term_id
        new_terms = sorted(set(terms).difference(term_id))
        if new_terms:
            term_id.update(zip(new_terms, range(len(term_id), len(term_id) + len(new_terms)), strict=True))
            if len(term_id) > len(self._hits):
                hits = np.zeros(2 * len(term_id), dtype=np.int64)
                hits[: len(self._hits)] = self._hits
                self._hits = hits
        count = len(terms)
        tid_array = np.fromiter(map(term_id.__getitem__, terms), dtype=np.int64, count=count)
        slot_array = np.fromiter(map(slot_of.__getitem__, rowids), dtype=np.int64, count=count)
        weighted = np.fromiter(map(weights.__getitem__, columns), dtype=np.float64, count=count)
        base = len(self._lengths)
        self._lengths += np.bincount(slot_array, minlength=base)
        self._total_tokens += count
        # One entry per (term, row): a term in two columns, or twice in one, adds up its weights.
        unique, inverse = np.unique(tid_array * base + slot_array, return_inverse=True)
        tid_array, slot_array = unique // base, unique % base
        freq_array = np.bincount(inverse, weights=weighted, minlength=len(unique)).astype(np.float64, copy=False)
        self._hits += np.bincount(tid_array, minlength=len(self._hits))
        if len(unique) >= BULK_ENTRIES:
            self._rebuild_block(tid_array, slot_array, freq_array)
            return
        recent, recent_terms, recent_arrays = self._recent, self._recent_terms, self._recent_arrays
        for tid, row_slot, freq in zip(tid_array.tolist(), slot_array.tolist(), freq_array.tolist(), strict=True):
            entries = recent.get(tid)
            if entries is None:
                entries = recent[tid] = {}
            entries[row_slot] = freq
            recent_arrays.pop(tid, None)
            row_terms = recent_terms.get(row_slot)
            if row_terms is None:
                recent_terms[row_slot] = [tid]
            else:
                row_terms.append(tid)
        self._recent_entries += len(unique)

    def remove(self, rowid: int) -> None:
        """Forget a row (no-op for an unknown one): its entries in the dicts go, those in the block are
        zeroed, found by binary search; its slot is retired until the block is rebuilt."""
        ensure_numpy()
        import numpy as np

        slot = self._slot_of.pop(rowid, None)
        if slot is None:
            return
        self._total_tokens -= int(self._lengths[slot])
        self._lengths[slot] = 0
        self._live[slot] = False
        hits = self._hits
        for tid in self._recent_terms.pop(slot, ()):
            entries = self._recent[tid]
            del entries[slot]
            if not entries:
                del self._recent[tid]
            self._recent_arrays.pop(tid, None)
            hits[tid] -= 1
            self._recent_entries -= 1
        terms = self._block_terms(slot)
        if len(terms):
            where = np.searchsorted(self._block_keys, terms * self._key_base + slot)
            self._block_freqs[where] = 0.0
            hits[terms] -= 1  # a row has a term once in the block
            self._zeroed += len(terms)
            self._retired.append(slot)
        else:
            self._free.append(slot)

    def _block_terms(self, slot: int) -> Ints:
        if slot + 1 >= len(self._row_offsets):
            return self._row_terms[:0]
        return self._row_terms[self._row_offsets[slot] : self._row_offsets[slot + 1]]

    def _slot(self, rowid: int) -> int:
        ensure_numpy()
        import numpy as np

        if self._free:
            slot = self._free.pop()
        else:
            slot = self._next_slot
            self._next_slot += 1
            if slot >= len(self._lengths):
                grow = len(self._lengths)
                self._lengths = np.concatenate([self._lengths, np.zeros(grow, dtype=np.float64)])
                self._rowid_at = np.concatenate([self._rowid_at, np.zeros(grow, dtype=np.int64)])
                self._live = np.concatenate([self._live, np.zeros(grow, dtype=bool)])
        self._slot_of[rowid] = slot
        self._rowid_at[slot] = rowid
        self._live[slot] = True
        return slot

    def _rebuild_block(self, tids: Ints, slots: Ints, freqs: Floats) -> None:
        """The block again from its live entries, the dicts' and these; the dicts are empty after."""
        ensure_numpy()
        import numpy as np

        terms = len(self._offsets) - 1
        block_tids = np.repeat(np.arange(terms, dtype=np.int64), np.diff(self._offsets))
        live = self._live[self._block_slots]
        recent_tids: list[int] = []
        recent_slots: list[int] = []
        recent_freqs: list[float] = []
        for tid, entries in self._recent.items():
            recent_tids.extend([tid] * len(entries))
            recent_slots.extend(entries)
            recent_freqs.extend(entries.values())
        all_tids = np.concatenate([block_tids[live], np.array(recent_tids, dtype=np.int64), tids])
        all_slots = np.concatenate([self._block_slots[live], np.array(recent_slots, dtype=np.int64), slots])
        all_freqs = np.concatenate([self._block_freqs[live], np.array(recent_freqs, dtype=np.float64), freqs])
        # Terms no row has any more are dropped, and the others numbered densely again.
        kept = self._hits[: len(self._term_id)] > 0
        if not kept.all():
            renumber = np.cumsum(kept) - 1
            self._term_id = {term: int(renumber[tid]) for term, tid in self._term_id.items() if kept[tid]}
            hits = self._hits[: len(kept)][kept]
            self._hits = np.zeros(max(16, 2 * len(hits)), dtype=np.int64)
            self._hits[: len(hits)] = hits
            all_tids = renumber[all_tids]
        self._key_base = base = len(self._lengths)
        keys = all_tids * base + all_slots
        order = np.argsort(keys)
        self._block_keys, self._block_slots, self._block_freqs = keys[order], all_slots[order], all_freqs[order]
        counts = np.bincount(all_tids, minlength=len(self._term_id))
        self._offsets = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(counts)])
        by_row = np.argsort(all_slots, kind="stable")
        self._row_terms = all_tids[by_row]
        self._row_offsets = np.concatenate(
            [np.zeros(1, dtype=np.int64), np.cumsum(np.bincount(all_slots, minlength=base))]
        )
        self._free.extend(self._retired)
        self._retired, self._zeroed = [], 0
        self._recent, self._recent_terms, self._recent_arrays, self._recent_entries = {}, {}, {}, 0

    # --- ranking --------------------------------------------------------------------------------

    def _postings(self, tid: int) -> list[tuple[Ints, Floats]]:
        ensure_numpy()
        import numpy as np

        parts: list[tuple[Ints, Floats]] = []
        if tid < len(self._offsets) - 1:
            start, end = int(self._offsets[tid]), int(self._offsets[tid + 1])
            if end > start:
                parts.append((self._block_slots[start:end], self._block_freqs[start:end]))
        entries = self._recent.get(tid)
        if entries:
            arrays = self._recent_arrays.get(tid)
            if arrays is None:
                arrays = self._recent_arrays[tid] = (
                    np.fromiter(entries, dtype=np.int64, count=len(entries)),
                    np.fromiter(entries.values(), dtype=np.float64, count=len(entries)),
                )
            parts.append(arrays)
        return parts

    def top(self, terms: Sequence[str], k: int) -> list[tuple[int, float]]:
        """The `k` best rows for the OR of `terms` as (rowid, bm25), best first, ties by rowid. A term
        given twice counts twice, as FTS5 counts a repeated phrase.

        bm25 = sum over terms of idf * f * (k1 + 1) / (f + k1 * (1 - b + b * |D| / avgdl)), f the
        column-weighted frequency of the term in the row, |D| the row's token count (fts5_aux.c).
        """
        ensure_numpy()
        import numpy as np

        rows = len(self._slot_of)
        if not rows or k <= 0:
            return []
        if self._zeroed + self._recent_entries > max(COMPACT_MIN, COMPACT_SHARE * len(self._block_slots)):
            empty = np.zeros(0, dtype=np.int64)
            self._rebuild_block(empty, empty, np.zeros(0, dtype=np.float64))
        average = self._total_tokens / rows if self._total_tokens else 1.0
        constant, per_token = K1 * (1 - B), K1 * B / average
        lengths = self._lengths
        slot_parts: list[Ints] = []
        share_parts: list[Floats] = []
        for term in terms:
            tid = self._term_id.get(term)
            if tid is None:
                continue
            hits = int(self._hits[tid])
            idf = math.log((rows - hits + 0.5) / (hits + 0.5))
            factor = (idf if idf > 0 else 1e-6) * (K1 + 1)
            for slots, freqs in self._postings(tid):
                slot_parts.append(slots)
                share_parts.append(factor * freqs / (freqs + constant + per_token * lengths[slots]))
        if not slot_parts:
            return []
        slots = np.concatenate(slot_parts) if len(slot_parts) > 1 else slot_parts[0]
        shares = np.concatenate(share_parts) if len(share_parts) > 1 else share_parts[0]
        # Zeroed entries of removed rows add 0 to a retired slot, which `_live` then leaves out.
        if len(slots) * SPARSE_RATIO < len(lengths):
            matched, inverse = np.unique(slots, return_inverse=True)
            scores = np.bincount(inverse, weights=shares, minlength=len(matched))
            live = self._live[matched]
            matched, scores = matched[live], scores[live]
        else:
            dense = np.bincount(slots, weights=shares, minlength=len(lengths))
            hit = np.zeros(len(lengths), dtype=bool)
            hit[slots] = True
            matched = np.flatnonzero(hit & self._live)
            scores = dense[matched]
        if len(matched) > k:
            # Every row scoring at least the k-th best: rows tied with it are then cut by rowid, as
            # the pure-Python postings (awb.inventory.bm25_small) cut them, not as the partition fell.
            kth = np.partition(scores, len(scores) - k)[len(scores) - k]
            best = np.flatnonzero(scores >= kth)
            matched, scores = matched[best], scores[best]
        rowids = self._rowid_at[matched]
        order = np.lexsort((rowids, -scores))[:k]
        return list(zip(rowids[order].tolist(), scores[order].tolist(), strict=True))


__all__ = ["K1", "B", "Bm25Postings"]
