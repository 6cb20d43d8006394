"""The workbench's event journal and the feeds that follow it (the panel's live toasts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from awb.config import Config
from awb.errors import AdmissionFailed
from awb.feed import BusFeed, FeedEvent, SQLiteEventFeed, open_feed
from awb.inventory.sqlite import SQLiteStore
from awb.web.stream import toast
from awb.workbench import Workbench
from support import add_tool

pytestmark = pytest.mark.anyio


async def test_a_craft_journals_its_start_and_its_admission_for_other_connections(
    workbench: Workbench, config: Config
) -> None:
    feed = SQLiteEventFeed(config.inventory_path)
    try:
        cursor = feed.head()
        tool = await workbench.craft(add_tool("summer"))
        events = feed.after(cursor)
    finally:
        feed.close()
    assert [e.kind for e in events] == ["craft_started", "crafted"]
    assert events[0].data == {"name": "summer", "runtime": tool.runtime}
    assert events[1].tool_id == tool.tool_id
    assert events[1].data["name"] == "summer"
    assert events[1].data["version"] == 1
    assert events[1].data["runtime"] == tool.runtime


async def test_a_rejected_craft_journals_how_many_examples_failed(workbench: Workbench, config: Config) -> None:
    feed = SQLiteEventFeed(config.inventory_path)
    request = add_tool(
        "bad_adder",
        examples=[
            {"params": {"a": 1, "b": 2}, "expected": 3},
            {"params": {"a": 1, "b": 1}, "expected": 5},
            {"params": {"a": 0, "b": 0}, "expected": 9},
        ],
    )
    try:
        cursor = feed.head()
        with pytest.raises(AdmissionFailed):
            await workbench.craft(request)
        events = feed.after(cursor)
    finally:
        feed.close()
    assert [e.kind for e in events] == ["craft_started", "craft_rejected"]
    assert events[1].data["reason"] == "2 of 3 examples failed"


async def test_the_feed_sees_events_another_process_writes_and_only_once(workbench: Workbench, config: Config) -> None:
    feed = SQLiteEventFeed(config.inventory_path)
    other = SQLiteStore(config.inventory_path)  # as another process would hold the file
    try:
        cursor = feed.head()
        assert feed.after(cursor) == []
        event_id = other.append_event("crafted", "tool_x", {"name": "elsewhere", "version": 1}, workbench.clock.now())
        seen = feed.after(cursor)
        assert [(e.id, e.data["name"]) for e in seen] == [(event_id, "elsewhere")]
        assert feed.after(event_id) == []
        assert feed.head() == event_id
    finally:
        other.close()
        feed.close()


async def test_the_feed_pages_through_a_burst_without_losing_events(config: Config, workbench: Workbench) -> None:
    feed = SQLiteEventFeed(config.inventory_path)
    store = SQLiteStore(config.inventory_path)
    try:
        cursor = feed.head()
        for index in range(7):
            store.append_event("deleted", None, {"name": f"t{index}"}, workbench.clock.now())
        names = []
        while page := feed.after(cursor, limit=3):
            names += [e.data["name"] for e in page]
            cursor = page[-1].id
        assert names == [f"t{i}" for i in range(7)]
    finally:
        store.close()
        feed.close()


async def test_an_in_memory_inventory_feeds_this_process_events(clock: object) -> None:
    async with Workbench(Config(inventory_path=":memory:")) as workbench:
        feed = open_feed(workbench.store, workbench.events)
        assert isinstance(feed, BusFeed)
        cursor = feed.head()
        await workbench.craft(add_tool("memo"))
        assert [e.kind for e in feed.after(cursor)] == ["craft_started", "crafted"]
        feed.close()


def test_the_store_keeps_only_the_newest_events(tmp_path: Path) -> None:
    from awb.inventory import sqlite

    store = SQLiteStore(tmp_path / "inventory.db")
    keep = sqlite.EVENTS_KEPT
    try:
        from datetime import UTC, datetime

        now = datetime.now(UTC)
        last = 0
        for _ in range(keep + 200):
            last = store.append_event("deleted", None, {}, now)
        feed = SQLiteEventFeed(tmp_path / "inventory.db")
        assert len(feed.after(0, limit=keep * 2)) <= keep
        assert feed.head() == last
        feed.close()
    finally:
        store.close()


@pytest.mark.parametrize(
    ("kind", "data", "text", "tone"),
    [
        ("craft_started", {"name": "image_resizer", "runtime": "monty"}, "crafting image_resizer…", "info"),
        (
            "crafted",
            {"name": "image_resizer", "version": 1, "runtime": "monty"},
            "image_resizer v1 ready and sandboxed (monty)",
            "success",
        ),
        (
            "craft_rejected",
            {"name": "image_resizer", "reason": "2 of 3 examples failed"},
            "image_resizer rejected: 2 of 3 examples failed",
            "error",
        ),
    ],
)
def test_each_moment_of_a_craft_has_its_sentence(kind: str, data: dict[str, object], text: str, tone: str) -> None:
    shown = toast(FeedEvent(id=1, at="2026-01-01T00:00:00", kind=kind, data=data))
    assert shown == {"text": text, "tone": tone}


def test_tier_changes_show_no_toast() -> None:
    assert toast(FeedEvent(id=1, at="2026-01-01T00:00:00", kind="tier_changed", data={})) is None
