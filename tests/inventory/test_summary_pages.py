"""Listing pages from the SQLite inventory: the page and the number of all matches, however filtered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from awb.clock import ManualClock
from awb.inventory.models import Tool, ToolMetadata
from awb.inventory.sqlite import SQLiteStore
from support import ADD_CODE


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    store = SQLiteStore(tmp_path / "inv.db")
    now = ManualClock().now()
    for i in range(7):
        store.add_tool(
            Tool(
                tool_id=f"tool_{i}",
                name=f"tool_{i}",
                description="a tool",
                language="python",
                runtime="monty",
                code=ADD_CODE,
                input_schema={"type": "object"},
                metadata=ToolMetadata(tags=["even"] if i % 2 == 0 else ["odd"]),
                memory_level="long_term" if i < 2 else "short_term",
                created_at=now,
                updated_at=now,
            )
        )
    return store


@pytest.mark.parametrize(
    ("filters", "limit", "offset", "names", "total"),
    [
        ({}, 3, 0, 3, 7),
        ({}, 3, 6, 1, 7),
        ({}, 3, 9, 0, 7),
        ({}, 10, 0, 7, 7),
        ({"tag": "even"}, 2, 0, 2, 4),
        ({"tag": "even"}, 2, 3, 1, 4),
        ({"tag": "even"}, 2, 8, 0, 4),
        ({"tag": "none"}, 2, 0, 0, 0),
        ({"memory_level": "long_term"}, 1, 0, 1, 2),
        ({"memory_level": "long_term", "tag": "odd"}, 5, 0, 1, 1),
    ],
)
def test_a_page_comes_with_the_count_of_every_match(
    store: SQLiteStore, filters: dict[str, Any], limit: int, offset: int, names: int, total: int
) -> None:
    page, counted = store.page_summaries(limit=limit, offset=offset, **filters)
    assert (len(page), counted) == (names, total)
    everything = store.list_summaries(limit=100, **filters)
    assert [t.tool_id for t in page] == [t.tool_id for t in everything][offset : offset + limit]
    store.close()
