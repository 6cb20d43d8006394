"""`tools/list` while the inventory cannot answer (a PostgreSQL inventory down, restarting, or slow to
give a connection): the client hears why, as for any other request, and the server goes on serving the
others meanwhile."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError

from awb.config import Config
from awb.errors import InventoryUnavailable
from awb.server.mcp import McpFace
from awb.workbench import Workbench
from journey import call
from support import add_tool

pytestmark = pytest.mark.anyio

DOWN = "the inventory at postgresql://awb@db.internal:5432/awb cannot be reached: connection refused; try again"


async def test_tools_list_while_the_inventory_is_down_says_unavailable_naming_the_inventory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = Config(inventory_path=tmp_path / "inv.db")
    async with Workbench(config) as workbench, Client(McpFace(workbench).server) as client:

        def down(**_: Any) -> Any:
            raise InventoryUnavailable(DOWN, inventory="postgresql://awb@db.internal:5432/awb")

        monkeypatch.setattr(workbench.store, "list_tools", down)
        with anyio.fail_after(10), pytest.raises(MCPError) as raised:
            await client.list_tools()
    assert raised.value.message == DOWN
    assert raised.value.data["error"]["code"] == "unavailable"


async def test_a_tools_list_waiting_for_the_inventory_does_not_hold_up_another_clients_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = Config(inventory_path=tmp_path / "inv.db")
    released = threading.Event()
    waiting = threading.Event()
    async with Workbench(config) as workbench:
        face = McpFace(workbench)
        async with Client(face.server) as lister, Client(face.server) as caller:
            await call(caller, "awb_craft", add_tool("adder"))
            listed = workbench.store.list_tools

            def slow(**kwargs: Any) -> Any:
                # What a request sees while the pool waits for a connection the database does not give.
                waiting.set()
                released.wait(timeout=20)
                return listed(**kwargs)

            monkeypatch.setattr(workbench.store, "list_tools", slow)
            try:
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(lister.list_tools)
                    with anyio.fail_after(10):
                        while not waiting.is_set():
                            await anyio.sleep(0.01)
                        result = await call(caller, "awb_call", {"name": "adder", "params": {"a": 2, "b": 3}})
                    assert result["result"] == 5
                    released.set()
            finally:
                released.set()
