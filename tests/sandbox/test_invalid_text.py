"""Text no UTF-8 wire can carry (lone surrogates, invalid bytes), from every runtime: results become
`invalid_output`, logs and error messages are repaired, the runtime keeps serving, and every error
serialises to JSON."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
import wat

from awb.errors import ExecutionError
from awb.sandbox.base import Runtime
from awb.sandbox.cpython import CPythonRuntime
from awb.sandbox.javascript import JavaScriptRuntime
from awb.sandbox.monty import MontyRuntime
from awb.sandbox.wasm import WasmRuntime
from sandbox_support import LIMITS

pytestmark = pytest.mark.anyio

PYTHON = {
    "return": "def run(params):\n    return '\\ud800'\n",
    "key": "def run(params):\n    return {'\\udc00': 1}\n",
    "nested": "def run(params):\n    return [1, {'a': ['x\\udfff']}]\n",
    "print": "def run(params):\n    print('a\\ud800b')\n    return 1\n",
    "log": "def run(params):\n    log('a\\ud800b')\n    return 1\n",
    "raise": "def run(params):\n    raise ValueError('a\\ud800b')\n",
}
JAVASCRIPT = {
    "return": 'function run(p) { return "\\ud800"; }',
    "key": 'function run(p) { return {["\\udc00"]: 1}; }',
    "nested": 'function run(p) { return [1, {a: ["x\\udfff"]}]; }',
    "print": 'function run(p) { console.log("a\\ud800b"); return 1; }',
    "log": 'function run(p) { log("a\\ud800b"); return 1; }',
    "raise": 'function run(p) { throw new Error("a\\ud800b"); }',
}
NEXT = {"python": "def run(params):\n    return params['n'] + 1\n", "javascript": "function run(p) { return p.n + 1; }"}


@pytest.fixture(params=["cpython", "monty", "javascript"])
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[Runtime]:
    made: Runtime
    if request.param == "cpython":
        made = CPythonRuntime(pool_size=1)
    elif request.param == "monty":
        made = MontyRuntime()
    else:
        made = JavaScriptRuntime(pool_size=1)
    await made.start()
    try:
        yield made
    finally:
        await made.close()


async def outcome(runtime: Runtime, code: str, host: Any) -> tuple[str, Any]:
    """("ok", execution) or (error code, error); the error must serialise."""
    with anyio.fail_after(15):
        try:
            result = await runtime.execute(code, {}, LIMITS, host)
        except ExecutionError as exc:
            json.dumps(exc.to_dict(), ensure_ascii=False).encode("utf-8")
            return exc.code, exc
    json.dumps([result.value, result.logs], ensure_ascii=False).encode("utf-8")
    return "ok", result


@pytest.mark.parametrize("case", sorted(PYTHON))
async def test_lone_surrogates_end_structured_and_the_runtime_keeps_serving(
    runtime: Runtime, host_factory: Any, case: str
) -> None:
    code = (JAVASCRIPT if runtime.language == "javascript" else PYTHON)[case]
    host = host_factory()
    code_or_ok, got = await outcome(runtime, code, host)
    if case in ("return", "key", "nested"):
        # Monty's strings cannot hold a lone surrogate: it already repairs them to U+FFFD.
        assert code_or_ok == "invalid_output" or (runtime.name == "monty" and code_or_ok == "ok"), got
    elif case == "raise":
        assert code_or_ok == "runtime_error"
        assert "a" in got.message and "b" in got.message
    else:
        assert code_or_ok == "ok", got
        assert got.value == 1
        text = "".join(got.logs if case == "print" else host.logs)
        text.encode("utf-8")
        assert text.startswith("a") and text.rstrip("\n").endswith("b")
    with anyio.fail_after(15):
        nxt = await runtime.execute(NEXT[runtime.language], {"n": 1}, LIMITS, host_factory())
    assert nxt.value == 2


async def test_javascript_log_with_a_lone_surrogate_keeps_the_same_worker(host_factory: Any) -> None:
    runtime = JavaScriptRuntime(pool_size=1)
    await runtime.start()
    try:
        first = runtime._idle[0]
        for code in (JAVASCRIPT["log"], JAVASCRIPT["print"]):
            with anyio.fail_after(15):
                assert (await runtime.execute(code, {}, LIMITS, host_factory())).value == 1
        assert runtime._idle == [first] and first.process.returncode is None
    finally:
        await runtime.close()


INVALID_UTF8_LOG = """
(module
  (import "awb" "log" (func $log (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "a\\ed\\a0\\80b\\ff1")
  (func (export "alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32 i32) (result i64)
    (call $log (i32.const 16) (i32.const 5))
    (i64.or (i64.shl (i64.const 22) (i64.const 32)) (i64.const 1))))
"""


async def test_wasm_surrogate_result_is_invalid_output_and_invalid_utf8_logs_are_repaired(
    wasm: WasmRuntime, host_factory: Any
) -> None:
    code_or_ok, error = await outcome(wasm, wat.constant("\ud800"), host_factory())
    assert code_or_ok == "invalid_output", error
    host = host_factory()
    code_or_ok, result = await outcome(wasm, INVALID_UTF8_LOG, host)
    assert code_or_ok == "ok" and result.value == 1
    assert host.logs[0].startswith("a") and host.logs[0].endswith("b")
    assert (await wasm.execute(wat.constant(3), {}, LIMITS, host_factory())).value == 3
