"""Starting a runtime: calls that arrive together on a runtime never started start it once."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import wat

from awb.errors import Unavailable
from awb.sandbox import javascript, wasm_compile
from awb.sandbox.base import Execution, Limits
from awb.sandbox.cpython import CPythonRuntime
from awb.sandbox.identity import WorkerIdentity
from awb.sandbox.javascript import JavaScriptRuntime
from awb.sandbox.wasm import WasmRuntime
from sandbox_support import LIMITS

pytestmark = pytest.mark.anyio

#: Each runtime with a tool that returns {"ok": 1} from its params.
RUNTIMES: dict[str, tuple[Callable[[WorkerIdentity, Path], Any], str]] = {
    "wasm": (lambda identity, _: WasmRuntime(identity=identity), wat.ECHO),
    "javascript": (
        lambda identity, _: JavaScriptRuntime(pool_size=1, identity=identity),
        "function run(params) { return params; }",
    ),
    "cpython": (
        lambda identity, granted: CPythonRuntime(pool_size=1, identity=identity, grants=[str(granted)]),
        "def run(params):\n    return params\n",
    ),
}


class CountingIdentity(WorkerIdentity):
    """Counts claims: each `acquire` is a hold that one `release` gives back."""

    def __init__(self) -> None:
        super().__init__()
        self.acquired = 0

    def acquire(self) -> tuple[int, int]:
        self.acquired += 1
        return super().acquire()


@pytest.mark.parametrize("name", list(RUNTIMES))
async def test_two_first_calls_together_start_the_runtime_once(
    name: str, dirs: dict[str, Path], host_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    launched = 0
    launchers: list[tuple[Any, str]] = [(wasm_compile, "launch_compiler"), (javascript, "launch_worker")]
    for module, attribute in launchers:
        real = getattr(module, attribute)

        async def counting(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            nonlocal launched
            launched += 1
            return await _real(*args, **kwargs)

        monkeypatch.setattr(module, attribute, counting)
    make, code = RUNTIMES[name]
    identity = CountingIdentity()
    runtime = make(identity, dirs["granted"])
    limits = Limits(timeout_ms=10_000, memory_mb=LIMITS.memory_mb)
    try:
        with anyio.fail_after(30):
            results = await asyncio.gather(
                runtime.execute(code, {"ok": 1}, limits, host_factory()),
                runtime.execute(code, {"ok": 1}, limits, host_factory()),
            )
        assert [result.value for result in results] == [{"ok": 1}, {"ok": 1}]
        # One claim of the worker identity, given back once at close; a second would keep its lock for ever.
        assert identity.acquired == 1
        if name == "wasm":  # the one started with the runtime, and one ahead of each call's compile
            assert launched <= 3
        elif name == "javascript":  # the pool's one worker, and one for the call that found none idle
            assert launched <= 2
    finally:
        await runtime.close()
    assert identity.ids is None


class GatedIdentity(CountingIdentity):
    """Holds each claim at `gate` until the test opens it: the runtime's start waits there."""

    def __init__(self) -> None:
        super().__init__()
        self.claiming = threading.Event()
        self.gate = threading.Event()

    def acquire(self) -> tuple[int, int]:
        self.claiming.set()
        self.gate.wait(20)
        return super().acquire()


def _children() -> set[int]:
    """The processes this one started and has not reaped."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
                    found.add(int(entry.name))
    return found


def _runtime_threads() -> list[str]:
    return [thread.name for thread in threading.enumerate() if thread.name.startswith("awb-wasm-epoch")]


@pytest.mark.parametrize("name", list(RUNTIMES))
async def test_a_close_that_arrives_while_the_runtime_starts_leaves_nothing_running(
    name: str, dirs: dict[str, Path], host_factory: Any
) -> None:
    make, code = RUNTIMES[name]
    identity = GatedIdentity()
    runtime = make(identity, dirs["granted"])
    limits = Limits(timeout_ms=10_000, memory_mb=LIMITS.memory_mb)
    children = _children()
    try:
        with anyio.fail_after(30):
            call = asyncio.ensure_future(runtime.execute(code, {"ok": 1}, limits, host_factory()))
            await asyncio.to_thread(identity.claiming.wait, 20)  # the start waits on the identity's claim
            closing = asyncio.ensure_future(runtime.close())
            for _ in range(20):  # the close goes as far as it can while the start waits
                await asyncio.sleep(0)
            identity.gate.set()
            # The call accepted before the close ends as any call under way at a close does: it finishes,
            # or it is refused as closed, not failed with an internal error or a dead zygote's.
            outcome = (await asyncio.gather(call, return_exceptions=True))[0]
            await closing
        assert isinstance(outcome, Execution) or (isinstance(outcome, Unavailable) and "closed" in outcome.message), (
            repr(outcome)
        )
        # Whatever the start went on to launch after the close arrived, the close ended.
        assert identity.ids is None
        assert _children() <= children
        assert _runtime_threads() == []
        # A closed runtime is an unstarted one: the next call starts it again, and its close ends it all.
        with anyio.fail_after(30):
            assert (await runtime.execute(code, {"ok": 1}, limits, host_factory())).value == {"ok": 1}
    finally:
        identity.gate.set()
        await runtime.close()
    assert identity.ids is None
    assert _children() <= children
    assert _runtime_threads() == []


async def test_a_javascript_worker_launched_across_a_close_runs_nothing_and_the_call_is_refused(
    host_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that found no idle worker launches one with the runtime's ids; a close while that launch is
    under way gives the ids back, so the worker, started with them, must run nothing: another server may
    claim them at once."""
    real = javascript.launch_worker
    launched: list[asyncio.subprocess.Process] = []
    in_launch = asyncio.Event()
    gate = asyncio.Event()

    async def slow_launch(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        process = await real(*args, **kwargs)
        launched.append(process)
        in_launch.set()
        await gate.wait()  # the close comes while the launch is under way
        return process

    runtime = JavaScriptRuntime(pool_size=0, identity=CountingIdentity())
    limits = Limits(timeout_ms=10_000, memory_mb=LIMITS.memory_mb)
    try:
        with anyio.fail_after(30):
            await runtime.start()
            monkeypatch.setattr(javascript, "launch_worker", slow_launch)
            call = asyncio.ensure_future(runtime.execute("function run(p) { return p; }", {}, limits, host_factory()))
            await in_launch.wait()
            await runtime.close()
            gate.set()
            outcome = (await asyncio.gather(call, return_exceptions=True))[0]
            assert isinstance(outcome, Unavailable), outcome
            assert "closed" in outcome.message
            assert launched and await launched[0].wait() is not None  # ended, not left to run a tool
    finally:
        gate.set()
        await runtime.close()
