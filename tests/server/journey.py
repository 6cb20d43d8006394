"""The user journey every transport must carry, written once against the SDK's `Client`."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import Client

from support import ADD_CODE, ADD_SCHEMA, Announcing, until_running


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert result.structured_content is not None
    if result.is_error:
        return {"is_error": True, **result.structured_content}
    return result.structured_content


async def abandoned_call(client: Client, runtime: Announcing) -> dict[str, Any]:
    """Call the WAITS tool and abandon the request once it runs (how the SDK client cancels); what
    `awb_inspect` then says of the tool, once the server has recorded the call (bound it)."""
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(client.call_tool, "awb_call", {"name": "waits"})
        await until_running(runtime)
        tasks.cancel_scope.cancel()
    with anyio.fail_after(10):  # the server hears of it in its own time
        inspected = await call(client, "awb_inspect", {"name": "waits"})
        while not inspected["recent_calls"]:
            inspected = await call(client, "awb_inspect", {"name": "waits"})
    return inspected


async def run_journey(client: Client) -> str:
    """craft -> call x5 (promoted to medium) -> search -> list filters -> delete -> call is tool_deleted."""
    listed = await client.list_tools()
    names = {tool.name for tool in listed.tools}
    assert {"awb_craft", "awb_call", "awb_list", "awb_search", "awb_delete", "awb_inspect"} <= names
    assert all(tool.description and tool.output_schema for tool in listed.tools)

    crafted = await call(
        client,
        "awb_craft",
        {
            "name": "sumPair",
            "description": "Add two numbers and return their sum",
            "code": ADD_CODE,
            "input_schema": ADD_SCHEMA,
            "examples": [{"params": {"a": 2, "b": 3}, "expected": 5}],
            "tags": ["math", "arithmetic"],
            "problem": "agents kept adding numbers by hand",
        },
    )
    assert "is_error" not in crafted, crafted
    tool_id = crafted["tool_id"]
    assert crafted["memory_level"] == "short_term"

    for i in range(5):
        called = await call(client, "awb_call", {"tool_id": tool_id, "params": {"a": i, "b": 10}})
        assert called["result"] == i + 10
    assert called["usage_count"] == 5
    assert called["memory_level"] == "medium_term"

    found = await call(client, "awb_search", {"query": "sum pair of numbers"})
    assert found["results"][0]["tool_id"] == tool_id
    assert found["results"][0]["memory_level"] == "medium_term"
    assert found["results"][0]["usage_count"] == 5

    by_level = await call(client, "awb_list", {"memory_level": "medium_term"})
    assert [t["tool_id"] for t in by_level["tools"]] == [tool_id]
    assert (await call(client, "awb_list", {"memory_level": "short_term"}))["count"] == 0
    assert (await call(client, "awb_list", {"tag": "arithmetic"}))["count"] == 1
    assert (await call(client, "awb_list", {"tag": "poetry"}))["count"] == 0
    assert (await call(client, "awb_list", {"query": "sum", "limit": 1}))["count"] == 1

    inspected = await call(client, "awb_inspect", {"name": "sumPair"})
    assert inspected["tool"]["code"] == ADD_CODE
    assert len(inspected["recent_calls"]) == 5

    deleted = await call(client, "awb_delete", {"tool_id": tool_id})
    assert deleted["status"] == "deleted"
    failed = await call(client, "awb_call", {"tool_id": tool_id, "params": {"a": 1, "b": 1}})
    assert failed["is_error"] and failed["error"]["code"] == "tool_deleted"
    return tool_id
