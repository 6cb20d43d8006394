"""The Server-Sent Events stream behind the toasts: new events only, resumable, bounded."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from awb.config import Config, SearchConfig
from awb.feed import SQLiteEventFeed, open_feed
from awb.inventory.sqlite import SQLiteStore
from awb.sign_outs import StreamSignIn
from awb.web import stream
from awb.workbench import Workbench
from support import add_tool

pytestmark = pytest.mark.anyio


class FakeRequest:
    def __init__(self, headers: dict[str, str] | None = None) -> None:
        self.headers = headers or {}
        self.gone = False

    async def is_disconnected(self) -> bool:
        return self.gone


async def frames(chunks: Any, count: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    async for chunk in chunks:
        if chunk.startswith("id: "):
            found.append(json.loads(chunk.split("data: ", 1)[1]))
            if len(found) == count:
                return found
    raise AssertionError("the stream ended early")


async def test_a_craft_in_another_workbench_reaches_an_open_stream(config: Config, workbench: Workbench) -> None:
    feed = SQLiteEventFeed(config.inventory_path)
    request = FakeRequest()
    chunks = stream.event_stream(request, feed, None, StreamSignIn(None, None))  # type: ignore[arg-type]
    try:
        assert await anext(chunks) == "retry: 1000\n\n"
        async with Workbench(config) as other:  # a second workbench on the same file
            await other.craft(add_tool("far_away"))
        with anyio.fail_after(10):
            got = await frames(chunks, 2)
        assert [f["kind"] for f in got] == ["craft_started", "crafted"]
        assert got[0]["toast"] == {"text": "crafting far_away…", "tone": "info"}
        assert got[1]["toast"]["text"].startswith("far_away v1 ready and sandboxed (")
    finally:
        await chunks.aclose()
        feed.close()


async def test_a_craft_on_another_postgres_workbench_reaches_an_open_stream_at_once(
    config: Config, clean_pg_url: str
) -> None:
    shared = config.model_copy(update={"inventory_url": clean_pg_url, "search": SearchConfig(mode="text")})
    async with Workbench(shared) as watching, Workbench(shared) as other:
        feed = open_feed(watching.store, watching.events)
        request = FakeRequest()
        chunks = stream.event_stream(request, feed, None, StreamSignIn(None, None))  # type: ignore[arg-type]
        try:
            assert await anext(chunks) == "retry: 1000\n\n"
            await other.craft(add_tool("far_away"))
            # Only a NOTIFY makes the feed look again: without one it answers "nothing new" forever.
            with anyio.fail_after(5):
                got = await frames(chunks, 2)
            assert [f["kind"] for f in got] == ["craft_started", "crafted"]
            assert got[1]["toast"]["text"].startswith("far_away v1 ready and sandboxed (")
        finally:
            await chunks.aclose()
            feed.close()


async def test_a_reconnecting_browser_resumes_after_its_last_event_id(config: Config, workbench: Workbench) -> None:
    store = SQLiteStore(config.inventory_path)
    feed = SQLiteEventFeed(config.inventory_path)
    now = workbench.clock.now()
    first = store.append_event("deleted", None, {"name": "one"}, now)
    store.append_event("deleted", None, {"name": "two"}, now)
    request = FakeRequest({"last-event-id": str(first)})
    chunks = stream.event_stream(request, feed, stream.start_cursor(request, feed), StreamSignIn(None, None))  # type: ignore[arg-type]
    try:
        with anyio.fail_after(10):
            [frame] = await frames(chunks, 1)
        assert frame["data"]["name"] == "two"
    finally:
        await chunks.aclose()
        store.close()
        feed.close()


async def test_the_stream_ends_when_the_browser_goes(config: Config, workbench: Workbench) -> None:
    feed = SQLiteEventFeed(config.inventory_path)
    request = FakeRequest()
    chunks = stream.event_stream(request, feed, None, StreamSignIn(None, None))  # type: ignore[arg-type]
    try:
        await anext(chunks)
        request.gone = True
        with anyio.fail_after(10):
            rest = [chunk async for chunk in chunks]
        assert rest == []
    finally:
        feed.close()
