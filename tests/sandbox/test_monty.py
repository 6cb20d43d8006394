"""The Monty runtime's session pipelining: sessions are checked out ahead and handed back after the
call, under load and when limits change, and closing never waits on a worker that is not coming."""

from __future__ import annotations

import anyio
import pytest

from awb.sandbox.host import HostBridge
from awb.sandbox.monty import MontyRuntime
from sandbox_support import LIMITS, SHORT, Staged

pytestmark = pytest.mark.anyio

CODE = "def run(params):\n    return params['x'] * 2\n"


def host() -> HostBridge:
    return HostBridge(read_dirs=[], stage=Staged(), max_log_bytes=LIMITS.max_log_bytes)


async def test_more_concurrent_calls_than_workers_all_finish_and_close_returns() -> None:
    runtime = MontyRuntime(pool_size=2, max_processes=2)
    results: list[int] = []

    async def call(x: int) -> None:
        results.append((await runtime.execute(CODE, {"x": x}, LIMITS, host())).value)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tasks:
            for x in range(12):
                tasks.start_soon(call, x)
        await runtime.close()
    assert sorted(results) == [2 * x for x in range(12)]


async def test_calls_with_other_limits_do_not_take_the_spare_session() -> None:
    runtime = MontyRuntime(pool_size=1, max_processes=1)
    try:
        with anyio.fail_after(30):
            for x in range(6):
                limits = LIMITS if x % 2 else SHORT
                assert (await runtime.execute(CODE, {"x": x}, limits, host())).value == 2 * x
    finally:
        with anyio.fail_after(10):
            await runtime.close()
