"""Nearest tool vectors by cosine: exact up to EXACT_LIMIT tools, a sign sketch and exact rescoring above.

An exact search reads the whole float32 matrix per query: 154 MB at 100,000 tools of 384 dimensions,
memory-bound at ~15 ms on an idle machine and several times that on a busy one. Above EXACT_LIMIT a
query first reads a 1-bit sketch of every vector (the signs of its centred coordinates, 48 bytes for
384 dimensions: 32x fewer bytes), takes the tools nearest by Hamming distance as candidates, and ranks
those by their exact float32 cosine. Scores are exact; what can be lost is a true neighbour the sketch
did not put among the candidates (recall, measured in benchmarks/vector_recall.py and the README).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from awb.search.numpy_once import ensure_numpy

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vector = npt.NDArray[np.float32]

#: Up to this many tools, every query scans the whole matrix: ranking is exact, as it always was.
EXACT_LIMIT = 20_000
#: Above it, the candidates rescored exactly: this share of the tools, and at least SKETCH_MIN_CANDIDATES
#: (and the results asked for). Recall for these values is in the README.
SKETCH_CANDIDATE_SHARE = 1 / 25
SKETCH_MIN_CANDIDATES = 2_000


#: How vectors are searched, as `awb doctor` and `awb db status` say it.
SEARCH_PATH = (
    f"in memory per server: exact cosine up to {EXACT_LIMIT:,} tools, "
    "a 1-bit sketch then exact rescoring above (float32)"
)


class NearestIndex(Protocol):
    """What hybrid search asks of an index: this module's in-memory one, or a store's (pgvector)."""

    def has_vectors(self) -> bool: ...

    def put(self, tool_id: str, vector: Any) -> None: ...

    def remove(self, tool_id: str) -> None: ...

    def nearest(self, query: npt.NDArray[np.float32], k: int, also: Sequence[str] = ()) -> dict[str, float]: ...


class VectorIndex:
    """One float32 row per tool in a buffer that doubles when full; removal moves the last row into
    the hole, so put and remove cost O(dim) amortised, never a copy of the matrix."""

    def __init__(self, dim: int, *, exact_limit: int | None = None) -> None:
        ensure_numpy()
        import numpy as np

        self.dim = dim
        self.exact_limit = EXACT_LIMIT if exact_limit is None else exact_limit
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self._buffer: Vector = np.zeros((16, dim), dtype=np.float32)
        #: The sign sketch, word by word (shape words x capacity: a query's passes run along contiguous
        #: rows), made the first time a query needs it.
        self._signs: npt.NDArray[np.uint64] | None = None
        self._centre: Vector = np.zeros(dim, dtype=np.float32)

    @classmethod
    def from_rows(cls, dim: int, rows: list[tuple[str, int, bytes]], *, exact_limit: int | None = None) -> VectorIndex:
        ensure_numpy()
        import numpy as np

        index = cls(dim, exact_limit=exact_limit)
        usable = [(tool_id, blob) for tool_id, row_dim, blob in rows if row_dim == dim]
        if usable:
            index.ids = [tool_id for tool_id, _ in usable]
            index.rows = {tool_id: i for i, tool_id in enumerate(index.ids)}
            # Room to grow by an eighth before the first doubling.
            index._buffer = np.zeros((len(usable) + len(usable) // 8 + 16, dim), dtype=np.float32)
            index._buffer[: len(usable)] = np.frombuffer(b"".join(blob for _, blob in usable), dtype="<f4").reshape(
                -1, dim
            )
        return index

    def __len__(self) -> int:
        return len(self.ids)

    def has_vectors(self) -> bool:
        return bool(self.ids)

    @property
    def matrix(self) -> Vector:
        """The live rows (a view: valid until the next put or remove)."""
        return self._buffer[: len(self.ids)]

    def put(self, tool_id: str, vector: Vector) -> None:
        ensure_numpy()
        import numpy as np

        row = self.rows.get(tool_id)
        if row is None:
            row = len(self.ids)
            if row == len(self._buffer):
                grown = np.zeros((2 * len(self._buffer), self.dim), dtype=np.float32)
                grown[:row] = self._buffer
                self._buffer = grown
                if self._signs is not None:
                    signs = np.zeros((self._signs.shape[0], len(grown)), dtype=np.uint64)
                    signs[:, :row] = self._signs
                    self._signs = signs
            self.rows[tool_id] = row
            self.ids.append(tool_id)
        self._buffer[row] = vector
        if self._signs is not None:
            self._signs[:, row] = self._sketch(self._buffer[row : row + 1])[0]

    def remove(self, tool_id: str) -> None:
        row = self.rows.pop(tool_id, None)
        if row is None:
            return
        last = len(self.ids) - 1
        if row != last:
            moved = self.ids[last]
            self.ids[row] = moved
            self.rows[moved] = row
            self._buffer[row] = self._buffer[last]
            if self._signs is not None:
                self._signs[:, row] = self._signs[:, last]
        self.ids.pop()

    def _sketch(self, vectors: Vector) -> npt.NDArray[np.uint64]:
        ensure_numpy()
        import numpy as np

        bits = np.packbits(vectors > self._centre, axis=1)
        words = -(-self.dim // 64)
        padded = np.zeros((len(vectors), 8 * words), dtype=np.uint8)
        padded[:, : bits.shape[1]] = bits
        return padded.view(np.uint64)

    def _ensure_sketch(self) -> npt.NDArray[np.uint64]:
        ensure_numpy()
        import numpy as np

        if self._signs is None:
            # Centred on the mean vector: sentence embeddings share a direction, and the signs of raw
            # coordinates would be nearly the same bits for every tool.
            self._centre = self.matrix.mean(axis=0).astype(np.float32)
            signs = np.zeros((-(-self.dim // 64), len(self._buffer)), dtype=np.uint64)
            signs[:, : len(self.ids)] = self._sketch(self.matrix).T
            self._signs = signs
        return self._signs

    def nearest(self, query: Vector, k: int, also: Sequence[str] = ()) -> dict[str, float]:
        """Cosines of the k nearest tools and of the tools in `also` (those that have a vector).

        Above `exact_limit` the k nearest are the best of the sketch's candidates; every cosine is exact."""
        ensure_numpy()
        import numpy as np

        count = len(self.ids)
        if not count:
            return {}
        k = min(k, count)
        if count <= self.exact_limit:
            scores = self.matrix @ query
            top = np.argpartition(-scores, k - 1)[:k] if k < count else np.arange(count)
            cosines = {self.ids[i]: float(scores[i]) for i in top}
            for tool_id in also:
                row = self.rows.get(tool_id)
                if row is not None:
                    cosines[tool_id] = float(scores[row])
            return cosines
        candidates = self._candidates(query, k)
        near = self._buffer[candidates] @ query
        best = np.argpartition(-near, k - 1)[:k] if k < len(candidates) else np.arange(len(candidates))
        cosines = {self.ids[candidates[i]]: float(near[i]) for i in best}
        for tool_id in also:
            row = self.rows.get(tool_id)
            if row is not None and tool_id not in cosines:
                cosines[tool_id] = float(self._buffer[row] @ query)
        return cosines

    def _candidates(self, query: Vector, k: int) -> npt.NDArray[np.intp]:
        """Rows nearest to `query` by the sketch's Hamming distance, ascending."""
        ensure_numpy()
        import numpy as np

        count = len(self.ids)
        signs = self._ensure_sketch()
        bits = self._sketch(query[None, :])[0]
        distance = np.bitwise_count(signs[0, :count] ^ bits[0]).astype(np.uint16)
        for word in range(1, len(bits)):
            distance += np.bitwise_count(signs[word, :count] ^ bits[word])
        wanted = min(count, max(SKETCH_MIN_CANDIDATES, k, int(count * SKETCH_CANDIDATE_SHARE)))
        # Distances are small integers: a histogram finds the cut-off in one pass, no sort.
        cumulative = np.cumsum(np.bincount(distance, minlength=self.dim + 1))
        cut = int(np.searchsorted(cumulative, wanted))
        candidates = np.flatnonzero(distance <= cut)
        if len(candidates) > wanted:  # ties at the cut-off: keep the nearest `wanted`
            candidates = np.sort(candidates[np.argpartition(distance[candidates], wanted - 1)[:wanted]])
        # Ascending rows: the rescoring reads the matrix front to back.
        return candidates


__all__ = ["EXACT_LIMIT", "SEARCH_PATH", "NearestIndex", "VectorIndex"]
