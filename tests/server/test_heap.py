"""A server freezes its heap after start-up and once more after its first tool calls (awb.server.heap)."""

from __future__ import annotations

import gc

import pytest
from mcp import Client

from awb.server import heap
from awb.server.mcp import McpFace
from awb.workbench import Workbench
from support import add_tool

pytestmark = pytest.mark.anyio


async def test_a_servers_face_settles_the_heap_once_after_its_first_calls(
    workbench: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    settled: list[int] = []
    face = McpFace(workbench, warm_up=heap.WarmUp(3))
    async with Client(face.server) as client:
        monkeypatch.setattr(heap, "settle", lambda: settled.append(len(settled)))
        assert not (await client.call_tool("awb_craft", add_tool())).is_error
        assert not (await client.call_tool("awb_call", {"name": "add_numbers", "params": {"a": 1, "b": 2}})).is_error
        assert settled == []
        for _ in range(5):  # the third call settles; later ones do nothing more
            await client.call_tool("awb_list", {})
    assert settled == [0]


async def test_a_library_users_face_never_touches_the_collector(
    workbench: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(heap, "settle", lambda: pytest.fail("a face without warm_up settled the heap"))
    async with Client(McpFace(workbench).server) as client:
        for _ in range(heap.WARM_UP_CALLS + 1):
            await client.call_tool("awb_list", {})


def test_settling_freezes_the_heap_and_spaces_young_collections_out(monkeypatch: pytest.MonkeyPatch) -> None:
    done: list[str] = []
    thresholds = [(700, 10, 10)]
    monkeypatch.setattr(gc, "collect", lambda *generation: done.append("collect") or 0)
    monkeypatch.setattr(gc, "freeze", lambda: done.append("freeze"))
    monkeypatch.setattr(gc, "get_threshold", lambda: thresholds[-1])
    monkeypatch.setattr(gc, "set_threshold", lambda *threshold: thresholds.append(threshold))
    heap.settle()
    heap.settle()  # again after the first calls: the same
    assert done == ["collect", "freeze"] * 2
    assert thresholds[-1] == (heap.YOUNG_COLLECTION_EVERY, 10, 10)
