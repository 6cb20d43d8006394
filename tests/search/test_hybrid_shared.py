"""Hybrid search on a shared PostgreSQL inventory: each server's vector matrix follows the others."""

from __future__ import annotations

import queue

import pytest

pytest.importorskip("numpy")

from test_hybrid import ConceptEmbedder, make_tool

from awb.config import SearchConfig
from awb.inventory.postgres import PostgresStore
from awb.inventory.postgres_notify import Change
from awb.search.hybrid import HybridSearch


def wait_for(heard: queue.Queue[Change], kind: str, tool_id: str) -> None:
    """Take messages (each bounded) until this one; earlier ones were followed before it."""
    while True:
        change = heard.get(timeout=5)
        if change.kind == kind and tool_id in change.tool_ids:
            return


def test_a_vector_stored_by_one_server_is_searched_by_another_and_leaves_with_a_delete(clean_pg_url: str) -> None:
    stores = [PostgresStore(clean_pg_url), PostgresStore(clean_pg_url)]
    engines = [HybridSearch(s, ConceptEmbedder(), SearchConfig(mode="hybrid")) for s in stores]
    heard: queue.Queue[Change] = queue.Queue()
    try:
        for store, engine in zip(stores, engines, strict=True):
            store.subscribe_changes(lambda change, engine=engine: engine.follow(change.kind, change.tool_ids))
        stores[1].subscribe_changes(heard.put)
        first = make_tool("weather_forecast", "Tomorrow's rain and temperature for a city.")
        stores[0].add_tool(first)
        engines[0].index_tool(first)
        _, hits = engines[1].search("will I need an umbrella", 3, mode="dense")  # loads the matrix
        assert [t.name for t, _ in hits] == ["weather_forecast"]
        loads = stores[1].vector_model_ids()
        second = make_tool("resize_image", "Scale a picture to new dimensions.")
        stores[0].add_tool(second)
        engines[0].index_tool(second)
        wait_for(heard, "vector", second.tool_id)
        _, hits = engines[1].search("make my photograph smaller", 1, mode="dense")
        assert [t.name for t, _ in hits] == ["resize_image"]
        assert loads == {"fake-concepts-1": 1}  # the second vector came by the feed, not a reload
        stores[0].update(second.tool_id, status="deleted")
        wait_for(heard, "deleted", second.tool_id)
        _, hits = engines[1].search("make my photograph smaller", 3, mode="dense")
        assert "resize_image" not in [t.name for t, _ in hits]
    finally:
        for store in stores:
            store.close()


def test_a_server_with_a_model_embeds_what_a_text_only_server_crafted(clean_pg_url: str) -> None:
    import threading

    from awb.search.backfill import backfill

    text_only, with_model = PostgresStore(clean_pg_url), PostgresStore(clean_pg_url)
    try:
        for name, description in (("weather_forecast", "Tomorrow's rain and temperature for a city."),):
            text_only.add_tool(make_tool(name, description))  # a server without the embed extra stores no vector
        deleted = make_tool("resize_image", "Scale a picture to new dimensions.")
        text_only.add_tool(deleted)
        text_only.update(deleted.tool_id, status="deleted")
        engine = HybridSearch(with_model, ConceptEmbedder(), SearchConfig(mode="hybrid"))
        assert with_model.tools_without_vector("fake-concepts-1", 10) == ["tool_weather_forecast"]
        assert backfill(engine, threading.Event(), duty=1.0) == 1
        assert with_model.tools_without_vector("fake-concepts-1", 10) == []
        _, hits = engine.search("will I need an umbrella", 3, matches_only=True)
        assert [t.name for t, _ in hits] == ["weather_forecast"]
    finally:
        text_only.close()
        with_model.close()
