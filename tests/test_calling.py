"""The call path's records: a call cancelled while its tool runs is recorded (error code `cancelled`,
its duration) and counted, whether the workbench's task is cancelled or an MCP client cancels."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest
from mcp import Client

from awb.calling import CANCELLED
from awb.errors import ToolRuntimeError
from awb.inventory.models import Tool
from awb.server.mcp import McpFace
from awb.workbench import Workbench
from journey import abandoned_call, call
from support import add_tool, announcing, until_running

pytestmark = pytest.mark.anyio


async def test_a_call_cancelled_while_its_tool_runs_is_recorded_as_cancelled_with_its_duration(
    workbench: Workbench,
) -> None:
    runtime = await announcing(workbench)
    with anyio.fail_after(30):
        waiting = asyncio.ensure_future(workbench.call("waits"))
        await until_running(runtime)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    with anyio.fail_after(5):
        while not workbench.inspect("waits").recent_calls:
            await asyncio.sleep(0)  # the record is written at the end of the loop's turn
    found = workbench.inspect("waits")
    [record] = found.recent_calls
    assert (record.ok, record.error_code) == (False, CANCELLED)
    assert record.duration_ms > 0 and record.call_id.startswith("call_")
    assert (found.tool.usage_count, found.tool.failure_count) == (0, 1)
    assert (found.versions[0].usage_count, found.versions[0].failure_count) == (1, 1)
    # The runtime ended that run; the next call is answered and counted as usual.
    with anyio.fail_after(30):
        done = await workbench.call("waits", {"forever": False})
    assert (done.result, done.usage_count) == (0, 1)


async def test_a_call_an_mcp_client_cancels_is_recorded_and_counted(workbench: Workbench) -> None:
    runtime = await announcing(workbench)
    with anyio.fail_after(60):
        async with Client(McpFace(workbench).server) as client:
            # In memory, the SDK client sends notifications/cancelled.
            inspected = await abandoned_call(client, runtime)
            [record] = inspected["recent_calls"]
            assert (record["ok"], record["error_code"]) == (False, "cancelled") and record["duration_ms"] > 0
            assert inspected["tool"]["failure_count"] == 1
            answered = await call(client, "awb_call", {"name": "waits", "params": {"forever": False}})
            assert (answered["result"], answered["usage_count"]) == (0, 1)


class _Broken:
    """A runtime that fails in a way no runtime error covers (as a forged frame once made the wire raise a
    bare ValueError)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def execute(self, *args: Any) -> Any:
        raise ValueError("Exceeds the limit (4300 digits) for integer string conversion")


async def test_a_runtime_failing_unexpectedly_is_a_recorded_failed_call(workbench: Workbench) -> None:
    await workbench.craft(add_tool("adder", runtime="monty"))
    workbench.runtimes["monty"] = _Broken(workbench.runtimes["monty"])  # type: ignore[assignment]
    with pytest.raises(ToolRuntimeError) as raised:
        await workbench.call("adder", {"a": 1, "b": 2})
    assert raised.value.code == "runtime_error"
    assert raised.value.details["exception"] == "ValueError"
    [record] = workbench.inspect("adder").recent_calls
    assert record.ok is False and record.error_code == "runtime_error"
    assert workbench.resolve("adder").failure_count == 1


async def test_a_call_that_moves_no_tier_copies_its_tool_record_only_for_the_store_cache(
    workbench: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The call's result reads the counters the record returned: a copy of the whole tool record for it
    # cost ~6 us of the event loop on every call.
    await workbench.craft({"name": "double", "description": "Double x.", "code": "def run(params):\n    return 2\n"})
    with anyio.fail_after(30):
        await workbench.call("double")  # warm: the tool is read into the store's cache
        copied: list[str] = []
        original = Tool.model_copy

        def counted_copy(self: Tool, *args: Any, **kwargs: Any) -> Tool:
            copied.append(self.tool_id)
            return original(self, *args, **kwargs)

        monkeypatch.setattr(Tool, "model_copy", counted_copy)
        result = await workbench.call("double")
    assert (result.result, result.usage_count, result.memory_level) == (2, 2, "short_term")
    assert len(copied) == 1  # the store's cached record taking the new counters


async def test_a_call_that_reaches_long_term_still_auto_equips_its_tool(workbench: Workbench) -> None:
    workbench.config.auto_equip_long_term = True
    await workbench.craft({"name": "hot", "description": "Often used.", "code": "def run(params):\n    return 1\n"})
    with anyio.fail_after(60):
        for _ in range(200):
            result = await workbench.call("hot")
            if result.memory_level == "long_term":
                break
    assert result.memory_level == "long_term"
    assert workbench.resolve("hot").equipped
