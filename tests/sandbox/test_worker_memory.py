"""Peak memory per call from the worker runtimes (monty, javascript): the server reads it from the
kernel's count of the worker's resident memory; it reaches the call record and `awb_inspect`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from mcp import Client

from awb.errors import ExecutionError
from awb.sandbox.base import Limits, Runtime
from awb.sandbox.host import HostBridge
from awb.sandbox.javascript import JavaScriptRuntime
from awb.sandbox.monty import MontyRuntime
from awb.server.mcp import McpFace
from awb.workbench import Workbench
from journey import call

pytestmark = pytest.mark.anyio

MiB = 1024 * 1024
BIG_MB = 48
ROOMY = Limits(timeout_ms=10_000, memory_mb=256)

TRIVIAL = {
    "monty": "def run(params):\n    return params['n'] + 1\n",
    "javascript": "function run(params) { return params.n + 1; }",
}
#: One block of `mb` MiB, written through (so every page is resident).
ONE_BLOCK = {
    "monty": "def run(params):\n    data = 'x' * (params['mb'] * 1024 * 1024)\n    return len(data)\n",
    "javascript": "function run(params) { const b = new Uint8Array(params.mb * 1024 * 1024); b.fill(1); return b.length; }",
}
#: Many small objects: what an allocator keeps after they are freed, to hand out again.
MANY_OBJECTS = {
    "monty": "def run(params):\n    items = [{'i': i, 's': 'x' + str(i)} for i in range(params['n'])]\n    return len(items)\n",
    "javascript": (
        "function run(params) { const a = []; for (let i = 0; i < params.n; i++) a.push({i: i, s: 'x' + i}); "
        "return a.length; }"
    ),
}
OBJECTS = {"monty": 100_000, "javascript": 300_000}


def host() -> HostBridge:
    return HostBridge(read_dirs=[], stage=None, max_log_bytes=ROOMY.max_log_bytes)


@pytest.fixture(params=["monty", "javascript"])
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[Runtime]:
    # One worker, so every call below reuses the worker the one before it ran in.
    made: Runtime = (
        MontyRuntime(pool_size=1, max_processes=1)
        if request.param == "monty"
        else JavaScriptRuntime(pool_size=1, max_concurrent=1)
    )
    await made.start()
    try:
        yield made
    finally:
        with anyio.fail_after(20):
            await made.close()


async def peak(runtime: Runtime, code: str, params: dict[str, Any]) -> int:
    with anyio.fail_after(30):
        execution = await runtime.execute(code, params, ROOMY, host())
    assert execution.peak_memory_bytes is not None, runtime.name
    return execution.peak_memory_bytes


async def test_a_tool_that_allocates_reports_a_clearly_larger_peak_than_a_trivial_one(runtime: Runtime) -> None:
    trivial = await peak(runtime, TRIVIAL[runtime.name], {"n": 1})
    big = await peak(runtime, ONE_BLOCK[runtime.name], {"mb": BIG_MB})
    again = await peak(runtime, TRIVIAL[runtime.name], {"n": 2})
    assert big >= (BIG_MB - 4) * MiB, big
    assert big > max(trivial, again) + 32 * MiB, (trivial, big, again)
    # What the big call freed is not counted against the next, trivial one.
    assert again < 16 * MiB, again


async def test_memory_a_call_freed_is_not_hidden_from_the_next_call_in_the_same_worker(runtime: Runtime) -> None:
    """A worker's allocator keeps freed memory to hand out again; a later call that reuses it would
    not grow the worker. Such a worker is retired (monty) or trimmed and retired (javascript), so each
    call is counted in full."""
    code, n = MANY_OBJECTS[runtime.name], OBJECTS[runtime.name]
    peaks = [await peak(runtime, code, {"n": n}) for _ in range(3)]
    assert min(peaks) >= 20 * MiB, peaks
    assert min(peaks) > max(peaks) / 2, peaks


@pytest.mark.parametrize("language", ["python", "javascript"])
async def test_the_peak_reaches_the_call_record_and_awb_inspect(workbench: Workbench, language: str) -> None:
    name = "monty" if language == "python" else "javascript"
    async with Client(McpFace(workbench).server) as client:
        with anyio.fail_after(60):
            crafted = await call(
                client,
                "awb_craft",
                {
                    "name": "block_maker",
                    "description": "Allocate a block of memory of the given size and report its length",
                    "language": language,
                    "code": ONE_BLOCK[name],
                    "input_schema": {"type": "object", "properties": {"mb": {"type": "integer"}}},
                    "examples": [{"params": {"mb": 1}, "expected": MiB}],
                },
            )
            assert crafted.get("runtime") == name, crafted
            called = await call(client, "awb_call", {"name": "block_maker", "params": {"mb": BIG_MB}})
            assert called["result"] == BIG_MB * MiB
            inspected = await call(client, "awb_inspect", {"name": "block_maker"})
    [record] = inspected["recent_calls"]
    assert record["call_id"] == called["call_id"]
    assert record["peak_memory_bytes"] >= (BIG_MB - 4) * MiB, record
    [stored] = workbench.store.calls(crafted["tool_id"])
    assert stored.peak_memory_bytes == record["peak_memory_bytes"]


#: Grows until the engine refuses: Monty's heap limit, QuickJS's memory limit.
GREEDY = {
    "monty": "def run(params):\n    blocks = []\n    while True:\n        blocks.append('x' * (1024 * 1024))\n",
    "javascript": "function run(p) { const a = []; for (;;) a.push(new Uint8Array(1 << 20).fill(1)); }",
}


@pytest.mark.parametrize("language", ["python", "javascript"])
async def test_a_call_that_hit_its_memory_limit_records_how_high_it_got(workbench: Workbench, language: str) -> None:
    name = "monty" if language == "python" else "javascript"
    limit_mb = workbench.limits.memory_mb
    await workbench.craft(
        {"name": "greedy", "description": "Take memory until refused", "language": language, "code": GREEDY[name]}
    )
    with anyio.fail_after(30), pytest.raises(ExecutionError) as failed:
        await workbench.call("greedy", {})
    assert failed.value.code == "memory_exceeded"
    [record] = workbench.inspect("greedy").recent_calls
    assert record.error_code == "memory_exceeded"
    assert record.peak_memory_bytes is not None
    assert limit_mb * 3 // 4 * MiB <= record.peak_memory_bytes <= (limit_mb + 32) * MiB, record
