"""Call counters move in SQL: concurrent calls, in one process or several on one inventory file,
never lose an update, and tier promotion follows the counted usage."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from awb.config import Config
from awb.errors import ToolRuntimeError
from awb.workbench import Workbench
from support import REPO, add_tool

pytestmark = pytest.mark.anyio

CALLS_PER_PROCESS = 40

HAMMER = textwrap.dedent(
    """
    import os
    import sys
    import anyio
    from awb.config import Config
    from awb.workbench import Workbench

    async def main() -> None:
        config = Config(inventory_path=sys.argv[1])
        config.sandbox.max_concurrent = 64
        async with Workbench(config) as workbench:
            async with anyio.create_task_group() as group:
                for _ in range({calls}):
                    group.start_soon(workbench.call, "shared", {{"a": 1, "b": 2}})

    anyio.run(main)
    print("finished", flush=True)
    # Counting is done and the inventory closed. Skip interpreter teardown: with two processes at
    # once it sometimes aborts inside the Monty worker pool's native threads (on main too), which is
    # not what this test is about.
    os._exit(0)
    """
).format(calls=CALLS_PER_PROCESS)


async def test_concurrent_calls_in_one_process_count_every_call(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db")
    config.sandbox.max_concurrent = 64
    async with Workbench(config) as workbench:
        await workbench.craft(add_tool("shared"))
        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for _ in range(30):
                    group.start_soon(workbench.call, "shared", {"a": 1, "b": 2})
        tool = workbench.resolve("shared")
        assert (tool.usage_count, tool.success_count, tool.failure_count) == (30, 30, 0)
        assert tool.memory_level == "medium_term"


async def test_two_processes_hammering_one_tool_on_one_inventory_lose_no_update(tmp_path: Path) -> None:
    inventory = tmp_path / "inv.db"
    config = Config(inventory_path=inventory)
    async with Workbench(config) as workbench:
        await workbench.craft(add_tool("shared"))
    with anyio.fail_after(120):
        processes = [
            await anyio.open_process(
                [sys.executable, "-c", HAMMER, str(inventory)], cwd=REPO, stderr=subprocess.DEVNULL
            )
            for _ in range(2)
        ]
        for process in processes:
            assert process.stdout is not None
            assert b"".join([chunk async for chunk in process.stdout]) == b"finished\n"
            assert await process.wait() == 0
            await process.aclose()
    async with Workbench(config) as workbench:
        tool = workbench.resolve("shared")
        assert (tool.usage_count, tool.success_count, tool.failure_count) == (
            2 * CALLS_PER_PROCESS,
            2 * CALLS_PER_PROCESS,
            0,
        )
        # Promoted past both thresholds (5 and 50 uses) on the counted usage, whichever process crossed them.
        assert tool.memory_level == "long_term"
        versions = workbench.store.versions(tool.tool_id)
        assert versions[0].usage_count == 2 * CALLS_PER_PROCESS
        assert len(workbench.store.calls(tool.tool_id, limit=1000)) == 2 * CALLS_PER_PROCESS


async def test_failures_are_counted_in_sql_and_never_promote(workbench: Workbench) -> None:
    await workbench.craft(
        add_tool(
            "fragile",
            code="def run(params):\n    return 1 / params['d']\n",
            input_schema={"type": "object"},
            examples=[],
        )
    )
    for _ in range(7):
        with pytest.raises(ToolRuntimeError):
            await workbench.call("fragile", {"d": 0})
    tool = workbench.resolve("fragile")
    assert (tool.usage_count, tool.failure_count, tool.memory_level) == (0, 7, "short_term")
