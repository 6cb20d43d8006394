"""Run one model-written Python plan in the sandbox, where the only way out is `call_tool`.

The plan is the body of `async def main()`. It runs in Monty (no filesystem, network or environment,
exact time and memory limits, in a worker process), with every connected server importable as
`from servers import <server>`: each tool a host function that the runner bridges to the real MCP
client, counted against the plan's limit and reported to the caller.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import pydantic_monty as pm

from awb.agents.toolbox import Toolbox, ToolOutcome, ToolSpec
from awb.errors import AwbError
from awb.planner.calls import CallMade
from awb.planner.codegen import Wrapper, group_wrappers, identifier, module_source
from awb.planner.cpython_plan import PlanHost, cpython_source
from awb.redaction import redact_record
from awb.sandbox.base import Limits, Runtime
from awb.sandbox.monty import print_cap_hit
from awb.text import MAX_RESULT_DEPTH, nesting_depth, surrogates_replaced

#: Called for every bridged tool call: (server, tool, payload, ok, duration_ms); the payload redacted, its
#: strings cut as a record's (`redact_record`).
CallObserver = Callable[[str, str, dict[str, Any], bool, float], None]
#: `auto`: Monty, and CPython for plans Monty cannot run; or one of them only.
PlanRuntime = Literal["auto", "monty", "cpython"]
_SCRIPT = "plan.py"
#: How long an ended plan waits for its cancelled tool calls to unwind before it reports.
CANCEL_GRACE_SECONDS = 0.25
#: A failed plan's error as the model and the caller get it: a traceback carried the plan's whole exception
#: message (50 MB of it took 5 s of the event loop to redact on its way to the model).
MAX_PLAN_ERROR_CHARS = 4000


@dataclass
class SandboxResult:
    success: bool
    result: Any = None
    logs: list[str] = field(default_factory=list)
    error: str | None = None
    timed_out: bool = False
    tool_calls: int = 0
    #: The tool calls the plan made, in order, and how each went (a refused call is not one).
    calls: list[CallMade] = field(default_factory=list)
    #: A stable code when the plan failed: `timeout`, `limit_exceeded`, `memory_exceeded`,
    #: `output_exceeded`, `runtime_error`, `sandbox_violation`.
    error_code: str | None = None
    #: Where the plan ran: `monty`, or `cpython` for plans Monty cannot run.
    runtime: str = "monty"


class PlanToolError(Exception):
    """A bridged tool call failed; the plan sees it as an exception it may catch."""


class PlanRunner:
    """Runs plans against one toolbox; one Monty worker pool for all of them, closed with `close()`."""

    def __init__(
        self,
        toolbox: Toolbox,
        *,
        max_tool_calls: int = 30,
        memory_mb: int = 256,
        max_log_bytes: int = 64 * 1024,
        max_output_bytes: int = 1024 * 1024,
        on_call: CallObserver | None = None,
        runtime: PlanRuntime = "auto",
        cpython: Runtime | None = None,
    ) -> None:
        self._toolbox = toolbox
        self._runtime: PlanRuntime = runtime
        #: The CPython runtime for plans Monty cannot run: given, or started on first need and owned.
        self._cpython = cpython
        self._owns_cpython = False
        self._max_tool_calls = max_tool_calls
        self._memory_mb = memory_mb
        self._max_log_bytes = max_log_bytes
        self._max_output_bytes = max_output_bytes
        self._on_call = on_call
        self._pool: pm.AsyncMonty | None = None
        self._grouped_from = toolbox.specs("tool")
        self._grouped = group_wrappers(self._grouped_from)

    @property
    def servers(self) -> list[str]:
        return list(self._grouped)

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.__aexit__(None, None, None)
        if self._cpython is not None and self._owns_cpython:
            runtime, self._cpython = self._cpython, None
            await runtime.close()

    async def __aenter__(self) -> PlanRunner:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def run(
        self,
        code_body: str,
        *,
        timeout_sec: float = 30,
        max_tool_calls: int | None = None,
        runtime: PlanRuntime | None = None,
        servers: Collection[str] | None = None,
        made: list[CallMade] | None = None,
    ) -> SandboxResult:
        """Run one plan: in Monty, or in the CPython runtime when Monty cannot (a module it lacks, syntax it
        does not support) and the plan has not called a tool yet, or when `runtime="cpython"` asks.
        `servers` narrows the servers the plan can import and call (a subagent's own `tools`). `made`, when
        given, receives each tool call as it starts: what the caller reports if the plan is cancelled."""
        # A server may have changed its tools since the last plan (list_changed, or a call of ours). The
        # toolbox is shared: a search or a direct call may have read the change already (its refresh then
        # said so, not this one's), so the wrappers follow the tools themselves.
        await self._toolbox.refresh()
        specs = self._toolbox.specs("tool")
        if specs != self._grouped_from:
            self._grouped_from, self._grouped = specs, group_wrappers(specs)
        limit = self._max_tool_calls if max_tool_calls is None else max_tool_calls
        choice = runtime or self._runtime
        grouped = {s: w for s, w in self._grouped.items() if servers is None or s in servers}
        made = [] if made is None else made
        state = _PlanState(limit=limit, grouped=grouped, made=made)
        try:
            if choice == "cpython":
                result = await self._run_cpython(code_body, timeout_sec, state)
            else:
                result, unsupported = await self._run_monty(code_body, timeout_sec, state)
                if unsupported is not None and choice == "auto" and state.calls == 0:
                    state = _PlanState(limit=limit, grouped=grouped, made=made)
                    result = await self._run_cpython(code_body, timeout_sec, state)
                    result.logs.insert(0, f"[awb] Monty cannot run this plan ({unsupported}); it ran in CPython")
        finally:
            # However the plan ended (its deadline, an error, the run cancelled), no call of it runs on.
            await state.cancel_calls()
        if state.over_limit:
            # Whether the plan died of the refusal or caught it and went on, the limit failed it.
            result.success, result.error_code, result.result = False, "limit_exceeded", None
            result.error = f"the plan tried more than {state.limit} tool calls"
        result.tool_calls, result.calls = state.calls, state.made
        if result.error is not None:
            result.error = _clipped(result.error, MAX_PLAN_ERROR_CHARS)
        return result

    async def _run_monty(
        self, code_body: str, timeout_sec: float, state: _PlanState
    ) -> tuple[SandboxResult, str | None]:
        """The result, and what Monty lacks when that is why the plan failed."""
        if self._pool is None:
            pool = pm.AsyncMonty(min_processes=1, max_processes=2, feed_duration_limit_grace=1.0)
            await pool.__aenter__()
            self._pool = pool
        result = SandboxResult(success=False, runtime="monty")
        try:
            modules = {"servers": pm.ExternalModule(self._server_modules(state))}
        except ValueError as exc:  # a server named like one of Monty's own modules (`math`, `json`)
            result.error, result.error_code = f"the servers cannot be offered to Monty: {exc}", "runtime_error"
            return result, str(exc)
        limits: pm.ResourceLimits = {"max_feed_duration_secs": timeout_sec, "max_memory": self._memory_mb << 20}
        prints = pm.CollectString(max_bytes=self._max_log_bytes)
        unsupported: str | None = None
        pool = self._pool

        async def feed() -> Any:
            async with pool.checkout(script_name=_SCRIPT, limits=limits, external_modules=modules) as session:
                return await session.feed_run(plan_source(code_body, list(state.grouped)), print_callback=prints)

        try:
            # Monty's own clock stops while the plan waits on a tool, so the wall-clock deadline is ours.
            value = await asyncio.wait_for(feed(), timeout=timeout_sec)
            result.result = _json_value(value, self._max_output_bytes)
            result.success = True
        except TimeoutError:
            result.timed_out, result.error_code = True, "timeout"
            result.error = f"the plan ran past {timeout_sec} s"
        except pm.MontyRuntimeError as exc:
            _runtime_failure(result, exc, timeout_sec, self._memory_mb, self._max_log_bytes)
            inner = exc.exception()
            if isinstance(inner, ModuleNotFoundError | NotImplementedError):
                unsupported = f"{type(inner).__name__}: {inner}"
        except pm.MontySyntaxError as exc:
            result.error, result.error_code = f"the plan does not parse: {exc}", "runtime_error"
        except pm.MontyCrashedError as exc:
            result.timed_out = bool(exc.timed_out)
            result.error_code = "timeout" if exc.timed_out else "runtime_error"
            result.error = f"the plan ran past {timeout_sec} s" if exc.timed_out else f"the sandbox worker died: {exc}"
        except _OutputTooLarge as exc:
            result.error, result.error_code = str(exc), "output_exceeded"
        except _NotJson as exc:
            result.error, result.error_code = str(exc), "invalid_output"
        except pm.MontyError as exc:
            result.error, result.error_code = f"the sandbox refused the plan: {exc}", "runtime_error"
        output = prints.output
        result.logs = output.splitlines() if output else []
        return result, unsupported

    async def _run_cpython(self, code_body: str, timeout_sec: float, state: _PlanState) -> SandboxResult:
        result = SandboxResult(success=False, runtime="cpython")
        wrappers = {(w.server, w.tool): w for group in state.grouped.values() for w in group}

        async def bridge(server: str, tool: str, payload: dict[str, Any]) -> Any:
            wrapper = wrappers.get((server, tool))
            if wrapper is None:
                raise PlanToolError(f"{server}.{tool} is not a tool of the connected servers")
            spec = self._toolbox.resolve(f"{server}.{tool}", "tool")
            return await self._bridge(spec, wrapper, payload, state)

        host = PlanHost(bridge, max_log_bytes=self._max_log_bytes)
        limits = Limits(
            timeout_ms=int(timeout_sec * 1000),
            memory_mb=self._memory_mb,
            max_output_bytes=self._max_output_bytes,
            max_log_bytes=self._max_log_bytes,
        )
        try:
            runtime = await self._cpython_runtime()
            # The runtime's own deadline covers the plan's computing; this one also covers its tool calls.
            execution = await asyncio.wait_for(
                runtime.execute(cpython_source(code_body, state.grouped), {}, limits, host), timeout=timeout_sec
            )
        except TimeoutError:
            result.timed_out, result.error_code = True, "timeout"
            result.error = f"the plan ran past {timeout_sec} s"
        except AwbError as exc:
            result.error_code = exc.code
            result.timed_out = exc.code == "timeout"
            result.error = _with_traceback(exc)
        else:
            result.success, result.result = True, execution.value
            result.logs = [line for chunk in execution.logs for line in chunk.splitlines()]
        result.logs = host.logs + result.logs
        return result

    async def _cpython_runtime(self) -> Runtime:
        if self._cpython is None:
            from awb.sandbox.cpython import CPythonRuntime  # started only for plans Monty cannot run

            self._cpython = CPythonRuntime(pool_size=1, max_concurrent=2)
            self._owns_cpython = True
        await self._cpython.start()
        return self._cpython

    def _server_modules(self, state: _PlanState) -> dict[str, pm.ExternalModule]:
        modules = {}
        for server, wrappers in state.grouped.items():
            functions = {w.function: self._host_function(w, state) for w in wrappers}
            modules[identifier(server)] = pm.ExternalModule(functions, stubs=module_source(server, wrappers))
        return modules

    def _host_function(self, wrapper: Wrapper, state: _PlanState) -> Callable[..., Any]:
        names = wrapper.argument_names()
        required = {p.ident for p in wrapper.parameters if p.required}
        spec = self._toolbox.resolve(f"{wrapper.server}.{wrapper.tool}", "tool")

        async def call(*args: Any, **kwargs: Any) -> Any:
            if args:
                raise TypeError(f"{wrapper.function}() takes keyword arguments only")
            unknown = sorted(set(kwargs) - set(names))
            if unknown:
                raise TypeError(f"{wrapper.function}() got unexpected keyword arguments: {', '.join(unknown)}")
            missing = sorted(required - {k for k, v in kwargs.items() if v is not None})
            if missing:
                raise TypeError(f"{wrapper.function}() is missing required arguments: {', '.join(missing)}")
            payload = {names[k]: v for k, v in kwargs.items() if v is not None}
            return await self._bridge(spec, wrapper, payload, state)

        return call

    async def _bridge(self, spec: ToolSpec | None, wrapper: Wrapper, payload: dict[str, Any], state: _PlanState) -> Any:
        if state.calls >= state.limit:
            state.over_limit = True
            raise PlanToolError(f"tool call limit reached: a plan may make at most {state.limit} tool calls")
        state.calls += 1
        if spec is None:
            raise PlanToolError(f"{wrapper.server}.{wrapper.tool} is not available")
        made = CallMade(wrapper.server, wrapper.tool, "plan")
        state.made.append(made)
        started = time.perf_counter()
        # A task of our own: cancelling Monty's feed leaves its host-call task running, so the plan's end
        # cancels this one (`_PlanState.cancel_calls`).
        call = asyncio.ensure_future(self._toolbox.call(spec, payload))
        state.in_flight.add(call)
        try:
            outcome = await call
        except Exception:
            made.outcome = "failed"
            raise
        finally:
            state.in_flight.discard(call)
        made.outcome = "ok" if outcome.ok else "failed"
        # `json.loads` makes a lone surrogate of a `\ud800` escape; neither Monty nor the CPython worker's
        # wire can carry one, and the plan failed at the call (Monty) or the run with an exception (CPython).
        payload_for_plan = surrogates_replaced(outcome.payload)
        if self._on_call is not None:
            elapsed = (time.perf_counter() - started) * 1000
            self._on_call(wrapper.server, wrapper.tool, redact_record(payload), outcome.ok, elapsed)
        if not outcome.ok:
            raise PlanToolError(f"{wrapper.server}.{wrapper.tool} failed: {payload_for_plan}")
        return payload_for_plan


@dataclass
class _PlanState:
    limit: int
    #: The wrappers this plan may import and call, by server.
    grouped: dict[str, list[Wrapper]]
    calls: int = 0
    over_limit: bool = False
    made: list[CallMade] = field(default_factory=list)
    in_flight: set[asyncio.Future[ToolOutcome]] = field(default_factory=set)

    async def cancel_calls(self) -> None:
        """Cancel the tool calls still running and give them a moment to unwind (shielded: the plan may
        be ending because its run was cancelled)."""
        calls = list(self.in_flight)
        for call in calls:
            call.cancel()
        if calls:
            with anyio.CancelScope(shield=True):
                await asyncio.wait(calls, timeout=CANCEL_GRACE_SECONDS)


class _OutputTooLarge(Exception):
    pass


def plan_source(code_body: str, servers: list[str]) -> str:
    """The module a plan runs as: every server imported, the body inside `async def main()`."""
    body = textwrap.indent(textwrap.dedent(code_body).strip("\n") or "pass", "    ")
    imports = f"from servers import {', '.join(identifier(s) for s in servers)}\n" if servers else ""
    return f"import asyncio\n{imports}\n\nasync def main():\n{body}\n\n\nawait main()\n"


class _NotJson(Exception):
    pass


def _json_value(value: Any, max_bytes: int) -> Any:
    """The plan's result as JSON, as a CPython plan's is: a set, an object or NaN is `invalid_output`,
    not its text (`"{1, 2}"`), so a plan gets the same answer in either runtime. A result nested past
    MAX_RESULT_DEPTH is `output_exceeded`, as a tool's is (the encoders recurse)."""
    if nesting_depth(value, MAX_RESULT_DEPTH) > MAX_RESULT_DEPTH:
        raise _OutputTooLarge(f"the plan's result nests deeper than {MAX_RESULT_DEPTH} levels; return flatter data")
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        size = len(text.encode("utf-8"))
    except (TypeError, ValueError) as exc:
        raise _NotJson(f"the plan returned a value that is not JSON-serialisable: {exc}") from None
    except UnicodeEncodeError:
        raise _NotJson("the plan returned text that is not valid Unicode (a lone surrogate)") from None
    if size > max_bytes:
        raise _OutputTooLarge(f"the plan's result is over the {max_bytes}-byte cap; return aggregates, not raw data")
    return json.loads(text)


def _clipped(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters in its middle: a traceback's first frames and its last line,
    which names the exception, both stay."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}… [{len(text) - 2 * half} characters cut] …{text[-half:]}"


def _with_traceback(exc: AwbError) -> str:
    """An error as the model should see it: the message, and the plan's own frames when there are some."""
    frames = exc.details.get("traceback") if isinstance(exc.details, dict) else None
    if isinstance(frames, list) and frames:
        # The runner's own frames (`run`, `_awb_drive`) say nothing the model can act on.
        own = (", in run: ", ", in _awb_drive: ")
        return exc.message + "\n" + "\n".join(str(line) for line in frames if not any(o in str(line) for o in own))
    return exc.message


def _runtime_failure(
    result: SandboxResult, exc: pm.MontyRuntimeError, timeout_sec: float, memory_mb: int, max_log_bytes: int
) -> None:
    inner = exc.exception()
    kind, message = type(inner).__name__, str(inner)
    if kind == "TimeoutError" and "time limit" in message:
        result.timed_out, result.error_code = True, "timeout"
        result.error = f"the plan ran past {timeout_sec} s"
    elif kind == "MemoryError" and print_cap_hit(message, max_log_bytes, memory_mb << 20):
        result.error_code, result.error = "output_exceeded", f"printed output is over the {max_log_bytes}-byte cap"
    elif kind == "MemoryError":
        result.error_code, result.error = "memory_exceeded", f"the plan went over its {memory_mb} MB memory limit"
    else:
        result.error_code, result.error = "runtime_error", exc.display("traceback")


async def run_python_plan(
    code_body: str,
    *,
    tools: Toolbox,
    timeout_sec: float = 30,
    max_tool_calls: int = 30,
    on_call: CallObserver | None = None,
    runtime: PlanRuntime = "auto",
) -> SandboxResult:
    """Run one plan against `tools` in a runner of its own (see `PlanRunner` to reuse the workers)."""
    async with PlanRunner(tools, max_tool_calls=max_tool_calls, on_call=on_call, runtime=runtime) as runner:
        return await runner.run(code_body, timeout_sec=timeout_sec)
