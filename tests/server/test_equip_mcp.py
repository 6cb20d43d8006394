"""Equipped tools as first-class MCP tools and tools/list_changed, through the official SDK client.

Both protocol generations: 2025-11-25 sessions get `notifications/tools/list_changed`; 2026-07-28 clients
get `ToolsListChanged` on a `subscriptions/listen` stream. In memory, over stdio and over streamable HTTP,
including changes made by the `awb` CLI in another process.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import IncomingMessage

from awb.config import Config
from awb.server.mcp import McpFace
from awb.workbench import Workbench
from journey import call
from support import add_tool, awb_env

pytestmark = pytest.mark.anyio

WAIT = 15  # seconds any single notification may take to arrive

#: Waits (bounded) for the next tools/list_changed signal; `forget` drops signals already received.
Changes = tuple[Callable[[], Awaitable[None]], Callable[[], None]]


class Notifications:
    """A `message_handler` that counts tools/list_changed notifications (the 2025-11-25 way)."""

    def __init__(self) -> None:
        self.count = 0
        self._arrived = anyio.Event()

    async def __call__(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1
            self._arrived.set()

    def forget(self) -> None:
        self._arrived = anyio.Event()

    async def next(self) -> None:
        with anyio.fail_after(WAIT):
            await self._arrived.wait()
        self._arrived = anyio.Event()


@asynccontextmanager
async def listening(client: Client) -> AsyncIterator[Changes]:
    """A 2026-07-28 `subscriptions/listen` stream for tool-list changes."""
    async with client.listen(tools_list_changed=True) as subscription:
        assert subscription.honored.tools_list_changed
        queue_send, queue_receive = anyio.create_memory_object_stream[object](100)

        async def pump() -> None:
            async for event in subscription:
                await queue_send.send(event)

        async def next_change() -> None:
            with anyio.fail_after(WAIT):
                await queue_receive.receive()

        def forget() -> None:
            while True:
                try:
                    queue_receive.receive_nowait()
                except anyio.WouldBlock:
                    return

        async with queue_send, queue_receive, anyio.create_task_group() as tasks:
            tasks.start_soon(pump)
            yield next_change, forget
            tasks.cancel_scope.cancel()


async def names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


async def equip_journey(client: Client, changes: Changes) -> None:
    """equip -> listed and notified -> called directly (usage counted) -> unequip and delete notify."""
    next_change, forget = changes
    tools = client.server_capabilities.tools
    assert tools is not None and tools.list_changed is True
    crafted = await call(client, "awb_craft", add_tool("adder"))
    assert "is_error" not in crafted, crafted
    assert "adder" not in await names(client)

    forget()
    equipped = await call(client, "awb_equip", {"name": "adder"})
    assert equipped["equipped"] is True and equipped["equipped_tools"] == ["adder"]
    await next_change()
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert listed["adder"].description == "Add two numbers and return the sum"
    assert listed["adder"].input_schema["required"] == ["a", "b"]
    assert "awb_equip" in listed and "awb_call" in listed

    direct = await client.call_tool("adder", {"a": 20, "b": 22})
    assert not direct.is_error, direct
    assert isinstance(direct.content[0], types.TextContent) and direct.content[0].text == "42"
    assert direct.structured_content == {"result": 42}
    assert direct.meta is not None and direct.meta["call_id"].startswith("call_")
    assert listed["adder"].output_schema == {"type": "object", "properties": {"result": {}}, "required": ["result"]}
    refused = await client.call_tool("adder", {"a": "twenty"})
    assert refused.is_error and refused.structured_content is not None
    assert refused.structured_content["error"]["code"] == "invalid_params"
    inspected = await call(client, "awb_inspect", {"name": "adder"})
    assert inspected["tool"]["usage_count"] == 1

    forget()
    assert (await call(client, "awb_unequip", {"tool_id": crafted["tool_id"]}))["equipped"] is False
    await next_change()
    assert "adder" not in await names(client)
    not_equipped = await client.call_tool("adder", {"a": 1, "b": 2})
    assert not_equipped.is_error and not_equipped.structured_content is not None
    assert not_equipped.structured_content["error"]["code"] == "tool_not_found"

    forget()
    await call(client, "awb_equip", {"name": "adder"})
    await next_change()
    forget()
    await call(client, "awb_delete", {"name": "adder"})
    await next_change()
    assert "adder" not in await names(client)


async def evolve_journey(client: Client) -> None:
    """failing examples reject a craft with a report; update then rollback round-trip."""
    rejected = await call(
        client, "awb_craft", add_tool("bad_adder", examples=[{"params": {"a": 1, "b": 2}, "expected": 4}])
    )
    assert rejected["is_error"] and rejected["error"]["code"] == "admission_failed"
    report = rejected["error"]["details"]["examples"]
    assert report == [
        {"example": 0, "params": {"a": 1, "b": 2}, "got": 3, "ok": False, "expected": 4, "expected_error": None}
    ]

    crafted = await call(client, "awb_craft", add_tool("calc"))
    updated = await call(
        client,
        "awb_update",
        {
            "name": "calc",
            "code": "def run(params):\n    return params['a'] * params['b']\n",
            "description": "Multiply two numbers",
            "examples": [{"params": {"a": 2, "b": 3}, "expected": 6}],
        },
    )
    assert (updated["status"], updated["version"], updated["parent_version"]) == ("updated", 2, 1)
    assert (await call(client, "awb_call", {"name": "calc", "params": {"a": 4, "b": 5}}))["result"] == 20
    failing = await call(client, "awb_update", {"name": "calc", "code": "def run(params):\n    return 0\n"})
    assert failing["error"]["code"] == "admission_failed"

    rolled = await call(client, "awb_update", {"tool_id": crafted["tool_id"], "to_version": 1})
    assert (rolled["status"], rolled["version"], rolled["parent_version"]) == ("rolled_back", 1, 2)
    assert (await call(client, "awb_call", {"name": "calc", "params": {"a": 4, "b": 5}}))["result"] == 9
    forward = await call(client, "awb_rollback", {"name": "calc", "to_version": 2})
    assert (forward["status"], forward["version"], forward["parent_version"]) == ("rolled_back", 2, 1)
    # Back "to" the version already current, either way: nothing moves, and the result says so.
    for verb in ("awb_update", "awb_rollback"):
        stay = await call(client, verb, {"name": "calc", "to_version": 2})
        assert (stay["status"], stay["version"], stay["parent_version"]) == ("unchanged", 2, 2)
    inspected = await call(client, "awb_inspect", {"name": "calc"})
    assert (inspected["tool"]["version"], inspected["tool"]["parent_version"]) == (2, 1)
    assert [(v["version"], v["usage_count"]) for v in inspected["versions"]] == [(1, 1), (2, 1)]
    assert inspected["tool"]["usage_count"] == 2


def stdio_params(tmp_path: Path, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "awb", "start", "--transport", "stdio"],
        env=awb_env(tmp_path, **env),
        cwd=tmp_path,
    )


async def awb_cli(tmp_path: Path, *args: str) -> str:
    """Run `python -m awb ...` in another process against the same inventory."""

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "awb", *args],
            env=awb_env(tmp_path),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )

    done = await anyio.to_thread.run_sync(run)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def cli_journey(client: Client, tmp_path: Path, changes: Changes) -> None:
    next_change, forget = changes
    await call(client, "awb_craft", add_tool("from_cli"))
    forget()
    await awb_cli(tmp_path, "inventory", "equip", "from_cli")
    await next_change()
    assert "from_cli" in await names(client)
    forget()
    await awb_cli(tmp_path, "inventory", "unequip", "from_cli")
    await next_change()
    assert "from_cli" not in await names(client)


# --- in memory ------------------------------------------------------------------------------------


async def test_equipped_tools_are_listed_called_and_notified_on_the_2025_handshake(workbench: Workbench) -> None:
    notes = Notifications()
    with anyio.fail_after(60):
        async with Client(McpFace(workbench).server, mode="legacy", message_handler=notes, cache=None) as client:
            await equip_journey(client, (notes.next, notes.forget))
    assert notes.count >= 4


async def test_equipped_tools_are_listed_called_and_notified_on_a_2026_listen_stream(workbench: Workbench) -> None:
    with anyio.fail_after(60):
        async with Client(McpFace(workbench).server, cache=None) as client:
            assert client.protocol_version == "2026-07-28"
            async with listening(client) as changes:
                await equip_journey(client, changes)


async def test_failing_examples_and_update_rollback_round_trip_in_memory(workbench: Workbench) -> None:
    with anyio.fail_after(60):
        async with Client(McpFace(workbench).server) as client:
            await evolve_journey(client)


async def test_dedupe_reject_refuses_a_duplicate_craft(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db", dedupe="reject")
    with anyio.fail_after(30):
        async with Workbench(config) as workbench, Client(McpFace(workbench).server) as client:
            first = await call(client, "awb_craft", add_tool("add_numbers"))
            again = await call(client, "awb_craft", add_tool("sum_numbers"))
            assert again["is_error"] and again["error"]["code"] == "duplicate_tool"
            assert again["error"]["details"]["tool_id"] == first["tool_id"]


async def test_craft_reports_similar_tools_when_dedupe_warns(workbench: Workbench) -> None:
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server) as client:
            first = await call(client, "awb_craft", add_tool("add_numbers"))
            assert first["similar"] == []
            second = await call(client, "awb_craft", add_tool("sum_numbers"))
            assert second["similar"][0]["tool_id"] == first["tool_id"]
            assert second["similar"][0]["score"] >= 0.85


async def test_equipping_past_the_cap_and_meta_tool_names_are_refused(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db", max_equipped=1)
    with anyio.fail_after(30):
        async with Workbench(config) as workbench, Client(McpFace(workbench).server) as client:
            await call(client, "awb_craft", add_tool("one"))
            for name in ("awb_list", "AWB_LIST", "Awb_Call"):
                refused = await call(client, "awb_craft", add_tool(name, description="A list maker", tags=[]))
                assert refused["error"]["code"] == "invalid_params"
                assert refused["error"]["details"]["rule"] == "reserved_name"
            await call(client, "awb_equip", {"name": "one"})
            await call(client, "awb_craft", {**add_tool("two"), "description": "Another adder entirely"})
            over = await call(client, "awb_equip", {"name": "two"})
            assert over["error"]["code"] == "limit_exceeded"


# --- stdio ----------------------------------------------------------------------------------------


async def test_equip_over_stdio_on_the_2025_handshake_notifies_and_calls_directly(tmp_path: Path) -> None:
    notes = Notifications()
    with anyio.fail_after(90):
        async with Client(stdio_params(tmp_path), mode="legacy", message_handler=notes, cache=None) as client:
            await equip_journey(client, (notes.next, notes.forget))
            await cli_journey(client, tmp_path, (notes.next, notes.forget))


async def test_equip_over_stdio_on_a_2026_listen_stream_sees_cli_changes(tmp_path: Path) -> None:
    with anyio.fail_after(90):
        async with Client(stdio_params(tmp_path), cache=None) as client, listening(client) as changes:
            await cli_journey(client, tmp_path, changes)


async def test_evolve_and_dedupe_reject_over_stdio(tmp_path: Path) -> None:
    with anyio.fail_after(90):
        async with Client(stdio_params(tmp_path, AWB_DEDUPE="reject")) as client:
            await evolve_journey(client)
            again = await call(client, "awb_craft", add_tool("multiply_calc", description="Multiply two numbers"))
            assert again["error"]["code"] == "duplicate_tool"
            assert again["error"]["details"]["name"] == "calc"


# --- streamable HTTP ------------------------------------------------------------------------------


async def test_equip_over_streamable_http_on_a_2026_listen_stream(http_server: str, tmp_path: Path) -> None:
    with anyio.fail_after(90):
        async with Client(http_server, cache=None) as client:
            async with listening(client) as changes:
                await equip_journey(client, changes)
                await cli_journey(client, tmp_path, changes)
            await evolve_journey(client)


async def standalone_stream_open(client: Client, notes: Notifications) -> None:
    """Wait (bounded) until the client's GET stream carries notifications: toggle a probe tool until one arrives.

    Over streamable HTTP a 2025-11-25 server can only push on the GET stream the client opens after the
    handshake; a notification sent before it is open is lost, so the test first waits for the stream.
    """
    await call(client, "awb_craft", add_tool("probe", description="A probe that only opens the stream", tags=[]))
    equipped = False
    with anyio.fail_after(WAIT):
        while True:
            notes.forget()
            equipped = not equipped
            await call(client, "awb_equip" if equipped else "awb_unequip", {"name": "probe"})
            with anyio.move_on_after(0.25):
                await notes.next()
                break
    await call(client, "awb_delete", {"name": "probe"})
    await notes.next()


async def test_equip_over_streamable_http_on_the_2025_handshake(http_server: str, tmp_path: Path) -> None:
    notes = Notifications()
    with anyio.fail_after(90):
        async with Client(http_server, mode="legacy", message_handler=notes, cache=None) as client:
            await standalone_stream_open(client, notes)
            await equip_journey(client, (notes.next, notes.forget))
            await cli_journey(client, tmp_path, (notes.next, notes.forget))
