"""Which runtimes this workbench has, how `python_runtime: auto` picks one, and what they protect."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from awb.config import Config
from awb.errors import ExecutionError, ToolRuntimeError, ToolTimeout, Unavailable
from awb.inventory.models import Example
from awb.sandbox.base import Limits, Runtime
from awb.sandbox.host import HostBridge
from awb.sandbox.identity import WorkerIdentity
from awb.sandbox.monty import MontyRuntime

if TYPE_CHECKING:
    import asyncio

    from awb.sandbox.cpython.handles import LaunchedZygote

log = logging.getLogger("awb.sandbox")


def limits_for(config: Config) -> Limits:
    """The limits every execution runs under, from the config."""
    return Limits(
        timeout_ms=config.tool_execution_timeout_ms,
        memory_mb=config.tool_memory_mb,
        max_output_bytes=config.max_output_bytes,
        max_log_bytes=config.sandbox.max_log_bytes,
    )


def build_runtimes(
    config: Config,
    *,
    preload: bool = True,
    launched_zygote: LaunchedZygote | None = None,
    launched_javascript: asyncio.subprocess.Process | None = None,
    launched_wasm: asyncio.subprocess.Process | None = None,
) -> dict[str, Runtime]:
    """Monty always; cpython on Linux; javascript and wasm when their packages are installed.
    `preload`: the cpython zygote imports the modules tools commonly need (False for one probe).
    `launched_zygote`, `launched_javascript`, `launched_wasm`: processes started ahead (`launch_zygote`,
    `javascript.launch_worker`, `wasm_compile.launch_compiler` without ids), which the runtimes configure and end.

    A runtime whose machine lacks protections is still listed: it raises `Unavailable` with the
    reason when used (and `describe_protections` says why)."""
    sandbox = config.sandbox
    # Every runtime can run `max_concurrent` calls at once (workers beyond the warm ones start on demand).
    monty = MontyRuntime(pool_size=sandbox.pool_size, max_processes=max(sandbox.pool_size, sandbox.max_concurrent))
    runtimes: dict[str, Runtime] = {"monty": monty}
    # One identity for all of this server's process workers: the other servers' workers are the strangers.
    identity = WorkerIdentity(sandbox.worker_uid)
    try:
        from awb.sandbox.cpython import CPythonRuntime

        grants = sorted({d for dirs in sandbox.grants.values() for d in dirs})
        runtimes["cpython"] = CPythonRuntime(
            pool_size=sandbox.pool_size,
            max_concurrent=sandbox.max_concurrent,
            grants=grants,
            allow_degraded=sandbox.allow_degraded_cpython,
            identity=identity,
            preload=preload,
            launched=launched_zygote,
        )
    except (ImportError, OSError) as exc:  # not Linux, or no ctypes/libc
        log.info("cpython runtime unavailable: %s", exc)
        if launched_zygote is not None:
            launched_zygote.discard()
    from awb.sandbox.javascript import JavaScriptRuntime, quickjs_missing

    if quickjs_missing() is None:
        runtimes["javascript"] = JavaScriptRuntime(
            pool_size=sandbox.pool_size,
            max_concurrent=sandbox.max_concurrent,
            identity=identity,
            launched=launched_javascript,
        )
    elif launched_javascript is not None:
        launched_javascript.kill()
    from awb.sandbox.wasm import WasmRuntime, wasmtime_missing

    if wasmtime_missing() is None:
        # No spare compile process without a warm pool (`awb doctor`'s one probe: pool_size 0).
        runtimes["wasm"] = WasmRuntime(
            max_concurrent=sandbox.max_concurrent,
            identity=identity,
            launched=launched_wasm,
            spare=sandbox.pool_size > 0,
        )
    elif launched_wasm is not None:
        launched_wasm.kill()
    return runtimes


#: How long `python_runtime: auto` lets one example run in Monty to learn whether Monty can run it.
PROBE_TIMEOUT_MS = 1000


async def choose_python_runtime(
    runtimes: dict[str, Runtime], code: str, examples: list[Example], limits: Limits
) -> str:
    """`python_runtime: auto`: Monty when it can load the code and run every example it has;
    `cpython` when Monty cannot run it (unsupported syntax or module). A tool that is simply wrong
    stays on Monty so the admission test reports its real error."""
    monty = runtimes.get("monty")
    if monty is None:
        return "cpython"
    # What Monty lacks shows at once (a parse error, an import, an unknown builtin): a probe that runs
    # longer is not one it cannot run, and the admission test runs the example in full after it. The
    # probe then stops: a looping tool's example cost its time limit twice (10 s for a 5 s limit).
    probe = replace(limits, timeout_ms=min(limits.timeout_ms, PROBE_TIMEOUT_MS))
    try:
        await monty.check(code, limits)
        for example in examples:
            host = HostBridge(read_dirs=[], stage=None, max_log_bytes=limits.max_log_bytes)
            try:
                await monty.execute(code, example.params, probe, host)
            except ToolTimeout:
                break
            except ExecutionError as exc:
                if _unsupported(exc):
                    raise
                # A wrong answer or an expected error is the admission test's business, not ours.
    except ExecutionError as exc:
        if _unsupported(exc) and "cpython" in runtimes:
            log.info("Monty cannot run this tool (%s); choosing cpython", exc.message)
            return "cpython"
    return "monty"


def _unsupported(exc: ExecutionError) -> bool:
    if isinstance(exc, ToolRuntimeError) and exc.details.get("unsupported"):
        return True
    # Syntax Monty does not implement surfaces as a parse error of valid Python.
    return isinstance(exc, ToolRuntimeError) and "does not parse" in exc.message


def describe_protections(runtimes: dict[str, Runtime]) -> dict[str, Any]:
    """For `awb doctor`: per runtime, its language, its protection layers and whether it will run."""
    report: dict[str, Any] = {}
    for name, runtime in sorted(runtimes.items()):
        entry: dict[str, Any] = {"language": runtime.language, "protections": runtime.protections()}
        refusal = getattr(runtime, "refusal", None)
        reason = refusal() if callable(refusal) else None
        if reason is None and name == "cpython":
            from awb.sandbox.cpython.runtime import REQUIRED_LAYERS

            missing = [layer for layer in REQUIRED_LAYERS if not entry["protections"].get(layer)]
            allow = getattr(runtime, "_allow_degraded", False)
            if missing and not allow:
                reason = f"protections missing on this machine: {', '.join(missing)}"
        entry["available"] = reason is None
        if reason is not None:
            entry["reason"] = reason
        report[name] = entry
    for name, why in _optional_missing(runtimes).items():
        report[name] = {"available": False, "reason": why}
    return report


def _optional_missing(runtimes: dict[str, Runtime]) -> dict[str, str]:
    from awb.sandbox.javascript import quickjs_missing
    from awb.sandbox.wasm import wasmtime_missing

    out: dict[str, str] = {}
    for name, check in (("javascript", quickjs_missing), ("wasm", wasmtime_missing)):
        reason = check()
        if name not in runtimes and reason is not None:
            out[name] = reason
    return out


__all__ = ["Unavailable", "build_runtimes", "choose_python_runtime", "describe_protections", "limits_for"]
