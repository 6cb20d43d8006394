"""The wasm runtime's compile processes: one started ahead of its ids (as `awb doctor` starts one), and
the spare kept started ahead of each compile."""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import pytest
import wat

from awb.sandbox import wasm_compile
from awb.sandbox.wasm import WasmRuntime, wasmtime_missing
from sandbox_support import LIMITS

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(wasmtime_missing() is not None, reason="the wasm runtime needs wasmtime"),
]


async def test_a_compile_process_launched_ahead_is_sent_its_ids_and_compiles_the_first_call(
    host_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`awb doctor` starts a compile process before it has loaded its config (and so before the worker ids
    are claimed): the runtime sends it its ids, and without a spare starts no other."""
    launched = await wasm_compile.launch_compiler(sys.executable)
    started: list[tuple[int, int] | None] = []

    async def no_other_process(python: str, worker_ids: tuple[int, int] | None = None) -> Any:
        started.append(worker_ids)
        raise OSError("the runtime started a compile process of its own")

    monkeypatch.setattr(wasm_compile, "launch_compiler", no_other_process)
    runtime = WasmRuntime(launched=launched, spare=False)
    try:
        with anyio.fail_after(30):
            assert (await runtime.execute(wat.constant(7), {}, LIMITS, host_factory())).value == 7
        if os.geteuid() == 0:  # the process left root for the ids it was sent
            assert runtime._compilers.layers["unprivileged_uid"]
    finally:
        await runtime.close()
    assert started == []
    assert launched.returncode is not None


async def test_a_runtime_closed_before_it_started_ends_the_compile_process_launched_for_it() -> None:
    launched = await wasm_compile.launch_compiler(sys.executable)
    with anyio.fail_after(10):
        await WasmRuntime(launched=launched).close()
    assert launched.returncode is not None
