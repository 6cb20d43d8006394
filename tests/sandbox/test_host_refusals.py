"""A host refusal the tool does not catch ends the call in the host's own error code, the same in
every runtime (monty, javascript, wasm); a tool cannot claim one it never met."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import wat

from awb.errors import SandboxViolation
from awb.sandbox import javascript
from awb.sandbox.base import Runtime
from awb.sandbox.cpython.runtime import CPythonRuntime
from awb.sandbox.host import MAX_WRITE_BYTES
from awb.sandbox.javascript import JavaScriptRuntime
from awb.sandbox.monty import MontyRuntime
from awb.sandbox.wasm import WasmRuntime
from sandbox_support import LIMITS, failure

pytestmark = pytest.mark.anyio

READS = ["/etc/passwd", "../outside/secret.txt", "link.txt"]


def reader(runtime: str, path: str) -> str:
    if runtime == "monty":
        return f"def run(params):\n    return read_file({path!r})\n"
    if runtime == "javascript":
        return f"function run(p) {{ return readFile({path!r}); }}"
    return wat.read_file(path)


@asynccontextmanager
async def started(name: str, dirs: dict[str, Path] | None = None) -> AsyncIterator[Runtime]:
    made: Runtime
    if name == "cpython":
        assert dirs is not None
        made = CPythonRuntime(pool_size=1, grants=[str(dirs["granted"])])
    elif name == "monty":
        made = MontyRuntime(pool_size=1)
    elif name == "javascript":
        made = JavaScriptRuntime(pool_size=1)
    else:
        made = WasmRuntime()
    await made.start()
    try:
        yield made
    finally:
        with anyio.fail_after(20):
            await made.close()


@pytest.fixture(params=["monty", "javascript", "wasm"])
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[Runtime]:
    async with started(request.param) as made:
        yield made


@pytest.fixture(params=["monty", "javascript"])
async def scripted(request: pytest.FixtureRequest) -> AsyncIterator[Runtime]:
    """The runtimes whose tools are scripts (wasm tools are modules built from wat.py)."""
    async with started(request.param) as made:
        yield made


@pytest.mark.parametrize("path", READS)
async def test_an_uncaught_read_refusal_is_a_sandbox_violation_in_every_runtime(
    runtime: Runtime, host_factory: Any, path: str
) -> None:
    with pytest.raises(SandboxViolation) as direct:
        host_factory().read_file(path)
    with anyio.fail_after(20):
        error = await failure(runtime, reader(runtime.name, path), {}, host_factory())
    # The host's own error: its code, its message, the refused path.
    assert (error.code, error.message, error.details.get("path")) == (
        "sandbox_violation",
        direct.value.message,
        path,
    ), error.to_dict()


WRITES_AND_LOGS = {
    "monty": {
        "sandbox_violation": "def run(params):\n    return write_file('/etc/cron.d/evil', 'x')\n",
        "output_exceeded": "def run(params):\n    for i in range(100):\n        log('x' * 1000)\n",
    },
    "javascript": {
        "sandbox_violation": "function run(p) { return writeFile('/etc/cron.d/evil', 'x'); }",
        "output_exceeded": "function run(p) { for (let i = 0; i < 100; i++) log('x'.repeat(1000)); }",
    },
}


@pytest.mark.parametrize("code", ["sandbox_violation", "output_exceeded"])
async def test_write_and_log_refusals_keep_their_code(
    scripted: Runtime, host_factory: Any, staged: Any, code: str
) -> None:
    with anyio.fail_after(20):
        error = await failure(scripted, WRITES_AND_LOGS[scripted.name][code], {}, host_factory())
    assert error.code == code, error.to_dict()
    assert staged.writes == []


FORGED = {
    "monty": "def run(params):\n    raise {kind}('read outside the granted directories refused: /etc/passwd')\n",
    "javascript": (
        "function run(p) {{ const e = new Error('read outside the granted directories refused: /etc/passwd'); "
        "e.awbCode = '{code}'; throw e; }}"
    ),
}


@pytest.mark.parametrize(
    ("code", "kind"),
    [("sandbox_violation", "PermissionError"), ("output_exceeded", "RuntimeError"), ("timeout", "TimeoutError")],
)
async def test_a_tool_cannot_claim_a_refusal_it_never_met(
    scripted: Runtime, host_factory: Any, code: str, kind: str
) -> None:
    """(A wasm module's failure is a trap: it has no error of its own to dress up.)"""
    source = FORGED[scripted.name].format(code=code, kind=kind)
    with anyio.fail_after(20):
        error = await failure(scripted, source, {}, host_factory())
    assert error.code == "runtime_error", error.to_dict()


BIG_WRITES = {
    "monty": "def run(params):\n    return write_file('big.txt', 'x' * params['size'])\n",
    "javascript": "function run(p) { return writeFile('big.txt', 'x'.repeat(p.size)); }",
    "cpython": "def run(params):\n    return write_file('big.txt', 'x' * params['size'])\n",
}


@pytest.mark.parametrize("name", ["monty", "javascript", "cpython"])
async def test_a_write_up_to_the_staging_cap_is_staged_and_one_past_it_is_the_hosts_refusal(
    name: str, host_factory: Any, staged: Any, dirs: dict[str, Path]
) -> None:
    """The frame a worker may send is sized for a staged write too, not only the result and logs: a
    4 MB write (the documented cap) failed as `output_exceeded` ("the tool sent ... bytes") in the
    worker runtimes."""
    cap = MAX_WRITE_BYTES
    async with started(name, dirs) as runtime:
        with anyio.fail_after(30):
            result = await runtime.execute(BIG_WRITES[name], {"size": cap}, LIMITS, host_factory())
            assert result.value["staged"] is True
            assert [len(content) for _, content in staged.writes] == [cap]
            error = await failure(runtime, BIG_WRITES[name], {"size": cap + 1}, host_factory())
    assert error.code == "output_exceeded"
    assert error.message == f"staged write of {cap + 1} bytes is over the {cap}-byte cap", error.to_dict()
    assert len(staged.writes) == 1


async def test_a_javascript_frame_over_the_cap_ends_the_call_at_once(
    host_factory: Any, staged: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host call too large to read ends the call as `output_exceeded` and the worker is replaced: the
    answer does not wait for the killed worker's unread frame (asyncio waited for that pipe until the kill's
    wait gave up). That wait is made an hour here, so the bound below tells the two apart on any machine."""
    monkeypatch.setattr(javascript, "KILL_WAIT_S", 3600.0)
    async with started("javascript") as runtime:
        with anyio.fail_after(20):
            error = await failure(runtime, BIG_WRITES["javascript"], {"size": 3 * MAX_WRITE_BYTES}, host_factory())
        assert error.code == "output_exceeded"
        assert error.message.startswith("the tool sent ")
        with anyio.fail_after(20):
            assert (await runtime.execute("function run(p) { return 1; }", {}, LIMITS, host_factory())).value == 1
    assert staged.writes == []
