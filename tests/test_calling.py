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
