"""A serving workbench embeds the live tools that have no vector of its model (imported, crafted where
search was text-only, embedded by another model), in batches, until none is left or it is told to stop."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("numpy")

from test_hybrid import TOOLS, BrokenEmbedder, ConceptEmbedder, make_tool

from awb.config import SearchConfig
from awb.inventory.sqlite import SQLiteStore
from awb.search.backfill import backfill, backfill_in_background
from awb.search.hybrid import REINDEX_BATCH, HybridSearch

UMBRELLA = "will I need an umbrella"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    db = SQLiteStore(tmp_path / "inventory.db")
    yield db
    db.close()


def listed(engine: HybridSearch, query: str) -> list[str]:
    """What a listing filtered by `query` shows (only tools at or above the relevance floor)."""
    return [tool.name for tool, _ in engine.search(query, 10, matches_only=True)[1]]


def imported(store: SQLiteStore) -> HybridSearch:
    """The six tools stored without vectors, as `awb inventory import` leaves them."""
    for name, description in TOOLS:
        store.add_tool(make_tool(name, description))
    return HybridSearch(store, ConceptEmbedder(), SearchConfig(mode="hybrid"))


def test_imported_tools_are_embedded_and_then_pass_the_listing_floor(store: SQLiteStore) -> None:
    engine = imported(store)
    assert engine.status().missing == len(TOOLS)
    assert listed(engine, UMBRELLA) == []  # by words alone nothing reaches the floor
    assert backfill(engine, threading.Event(), duty=1.0) == len(TOOLS)
    assert engine.status().missing == 0 and not engine.status().needs_reindex
    assert listed(engine, UMBRELLA) == ["weather_forecast"]
    assert backfill(engine, threading.Event(), duty=1.0) == 0  # nothing left to do


def test_vectors_of_another_model_are_replaced(store: SQLiteStore) -> None:
    old = HybridSearch(store, ConceptEmbedder("fake-concepts-1"), SearchConfig(mode="hybrid"))
    for name, description in TOOLS:
        tool = make_tool(name, description)
        store.add_tool(tool)
        old.index_tool(tool)
    engine = HybridSearch(store, ConceptEmbedder("fake-concepts-2"), SearchConfig(mode="hybrid"))
    assert engine.status().stale == len(TOOLS)
    assert backfill(engine, threading.Event(), duty=1.0) == len(TOOLS)
    assert engine.status().vectors_by_model == {"fake-concepts-2": len(TOOLS)}


def test_deleted_tools_are_not_embedded(store: SQLiteStore) -> None:
    engine = imported(store)
    store.update("tool_weather_forecast", status="deleted")
    assert backfill(engine, threading.Event(), duty=1.0) == len(TOOLS) - 1
    assert store.tools_without_vector("fake-concepts-1", 100) == []
    assert engine.status().vectors_by_model == {"fake-concepts-1": len(TOOLS) - 1}


class StoppingEmbedder(ConceptEmbedder):
    """Sets `stop` during its first batch, as a server shutting down would."""

    def __init__(self, stop: threading.Event) -> None:
        super().__init__()
        self.stop = stop

    def embed(self, texts: Sequence[str]) -> Any:
        self.stop.set()
        return super().embed(texts)


def test_stop_ends_the_backfill_after_the_batch_it_is_in(store: SQLiteStore) -> None:
    count = REINDEX_BATCH + 4
    for number in range(count):
        store.add_tool(make_tool(f"weather_tool_{number}", "Tomorrow's rain and temperature."))
    stop = threading.Event()
    engine = HybridSearch(store, StoppingEmbedder(stop), SearchConfig(mode="hybrid"))
    assert backfill(engine, stop) == REINDEX_BATCH
    assert engine.status().missing == 4


def test_text_only_search_and_a_failing_model_have_nothing_to_backfill(store: SQLiteStore) -> None:
    store.add_tool(make_tool("word_counter", "Count the words of a text."))
    text_only = HybridSearch(store, None, SearchConfig(mode="hybrid"), reason="no embed extra")
    assert backfill(text_only, threading.Event()) == 0
    broken = HybridSearch(store, BrokenEmbedder(), SearchConfig(mode="hybrid"))
    assert backfill(broken, threading.Event()) == 0
    assert broken.mode == "text" and "simulated" in broken.status().reason


class Heard(logging.Handler):
    """Tells when the backfill logs that it is done."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.finished = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("search: embedded"):
            self.finished.set()


@pytest.fixture
def heard() -> Iterator[Heard]:
    logger = logging.getLogger("awb.search")
    handler, level = Heard(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_in_the_background_it_runs_to_the_end(store: SQLiteStore) -> None:
    engine = imported(store)
    anyio.run(backfill_in_background, engine)
    assert engine.status().missing == 0


def test_cancelled_it_returns_at_once_and_stops_after_the_batch_it_is_in(store: SQLiteStore, heard: Heard) -> None:
    count = REINDEX_BATCH * 3
    for number in range(count):
        store.add_tool(make_tool(f"weather_tool_{number}", "Rain tomorrow."))
    entered, release = threading.Event(), threading.Event()

    class Blocking(ConceptEmbedder):
        def embed(self, texts: Sequence[str]) -> Any:
            entered.set()
            assert release.wait(10)
            return super().embed(texts)

    embedder = Blocking()
    engine = HybridSearch(store, embedder, SearchConfig(mode="hybrid"))

    async def cancel_mid_batch() -> None:
        with anyio.move_on_after(10) as scope:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(backfill_in_background, engine)
                await anyio.to_thread.run_sync(entered.wait, 10)
                tasks.cancel_scope.cancel()
        assert not scope.cancelled_caught  # the cancel did not wait for the batch

    anyio.run(cancel_mid_batch)
    release.set()
    assert heard.finished.wait(10)
    assert embedder.calls == 1
    assert engine.status().missing == count - REINDEX_BATCH
