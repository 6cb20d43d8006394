"""Calling a tool: check its params, run it in its sandbox within the call limits, check what it
returned, and record the call (counters, memory tier, auto-equip on reaching long term).

`Workbench.call` resolves the tool and hands it here; nothing here knows the workbench itself.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr

from awb import crafting
from awb.call_recorder import CallRecorder
from awb.clock import Clock
from awb.config import Config
from awb.equip import Armory
from awb.errors import (
    AwbError,
    ExecutionError,
    InvalidOutput,
    InvalidParams,
    OutputExceeded,
    ToolRuntimeError,
    Unavailable,
)
from awb.events import Event, EventBus
from awb.inventory.lane import StoreLane
from awb.inventory.memory import MemoryPolicy
from awb.inventory.models import CallRecord, MemoryLevel, Tool, ToolCounters
from awb.inventory.store import Store
from awb.log_limit import PER_REQUEST
from awb.maintenance import Upkeep
from awb.sandbox.base import Execution, ExecutionSlots, Runtime, nests_too_deep
from awb.sandbox.host import HostBridge
from awb.sandbox.registry import limits_for
from awb.sandbox.staging import granted_dirs, protected_paths
from awb.schema_bounds import SchemaTooExpensive
from awb.text import cap_text
from awb.validation import ToolSchema

log = logging.getLogger("awb.workbench")

#: Compiled tool schemas kept per workbench (a version's input and output schema count one each).
COMPILED_SCHEMAS = 4096
#: Result text (characters) from which a call's result keeps the JSON its runtime encoded, for the faces
#: to send as it is: a smaller one is encoded again in less time than handing it on takes.
KEPT_JSON_FROM = 4096
#: The error code on the record of a call cancelled while its tool ran (no one hears an error: the
#: request that made it is never answered).
CANCELLED = "cancelled"


class CallResult(BaseModel):
    #: The id on the call's record (awb_inspect's recent_calls) and on any write it staged.
    call_id: str
    tool_id: str
    name: str
    version: int
    result: Any
    logs: list[str] = Field(default_factory=list)
    duration_ms: float
    memory_level: MemoryLevel
    usage_count: int
    #: `result` and its JSON text, as the runtime encoded it for the output cap (`Execution.value_json`).
    _encoded: tuple[Any, str] | None = PrivateAttr(None)

    @property
    def result_json(self) -> str | None:
        """`result` as JSON, when the runtime encoded a large one, so that a face need not encode it again."""
        # Tied to the very value encoded: a copy with another result has no text. Read from the private
        # dict itself: pydantic's attribute lookup for private names costs more than the rest of this.
        encoded = (self.__pydantic_private__ or {}).get("_encoded")
        return encoded[1] if encoded is not None and encoded[0] is self.result else None


class Caller:
    """The call path of one workbench, over the workbench's own store, runtimes and policy."""

    def __init__(
        self,
        config: Config,
        store: Store,
        clock: Clock,
        runtimes: dict[str, Runtime],
        *,
        slots: ExecutionSlots,
        policy: MemoryPolicy,
        events: EventBus,
        armory: Armory,
        upkeep: Upkeep,
        lane: StoreLane | None = None,
    ) -> None:
        self._config, self._store, self._clock, self._runtimes = config, store, clock, runtimes
        self._slots, self._policy, self._events, self._armory, self._upkeep = slots, policy, events, armory, upkeep
        self._compiled: dict[tuple[str, int, str], ToolSchema] = {}
        self._protected = protected_paths(config)
        self._lane = lane or StoreLane(store)
        self._recorder = CallRecorder(store, policy, self._lane)

    async def flush_records(self) -> None:
        """Write the call records that still wait for their group (`CallRecorder.flush`)."""
        await self._recorder.flush()

    def schema(self, tool: Tool, which: Literal["input", "output"] = "input") -> ToolSchema:
        """The compiled schema of a tool version; versions are immutable, so compile once per version
        (the oldest compiled go first past `COMPILED_SCHEMAS`: a big inventory's calls cannot grow it)."""
        key = (tool.tool_id, tool.version, which)
        schema = self._compiled.get(key)
        if schema is None:
            raw = tool.input_schema if which == "input" else tool.output_schema
            schema = self._compiled[key] = ToolSchema.compile(raw or {})
            if len(self._compiled) > COMPILED_SCHEMAS:
                del self._compiled[next(iter(self._compiled))]
        return schema

    async def call(self, tool: Tool, params: dict[str, Any] | None = None) -> CallResult:
        """Run `tool` in its sandbox. Failures are recorded and raised as `ExecutionError`s."""
        call_id = "call_" + os.urandom(8).hex()  # 16 random hex digits
        params = {} if params is None else params
        if not isinstance(params, dict):
            raise InvalidParams("params must be a JSON object", got=type(params).__name__)
        try:
            problems = await self.schema(tool).problems_off_loop(params)
        except SchemaTooExpensive as exc:
            raise InvalidParams(
                f"params of {tool.name!r} cannot be checked: {exc}", tool_id=tool.tool_id, reason="validation_limit"
            ) from None
        if problems:
            raise InvalidParams(
                f"params do not match the input_schema of {tool.name!r}", tool_id=tool.tool_id, errors=problems
            )
        runtime = self._runtimes.get(tool.runtime)
        if runtime is None:
            raise Unavailable(f"runtime {tool.runtime!r} of {tool.name!r} is not available here")
        limits = limits_for(self._config)
        host = HostBridge(
            read_dirs=granted_dirs(self._config.sandbox.grants, tool.name),
            stage=lambda path, data: self._store.stage_write(
                tool.tool_id,
                path,
                data,
                self._clock.now(),
                call_id=call_id,
                max_tool_bytes=self._config.sandbox.max_staged_bytes_per_tool,
                max_total_bytes=self._config.sandbox.max_staged_bytes_total,
                max_tool_writes=self._config.sandbox.max_staged_writes_per_tool,
                max_total_writes=self._config.sandbox.max_staged_writes_total,
            ),
            max_log_bytes=limits.max_log_bytes,
            protected=self._protected,
        )
        started = time.perf_counter()
        error: AwbError | None = None
        execution: Execution | None = None
        # `running`: a group of other calls' records may wait for this one (awb.call_recorder).
        with self._slots.take(), self._recorder.running():
            try:
                execution = await runtime.execute(tool.code, params, limits, host)
                self._check_result(tool, execution)
                if tool.output_schema is not None:
                    out_problems = await self._output_problems(tool, execution.value)
                    if out_problems:
                        raise InvalidOutput("the tool's result does not match its output_schema", errors=out_problems)
            except ExecutionError as exc:
                error = exc
            except RecursionError:
                # A result nested past the interpreter's recursion limit, met while encoding or decoding it.
                error = _too_deep(tool)
            except AwbError:
                raise  # the server's own refusal (a runtime that is not available, say), not the tool's run
            except Exception as exc:
                # Anything else a runtime raises: whatever a hostile tool provoked there, the call is
                # recorded and counted as failed, never let through unrecorded.
                log.warning("runtime %s raised %r running %s", tool.runtime, exc, tool.name, extra=PER_REQUEST)
                error = ToolRuntimeError(f"the sandbox failed: {type(exc).__name__}", exception=type(exc).__name__)
            except asyncio.CancelledError:
                # The client gave up (notifications/cancelled, a dropped HTTP request): the tool ran all
                # the same, so the call is recorded and counted, without waiting for the record.
                self._record_cancelled(tool, call_id, (time.perf_counter() - started) * 1000)
                raise
        duration_ms = (time.perf_counter() - started) * 1000
        if execution is not None:
            peak = execution.peak_memory_bytes
        else:  # a failed run may still have been measured (a tool that hit its memory limit, say)
            peak = error.peak_memory_bytes if isinstance(error, ExecutionError) else None
        counters = await self._record(tool, call_id, duration_ms, error, peak)
        if error is not None:
            log.info("call %s failed: %s", tool.name, error.code)
            raise error
        assert execution is not None
        called = CallResult(
            call_id=call_id,
            tool_id=tool.tool_id,
            name=tool.name,
            version=tool.version,
            result=execution.value,
            logs=_capped_logs(host.logs + execution.logs, limits.max_log_bytes),
            duration_ms=round(duration_ms, 3),
            memory_level=counters.memory_level,
            usage_count=counters.usage_count,
        )
        if execution.value_json is not None and len(execution.value_json) >= KEPT_JSON_FROM:
            called._encoded = (execution.value, execution.value_json)
        return called

    def _check_result(self, tool: Tool, execution: Execution) -> None:
        """Results nested past MAX_RESULT_DEPTH cannot be encoded on the wire: a failed call, not a
        success that the face then cannot send."""
        if nests_too_deep(execution):
            raise _too_deep(tool)

    async def _output_problems(self, tool: Tool, value: Any) -> list[dict[str, str]]:
        try:
            return await self.schema(tool, "output").problems_off_loop(value)
        except SchemaTooExpensive as exc:
            raise InvalidOutput(f"the tool's result cannot be checked against its output_schema: {exc}") from None

    async def _record(
        self,
        tool: Tool,
        call_id: str,
        duration_ms: float,
        error: AwbError | None,
        peak_memory_bytes: int | None = None,
    ) -> ToolCounters:
        """Record the call; its tool's counters and tier right after it."""
        now = self._clock.now()
        call = CallRecord(
            call_id=call_id,
            tool_id=tool.tool_id,
            version=tool.version,
            at=now,
            duration_ms=duration_ms,
            ok=error is None,
            error_code=None if error is None else error.code,
            peak_memory_bytes=peak_memory_bytes,
        )
        # Counters move in SQL inside one write transaction, so concurrent calls (from any process)
        # never lose an update; the tier is recomputed there from the counted usage.
        counters = await self._recorder.record(call)
        if counters.memory_level != counters.previous_level:
            self._events.publish(
                Event("tier_changed", tool.tool_id, {"before": counters.previous_level, "after": counters.memory_level})
            )
            if counters.memory_level == "long_term":
                # The record as this call left it, for the equip to judge (only here: a copy of a tool
                # record costs ~6 us, on every call when it was made for all of them).
                updated = tool.model_copy(
                    update={
                        "usage_count": counters.usage_count,
                        "success_count": counters.success_count,
                        "failure_count": counters.failure_count,
                        "memory_level": counters.memory_level,
                        "status": counters.status,
                        "last_used_at": now if error is None else tool.last_used_at,
                    }
                )
                await self._lane.call(self._armory.auto_equip, updated, now)
        self._upkeep.counted(tool.tool_id)
        return counters

    def _record_cancelled(self, tool: Tool, call_id: str, duration_ms: float) -> None:
        """A cancelled call's record: failed, `cancelled`. Only a success moves the tier, so there is no
        tier change to announce and no auto-equip to consider."""
        call = CallRecord(
            call_id=call_id,
            tool_id=tool.tool_id,
            version=tool.version,
            at=self._clock.now(),
            duration_ms=duration_ms,
            ok=False,
            error_code=CANCELLED,
        )
        self._recorder.record_abandoned(call)
        self._upkeep.counted(tool.tool_id)
        log.info("call %s cancelled after %.1f ms", tool.name, duration_ms)


def _too_deep(tool: Tool) -> OutputExceeded:
    return crafting.too_deep(tool.name)


def _capped_logs(logs: list[str], max_bytes: int) -> list[str]:
    """The call's log lines up to `max_bytes` in all, whichever runtime produced them."""
    kept: list[str] = []
    used = 0
    for line in logs:
        size = len(line.encode("utf-8", errors="surrogatepass"))
        if used + size > max_bytes:
            kept.append(cap_text(line, max(0, max_bytes - used)) if used < max_bytes else "[log cut at the cap]")
            break
        kept.append(line)
        used += size
    return kept
