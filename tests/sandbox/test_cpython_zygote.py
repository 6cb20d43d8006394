"""The cpython zygote dying (killed, crashed): the call on one of its workers fails at once with an error
that says so, and the next call gets a new zygote instead of the dead one's pre-forked workers."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from typing import Any

import anyio
import pytest

from awb.errors import ToolRuntimeError
from awb.sandbox.cpython import handles
from awb.sandbox.cpython.runtime import CPythonRuntime
from awb.workbench import Workbench
from support import Announcing, until_running

pytestmark = pytest.mark.anyio

WAITER = {
    "name": "waiter",
    "description": "Say it started, then wait as long as it is told",
    "runtime": "cpython",
    "code": "import time\n\ndef run(params):\n    log('started')\n    time.sleep(params.get('s', 0))\n    return 1\n",
    "input_schema": {"type": "object", "properties": {"s": {"type": "number"}}},
}


async def cpython_of(workbench: Workbench) -> Announcing:
    if "cpython" not in workbench.runtimes:
        pytest.skip("no cpython runtime here")
    await workbench.craft(WAITER)
    runtime = Announcing(workbench.runtimes["cpython"])
    workbench.runtimes["cpython"] = runtime  # type: ignore[assignment]
    return runtime


def kill_zygote(runtime: Announcing) -> None:
    os.kill(runtime.inner._zygote.process.pid, signal.SIGKILL)


async def test_a_call_whose_zygote_dies_fails_at_once_and_the_next_call_runs(workbench: Workbench) -> None:
    runtime = await cpython_of(workbench)
    with anyio.fail_after(60):
        call = asyncio.ensure_future(workbench.call("waiter", {"s": 30}))
        await until_running(runtime)
        kill_zygote(runtime)
        # Before: "the sandbox worker died" after waiting a second for a report no one could send.
        with pytest.raises(ToolRuntimeError, match="died with the cpython zygote"):
            await call
        assert (await workbench.call("waiter", {})).result == 1


async def test_the_dead_zygotes_ready_workers_never_take_a_call(workbench: Workbench) -> None:
    runtime = await cpython_of(workbench)
    with anyio.fail_after(60):
        assert (await workbench.call("waiter", {})).result == 1  # the pool is filled
        kill_zygote(runtime)
        while not runtime.inner._zygote.dead:  # its control socket's end, read on the event loop
            await anyio.sleep(0.01)
        # Before: each pre-forked worker, dead with its zygote, failed a call in turn.
        for _ in range(3):
            assert (await workbench.call("waiter", {})).result == 1


async def test_a_start_cancelled_while_its_zygote_starts_leaves_no_zygote(monkeypatch: pytest.MonkeyPatch) -> None:
    # A server stopped while it warms up cancels the zygote's start. Before: the zygote was left
    # running, its control socket still open, after the server had exited.
    started: list[subprocess.Popen[bytes]] = []

    def popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    real_popen = subprocess.Popen
    monkeypatch.setattr(handles.subprocess, "Popen", popen)
    runtime = CPythonRuntime(pool_size=1, max_concurrent=2)
    try:
        with anyio.fail_after(30):
            start = asyncio.ensure_future(runtime.start())
            while not started:
                await anyio.sleep(0.001)
            start.cancel()
            with pytest.raises(asyncio.CancelledError):
                await start
        assert started[0].poll() is not None
    finally:
        await runtime.close()
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=5)
