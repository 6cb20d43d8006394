"""The query vectors a search engine keeps: those embedded lately (agents repeat queries), and those
being embedded ahead of their search on a thread of their own (`QueryVectors.embed_ahead`)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from awb.search.embeddings import Embedder

QUERY_CACHE_SIZE = 256


class QueryVectors:
    """Query -> vector, the `size` most recently used kept."""

    def __init__(self, size: int = QUERY_CACHE_SIZE) -> None:
        #: Agents repeat queries; the benchmarks set 0 so every query pays for its embedding.
        self.size = size
        self._lock = threading.Lock()
        self._vectors: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        #: Queries being embedded ahead, each set once its embedding has ended (however it ended).
        self._ahead: dict[str, threading.Event] = {}

    def embed_ahead(self, embedder: Embedder, query: str) -> None:
        """Embed `query` on a thread of its own (its first embedding loads the model), so that the
        search for it finds the vector ready. A failure is not kept: that search embeds it again, and
        meets the failure itself."""
        with self._lock:
            if query in self._vectors or query in self._ahead:
                return
            done = self._ahead[query] = threading.Event()

        def embed() -> None:
            try:
                self._cached_or_embedded(embedder, query)
            except Exception:  # met again, and reported, by the search for it
                pass
            finally:
                with self._lock:
                    del self._ahead[query]
                done.set()

        # Not a daemon, as the model's own loading thread (`LocalEmbedder.start_loading`).
        threading.Thread(target=embed, name="awb-query-ahead").start()

    def vector(self, embedder: Embedder, query: str) -> npt.NDArray[np.float32]:
        """The vector of `query`: kept, embedded ahead (waited for), or embedded now."""
        with self._lock:
            ahead = self._ahead.get(query)
        if ahead is not None:
            ahead.wait()  # set however that embedding ends
        return self._cached_or_embedded(embedder, query)

    def _cached_or_embedded(self, embedder: Embedder, query: str) -> npt.NDArray[np.float32]:
        with self._lock:
            cached = self._vectors.get(query)
            if cached is not None:
                self._vectors.move_to_end(query)
                return cached
        vector: npt.NDArray[np.float32] = embedder.embed([query])[0]
        with self._lock:
            self._vectors[query] = vector
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        return vector


__all__ = ["QUERY_CACHE_SIZE", "QueryVectors"]
