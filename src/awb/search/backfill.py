"""Vectors for the live tools that have none, made by a serving workbench in the background.

A tool has no vector of the current model when it was imported (`awb inventory import` brings no
vectors), crafted by a server without the `embed` extra on a shared inventory, or embedded by another
model. Hybrid search still finds it by its words, but a text match alone stays under the relevance
floor, so a listing filtered by a query never shows it. A server with an embedding model embeds such
tools once it serves, a batch at a time and at most about half of one core (it rests as long as each
batch took), so serving goes on meanwhile; `awb reindex` does the same at once, for every tool.
"""

from __future__ import annotations

import logging
import threading
import time

import anyio.to_thread

from awb.search.hybrid import REINDEX_BATCH, HybridSearch, VectorStore

log = logging.getLogger("awb.search")

#: Share of the time the backfill works; it rests the rest (a batch of 16 tools takes ~0.1 s).
DUTY = 0.5


def backfill(engine: HybridSearch, stop: threading.Event, *, duty: float = DUTY) -> int:
    """Embed live tools without a vector of the engine's model until none is left or `stop` is set;
    returns how many were embedded. Text-only search has nothing to do."""
    embedder, store = engine.embedder, engine.store
    if embedder is None or not isinstance(store, VectorStore):
        return 0
    model_id = embedder.model_id
    done = 0
    tried: set[str] = set()
    started = time.perf_counter()
    while not stop.is_set():
        ids = store.tools_without_vector(model_id, REINDEX_BATCH)
        fresh = [tool_id for tool_id in ids if tool_id not in tried]
        if not fresh:  # none left, or only tools a batch already failed to store: they wait for `awb reindex`
            break
        if not done:
            log.info("search: embedding the tools that have no %s vector, in the background", model_id)
        tried.update(fresh)
        batch_started = time.perf_counter()
        embedded = engine.index_tools(list(store.get_many(fresh).values()))
        if embedded == 0 and engine.embedder is None:  # the model failed: search went text-only
            break
        done += embedded
        stop.wait((time.perf_counter() - batch_started) * (1 - duty) / duty)
    if done:
        log.info("search: embedded %d tools in %.1f s", done, time.perf_counter() - started)
    return done


async def backfill_in_background(engine: HybridSearch) -> None:
    """`backfill` on a worker thread for as long as the caller's task runs; cancelling it stops the
    backfill after its current batch."""
    stop = threading.Event()
    try:
        await anyio.to_thread.run_sync(_logged, engine, stop, abandon_on_cancel=True)
    finally:
        stop.set()


def _logged(engine: HybridSearch, stop: threading.Event) -> None:
    try:
        backfill(engine, stop)
    except Exception as error:  # a closed or unreachable store: search works as before, `awb reindex` remains
        if not stop.is_set():
            log.warning("search: embedding the tools without a vector stopped: %s", error)


__all__ = ["DUTY", "backfill", "backfill_in_background"]
