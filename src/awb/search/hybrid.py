"""Hybrid tool search: FTS5 BM25 and embedding cosine fused into an absolute relevance, tier-aware.

Every constant here was chosen on MetaTool (199 tools, 21,041 queries) with `benchmarks/retrieval.py`,
tuned on a fixed 20% of the queries and checked on the other 80%; see the README's Search section for
the numbers. How the signals make a score is `awb.search.relevance`. Without an embedder (no `embed`
extra, or embeddings disabled) search is BM25 only and says so.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from awb.config import SearchConfig
from awb.inventory.models import MemoryLevel, Tool
from awb.inventory.rows import relative_to_best
from awb.inventory.store import Store
from awb.search.embeddings import Embedder, EmbedderUnavailable, create_embedder
from awb.search.fts import search_words, split_identifier
from awb.search.numpy_once import ensure_numpy
from awb.search.relevance import FLOOR_RELEVANCE, RELEVANCE_FLOOR, fuse, score
from awb.search.vector_cache import VectorCache, text_key
from awb.search.vector_index import SEARCH_PATH, NearestIndex, VectorIndex

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

log = logging.getLogger("awb.search")

Mode = Literal["text", "dense", "hybrid"]

#: A tool's vector is the normalised sum of three views: its description (with problem and tags), its
#: name in words plus description, and NAME_VIEW_WEIGHT times its name alone. +1.6 R@5 dense and +1.1
#: hybrid on MetaTool against the description alone; 0.3-0.8 all do as well.
NAME_VIEW_WEIGHT = 0.5
#: Among near ties, hotter memory first. Far below the score gaps that matter: MetaTool R@5 is unchanged
#: when every tool is long-term except the relevant one.
TIER_BONUS: dict[MemoryLevel, float] = {"long_term": 0.01, "medium_term": 0.005, "short_term": 0.0, "archived": 0.0}
#: Tools past `limit` whose tier is looked at, so a hotter near tie or an archived tool can move.
TIER_WINDOW = 10
#: Candidates taken from each signal before fusion, at least.
MIN_CANDIDATES = 50
QUERY_CACHE_SIZE = 256
#: Tools embedded per batch by reindex (three texts each).
REINDEX_BATCH = 16


@runtime_checkable
class VectorStore(Protocol):
    """What a store needs for dense search (SQLiteStore has it; a store without it searches text only)."""

    def put_vector(self, tool_id: str, model_id: str, values: list[float]) -> None: ...

    def load_vectors(self, model_id: str) -> list[tuple[str, int, bytes]]: ...

    def vector_model_ids(self) -> dict[str, int]: ...

    def tools_without_vector(self, model_id: str, limit: int) -> list[str]: ...

    def text_scores(self, words: Sequence[str], limit: int) -> list[tuple[str, float]]: ...


@dataclass
class SearchStatus:
    """What `awb doctor` shows: the mode search runs in and why, and how the stored vectors stand."""

    mode: Literal["text", "hybrid"]
    reason: str
    model_id: str | None = None
    load_seconds: float | None = None
    #: Live tools with a vector, per embedding model.
    vectors_by_model: dict[str, int] = field(default_factory=dict)
    #: Live tools whose vector came from another model than the current one: `awb reindex` fixes them.
    stale: int = 0
    #: Live tools without a vector of the current model (stale ones included).
    missing: int = 0
    #: Where vectors are searched: in this server's memory, or the database's pgvector index.
    vector_path: str = SEARCH_PATH

    @property
    def needs_reindex(self) -> bool:
        return self.mode == "hybrid" and self.missing > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "reason": self.reason,
            "model_id": self.model_id,
            "load_seconds": None if self.load_seconds is None else round(self.load_seconds, 3),
            "vectors_by_model": self.vectors_by_model,
            "stale": self.stale,
            "missing": self.missing,
            "needs_reindex": self.needs_reindex,
            "vector_path": self.vector_path,
        }


def tool_views(tool: Tool) -> tuple[str, str, str]:
    """The three texts whose embeddings make a tool's vector: description, name + description, name."""
    name = split_identifier(tool.name)
    extra = " ".join(part for part in (tool.metadata.problem, " ".join(tool.metadata.tags)) if part)
    description = f"{tool.description} {extra}".strip()
    return description, f"{name}: {description}", name


