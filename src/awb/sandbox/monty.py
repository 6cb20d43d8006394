"""The default Python runtime: pydantic-monty, a Python interpreter with no filesystem, network or
environment by design, run in a pool of crash-isolated worker processes kept warm by the server."""

from __future__ import annotations

import time
from typing import Any

import pydantic_monty as pm

from awb.errors import (
    ExecutionError,
    MemoryExceeded,
    OutputExceeded,
    SandboxViolation,
    ToolRuntimeError,
    ToolTimeout,
)
from awb.sandbox.base import Execution, HostFunctions, Limits, encode_output

SCRIPT_NAME = "tool.py"
# The entry point is called in the same feed as the definition so that limits, host functions and
# the print sink apply to one run; a sentinel name keeps the call line out of the tool's traceback.
_CALL_LINE = "\n\nrun(params)\n"
_CHECK_LINE = "\n\n__awb_entry = run\nNone\n"
#: Exceptions that mean "Monty cannot run this code", as opposed to "the code is wrong".
UNSUPPORTED = ("NotImplementedError", "ModuleNotFoundError", "ImportError")


class MontyRuntime:
    name = "monty"
    language = "python"

    def __init__(self, pool_size: int = 2, max_processes: int | None = None) -> None:
        self._pool_size = pool_size
        self._max_processes = max_processes or max(pool_size, 4)
        self._pool: pm.AsyncMonty | None = None

    async def start(self) -> None:
        if self._pool is None:
            pool = pm.AsyncMonty(
                min_processes=self._pool_size,
                max_processes=self._max_processes,
                feed_duration_limit_grace=1.0,
            )
            await pool.__aenter__()
            self._pool = pool

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.__aexit__(None, None, None)

    def protections(self) -> dict[str, bool]:
        return {"no_filesystem": True, "no_network": True, "no_environment": True, "worker_process": True}

    async def execute(self, code: str, params: dict[str, Any], limits: Limits, host: HostFunctions) -> Execution:
        started = time.perf_counter()
        value, logs = await self._feed(code + _CALL_LINE, params, limits, host)
        encode_output(value, limits.max_output_bytes)
        return Execution(value=value, logs=logs, duration_ms=(time.perf_counter() - started) * 1000)

    async def check(self, code: str, limits: Limits) -> None:
        await self._feed(code + _CHECK_LINE, {}, limits, None)

    async def _feed(
        self, source: str, params: dict[str, Any], limits: Limits, host: HostFunctions | None
    ) -> tuple[Any, list[str]]:
        await self.start()
        assert self._pool is not None
        prints = pm.CollectString(max_bytes=limits.max_log_bytes)
        lookup: dict[str, Any] = {}
        if host is not None:
            lookup = {"log": host.log, "read_file": host.read_file, "write_file": host.write_file}
        session_limits: pm.ResourceLimits = {
            "max_feed_duration_secs": limits.timeout_ms / 1000,
            "max_memory": limits.memory_mb * 1024 * 1024,
        }
        try:
            async with self._pool.checkout(script_name=SCRIPT_NAME, limits=session_limits) as session:
                value = await session.feed_run(
                    source, inputs={"params": params}, external_lookup=lookup, print_callback=prints
                )
        except pm.MontyRuntimeError as exc:
            raise _runtime_error(exc, limits) from None
        except pm.MontySyntaxError as exc:
            raise ToolRuntimeError(
                f"the tool's code does not parse: {exc}", traceback=exc.display("traceback")
            ) from None
        except pm.MontyCrashedError as exc:
            if exc.timed_out:
                raise ToolTimeout(f"the tool ran past {limits.timeout_ms} ms", limit_ms=limits.timeout_ms) from None
            raise ToolRuntimeError(f"the sandbox worker died: {exc}") from None
        except pm.MontyError as exc:
            raise ToolRuntimeError(f"the sandbox refused the tool: {exc}") from None
        output = prints.output
        return value, [output] if output else []


def _runtime_error(exc: pm.MontyRuntimeError, limits: Limits) -> ExecutionError:
    inner = exc.exception()
    kind = type(inner).__name__
    message = str(inner)
    traceback = _tool_traceback(exc)
    if kind == "TimeoutError" and "time limit" in message:
        return ToolTimeout(f"the tool ran past {limits.timeout_ms} ms", limit_ms=limits.timeout_ms)
    if kind == "MemoryError":
        return MemoryExceeded(f"the tool went over its {limits.memory_mb} MB memory limit", limit_mb=limits.memory_mb)
    if kind == "PermissionError":
        return SandboxViolation(f"the sandbox refused an operation: {message}", traceback=traceback)
    if "output" in message and "limit" in message:
        return OutputExceeded(message)
    return ToolRuntimeError(f"{kind}: {message}", exception=kind, traceback=traceback, unsupported=kind in UNSUPPORTED)


def _tool_traceback(exc: pm.MontyRuntimeError) -> list[str]:
    """The traceback lines that belong to the tool's own code (not our call line)."""
    lines = []
    for frame in exc.traceback():
        if frame.function_name == "<module>" and (frame.source_line or "").strip() in ("run(params)", ""):
            continue
        source = (frame.source_line or "").strip()
        lines.append(f"line {frame.line}, in {frame.function_name}: {source}")
    lines.append(exc.display("type-msg"))
    return lines
