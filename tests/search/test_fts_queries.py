"""Text search: identifier splitting, BM25 ranking, and safety against any query string."""

from __future__ import annotations

import pytest

from awb.errors import InvalidParams
from awb.search.fts import or_expression, search_words, split_identifier
from awb.workbench import Workbench

pytestmark = pytest.mark.anyio

HOSTILE = [
    '"',
    "'",
    '""""',
    "name:foo OR (bar",
    "NEAR(a b, 2)",
    "*",
    "a AND OR NOT",
    "^start",
    "col:*",
    "画像を縮小する",
    "🔥 resize 🔥",
    "!!!???...",
    "-- ; DROP TABLE tools;",
    "\x00\x01",
    "x" * 4096,  # the longest a query may be (longer: invalid_params, see test_workbench)
]


def test_identifiers_are_split_into_words() -> None:
    assert split_identifier("resizeImage") == "resize image"
    assert split_identifier("HTTPServer_log-parser2") == "http server log parser2"


def test_match_expressions_quote_every_term() -> None:
    assert or_expression(search_words('resize "image" NEAR(')) == '"resize" OR "image" OR "near"'
    assert or_expression(search_words("...")) is None


async def test_search_finds_a_tool_by_the_words_of_its_camel_case_name(workbench: Workbench) -> None:
    await workbench.craft(
        {"name": "resizeImage", "description": "Make pictures smaller", "code": "def run(params):\n    return 1\n"}
    )
    await workbench.craft(
        {"name": "parseCsv", "description": "Read comma separated rows", "code": "def run(params):\n    return 1\n"}
    )
    hits = workbench.search("resize an image").results
    assert [h.name for h in hits] == ["resizeImage"]
    assert hits[0].score is not None


async def test_search_covers_description_problem_and_tags(workbench: Workbench) -> None:
    code = "def run(params):\n    return 1\n"
    await workbench.craft({"name": "t1", "description": "convert temperatures", "code": code})
    await workbench.craft({"name": "t2", "description": "x", "code": code, "problem": "kelvin was confusing"})
    await workbench.craft({"name": "t3", "description": "y", "code": code, "tags": ["weather"]})
    assert [h.name for h in workbench.search("temperature").results] == ["t1"]
    assert [h.name for h in workbench.search("kelvin").results] == ["t2"]
    assert [h.name for h in workbench.search("weather").results] == ["t3"]


@pytest.mark.parametrize("query", HOSTILE)
async def test_hostile_query_strings_are_safe(workbench: Workbench, query: str) -> None:
    await workbench.craft(
        {"name": "resizer", "description": "resize images", "code": "def run(params):\n    return 1\n"}
    )
    result = workbench.search(query)
    assert result.mode == "text"
    assert all(hit.name == "resizer" for hit in result.results)


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
async def test_an_empty_query_is_a_clear_error(workbench: Workbench, query: str) -> None:
    with pytest.raises(InvalidParams, match="empty"):
        workbench.search(query)


async def test_deleted_tools_are_not_found(workbench: Workbench) -> None:
    tool = await workbench.craft(
        {"name": "gone", "description": "vanishing act", "code": "def run(p):\n    return 1\n"}
    )
    workbench.delete(tool.tool_id)
    assert workbench.search("vanishing").results == []
