"""One run of a loaded WebAssembly module, on the thread `WasmRuntime` gives it: its store (memory and
table limits, the epoch deadline), then the ABI (export `memory`, `alloc(len)` and `run(ptr, len)`; params
in as UTF-8 JSON, the result out, packed), every way it can fail told as the call's error."""

from __future__ import annotations

import contextvars
import json
from typing import Any

from awb.errors import ExecutionError, OutputExceeded, ToolRuntimeError
from awb.sandbox.base import Limits
from awb.sandbox.wasm_host import (
    WasmCall,
    out_of_memory,
    read_memory,
    trap_error,
    wasmtime_error,
    write_memory,
)
from awb.text import first_line

#: Table entries cost host memory that the store's memory limit does not count; modules use a few thousand.
MAX_TABLE_ELEMENTS = 100_000

#: Where `execute` collects the run's peak memory; the worker thread sees it through the copied context.
#: Linear memory never shrinks, so its size when the run ends is the run's peak.
peak_memory: contextvars.ContextVar[list[int]] = contextvars.ContextVar("awb_wasm_peak_memory")


def run_module(
    engine: Any,
    linker: Any,
    module: Any,
    params: dict[str, Any],
    limits: Limits,
    call: WasmCall,
    check: bool,
    *,
    deadline: int,
) -> tuple[Any, list[str]]:
    """Run `module` (instantiate only, if `check`) with `params`, stopped after `deadline` epochs: the
    value its `run` returned and the call's logs."""
    import wasmtime

    # The store holds the module's linear memory (up to the limit, in this process). It is closed
    # when the call ends, whatever the ending: a failed call's exception refers to the frame that
    # ran it and the frame to the store, so leaving it to reference counting kept it until the
    # cycle collector ran (a client repeating a failing call held gigabytes).
    store = wasmtime.Store(engine)
    try:
        store.set_limits(
            memory_size=limits.memory_mb * 1024 * 1024,
            table_elements=MAX_TABLE_ELEMENTS,
            instances=1,
            tables=4,
            memories=1,
        )
        store.set_epoch_deadline(deadline)
        return _run_in(store, linker, module, params, limits, call, check)
    finally:
        store.close()


def _run_in(
    store: Any,
    linker: Any,
    module: Any,
    params: dict[str, Any],
    limits: Limits,
    call: WasmCall,
    check: bool,
) -> tuple[Any, list[str]]:
    import wasmtime

    memory: Any = None
    error: ExecutionError
    try:
        instance = linker.instantiate(store, module)
        exports = instance.exports(store)
        memory, alloc, run = exports.get("memory"), exports.get("alloc"), exports.get("run")
        if (
            not isinstance(memory, wasmtime.Memory)
            or not isinstance(alloc, wasmtime.Func)
            or not isinstance(run, wasmtime.Func)
        ):
            raise ToolRuntimeError(
                "the module must export `memory`, `alloc(len: i32) -> i32` and `run(ptr: i32, len: i32) -> i64`"
                " (params: UTF-8 JSON at [ptr, ptr+len); returns (result_ptr << 32) | result_len of UTF-8 JSON)"
            )
        if check:
            return None, []
        data = json.dumps(params, ensure_ascii=False).encode("utf-8")
        ptr = int(alloc(store, len(data)))
        write_memory(memory, store, ptr, data)
        packed = int(run(store, ptr, len(data))) & 0xFFFFFFFFFFFFFFFF
        peak_memory.get([]).append(int(memory.data_len(store)))
        out_ptr, out_len = packed >> 32, packed & 0xFFFFFFFF
        if out_len > limits.max_output_bytes:
            raise OutputExceeded(
                f"tool output is {out_len} bytes, over the {limits.max_output_bytes}-byte cap",
                size=out_len,
                limit=limits.max_output_bytes,
            )
        text = read_memory(memory, store, out_ptr, out_len).decode("utf-8", "replace")
        try:
            value = json.loads(text) if text.strip() else None
        except json.JSONDecodeError as exc:
            raise ToolRuntimeError(f"the module's result is not JSON: {exc}") from None
        return value, call.logs
    except wasmtime.Trap as exc:
        error = call.error or trap_error(exc, limits)
    except wasmtime.WasmtimeError as exc:
        error = call.error or wasmtime_error(exc, limits)
    except ExecutionError as exc:
        error = exc
    except Exception as exc:
        error = call.error or ToolRuntimeError(f"the module failed: {first_line(exc)}")
    memory = memory if isinstance(memory, wasmtime.Memory) else None
    raise out_of_memory(error, memory, store, limits) from None


__all__ = ["MAX_TABLE_ELEMENTS", "peak_memory", "run_module"]
