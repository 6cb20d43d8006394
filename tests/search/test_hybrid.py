"""Hybrid search on a small inventory built here, with a fake embedder whose 'meaning' is a synonym table."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")

from awb.config import SearchConfig  # noqa: E402
from awb.inventory.models import MemoryLevel, Tool  # noqa: E402
from awb.inventory.sqlite import SQLiteStore  # noqa: E402
from awb.search import vector_index  # noqa: E402
from awb.search.embeddings import EmbedderUnavailable, create_embedder  # noqa: E402
from awb.search.hybrid import HybridSearch  # noqa: E402
from awb.search.relevance import BM25_HALF, FLOOR_RELEVANCE, RELEVANCE_FLOOR, TEXT_WEIGHT, fuse, score  # noqa: E402

CONCEPTS = {
    "image": "image picture photo photograph img png jpeg",
    "resize": "resize scale shrink enlarge dimensions smaller bigger",
    "weather": "weather forecast rain temperature sunny umbrella",
    "money": "currency money exchange dollars euros convert rate",
    "travel": "flight travel trip airline plane book",
    "text": "text words sentence translate language",
    "count": "count counter tally",
}
_CONCEPT_OF = {word: i for i, words in enumerate(CONCEPTS.values()) for word in words.split()}


class ConceptEmbedder:
    """Each concept is one dimension; words outside the table spread thinly over a noise dimension."""

    def __init__(self, model_id: str = "fake-concepts-1") -> None:
        self.model_id = model_id
        self.dim = len(CONCEPTS) + 1
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                out[row, _CONCEPT_OF.get(word, self.dim - 1)] += 1.0 if word in _CONCEPT_OF else 0.1
            out[row] /= max(float(np.linalg.norm(out[row])), 1e-6)
        return out


class BrokenEmbedder(ConceptEmbedder):
    def embed(self, texts: Sequence[str]) -> Any:
        raise EmbedderUnavailable("the embedding model failed to load: simulated")


TOOLS = [
    ("resize_image", "Scale a picture to new dimensions."),
    ("weather_forecast", "Tomorrow's rain and temperature for a city."),
    ("currency_converter", "Convert money between dollars and euros at today's rate."),
    ("flight_booker", "Book a plane trip with any airline."),
    ("translate_text", "Translate a sentence into another language."),
    ("word_counter", "Count the words of a text."),
]

# (query, the tool it wants): half need meaning (no shared word), half are plain keyword queries.
QUERIES = [
    ("make my photograph smaller", "resize_image"),
    ("will I need an umbrella", "weather_forecast"),
    ("how many euros is 20 dollars", "currency_converter"),
    ("airline tickets", "flight_booker"),
    ("translate this", "translate_text"),
    ("count words", "word_counter"),
]


def make_tool(name: str, description: str, level: MemoryLevel = "short_term") -> Tool:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return Tool(
        tool_id=f"tool_{name}",
        name=name,
        description=description,
        language="python",
        runtime="monty",
        code="def run(params):\n    return None\n",
        input_schema={"type": "object"},
        memory_level=level,
        status="archived" if level == "archived" else "active",
        created_at=now,
        updated_at=now,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    db = SQLiteStore(tmp_path / "inventory.db")
    yield db
    db.close()


def engine_with(store: SQLiteStore, embedder: Any, tools: list[Tool]) -> HybridSearch:
    engine = HybridSearch(store, embedder, SearchConfig(mode="hybrid"))
    for tool in tools:
        store.add_tool(tool)
        engine.index_tool(tool)
    return engine


def top_name(engine: HybridSearch, query: str, mode: Any = None) -> str | None:
    hits = engine.search(query, 3, mode=mode)[1]
    return hits[0][0].name if hits else None


def test_hybrid_ranks_the_wanted_tool_first_more_often_than_text(store: SQLiteStore) -> None:
    engine = engine_with(store, ConceptEmbedder(), [make_tool(n, d) for n, d in TOOLS])
    text = sum(top_name(engine, q, "text") == want for q, want in QUERIES)
    hybrid = sum(top_name(engine, q) == want for q, want in QUERIES)
    assert hybrid == len(QUERIES)
    assert text < hybrid


def test_above_the_exact_limit_hybrid_ranks_and_scores_as_exact_search(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every tool is among the sketch's candidates here, so fusion must see the same cosines.
    engine = engine_with(store, ConceptEmbedder(), [make_tool(n, d) for n, d in TOOLS])
    exact = {query: [(tool.name, score) for tool, score in engine.search(query, 5)[1]] for query, _ in QUERIES}
    monkeypatch.setattr(vector_index, "EXACT_LIMIT", 0)
    engine._index = None  # loaded again, now past its exact limit
    sketched = {query: [(tool.name, score) for tool, score in engine.search(query, 5)[1]] for query, _ in QUERIES}
    assert engine._index is not None and engine._index._signs is not None
    for query, hits in exact.items():
        assert [name for name, _ in sketched[query]] == [name for name, _ in hits]
        assert [score for _, score in sketched[query]] == pytest.approx([score for _, score in hits], abs=1e-6)


def test_search_results_say_hybrid_when_an_embedder_is_there(store: SQLiteStore) -> None:
    engine = engine_with(store, ConceptEmbedder(), [make_tool(n, d) for n, d in TOOLS])
    mode, hits = engine.search("count words", 2)
    assert mode == "hybrid"
    assert hits[0][0].name == "word_counter"


def test_fusion_adds_saturating_bm25_to_the_cosine_whatever_the_other_tools_score() -> None:
    fused = fuse({"a": BM25_HALF, "b": 3 * BM25_HALF}, {"a": 0.2, "c": 0.6})
    assert fused["a"] == pytest.approx(0.2 + TEXT_WEIGHT / 2)
    assert fused["b"] == pytest.approx(TEXT_WEIGHT * 3 / 4)  # no vector: the text part alone
    assert fused["c"] == pytest.approx(0.6)
    # Other tools, stronger or weaker, change nothing of a tool's relevance (min-max scaling did).
    assert fuse({"a": BM25_HALF}, {"a": 0.2})["a"] == fused["a"]
    assert fuse({"a": BM25_HALF, "d": 1000.0}, {"a": 0.2, "d": 0.99, "e": -0.3})["a"] == fused["a"]


def test_scores_rise_with_relevance_and_the_floor_is_where_the_curve_says() -> None:
    relevances = [-0.2, 0.0, 0.1, 0.2, FLOOR_RELEVANCE, 0.4, 0.6, 1.0, 1.25]
    scores = [score(r) for r in relevances]
    assert scores == sorted(scores) and len(set(scores)) == len(scores)
    assert all(0.0 < s < 1.0 or s == 1.0 for s in scores)
    assert score(FLOOR_RELEVANCE) == pytest.approx(RELEVANCE_FLOOR)
    assert score(0.1) < 0.1 and score(0.6) > 0.95


def test_a_tool_with_the_same_cosine_scores_the_same_alone_or_among_others(store: SQLiteStore) -> None:
    """The defect: min-max fusion gave the nearer of two tools 0.8 or more for any query at all."""
    engine = engine_with(store, ConceptEmbedder(), [make_tool(n, d) for n, d in TOOLS[:2]])
    for query in ("zzz qqq", "quantum chromodynamics lattice"):
        hits = engine.search(query, 2)[1]
        assert hits and all(s < RELEVANCE_FLOOR for _, s in hits), (query, hits)
        assert engine.search(query, 2, matches_only=True)[1] == []
    best = engine.search("will I need an umbrella", 2)[1]
    assert best[0][0].name == "weather_forecast" and best[0][1] > 0.99
    assert best[1][1] < RELEVANCE_FLOOR
    assert [t.name for t, _ in engine.search("will I need an umbrella", 2, matches_only=True)[1]] == [
        "weather_forecast"
    ]


def test_the_only_tool_of_an_inventory_scores_high_for_a_perfect_match_in_text_and_hybrid(
    store: SQLiteStore,
) -> None:
    engine = engine_with(store, ConceptEmbedder(), [make_tool("word_counter", "Count the words of a text.")])
    for mode in ("text", "hybrid"):
        used, hits = engine.search("count the words of a text", 5, mode=mode)  # type: ignore[arg-type]
        assert used == mode and [tool.name for tool, _ in hits] == ["word_counter"]
        assert hits[0][1] >= 0.9, (mode, hits[0][1])


def test_text_scores_are_bm25_relative_to_the_best_match(store: SQLiteStore) -> None:
    engine = engine_with(store, ConceptEmbedder(), [make_tool(n, d) for n, d in TOOLS])
    _, hits = engine.search("count words text", 5, mode="text")
    assert hits[0][0].name == "word_counter" and hits[0][1] == pytest.approx(1.0)
    assert all(0 < score <= 1.0 for _, score in hits)


def test_text_hit_outside_the_nearest_candidates_keeps_its_own_cosine(store: SQLiteStore) -> None:
    engine = engine_with(store, ConceptEmbedder(), [make_tool(n, d) for n, d in TOOLS])
    mode, hits = engine.search("word photograph", 6)
    scores = {tool.name: score for tool, score in hits}
    assert mode == "hybrid"
    assert scores["word_counter"] > 0 and scores["resize_image"] > 0


def test_changed_model_is_reported_and_reindex_replaces_the_stale_vectors(store: SQLiteStore) -> None:
    engine_with(store, ConceptEmbedder("fake-concepts-1"), [make_tool(n, d) for n, d in TOOLS])
    engine = HybridSearch(store, ConceptEmbedder("fake-concepts-2"), SearchConfig(mode="hybrid"))
    before = engine.status()
    assert before.vectors_by_model == {"fake-concepts-1": len(TOOLS)}
    assert before.stale == len(TOOLS) and before.missing == len(TOOLS) and before.needs_reindex
    # Old vectors are never compared with new ones: until reindex, search is effectively text-only.
    assert top_name(engine, "will I need an umbrella") is None
    seen: list[tuple[int, int]] = []
    assert engine.reindex(lambda done, total: seen.append((done, total))) == len(TOOLS)
    after = engine.status()
    assert after.vectors_by_model == {"fake-concepts-2": len(TOOLS)}
    assert not after.needs_reindex
    assert seen[-1] == (len(TOOLS), len(TOOLS))
    assert top_name(engine, "will I need an umbrella") == "weather_forecast"


def test_search_is_text_only_without_an_embedder_and_says_why(store: SQLiteStore) -> None:
    engine = HybridSearch(store, None, SearchConfig(mode="hybrid"), reason="local embeddings need the embed extra")
    store.add_tool(make_tool("word_counter", "Count the words of a text."))
    assert engine.index_tool(make_tool("x", "y")) is False
    mode, hits = engine.search("count words", 5)
    assert mode == "text"
    assert [t.name for t, _ in hits] == ["word_counter"]
    assert engine.status().mode == "text"
    assert "embed extra" in engine.status().reason


def test_embedder_that_fails_to_load_falls_back_to_text(store: SQLiteStore) -> None:
    engine = engine_with(store, BrokenEmbedder(), [make_tool(n, d) for n, d in TOOLS])
    mode, hits = engine.search("count words", 5)
    assert mode == "text"
    assert hits[0][0].name == "word_counter"
    assert "simulated" in engine.status().reason


def test_text_mode_config_never_embeds(store: SQLiteStore) -> None:
    embedder = ConceptEmbedder()
    engine = HybridSearch(store, embedder, SearchConfig(mode="text"))
    store.add_tool(make_tool("word_counter", "Count the words of a text."))
    assert engine.index_tool(make_tool("word_counter", "Count the words of a text.")) is False
    assert engine.search("count words", 5)[0] == "text"
    assert embedder.calls == 0


def test_disabled_provider_gives_no_embedder_and_a_reason() -> None:
    embedder, reason = create_embedder("none")
    assert embedder is None
    assert "disabled" in reason


def test_long_term_tool_wins_a_near_tie_and_archived_ranks_last(store: SQLiteStore) -> None:
    tools = [
        make_tool("currency_rates_a", "Convert money at the exchange rate.", "short_term"),
        make_tool("currency_rates_b", "Convert money at the exchange rate.", "long_term"),
        make_tool("currency_rates_c", "Convert money at the exchange rate.", "archived"),
        make_tool("flight_booker", "Book a plane trip with any airline.", "short_term"),
    ]
    engine = engine_with(store, ConceptEmbedder(), tools)
    names = [t.name for t, _ in engine.search("convert money", 4)[1]]
    assert names[0] == "currency_rates_b"
    assert names[-1] == "currency_rates_c"
    text_names = [t.name for t, _ in engine.search("convert money", 4, mode="text")[1]]
    assert text_names[-1] == "currency_rates_c"


def test_removed_tool_leaves_dense_results(store: SQLiteStore) -> None:
    engine = engine_with(store, ConceptEmbedder(), [make_tool(n, d) for n, d in TOOLS])
    assert top_name(engine, "will I need an umbrella") == "weather_forecast"
    store.update("tool_weather_forecast", status="deleted")
    engine.remove_tool("tool_weather_forecast")
    assert "weather_forecast" not in [t.name for t, _ in engine.search("will I need an umbrella", 10)[1]]


def test_vectors_written_by_another_connection_are_picked_up(store: SQLiteStore, tmp_path: Path) -> None:
    engine = engine_with(store, ConceptEmbedder(), [make_tool(n, d) for n, d in TOOLS[:2]])
    assert top_name(engine, "how many euros is 20 dollars") != "currency_converter"
    other = SQLiteStore(tmp_path / "inventory.db")
    try:
        engine_with(other, ConceptEmbedder(), [make_tool("currency_converter", TOOLS[2][1])])
    finally:
        other.close()
    assert top_name(engine, "how many euros is 20 dollars") == "currency_converter"


@pytest.mark.anyio
async def test_workbench_keeps_vectors_in_step_with_craft_and_delete(workbench: Any) -> None:
    workbench.search_engine = HybridSearch(workbench.store, ConceptEmbedder(), SearchConfig(mode="hybrid"))
    code = "def run(params):\n    return None\n"
    for name, description in TOOLS:
        await workbench.craft({"name": name, "description": description, "code": code})
    found = workbench.search("will I need an umbrella", limit=3)
    assert found.mode == "hybrid"
    assert found.results[0].name == "weather_forecast"
    workbench.delete("weather_forecast")
    assert "weather_forecast" not in [r.name for r in workbench.search("will I need an umbrella", limit=6).results]


def test_auto_mode_is_hybrid_with_the_extra_and_says_so(tmp_path: Path) -> None:
    from awb.config import Config
    from awb.workbench import Workbench

    workbench = Workbench(Config(inventory_path=tmp_path / "auto.db"))
    try:
        assert workbench.config.search.mode == "auto"
        assert workbench.search_engine.mode == "hybrid"
    finally:
        workbench.store.close()


def test_auto_mode_without_embeddings_is_text_and_says_why(tmp_path: Path) -> None:
    from awb.config import Config
    from awb.workbench import Workbench

    config = Config(inventory_path=tmp_path / "auto.db", search=SearchConfig(mode="auto", embedding_provider="none"))
    workbench = Workbench(config)
    try:
        assert workbench.search_engine.mode == "text"
        assert workbench.search_engine.reason.startswith("search.mode is 'auto' and embeddings are disabled")
    finally:
        workbench.store.close()


def test_an_inventory_without_vectors_is_searched_without_embedding_the_query(store: SQLiteStore) -> None:
    embedder = ConceptEmbedder()
    engine = HybridSearch(store, embedder, SearchConfig(mode="hybrid"))
    mode, hits = engine.search("count words", 5)
    assert (mode, hits, embedder.calls) == ("text", [], 0)


def test_prepare_builds_the_vector_matrix_before_any_search(store: SQLiteStore) -> None:
    tools = [make_tool(n, d) for n, d in TOOLS]
    for tool in tools:
        store.add_tool(tool)
    embedder = ConceptEmbedder()
    HybridSearch(store, embedder, SearchConfig(mode="hybrid")).index_tools(tools)
    engine = HybridSearch(store, embedder, SearchConfig(mode="hybrid"))  # a server that just started
    assert engine._index is None
    engine.prepare()
    assert engine._index is not None and sorted(engine._index.ids) == sorted(t.tool_id for t in tools)
