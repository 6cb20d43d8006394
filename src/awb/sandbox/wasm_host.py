"""The `wasm` runtime's side of the guest ABI (`awb.sandbox.wasm` describes it): the three host
functions a module may import, reading and writing its linear memory within bounds, and what a
wasmtime failure or trap means as a workbench error.

Host functions find the running call through `current_call`, a context variable set for each run.
"""

from __future__ import annotations

import contextvars
import json
from dataclasses import dataclass, field
from typing import Any

from awb.errors import (
    ExecutionError,
    MemoryExceeded,
    OutputExceeded,
    SandboxViolation,
    ToolRuntimeError,
    ToolTimeout,
)
from awb.sandbox.base import HostFunctions, Limits
from awb.text import first_line

#: Largest text a host call takes from the module (its result goes out under the output cap).
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
PAGE_BYTES = 64 * 1024


@dataclass
class WasmCall:
    """What host functions of one running instance can reach."""

    host: HostFunctions | None
    logs: list[str] = field(default_factory=list)
    error: ExecutionError | None = None


current_call: contextvars.ContextVar[WasmCall] = contextvars.ContextVar("awb_wasm_call")


def wasmtime_error(exc: Any, limits: Limits) -> ExecutionError:
    message = first_line(exc)
    # The store limiter refuses a module at instantiation with an error (too large a minimum memory
    # or table, too many memories or tables).
    if "limit" in message and any(word in message for word in ("memory", "table", "resource")):
        return MemoryExceeded(
            f"the module needs more than its {limits.memory_mb} MB memory limit allows: {message}",
            limit_mb=limits.memory_mb,
        )
    if "unknown import" in message:
        return SandboxViolation(f"the module imports something the sandbox does not provide: {message}")
    return ToolRuntimeError(f"the module failed: {message}")


def out_of_memory(error: ExecutionError, memory: Any, store: Any, limits: Limits) -> ExecutionError:
    """`error`, or `memory_exceeded` when the module failed with its memory at the limit.

    A refused `memory.grow` only returns -1 and the module decides what follows (usually a trap), so the
    refusal itself is invisible; a memory within a sixteenth (at least a page) of the limit is the sign."""
    if not isinstance(error, ToolRuntimeError) or error.details.get("trap") == "stack_overflow" or memory is None:
        return error
    limit = limits.memory_mb * 1024 * 1024
    used = int(memory.data_len(store))
    if used + max(PAGE_BYTES, limit // 16) <= limit:
        return error
    return MemoryExceeded(
        f"the module ran out of memory: it failed with {used / 2**20:.1f} MB of its {limits.memory_mb} MB limit "
        "in use (memory.grow past the limit returns -1)",
        limit_mb=limits.memory_mb,
        used_mb=round(used / 2**20, 1),
        failure=error.message,
    )


def trap_error(exc: Any, limits: Limits) -> ExecutionError:
    import wasmtime

    code = getattr(exc, "trap_code", None)
    message = first_line(exc)
    if code == wasmtime.TrapCode.INTERRUPT:
        return ToolTimeout.past(limits.timeout_ms)
    if code == wasmtime.TrapCode.STACK_OVERFLOW:
        return ToolRuntimeError("stack overflow in the module", trap="stack_overflow")
    name = code.name.lower() if code is not None else "trap"
    return ToolRuntimeError(f"the module trapped ({name})", trap=name, detail=message[:500])


def read_memory(memory: Any, store: Any, ptr: int, length: int) -> bytes:
    if length > MAX_MESSAGE_BYTES * 2 or ptr < 0 or ptr + length > memory.data_len(store):
        raise ToolRuntimeError("the module pointed outside its memory")
    return bytes(memory.read(store, ptr, ptr + length))


def write_memory(memory: Any, store: Any, ptr: int, data: bytes) -> None:
    if ptr < 0 or ptr + len(data) > memory.data_len(store):
        raise ToolRuntimeError("alloc returned a pointer outside the module's memory")
    memory.write(store, data, ptr)


def make_linker(engine: Any) -> Any:
    """One linker per engine; host functions find their call through a context variable."""
    import wasmtime

    i32, i64 = wasmtime.ValType.i32(), wasmtime.ValType.i64()
    linker = wasmtime.Linker(engine)

    def guarded(fn: Any) -> Any:
        def wrapper(caller: Any, *args: int) -> Any:
            call = current_call.get()
            if call.host is None:
                call.error = SandboxViolation("host functions are not available while checking a module")
                raise call.error
            try:
                return fn(call, caller, *args)
            except ExecutionError as exc:
                call.error = exc
                raise
            except Exception as exc:
                call.error = ToolRuntimeError(f"host function failed: {exc}")
                raise call.error from None

        return wrapper

    def text(caller: Any, ptr: int, length: int) -> str:
        memory = caller.get("memory")
        if length > MAX_MESSAGE_BYTES:
            raise OutputExceeded(f"a host call argument of {length} bytes is over the cap")
        return read_memory(memory, caller, ptr, length).decode("utf-8", "replace")

    def give(caller: Any, payload: str) -> int:
        data = payload.encode("utf-8")
        ptr = int(caller.get("alloc")(caller, len(data)))
        write_memory(caller.get("memory"), caller, ptr, data)
        return (ptr << 32) | len(data)

    def log(call: WasmCall, caller: Any, ptr: int, length: int) -> None:
        assert call.host is not None
        call.host.log(text(caller, ptr, length))

    def read_file(call: WasmCall, caller: Any, ptr: int, length: int) -> int:
        assert call.host is not None
        return give(caller, call.host.read_file(text(caller, ptr, length)))

    def write_file(call: WasmCall, caller: Any, pp: int, pl: int, dp: int, dl: int) -> int:
        assert call.host is not None
        receipt = call.host.write_file(text(caller, pp, pl), text(caller, dp, dl))
        return give(caller, json.dumps(receipt))

    linker.define_func("awb", "log", wasmtime.FuncType([i32, i32], []), guarded(log), access_caller=True)
    linker.define_func("awb", "read_file", wasmtime.FuncType([i32, i32], [i64]), guarded(read_file), access_caller=True)
    linker.define_func(
        "awb", "write_file", wasmtime.FuncType([i32, i32, i32, i32], [i64]), guarded(write_file), access_caller=True
    )
    return linker
