"""`run_code` for a run of the agent loop: each plan runs in the plan runner, its bridged tool calls
count toward the run's tool-call budget, and its result reaches the model capped and redacted."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Any

import anyio

from awb.agents.scope import RunScope, StopRun
from awb.agents.toolbox import ToolOutcome
from awb.planner.calls import CallMade, call_runs
from awb.planner.plan_runner import PlanRunner, SandboxResult
from awb.redaction import redact_payload, redact_payload_off_loop

#: Log lines of a plan that reach the model, newest kept, each cut to a line's worth.
PLAN_LOG_LINES = 20
PLAN_LOG_CHARS = 500


class CodeMode:
    """The run's code runner (`RunScope.code_runner`): call it with a plan's code."""

    def __init__(
        self,
        runner: PlanRunner,
        scope: RunScope,
        *,
        max_tool_calls: int,
        max_code_runs: int | None = None,
        timeout_sec: float = 30,
        for_context: Callable[[str, Any], Awaitable[Any]] | None = None,
        on_run: Callable[[SandboxResult], None] | None = None,
    ) -> None:
        self.runner, self.scope = runner, scope
        self.max_tool_calls, self.max_code_runs, self.timeout_sec = max_tool_calls, max_code_runs, timeout_sec
        self._for_context = for_context or (lambda label, payload: redact_payload_off_loop(payload))
        self._on_run = on_run
        self.code_runs = 0

    async def __call__(self, code: str, servers: Collection[str] | None = None) -> ToolOutcome:
        if self.max_code_runs is not None and self.code_runs >= self.max_code_runs:
            raise StopRun("max_code_runs", "the code-run budget is spent", limit=self.max_code_runs)
        remaining = max(0, self.max_tool_calls - self.scope.tool_calls)
        self.code_runs += 1
        made: list[CallMade] = []
        try:
            result = await self.runner.run(
                code, max_tool_calls=remaining, timeout_sec=self.timeout_sec, servers=servers, made=made
            )
        except anyio.get_cancelled_exc_class():
            # The run ended (its deadline, a cancel) while the plan ran: the calls it made count and are
            # reported, because they may have had effects.
            self.scope.tool_calls += len(made)
            if self._on_run is not None:
                message = "the run ended while the plan ran"
                self._on_run(
                    SandboxResult(
                        success=False, error=message, error_code="cancelled", tool_calls=len(made), calls=made
                    )
                )
            raise
        self.scope.tool_calls += result.tool_calls
        if self._on_run is not None:
            self._on_run(result)
        outcome = ToolOutcome(ok=result.success, payload=await self._payload(result), error_code=result.error_code)
        if result.error_code == "limit_exceeded":
            raise StopRun("max_tool_calls", "the tool-call budget is spent", outcome=outcome, limit=self.max_tool_calls)
        return outcome

    async def _payload(self, result: SandboxResult) -> dict[str, Any]:
        # The logs and the error are cut before this (PLAN_LOG_CHARS, MAX_PLAN_ERROR_CHARS): only the
        # result can be large.
        logs = [line[:PLAN_LOG_CHARS] for line in result.logs[-PLAN_LOG_LINES:]]
        payload: dict[str, Any] = {
            "success": result.success,
            "result": await self._for_context("plan_result", result.result),
            "logs": redact_payload(logs),
            "tool_calls": result.tool_calls,
        }
        if result.calls:
            payload["calls"] = call_runs(result.calls, with_route=False)
        if len(result.logs) > len(logs):
            payload["logs_dropped"] = len(result.logs) - len(logs)
        if not result.success:
            payload.update(error=redact_payload(result.error), timed_out=result.timed_out)
        return payload
