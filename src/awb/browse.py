"""Listing and searching the inventory: the read side of `Workbench`, over a store and a search engine.

`Workbench.list_page` and `Workbench.search` are these functions. The CLI's listing commands call
them on a store directly, so `awb inventory list` and `search` never import the sandbox runtimes or
JSON Schema validation, and a search loads the embedding model only when hybrid search needs it
(`benchmarks/cli_startup.py`).
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from awb.errors import InvalidParams
from awb.inventory.models import MemoryLevel, ToolSummary
from awb.inventory.store import Store
from awb.search.fts import search_words
from awb.search.hybrid import HybridSearch

#: Matches a search considers when a listing is filtered by a query.
LISTING_SEARCH_LIMIT = 1000
#: The longest search query: a paragraph and then some. Ranking costs time in its length (a 2 MB query
#: took 1.4 s of CPU), so what a request may ask for is bounded.
MAX_QUERY_CHARS = 4096
#: The most tools one listing page or one search returns.
MAX_LIMIT = 1000


class SearchResult(BaseModel):
    query: str
    mode: str
    results: list[ToolSummary]


class ToolPage(BaseModel):
    """One page of a listing: `total` counts every match, `next_offset` is None on the last page."""

    tools: list[ToolSummary]
    total: int
    offset: int
    next_offset: int | None


def search(
    store: Store,
    engine: HybridSearch,
    query: str,
    *,
    limit: int | None = None,
    top_k: int | None = None,
    matches_only: bool = False,
) -> SearchResult:
    """The best `limit` matches (`top_k` is the spec's name for it; default 10). `matches_only`: in
    hybrid mode only tools scoring at least `RELEVANCE_FLOOR` (text results all share a query word)."""
    limit = one_limit(limit, top_k)
    if not isinstance(query, str) or not query.strip():
        raise InvalidParams("the search query is empty", field="query")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidParams(
            f"the search query is {len(query)} characters, over the {MAX_QUERY_CHARS}-character limit",
            field="query",
            limit=MAX_QUERY_CHARS,
        )
    if limit < 1 or limit > MAX_LIMIT:
        raise InvalidParams(f"limit must be between 1 and {MAX_LIMIT}", limit=limit)
    if engine.mode == "hybrid":
        mode, scored = engine.search(query, limit, matches_only=matches_only)
        if mode == "hybrid":
            results = [tool.summary(score=round(score, 4)) for tool, score in scored]
            return SearchResult(query=query, mode="hybrid", results=results)
    words = search_words(query)
    if not words:
        return SearchResult(query=query, mode="text", results=[])
    # Archived tools stay findable but rank after every live match among the best candidates.
    hits = store.search_summaries(words, limit=limit, candidates=limit * 3 + 20)
    return SearchResult(query=query, mode="text", results=hits)


#: The largest offset a listing takes: past any inventory, and inside what a store's integers hold.
MAX_OFFSET = 2**31 - 1


def list_page(
    store: Store,
    find: Callable[[str, int], SearchResult],
    *,
    memory_level: MemoryLevel | None = None,
    tag: str | None = None,
    query: str | None = None,
    limit: int = 20,
    offset: int = 0,
) -> ToolPage:
    """One page of the listing, with the number of all matches and where the next page starts.
    `find(query, limit)` searches for the matches of a listing filtered by a query: `search` with
    `matches_only`, so that in hybrid mode as in text mode `total` counts matches, not the inventory."""
    if limit < 1 or limit > MAX_LIMIT:
        raise InvalidParams(f"limit must be between 1 and {MAX_LIMIT}", limit=limit)
    if offset < 0 or offset > MAX_OFFSET:
        raise InvalidParams(f"offset must be between 0 and {MAX_OFFSET}", offset=offset)
    if tag is not None:
        # Trimmed as stored tags are (`normal_tags`); a blank one filters nothing, as in the web panel.
        tag = tag.strip() or None
    if query is not None and not query.strip():
        query = None  # a blank query filters nothing, as "" does and as in the web panel (`search` refuses one)
    if query:
        hits = [
            h
            for h in find(query, LISTING_SEARCH_LIMIT).results
            if (memory_level is None or h.memory_level == memory_level) and (tag is None or tag in h.tags)
        ]
        total, tools = len(hits), hits[offset : offset + limit]
    else:
        tools, total = store.page_summaries(memory_level=memory_level, tag=tag, limit=limit, offset=offset)
    end = offset + len(tools)
    return ToolPage(tools=tools, total=total, offset=offset, next_offset=end if end < total else None)


def one_limit(limit: int | None, top_k: int | None) -> int:
    if limit is not None and top_k is not None and limit != top_k:
        raise InvalidParams("limit and top_k are the same setting; give one", limit=limit, top_k=top_k)
    chosen = limit if limit is not None else top_k
    return 10 if chosen is None else chosen


__all__ = ["MAX_LIMIT", "MAX_OFFSET", "MAX_QUERY_CHARS", "SearchResult", "ToolPage", "list_page", "one_limit", "search"]
