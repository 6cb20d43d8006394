"""The agent loop: build the prompt, take exactly one action from the model, execute it,
remember the observation, repeat until `done` or a limit. Mechanical on purpose: every
decision belongs to the model, every limit to the agent's budget.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ValidationError

from awb.agents.actions import CallTool, Done, RunCode, SpawnSubagent
from awb.agents.agent import Agent
from awb.agents.context import Context, to_text
from awb.agents.errors import MalformedAction, ModelError, validation_errors
from awb.agents.models.base import Model, Prompt
from awb.agents.result import RunResult, SubagentCallRecord, TerminationReason, ToolCallRecord
from awb.agents.toolbox import Handler, Toolbox, ToolOutcome, ToolSpec
from awb.errors import AwbError, InvalidParams

Ending = tuple[TerminationReason, dict[str, Any] | None, dict[str, Any] | None]


def _stop(reason: TerminationReason, message: str, **details: Any) -> Ending:
    return reason, None, {"code": reason, "message": message, "details": details}


class _Run:
    def __init__(self, agent: type[Agent], task: BaseModel, model: Model, tools: Toolbox, depth: int) -> None:
        self.agent, self.model, self.depth = agent, model, depth
        self.context = Context(agent.system_prompt, to_text(task.model_dump(mode="json")), agent.context_chars)
        self.tools = tools.view(agent.tools, subagents=False)
        self.subagents = {sub.mode: sub for sub in agent.subagents} if depth == 0 else {}
        for sub in self.subagents.values():
            schema = sub.Input.model_json_schema()
            self.tools.add(ToolSpec(sub.mode, sub.system_prompt, schema, "", "subagent"), self._spawner(sub))
        self.iterations = 0
        self.retries_left = agent.output_retries
        self.tool_calls: list[ToolCallRecord] = []
        self.subagent_calls: list[SubagentCallRecord] = []
        self.deadline = math.inf

    async def drive(self) -> Ending:
        budget = self.agent.budget
        while self.iterations < budget.max_iterations:
            self.iterations += 1
            prompt = Prompt(self.context.system_prompt, self.context.render(), self.agent.Output.model_json_schema())
            try:
                action = await self.model.call(prompt, self.tools.specs())
            except MalformedAction as err:
                if self._reject(err.to_dict()):
                    return _stop("output_invalid", "the model kept replying with malformed actions", **err.details)
                continue
            except ModelError as err:
                return "model_error", None, err.to_dict()
            if action.note:
                self.context.add("note", "model", action.note)
            if isinstance(action, Done):
                try:
                    output = self._validate_output(action.output)
                except ValidationError as err:
                    errors = validation_errors(err)
                    if self._reject({"code": "output_invalid", "message": "output does not match", "errors": errors}):
                        return _stop("output_invalid", "the output did not match the Output model", errors=errors)
                    continue
                return "done", output.model_dump(mode="json"), None
            if isinstance(action, CallTool):
                if len(self.tool_calls) >= budget.max_tool_calls:
                    return _stop("max_tool_calls", "the tool-call budget is spent", limit=budget.max_tool_calls)
                outcome = await self._call_tool(action)
                if not outcome.ok and self.agent.stop_on_tool_error:
                    return _stop("tool_error", f"tool {action.tool!r} failed", result=to_text(outcome.payload))
            elif isinstance(action, SpawnSubagent):
                await self._spawn(action)
            elif isinstance(action, RunCode):
                self.context.add("tool_error", "run_code", "run_code is not supported yet; use call_tool")
        return _stop("max_iterations", "the iteration budget is spent", limit=budget.max_iterations)

    def _validate_output(self, output: Any) -> BaseModel:
        if isinstance(output, str):
            return self.agent.Output.model_validate_json(output)
        return self.agent.Output.model_validate(output)

    def _reject(self, feedback: dict[str, Any]) -> bool:
        """Feed a rejected reply back to the model; True once the retries are spent."""
        self.retries_left -= 1
        if self.retries_left < 0:
            return True
        self.context.add("feedback", "runtime", {"rejected": feedback, "retries_left": self.retries_left})
        return False

    def _unknown(self, kind: Literal["tool", "subagent"], name: str) -> None:
        available = [s.name for s in self.tools.specs(kind)]
        self.context.add("tool_error", name, f"no {kind} named {name!r} is available; available: {available}")

    async def _call_tool(self, action: CallTool) -> ToolOutcome:
        spec = self.tools.resolve(action.tool, "tool")
        if spec is None:
            self._unknown("tool", action.tool)
            return ToolOutcome(ok=False, payload=f"unknown tool {action.tool!r}")
        started = anyio.current_time()
        outcome = await self.tools.call(spec, action.arguments)
        duration = anyio.current_time() - started
        self.tool_calls.append(
            ToolCallRecord(name=spec.name, arguments=action.arguments, duration_seconds=duration, ok=outcome.ok)
        )
        self.context.add("tool_result" if outcome.ok else "tool_error", spec.name, outcome.payload)
        return outcome

    async def _spawn(self, action: SpawnSubagent) -> None:
        if self.depth > 0:
            self.context.add("tool_error", action.agent, "refused: a subagent cannot spawn subagents")
            return
        spec = self.tools.resolve(action.agent, "subagent")
        if spec is None:
            self._unknown("subagent", action.agent)
            return
        try:
            task = self.subagents[spec.name].parse_input(action.input)
        except InvalidParams as err:
            self.context.add("subagent_error", spec.name, err.to_dict())
            return
        outcome = await self.tools.call(spec, task.model_dump(mode="json"))
        self.context.add("subagent_output" if outcome.ok else "subagent_error", spec.name, outcome.payload)

    def _spawner(self, sub: type[Agent]) -> Handler:
        async def spawn(arguments: dict[str, Any]) -> ToolOutcome:
            task = sub.parse_input(arguments)
            started = anyio.current_time()
            result = await run_loop(sub, task, self.model, self.tools, depth=1, deadline=self.deadline)
            self.subagent_calls.append(
                SubagentCallRecord(
                    agent=sub.mode,
                    input=task.model_dump(mode="json"),
                    termination_reason=result.termination_reason,
                    output=result.output,
                    iterations=result.iterations,
                    tool_calls=result.tool_calls,
                    duration_seconds=anyio.current_time() - started,
                )
            )
            if result.ok:
                return ToolOutcome(ok=True, payload=result.output)
            return ToolOutcome(
                ok=False, payload={"termination_reason": result.termination_reason, **(result.error or {})}
            )

        return spawn


async def run_loop(
    agent: type[Agent],
    task: BaseModel,
    model: Model,
    tools: Toolbox,
    *,
    depth: int = 0,
    deadline: float = math.inf,
) -> RunResult:
    """Run `agent` on an already validated `task`; tools are narrowed to the agent's allowlist."""
    run = _Run(agent, task, model, tools, depth)
    run.deadline = min(deadline, anyio.current_time() + agent.budget.timeout_seconds)
    usage_before = model.usage.model_copy()
    ending: Ending = _stop("timeout", "the run's time budget is spent", seconds=agent.budget.timeout_seconds)
    with anyio.CancelScope(deadline=run.deadline):
        try:
            ending = await run.drive()
        except AwbError as err:  # a model or toolbox that raises instead of replying is a model error
            ending = "model_error", None, err.to_dict()
    reason, output, error = ending
    return RunResult(
        agent=agent.mode,
        output=output,
        termination_reason=reason,
        iterations=run.iterations,
        tool_calls=run.tool_calls,
        subagent_calls=run.subagent_calls,
        usage=model.usage.minus(usage_before),
        error=error,
    )