def relative_text_scores(hits: list[tuple[Tool, float]]) -> list[tuple[Tool, float]]:
    """BM25 divided by the best BM25 of the query (`relative_to_best`, as the stores' text summaries)."""
    relative = relative_to_best([score for _, score in hits])
    return [(tool, score) for (tool, _), score in zip(hits, relative, strict=True)]


def tier_order(hits: Sequence[tuple[Tool, float]]) -> list[tuple[Tool, float]]:
    """Archived tools after every live one; hotter tiers win near ties by a small bonus."""
    ranked = [(tool, score + TIER_BONUS[tool.memory_level]) for tool, score in hits]
    ranked.sort(key=lambda hit: (hit[0].memory_level == "archived" or hit[0].status == "archived", -hit[1]))
    return ranked


class HybridSearch:
    """The search `awb_search` runs. Keeps tool vectors in step with craft, update and delete."""

    def __init__(
        self, store: Store, embedder: Embedder | None, config: SearchConfig | None = None, *, reason: str = ""
    ) -> None:
        self.store = store
        self.config = config or SearchConfig()
        self._lock = threading.RLock()
        self._index: NearestIndex | None = None
        self._data_version: int | None = None
        self._queries: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        #: Agents repeat queries; the benchmark sets 0 so every query pays for its embedding.
        self.query_cache_size = QUERY_CACHE_SIZE
        self.embedder: Embedder | None = None
        #: Where tool vectors computed before are found again (the planner's index sets it).
        self.vector_cache: VectorCache | None = None
        if self.config.mode == "text":
            self.reason = "search.mode is 'text'"
        elif embedder is None:
            self.reason = reason or "no embedding model"
        elif not isinstance(store, VectorStore):
            self.reason = f"{type(store).__name__} keeps no vectors"
        else:
            self.embedder = embedder
            self.reason = reason or f"embedding model {embedder.model_id}"

    @property
    def mode(self) -> Literal["text", "hybrid"]:
        return "hybrid" if self.embedder is not None else "text"

    def warm_up(self) -> None:
        """Start loading the model in the background (call from `Workbench.start`); returns at once."""
        start = getattr(self.embedder, "start_loading", None)
        if callable(start):
            start()

    def prepare(self) -> None:
        """Build what the first search would (the text index copy a shared store keeps, the vector
        matrix once the model is there): a server calls it in a thread after it serves, so the first
        agent to search does not pay seconds for it at 100k tools."""
        self.store.search_text(["prepare"], 1)
        if self.embedder is not None and isinstance(self.store, VectorStore):
            self._vector_index()

    def _disable(self, exc: Exception) -> None:
        log.warning("search falls back to text only: %s", exc)
        self.reason = str(exc)
        self.embedder = None

    # --- keeping vectors in step ----------------------------------------------------------------

    def _vectors_of(self, tools: Sequence[Tool]) -> npt.NDArray[np.float32]:
        assert self.embedder is not None
        if self.vector_cache is None:
            return self._embed_views(tools)
        # The key covers every text embedded and how the views are summed.
        keys = [text_key([*tool_views(tool), f"name view weight {NAME_VIEW_WEIGHT}"]) for tool in tools]
        return self.vector_cache.vectors(self.embedder, keys, lambda rows: self._embed_views([tools[i] for i in rows]))

    def _embed_views(self, tools: Sequence[Tool]) -> npt.NDArray[np.float32]:
        ensure_numpy()
        import numpy as np

        assert self.embedder is not None
        views = self.embedder.embed([text for tool in tools for text in tool_views(tool)]).reshape(len(tools), 3, -1)
        summed = views[:, 0] + views[:, 1] + NAME_VIEW_WEIGHT * views[:, 2]
        norms = np.clip(np.linalg.norm(summed, axis=1, keepdims=True), 1e-12, None)
        vectors: npt.NDArray[np.float32] = (summed / norms).astype(np.float32)
        return vectors

    def index_tool(self, tool: Tool) -> bool:
        """Embed and store a tool's vector (after craft and every new version). False in text mode."""
        return self.index_tools([tool]) == 1

    def index_tools(self, tools: Sequence[Tool]) -> int:
        """Embed and store the vectors of several tools in one batch; returns how many were stored."""
        if self.embedder is None or not tools:
            return 0
        try:
            vectors = self._vectors_of(tools)
        except EmbedderUnavailable as exc:
            self._disable(exc)
            return 0
        assert isinstance(self.store, VectorStore)
        for tool, vector in zip(tools, vectors, strict=True):
            self.store.put_vector(tool.tool_id, self.embedder.model_id, vector.tolist())
        with self._lock:
            if self._index is not None:
                for tool, vector in zip(tools, vectors, strict=True):
                    self._index.put(tool.tool_id, vector)
        return len(tools)

    def remove_tool(self, tool_id: str) -> None:
        """Forget a deleted tool in the cache; the stored vector goes with the record when it is purged."""
        with self._lock:
            if self._index is not None:
                self._index.remove(tool_id)

    def follow(self, kind: str, tool_ids: Sequence[str]) -> None:
        """Follow a change another server made to a shared inventory: its new vectors, its deletions.

        Only the vectors named are read again, so a craft elsewhere costs one row, not a reload."""
        ensure_numpy()
        import numpy as np

        with self._lock:
            index = self._index
        if index is None or self.embedder is None:
            return
        if not isinstance(index, VectorIndex):
            # The database is the index (pgvector): every server reads the same one.
            return
        matrix: VectorIndex = index
        if kind == "resync":
            with self._lock:
                self._index = None
            return
        load_one = getattr(self.store, "load_vector", None)
        for tool_id in tool_ids:
            blob = load_one(tool_id, self.embedder.model_id) if kind == "vector" and callable(load_one) else None
            with self._lock:
                if self._index is not matrix:
                    return
                if blob is not None and len(blob) == 4 * matrix.dim:
                    matrix.put(tool_id, np.frombuffer(blob, dtype="<f4").copy())
                elif kind in ("deleted", "purged", "vector"):
                    matrix.remove(tool_id)

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Recompute every live tool's vector with the current model; returns how many were written."""
        if self.embedder is None:
            raise EmbedderUnavailable(f"search is text-only: {self.reason}")
        tools = self.store.list_tools(limit=1_000_000)
        done = 0
        for start in range(0, len(tools), REINDEX_BATCH):
            done += self.index_tools(tools[start : start + REINDEX_BATCH])
            if progress is not None:
                progress(done, len(tools))
        with self._lock:
            self._index = None
        return done

    def status(self) -> SearchStatus:
        if self.embedder is None:
            return SearchStatus(mode="text", reason=self.reason)
        assert isinstance(self.store, VectorStore)
        by_model = self.store.vector_model_ids()
        current = by_model.get(self.embedder.model_id, 0)
        return SearchStatus(
            mode="hybrid",
            reason=self.reason,
            model_id=self.embedder.model_id,
            load_seconds=getattr(self.embedder, "load_seconds", None),
            vectors_by_model=by_model,
            stale=sum(n for model, n in by_model.items() if model != self.embedder.model_id),
            missing=max(self.store.count_active() - current, 0),
            vector_path=getattr(self.store, "vector_search_path", SEARCH_PATH),
        )

    # --- searching --------------------------------------------------------------------------------

    def _vector_index(self) -> NearestIndex:
        assert self.embedder is not None and isinstance(self.store, VectorStore)
        version = self.store.data_version()
        with self._lock:
            # Another process (the CLI beside `awb start`) committed: its crafts may carry new vectors.
            if self._index is None or version != self._data_version:
                # A store with pgvector answers `nearest` itself: no matrix is loaded.
                shared = getattr(self.store, "nearest_index", None)
                index = shared(self.embedder.model_id, self.embedder.dim) if callable(shared) else None
                if index is None:
                    index = VectorIndex.from_rows(self.embedder.dim, self.store.load_vectors(self.embedder.model_id))
                self._index = index
                self._data_version = version
            return self._index

    def _embed_query(self, query: str) -> npt.NDArray[np.float32]:
        assert self.embedder is not None
        with self._lock:
            cached = self._queries.get(query)
            if cached is not None:
                self._queries.move_to_end(query)
                return cached
        vector: npt.NDArray[np.float32] = self.embedder.embed([query])[0]
        with self._lock:
            self._queries[query] = vector
            while len(self._queries) > self.query_cache_size:
                self._queries.popitem(last=False)
        return vector

    def _text(self, query: str, k: int) -> list[tuple[Tool, float]]:
        words = search_words(query)
        return relative_text_scores(self.store.search_text(words, limit=k)) if words else []

    def search(
        self, query: str, limit: int = 10, *, mode: Mode | None = None, matches_only: bool = False
    ) -> tuple[str, list[tuple[Tool, float]]]:
        """The best `limit` tools for `query` with their scores, and the mode that produced them.

        `mode` forces one signal (the benchmark compares them); by default hybrid when an embedder
        is available, else text. In hybrid mode a score is absolute (`awb.search.relevance`), and
        `matches_only` keeps the tools scoring at least `RELEVANCE_FLOOR`; a text search returns only
        tools that share a word with the query anyway.
        """
        wanted: Mode = mode or self.mode
        k = max(limit * 3 + 20, MIN_CANDIDATES)
        if wanted == "text" or self.embedder is None:
            return "text", tier_order(self._text(query, k))[:limit]
        # BM25 first, in this thread: ranked in memory it costs a few hundred microseconds, less than
        # handing it to another thread that would compete with the model's for two cores.
        assert isinstance(self.store, VectorStore)
        if not self._vector_index().has_vectors():
            # No tool has a vector (an empty inventory): nothing for the model to rank, so the query
            # is not embedded and a fresh CLI process does not wait for the model to load.
            return "text", tier_order(self._text(query, k))[:limit]
        words = [] if wanted == "dense" else search_words(query)
        text_scores = dict(self.store.text_scores(words, k)) if words else {}
        try:
            query_vector = self._embed_query(query)
        except EmbedderUnavailable as exc:
            self._disable(exc)
            return "text", tier_order(self._text(query, k))[:limit]
        # A text hit outside the k nearest still brings its own cosine into the fusion. Under the lock:
        # a put or remove moves rows of the matrix in place.
        index = self._vector_index()
        if isinstance(index, VectorIndex):
            with self._lock:
                cosines = index.nearest(query_vector, k, list(text_scores))
        else:  # the database's index: searches on other threads need not wait for this round trip
            cosines = index.nearest(query_vector, k, list(text_scores))
        relevance = cosines if wanted == "dense" else fuse(text_scores, cosines)
        # Materialise a window past `limit` so tier order can still move near ties and archived tools;
        # a listing's matches need no tool far under the floor (the tier bonus lifts by at most its top).
        ranked = sorted(relevance, key=relevance.__getitem__, reverse=True)
        if matches_only and wanted == "hybrid":
            lowest = FLOOR_RELEVANCE - max(TIER_BONUS.values())
            ranked = [tool_id for tool_id in ranked if relevance[tool_id] >= lowest]
        window = ranked[: limit + TIER_WINDOW]
        # One read for the window: on a shared store, a round trip per result would cost more than
        # the whole ranking.
        tools = self.store.get_many(window)
        hits: list[tuple[Tool, float]] = []
        for tool_id in window:
            tool = tools.get(tool_id)
            if tool is not None and tool.status != "deleted":
                hits.append((tool, relevance[tool_id]))
        ordered = tier_order(hits)[:limit]
        if wanted == "dense":
            return wanted, ordered
        # The bonus is on the relevance scale, under the score: a near tie moves, the order stays the score's.
        scored = [(tool, score(value)) for tool, value in ordered]
        if matches_only:
            scored = [(tool, value) for tool, value in scored if value >= RELEVANCE_FLOOR]
        return wanted, scored


def search_engine(store: Store, config: SearchConfig, *, few_queries: bool = False) -> HybridSearch:
    """Hybrid search when configured (or `auto`) and the `embed` extra is installed; text-only otherwise,
    with why. `few_queries`: a process that searches once and exits (see `create_embedder`)."""
    if config.mode == "text":
        return HybridSearch(store, None, config, reason="search.mode is 'text'")
    embedder, reason = create_embedder(config.embedding_provider, few_queries=few_queries)
    if embedder is None and config.mode == "auto":
        reason = f"search.mode is 'auto' and {reason}"
    return HybridSearch(store, embedder, config, reason=reason)


__all__ = [
    "HybridSearch",
    "SearchStatus",
    "VectorStore",
    "search_engine",
    "tier_order",
    "tool_views",
]
