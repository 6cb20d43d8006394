"""Fixtures for the sandbox tests: started runtimes, a host bridge, a granted directory with a
secret beside it, and the hostile-tool helpers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from awb.sandbox.cpython import CPythonRuntime
from awb.sandbox.host import HostBridge
from awb.sandbox.javascript import JavaScriptRuntime
from awb.sandbox.wasm import WasmRuntime
from sandbox_support import LIMITS, SECRET, Staged


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    """`granted/` holding data.txt and a symlink to `outside/secret.txt`."""
    granted, outside = tmp_path / "granted", tmp_path / "outside"
    granted.mkdir()
    outside.mkdir()
    (granted / "data.txt").write_text("hello from a granted dir")
    (outside / "secret.txt").write_text(SECRET)
    (granted / "link.txt").symlink_to(outside / "secret.txt")
    return {"granted": granted, "outside": outside, "root": tmp_path}


@pytest.fixture
def staged() -> Staged:
    return Staged()


@pytest.fixture
def host_factory(dirs: dict[str, Path], staged: Staged) -> Any:
    def make(grant: bool = True) -> HostBridge:
        return HostBridge(
            read_dirs=[str(dirs["granted"])] if grant else [], stage=staged, max_log_bytes=LIMITS.max_log_bytes
        )

    return make


@pytest.fixture
async def cpython(dirs: dict[str, Path]) -> AsyncIterator[CPythonRuntime]:
    runtime = CPythonRuntime(pool_size=2, max_concurrent=40, grants=[str(dirs["granted"])])
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.close()


@pytest.fixture
async def javascript() -> AsyncIterator[JavaScriptRuntime]:
    runtime = JavaScriptRuntime(pool_size=2, max_concurrent=40)
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.close()


@pytest.fixture
async def wasm() -> AsyncIterator[WasmRuntime]:
    runtime = WasmRuntime(max_concurrent=40)
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.close()
