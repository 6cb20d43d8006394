"""Plans that Monty cannot run, in the hardened CPython runtime instead.

Monty runs most plans; it lacks some standard modules (`statistics`, `heapq`, ...) and some syntax
(generators, `except*`). Such a plan runs in the CPython runtime's single-use, kernel-locked-down worker
(no network, no filesystem beyond a scratch directory, no process creation): the same generated
wrappers, imported the same way (`from servers import mail`), and the same single way out,
`call_tool`, which the worker sends to this host as a host call and the host bridges to the real MCP
client, counted and observed like every bridged call.

The worker may not create an event loop (its seccomp filter refuses sockets, which asyncio's loop
needs), so `asyncio` inside the plan is a small stand-in: `gather`, `sleep`, `wait_for`,
`create_task` and `run` work, and tool calls run one after another.
"""

from __future__ import annotations

import textwrap
from collections.abc import Awaitable, Callable
from typing import Any

from awb.errors import OutputExceeded, SandboxViolation, ToolRuntimeError
from awb.planner.codegen import CLIENT_SOURCE, Wrapper, identifier, module_source
from awb.sandbox.host import HostCallCount

#: (server, tool, payload) -> the tool's result; raises on failure.
Bridge = Callable[[str, str, dict[str, Any]], Awaitable[Any]]

# Runs inside the worker, after the plan's `main` is defined and before `run` is called. `call_tool` is
# the worker's host function; everything here is plain Python the worker's sandbox allows.
_PRELUDE = """
import sys as _awb_sys
import time as _awb_time
import types as _awb_types


def _awb_drive(coroutine):
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError(
        "a plan in the CPython runtime can await only the server wrappers and asyncio.gather, sleep, "
        "wait_for and create_task"
    )


def _awb_asyncio():
    shim = _awb_types.ModuleType("asyncio")
    shim.__doc__ = "awb's stand-in for asyncio in CPython plans: tool calls run one after another."

    async def gather(*awaitables, return_exceptions=False):
        results = []
        for awaitable in awaitables:
            try:
                results.append(await awaitable)
            except Exception as exc:
                if not return_exceptions:
                    raise
                results.append(exc)
        return results

    async def sleep(delay, result=None):
        _awb_time.sleep(min(max(float(delay), 0.0), 5.0))
        return result

    async def wait_for(awaitable, timeout=None):
        return await awaitable

    def create_task(coroutine, **_):
        return coroutine

    shim.gather, shim.sleep, shim.wait_for = gather, sleep, wait_for
    shim.create_task = shim.ensure_future = create_task
    shim.run = lambda coroutine, **_: _awb_drive(coroutine)
    shim.TimeoutError = TimeoutError
    shim.CancelledError = type("CancelledError", (BaseException,), {})
    return shim


def _awb_install(modules, client_source):
    host_call_tool = call_tool

    def module(name, package, source=None):
        made = _awb_types.ModuleType(name)
        made.__package__ = package
        _awb_sys.modules[name] = made
        if source is not None:
            exec(compile(source, "<" + name + ">", "exec"), made.__dict__)
        return made

    module("_awb_plan", "_awb_plan").__path__ = []
    client = module("_awb_plan.client", "_awb_plan", client_source)

    async def bridged(server, tool, payload):
        return host_call_tool(server, tool, payload)

    client.register_tool_caller(bridged)
    servers = module("_awb_plan.servers", "_awb_plan.servers")
    servers.__path__ = []
    for name, source in modules.items():
        setattr(servers, name, module("_awb_plan.servers." + name, "_awb_plan.servers", source))
    _awb_sys.modules["servers"] = servers
    _awb_sys.modules["asyncio"] = _awb_asyncio()
"""


def cpython_source(code_body: str, grouped: dict[str, list[Wrapper]]) -> str:
    """The tool module a plan runs as in the CPython runtime. The plan comes first, so its line N is
    line N + 1 in a traceback; the servers are installed as modules before `run` calls `main`."""
    body = textwrap.indent(textwrap.dedent(code_body).strip("\n") or "pass", "    ")
    modules = {identifier(server): module_source(server, wrappers) for server, wrappers in grouped.items()}
    imports = f"from servers import {', '.join(modules)}\n" if modules else ""
    return (
        f"async def main():\n{body}\n\n"
        + _PRELUDE
        + f"\n_awb_install({modules!r}, {CLIENT_SOURCE!r})\n"
        + imports
        + "import asyncio\n\n\ndef run(params):\n    return _awb_drive(main())\n"
    )


class PlanHost(HostCallCount):
    """The host functions of one CPython plan: capped prints, no files, and `call_tool`. Each host call
    (`log`, a file call, a malformed one) is a round trip the server answers on its event loop, so a
    plan makes at most as many as a tool's call may; past them the runtime ends the plan
    (`end_if_exhausted`)."""

    counted_as = "the plan"

    def __init__(self, bridge: Bridge, *, max_log_bytes: int) -> None:
        self._bridge = bridge
        self._max_log_bytes = max_log_bytes
        self._log_bytes = 0
        self.logs: list[str] = []

    def log(self, message: str) -> None:
        self.count_call()
        size = len(message.encode("utf-8", "replace"))
        if self._log_bytes + size > self._max_log_bytes:
            raise OutputExceeded(f"the plan's log is over the {self._max_log_bytes}-byte cap")
        self._log_bytes += size
        self.logs.append(message)

    def read_file(self, path: str) -> str:
        self.count_call()
        raise SandboxViolation("a plan has no filesystem: its only way out is the servers' tools", path=path[:200])

    def write_file(self, path: str, data: str) -> dict[str, Any]:
        self.count_call()
        raise SandboxViolation("a plan has no filesystem: its only way out is the servers' tools", path=path[:200])

    async def call_tool(self, server: str, tool: str, payload: dict[str, Any]) -> Any:
        try:
            return await self._bridge(server, tool, payload)
        except ToolRuntimeError:
            raise
        except Exception as exc:  # the plan sees a failed tool call as an exception it may catch
            raise ToolRuntimeError(str(exc)) from None
