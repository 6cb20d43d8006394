"""The in-memory BM25 ranking gives FTS5's own scores, and follows every write to the table."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from awb.inventory import bm25_small
from awb.inventory.models import Tool, ToolMetadata
from awb.inventory.sqlite import SQLiteStore
from awb.search.fts import or_expression, search_words

# Inflected forms (one stem for several words), words shared by many tools and by few, and some
# accents, so stemming, IDF and diacritic folding all take part.
VOCABULARY = (
    "image images imaging resize resized resizing convert converts converter weather forecast forecasts "
    "temperature currency exchange rates rate stock stocks price prices email emails send sending parse "
    "parsing csv json table tables sort sorted merge merging café naïve résumé crème data information "
    "search searching searches translate translation text texts count counting word words"
).split()
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _tool(i: int, rng: random.Random) -> Tool:
    words = lambda n: " ".join(rng.choices(VOCABULARY, k=n))  # noqa: E731
    return Tool(
        tool_id=f"tool_{i:016x}",
        name=f"{rng.choice(VOCABULARY)}{rng.choice(VOCABULARY).title()}_{i}",
        description=words(rng.randint(1, 25)),
        language="python",
        runtime="monty",
        code="def run(params):\n    return 1\n",
        input_schema={"type": "object"},
        metadata=ToolMetadata(problem=words(rng.randint(0, 6)), tags=rng.sample(VOCABULARY, rng.randint(0, 3))),
        created_at=NOW,
        updated_at=NOW,
    )


def fts5_ranking(store: SQLiteStore, words: list[str], k: int) -> list[tuple[int, float]]:
    """What FTS5 itself says: `ORDER BY rank` with the table's configured bm25 weights."""
    sql = "SELECT rowid, -rank FROM tools_fts WHERE tools_fts MATCH ? ORDER BY rank LIMIT ?"
    return [(r[0], r[1]) for r in store._db.execute(sql, (or_expression(words), k))]


def assert_same_ranking(store: SQLiteStore, words: list[str], k: int = 30) -> None:
    ours = store._text.top(words, k)
    assert ours is not None
    theirs = fts5_ranking(store, words, k)
    assert [round(s, 9) for _, s in ours] == [round(s, 9) for _, s in theirs], words
    # Rows may trade places only among equal scores.
    by_score: dict[float, set[int]] = {}
    for rowid, score in theirs:
        by_score.setdefault(round(score, 9), set()).add(rowid)
    for rowid, score in ours[: len(theirs) - 1]:
        assert rowid in by_score[round(score, 9)] or score == theirs[-1][1]


@pytest.fixture(params=["dicts", "numpy"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SQLiteStore:
    # 400 tools rank in dicts; the numpy postings of a large inventory are made to rank them as well.
    if request.param == "numpy":
        monkeypatch.setattr(bm25_small, "SMALL_ROWS", 0)
    store = SQLiteStore(tmp_path / "inventory.db")
    rng = random.Random(7)
    for i in range(400):
        store.add_tool(_tool(i, rng))
    return store


QUERIES = [
    "resize an image",
    "images resizing",
    "weather forecast temperature",
    "cafe naive",
    "résumé",
    "convert currency exchange rates",
    "data",
    "searching word counts in texts",
    "the of and",  # stop words only: all of them are searched
    "nothing matches zzzz",
]


def test_scores_equal_fts5_bm25_for_many_queries(store: SQLiteStore) -> None:
    rng = random.Random(3)
    queries = QUERIES + [" ".join(rng.choices(VOCABULARY, k=rng.randint(1, 6))) for _ in range(200)]
    for query in queries:
        assert_same_ranking(store, search_words(query))


def test_the_ranking_follows_inserts_updates_and_deletes(store: SQLiteStore) -> None:
    assert_same_ranking(store, ["weather", "image"])
    rng = random.Random(11)
    store.add_tool(_tool(1000, rng))
    store.update("tool_0000000000000005", description="weather weather image", name="weatherImage")
    store.update("tool_0000000000000006", metadata=ToolMetadata(tags=["weather"], problem="image"))
    store.delete_forever(["tool_0000000000000007", "tool_0000000000000008"])
    for query in QUERIES:
        assert_same_ranking(store, search_words(query))
    top = store.search_summaries(["weather", "image"], 5)
    assert top[0].tool_id == "tool_0000000000000005"


def test_a_write_by_another_connection_is_seen(store: SQLiteStore, tmp_path: Path) -> None:
    assert store.search_summaries(["zebra"], 5) == []
    other = SQLiteStore(tmp_path / "inventory.db")
    tool = _tool(2000, random.Random(1)).model_copy(update={"description": "zebra crossing"})
    other.add_tool(tool)
    other.close()
    assert [s.tool_id for s in store.search_summaries(["zebra"], 5)] == [tool.tool_id]
    assert_same_ranking(store, ["zebra", "image"])


def test_an_unannounced_write_to_the_table_is_noticed(store: SQLiteStore) -> None:
    assert_same_ranking(store, ["image"])
    # Straight SQL, past the store's methods: the FTS structure record changes, the copy is rebuilt.
    store._db.execute("UPDATE tools SET description = 'zebra' WHERE tool_id = 'tool_0000000000000009'")
    assert [s.tool_id for s in store.search_summaries(["zebra"], 5)] == ["tool_0000000000000009"]
    assert_same_ranking(store, ["image", "zebra"])


def test_a_word_fts5_reads_as_a_phrase_is_ranked_by_fts5(store: SQLiteStore) -> None:
    rng = random.Random(5)
    store.add_tool(_tool(3000, rng).model_copy(update={"description": "send an e mail"}))
    store.add_tool(_tool(3001, rng).model_copy(update={"description": "mail the e file"}))
    assert store._text.top(["e-mail"], 5) is None
    hits = store.search_summaries(["e-mail"], 5)
    assert [h.tool_id for h in hits] == [f"tool_{3000:016x}"]


def test_deleted_tools_are_not_found_and_archived_ones_come_last(store: SQLiteStore) -> None:
    words = ["weather", "forecast"]
    first, second = store.search_summaries(words, 2)
    store.update(first.tool_id, memory_level="archived", status="archived")
    store.update(second.tool_id, status="deleted")
    hits = store.search_summaries(words, 60, candidates=60)
    ids = [h.tool_id for h in hits]
    assert second.tool_id not in ids
    assert ids[-1] == first.tool_id
    assert [h.memory_level for h in hits[:-1]] == [h.memory_level for h in hits[:-1] if h.memory_level != "archived"]
