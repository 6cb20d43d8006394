"""The workbench's event journal and the feeds that follow it (the panel's live toasts)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from awb import feed as feed_module
from awb.config import Config, SearchConfig
from awb.errors import AdmissionFailed
from awb.feed import BusFeed, FeedEvent, PostgresEventFeed, SQLiteEventFeed, open_feed
from awb.inventory.postgres import PostgresStore
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


# --- the PostgreSQL journal: every server appends, every server's panel follows ------------------------


def pg_config(config: Config, url: str) -> Config:
    return config.model_copy(update={"inventory_url": url, "search": SearchConfig(mode="text")})


class CountingJournal:
    """A store's journal that counts the queries a feed makes."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.queries = 0

    def events_after(self, cursor: int, limit: int = 100) -> list[tuple[int, str, str, str | None, str]]:
        self.queries += 1
        return self.store.events_after(cursor, limit)

    def events_head(self) -> int:
        return self.store.events_head()

    def subscribe_journal(self, listener: Callable[[], None]) -> Callable[[], None]:
        return self.store.subscribe_journal(listener)


async def test_a_craft_on_one_postgres_workbench_reaches_the_feed_of_another(config: Config, clean_pg_url: str) -> None:
    shared = pg_config(config, clean_pg_url)
    async with Workbench(shared) as crafting, Workbench(shared) as watching:
        feed = open_feed(watching.store, watching.events)
        assert isinstance(feed, PostgresEventFeed)
        try:
            cursor = feed.head()
            assert feed.after(cursor) == []
            tool = await crafting.craft(add_tool("far_adder"))
            with anyio.fail_after(5):
                while not (events := feed.after(cursor)) or events[-1].kind != "crafted":
                    await feed.wait(events[-1].id if events else cursor)
        finally:
            feed.close()
    assert [e.kind for e in events] == ["craft_started", "crafted"]
    assert events[-1].tool_id == tool.tool_id
    assert events[-1].data == {"name": "far_adder", "version": 1, "runtime": tool.runtime}


async def test_the_postgres_feed_queries_only_after_a_notification_and_wakes_on_one(
    clean_pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feed_module, "QUIET_SECONDS", 600.0)  # only the NOTIFY can end the wait in time
    writer, reader = PostgresStore(clean_pg_url), PostgresStore(clean_pg_url)
    journal = CountingJournal(reader)
    feed = PostgresEventFeed(journal)
    try:
        cursor = feed.head()
        assert feed.after(cursor) == [] and journal.queries == 1
        assert feed.after(cursor) == [] and journal.queries == 1  # nothing was announced: no query
        async with anyio.create_task_group() as tasks:
            woken = anyio.Event()

            async def waiter() -> None:
                await feed.wait(cursor)
                woken.set()

            tasks.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            event_id = writer.append_event("deleted", None, {"name": "gone"}, datetime.now(UTC))
            with anyio.fail_after(10):
                await woken.wait()
        [event] = feed.after(cursor)
        assert (event.id, event.data, journal.queries) == (event_id, {"name": "gone"}, 2)
        assert feed.after(event_id) == [] and journal.queries == 2
    finally:
        feed.close()
        writer.close()
        reader.close()


def test_journal_appends_from_many_servers_reach_a_reader_in_order_and_none_is_skipped(clean_pg_url: str) -> None:
    writers = [PostgresStore(clean_pg_url) for _ in range(2)]
    reader = PostgresStore(clean_pg_url)
    done = threading.Event()
    seen: list[int] = []

    def follow() -> None:
        cursor = 0
        while True:
            finished = done.is_set()  # read before the query: the last pass sees every append
            for row in reader.events_after(cursor, 50):
                seen.append(row[0])
                cursor = row[0]
            if finished:
                return

    def append(index: int) -> list[int]:
        store = writers[index % 2]
        return [store.append_event("deleted", None, {"n": n}, datetime.now(UTC)) for n in range(40)]

    try:
        follower = threading.Thread(target=follow)
        follower.start()
        with ThreadPoolExecutor(6) as pool:
            written = sorted(i for ids in pool.map(append, range(6)) for i in ids)
        done.set()
        follower.join(timeout=30)
        assert not follower.is_alive()
    finally:
        for store in [*writers, reader]:
            store.close()
    assert seen == written  # every event once, in id order: a later id never committed before an earlier one
