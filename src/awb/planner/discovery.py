"""`search_tools`: find the tools of every connected MCP server with the workbench's own search engine.

The servers' tools are kept as records of an in-memory inventory, so they are ranked exactly as
`awb_search` ranks crafted tools (BM25 over name, description and tags; fused with embeddings when the
`embed` extra is installed and hybrid search is asked for). The index is rebuilt when a server's tool
list changes, and the tools' vectors are kept in a `VectorCache` file, so the next task over the same
tools embeds none of them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal

import anyio.to_thread

from awb.agents.toolbox import ToolSpec
from awb.config import SearchConfig
from awb.inventory.models import Tool, ToolMetadata
from awb.inventory.sqlite import SQLiteStore
from awb.planner.codegen import Wrapper, wrapper_for
from awb.search.embeddings import TOKENIZE_BATCH, EmbedderUnavailable, create_embedder
from awb.search.hybrid import HybridSearch
from awb.search.vector_cache import VectorCache

DetailLevel = Literal["summary", "full"]
_SHORT_DESCRIPTION_CHARS = 160
#: Tools embedded (and their vectors cached) at a time: three texts each, one tokenizer batch. A first
#: index of 5,000 tools takes minutes; one stopped half-way keeps the vectors of its finished chunks.
INDEX_CHUNK = TOKENIZE_BATCH // 3
log = logging.getLogger("awb.planner")


class ToolIndex:
    """The tools of the connected servers, searchable; `refresh` with the current specs at each step."""

    def __init__(
        self, *, mode: Literal["auto", "text", "hybrid"] = "auto", vector_cache: VectorCache | None = None
    ) -> None:
        self._lock = threading.Lock()
        #: Each indexed tool's fingerprint: a tool whose name, description and schema are unchanged keeps
        #: its record and vector, and a refresh that changes none (nor what is available) does nothing.
        self._prints: dict[str, str] = {}
        self._specs: dict[str, ToolSpec] = {}
        self._wrappers: dict[str, Wrapper] = {}
        self._available: set[str] = set()
        self._store = SQLiteStore(":memory:")
        # The model is loaded once per process and shared with every workbench in it.
        embedder, reason = create_embedder("local") if mode != "text" else (None, "search mode is 'text'")
        if embedder is None and mode == "hybrid":
            log.warning("planner tool search falls back to text: %s", reason)
        wanted: Literal["text", "hybrid"] = "hybrid" if embedder is not None else "text"
        self._search = HybridSearch(self._store, embedder, SearchConfig(mode=wanted), reason=reason)
        if vector_cache is not None and self._search.embedder is not None:
            # Not warmed up here, beside the refresh: numpy imported by two threads at once failed now and
            # then ("partially initialized module"); `refresh_off_loop` loads the model after the refresh.
            self._search.vector_cache = vector_cache
        #: Bumped on every rebuild, so a planner can tell that its menu is stale.
        self.version = 0

    @property
    def mode(self) -> str:
        return self._search.mode

    def close(self) -> None:
        self._store.close()

    def refresh(self, specs: Sequence[ToolSpec], *, unavailable: Sequence[str] = ()) -> bool:
        """Index these tools if they differ from the last call; return whether anything changed.

        Only the tools that are new or changed are embedded again: the model's time is ~15 ms a tool
        here, so re-embedding a 1,000-tool catalogue for one crafted tool cost a search over a minute.
        Embedding is slow work: call this off the event loop (`refresh_off_loop`)."""
        tools = sorted((s for s in specs if s.kind == "tool"), key=lambda s: s.name)
        with self._lock:
            # A tool equal to the one indexed keeps its fingerprint: at every search step, hashing the
            # JSON of 5,000 tools cost ~35 ms, comparing them ~5.
            indexed = self._specs
            prints = {
                spec.name: self._prints[spec.name] if indexed.get(spec.name) == spec else _fingerprint(spec)
                for spec in tools
            }
            available = set(prints) - set(unavailable)
            if prints == self._prints and available == self._available:
                return False
            stale = [name for name, was in self._prints.items() if prints.get(name) != was]
            for name in stale:
                self._store.delete_forever([name])
                self._search.remove_tool(name)
            now = datetime.now(UTC)
            fresh = [_record(spec, now) for spec in tools if self._prints.get(spec.name) != prints[spec.name]]
            for record in fresh:
                # Other servers' names are case-sensitive: `Fetch` and `fetch` are two tools.
                self._store.add_tool(record, keep_case_variants=True)
            for start in range(0, len(fresh), INDEX_CHUNK):
                self._search.index_tools(fresh[start : start + INDEX_CHUNK])
            self._specs = {spec.name: spec for spec in tools}
            # A wrapper is made from what the fingerprint covers: an unchanged tool keeps its own (5,000
            # tools took ~0.1 s to wrap again for every crafted one).
            self._wrappers = {
                spec.name: self._wrappers[spec.name]
                if self._prints.get(spec.name) == prints[spec.name]
                else wrapper_for(spec)
                for spec in tools
            }
            self._prints = prints
            self._available = available
            self.version += 1
            return True

    async def refresh_off_loop(self, specs: Sequence[ToolSpec], *, unavailable: Sequence[str] = ()) -> bool:
        """`refresh` in a worker thread: the event loop (and the run's timeout) go on meanwhile."""
        return await anyio.to_thread.run_sync(partial(self._refresh_and_load, specs, unavailable))

    def _refresh_and_load(self, specs: Sequence[ToolSpec], unavailable: Sequence[str]) -> bool:
        changed = self.refresh(specs, unavailable=unavailable)
        # Vectors from the cache need no model, but a search embeds its query: load it here, in the thread the
        # refresh holds anyway (~1 s), once there are tools to rank, not in the first search's.
        wait = getattr(self._search.embedder, "wait_loaded", None)
        if self._specs and callable(wait):
            try:
                wait()
            except EmbedderUnavailable:
                pass  # the search says so, and ranks by text
        return changed

    async def search_off_loop(
        self, query: str, *, detail_level: DetailLevel = "summary", limit: int = 40
    ) -> list[dict[str, Any]]:
        """`search` in a worker thread: a query is embedded first (~10-15 ms with the local model)."""
        return await anyio.to_thread.run_sync(partial(self.search, query, detail_level=detail_level, limit=limit))

    def search(self, query: str, *, detail_level: DetailLevel = "summary", limit: int = 40) -> list[dict[str, Any]]:
        """The best tools for `query`, one row per (server, tool); an empty query lists them all."""
        limit = max(1, min(limit, 200))
        with self._lock:
            if query.strip():
                _, hits = self._search.search(query, limit=limit)
                names = [tool.tool_id for tool, _ in hits]
                scores = {tool.tool_id: score for tool, score in hits}
            else:
                names, scores = sorted(self._specs)[:limit], {}
            return [self._row(name, scores.get(name), detail_level) for name in dict.fromkeys(names)]

    def _row(self, name: str, score: float | None, detail: DetailLevel) -> dict[str, Any]:
        spec, wrapper = self._specs[name], self._wrappers[name]
        description = " ".join(spec.description.split())
        row: dict[str, Any] = {
            "server": wrapper.server,
            "tool": wrapper.tool,
            "short_description": description[:_SHORT_DESCRIPTION_CHARS],
            "parameters": {p.name: p.annotation + ("" if p.required else " (optional)") for p in wrapper.parameters},
            "available": name in self._available,
            "mcp_tool_name": wrapper.tool,
            "path": wrapper.import_path,
            "score": None if score is None else round(score, 4),
        }
        if detail == "full":
            row["description"] = spec.description
            row["input_schema"] = spec.input_schema
        return row


def _fingerprint(spec: ToolSpec) -> str:
    data = [spec.name, spec.description, spec.input_schema]
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def _record(spec: ToolSpec, now: datetime) -> Tool:
    server, _, tool = spec.name.partition(".")
    return Tool(
        tool_id=spec.name,
        # The name is what BM25 splits into words: `search_mail` on `mail` reads as "mail search mail".
        name=f"{server}__{tool}",
        description=spec.description or tool,
        language="python",
        runtime="monty",
        code="",
        input_schema=spec.input_schema if isinstance(spec.input_schema, dict) else {},
        metadata=ToolMetadata(tags=[server]),
        created_at=now,
        updated_at=now,
    )
