"""The agent loop: build the prompt, take exactly one action from the model, execute it,
remember the observation, repeat until `done` or a limit. Mechanical on purpose: every
decision belongs to the model, every limit to the agent's budget.

A step is one accepted action. A reply the runtime cannot use (malformed, or a `done` whose
output does not validate) is fed back within the same step, up to `output_retries` times; the
next accepted reply restores the count. Every step is recorded, rejected replies included.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from pydantic import BaseModel, ValidationError

from awb.agents.actions import Action, CallTool, Done, RunCode, SpawnSubagent
from awb.agents.agent import Agent
from awb.agents.context import Context, to_text
from awb.agents.errors import MalformedAction, ModelError, validation_errors
from awb.agents.events import EventType, RunEvent
from awb.agents.models.base import Model, Prompt
from awb.agents.models.functions import function_overflow
from awb.agents.models.settings import ModelSettings
from awb.agents.result import (
    PartialOutput,
    RejectedAction,
    RunResult,
    StepRecord,
    SubagentCallRecord,
    TerminationReason,
    ToolCallRecord,
    ToolError,
    Usage,
)
from awb.agents.scope import RunScope, StopRun
from awb.agents.telemetry import chat_attributes, model_attributes, set_attributes, span
from awb.agents.toolbox import Handler, Toolbox, ToolOutcome, ToolSpec
from awb.errors import AwbError, InvalidParams
from awb.text import bounded

Ending = tuple[TerminationReason, dict[str, Any] | None, dict[str, Any] | None]
#: Observations a partial result carries, newest last.
_PARTIAL_OBSERVATIONS = 8


def _stop(reason: TerminationReason, message: str, **details: Any) -> Ending:
    return reason, None, {"code": reason, "message": message, "details": details}


class _Retry(Exception):
    """The reply was rejected and fed back; ask again within the same step."""


class _GiveUp(Exception):
    """A rejected reply with no corrections left ends the run."""

    def __init__(self, ending: Ending) -> None:
        super().__init__(ending[2])
        self.ending = ending


class _Run:
    def __init__(
        self, agent: type[Agent], task: BaseModel, model: Model, tools: Toolbox, scope: RunScope, depth: int
    ) -> None:
        self.agent, self.model, self.scope, self.depth = agent, model, scope, depth
        self.context = Context(agent.system_prompt, to_text(task.model_dump(mode="json")), agent.context_chars)
        self.settings = (agent.model_settings or ModelSettings()).merged(scope.settings)
        self.tools = tools.view(agent.tools, subagents=False)
        self.subagents = {sub.mode: sub for sub in agent.subagents} if depth == 0 else {}
        for sub in self.subagents.values():
            schema = sub.Input.model_json_schema()
            self.tools.add(ToolSpec(sub.mode, sub.system_prompt, schema, "", "subagent"), self._spawner(sub))
        self.iterations = 0
        self.tool_calls: list[ToolCallRecord] = []
        #: Calls counted against max_tool_calls (a lookup such as the planner's search_tools is not).
        self._counted_calls = 0
        self.subagent_calls: list[SubagentCallRecord] = []
        self.steps: list[StepRecord] = []
        self.usage = Usage()
        self.last_output: Any = None
        #: The step whose `spawn_subagent` is running, so the subagent's record lands in it.
        self._spawning: StepRecord | None = None

    async def _tell(self, kind: EventType, **data: Any) -> None:
        await self.scope.tell(
            RunEvent(type=kind, agent=self.agent.mode, depth=self.depth, step=self.iterations, data=data)
        )

    async def drive(self) -> Ending:
        budget = self.agent.budget
        while self.iterations < budget.max_iterations:
            spent = self.scope.exhausted(budget)
            if spent is not None:
                return _stop(spent[0], spent[1], **spent[2])
            self.iterations += 1
            step = StepRecord(index=self.iterations)
            self.steps.append(step)
            started = anyio.current_time()
            try:
                ending = await self._step(step)
            finally:
                step.duration_seconds = anyio.current_time() - started
            if ending is not None:
                return ending
        return _stop("max_iterations", "the iteration budget is spent", limit=budget.max_iterations)

    async def _step(self, step: StepRecord) -> Ending | None:
        await self._tell("step_started")
        retries = self.agent.output_retries
        while True:
            try:
                return await self._turn(step, retries)
            except _Retry:
                retries -= 1
                await self._tell_rejected(step)
            except ModelError as err:
                return "model_error", None, err.to_dict()
            except _GiveUp as give_up:
                await self._tell_rejected(step)
                return give_up.ending

    async def _tell_rejected(self, step: StepRecord) -> None:
        rejected = step.rejected[-1]
        await self._tell("rejected", code=rejected.code, message=rejected.message)

    async def _turn(self, step: StepRecord, retries: int) -> Ending | None:
        action = await self._ask(step, retries)
        if isinstance(action, Done):
            self.last_output = action.output
            try:
                output = self._validate_output(action.output)
            except ValidationError as err:
                errors = validation_errors(err)
                self._reject(step, retries, "output_invalid", "output does not match", action.output, errors)
                raise _GiveUp(
                    _stop("output_invalid", "the output did not match the Output model", errors=errors)
                ) from None
            step.action = action.model_dump(mode="json", exclude_none=True)
            await self._tell("model_reply", action=bounded(step.action), usage=step.usage.model_dump())
            return "done", output.model_dump(mode="json"), None
        step.action = action.model_dump(mode="json", exclude_none=True)
        step.not_run = action.not_run
        await self._tell(
            "model_reply", action=bounded(step.action), not_run=step.not_run, usage=step.usage.model_dump()
        )
        if action.note:
            self.context.add("note", "model", action.note)
        if action.not_run:
            first = getattr(action, "tool", None) or getattr(action, "agent", None) or action.action
            self.context.add(
                "feedback", "runtime", f"one action per step: only {first!r} ran; not run: {action.not_run}"
            )
        return await self._execute(step, action)

    async def _execute(self, step: StepRecord, action: Action) -> Ending | None:
        budget = self.agent.budget
        if isinstance(action, CallTool):
            spec = self.tools.resolve(action.tool, "tool")
            counted = spec is None or spec.counted
            if counted and (
                self._counted_calls >= budget.max_tool_calls
                or self.scope.tool_calls >= self.scope.budget.max_tool_calls
            ):
                limit = min(budget.max_tool_calls, self.scope.budget.max_tool_calls)
                return _stop("max_tool_calls", "the tool-call budget is spent", limit=limit)
            outcome = await self._call_tool(step, action, spec)
            if outcome is not None and not outcome.ok and self.agent.stop_on_tool_error:
                return _stop("tool_error", f"tool {action.tool!r} failed", result=to_text(outcome.payload))
        elif isinstance(action, SpawnSubagent):
            await self._spawn(step, action)
        elif isinstance(action, RunCode):
            return await self._run_code(step, action)
        return None

    async def _run_code(self, step: StepRecord, action: RunCode) -> Ending | None:
        runner = self.scope.code_runner
        if runner is None:
            self.context.add("tool_error", "run_code", "run_code is not available in this run; use call_tool")
            return None
        try:
            await self._invoke(step, "run_code", {"code": action.code}, lambda: runner(action.code))
        except StopRun as stop:
            return _stop(stop.reason, stop.message, **stop.details)
        return None

    async def _ask(self, step: StepRecord, retries: int) -> Action:
        prompt = Prompt(
            self.context.system_prompt,
            self.context.render(),
            self.agent.Output.model_json_schema(),
            settings=self.settings,
            code_mode=self.scope.code_runner is not None,
        )
        tools = self.tools.specs()
        # Before every call, not only at the start: a server may add tools mid-run (list_changed).
        overflow = function_overflow(self.agent.mode, self.model, len(tools), code_mode=prompt.code_mode)
        if overflow is not None:
            raise overflow
        before = self.model.usage.model_copy()
        attributes = chat_attributes(self.model, self.settings.temperature, self.settings.max_tokens)
        with span(f"chat {attributes['gen_ai.request.model'] or 'model'}", attributes) as current:
            try:
                return await self.model.call(prompt, tools)
            except MalformedAction as err:
                current.set_attribute("error.type", err.code)
                reply = err.details.get("reply")
                self._reject(step, retries, err.code, err.message, reply, err.details.get("errors", []), err.details)
                raise _GiveUp(
                    _stop("output_invalid", "the model kept replying with malformed actions", **err.details)
                ) from None
            except ModelError as err:
                current.set_attribute("error.type", err.code)
                raise
            finally:
                spent = self.scope.charge(self.model, self.model.usage.minus(before))
                step.usage.add(spent)
                self.usage.add(spent)
                set_attributes(
                    current,
                    {
                        "gen_ai.usage.input_tokens": spent.input_tokens,
                        "gen_ai.usage.output_tokens": spent.output_tokens,
                    },
                )

    def _validate_output(self, output: Any) -> BaseModel:
        if isinstance(output, str):
            return self.agent.Output.model_validate_json(output)
        return self.agent.Output.model_validate(output)

    def _reject(
        self,
        step: StepRecord,
        retries: int,
        code: str,
        message: str,
        reply: Any,
        errors: list[dict[str, Any]],
        details: dict[str, Any] | None = None,
    ) -> None:
        """Record and feed back a rejected reply; raise `_Retry` while corrections are left (the caller
        raises the final ending otherwise)."""
        step.rejected.append(RejectedAction(code=code, message=message, reply=reply, errors=errors))
        if retries <= 0:
            return
        feedback: dict[str, Any] = {"code": code, "message": message}
        if errors:
            feedback["errors"] = errors
        elif details:
            feedback["details"] = details
        self.context.add("feedback", "runtime", {"rejected": feedback, "retries_left": retries - 1})
        raise _Retry

    def _unknown(self, step: StepRecord, kind: str, name: str) -> None:
        available = [s.name for s in self.tools.specs("tool" if kind == "tool" else "subagent")]
        message = f"no {kind} named {name!r} is available; available: {available}"
        step.rejected.append(RejectedAction(code=f"{kind}_not_found", message=message, reply=name))
        self.context.add("tool_error", name, message)

    async def _call_tool(self, step: StepRecord, action: CallTool, spec: ToolSpec | None) -> ToolOutcome | None:
        """`action` on the tool it names (`spec`, resolved by the caller; None when there is none)."""
        if spec is None:
            self._unknown(step, "tool", action.tool)
            await self._tell_rejected(step)
            return None
        self.scope.tool_calls += spec.counted
        self._counted_calls += spec.counted
        outcome = await self._invoke(step, spec.name, action.arguments, lambda: self.tools.call(spec, action.arguments))
        assert step.tool_call is not None
        self.tool_calls.append(step.tool_call)
        return outcome

    async def _invoke(
        self, step: StepRecord, name: str, arguments: dict[str, Any], call: Callable[[], Awaitable[ToolOutcome]]
    ) -> ToolOutcome:
        """Run one tool call (or plan): told as events, traced, recorded on the step, remembered."""
        await self._tell("tool_call", tool=name, arguments=bounded(arguments))
        started = anyio.current_time()
        with span(
            f"execute_tool {name}", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
        ) as current:
            stopped: StopRun | None = None
            try:
                outcome = await call()
            except StopRun as stop:
                if stop.outcome is None:
                    raise
                stopped, outcome = stop, stop.outcome
            if not outcome.ok:
                current.set_attribute("error.type", outcome.error_code or "tool_error")
        duration = anyio.current_time() - started
        error = None if outcome.ok else ToolError(code=outcome.error_code or "tool_error", message=outcome.message())
        step.tool_call = ToolCallRecord(
            name=name, arguments=arguments, duration_seconds=duration, ok=outcome.ok, error=error
        )
        await self._tell(
            "tool_result",
            tool=name,
            ok=outcome.ok,
            duration_seconds=duration,
            error=None if error is None else error.model_dump(),
        )
        self.context.add("tool_result" if outcome.ok else "tool_error", name, outcome.payload)
        if stopped is not None:
            raise stopped
        return outcome

    async def _spawn(self, step: StepRecord, action: SpawnSubagent) -> None:
        if self.depth > 0:
            step.rejected.append(RejectedAction(code="subagent_refused", message="a subagent cannot spawn subagents"))
            self.context.add("tool_error", action.agent, "refused: a subagent cannot spawn subagents")
            return
        spec = self.tools.resolve(action.agent, "subagent")
        if spec is None:
            self._unknown(step, "subagent", action.agent)
            return
        try:
            task = self.subagents[spec.name].parse_input(action.input)
        except InvalidParams as err:
            step.rejected.append(RejectedAction(code=err.code, message=err.message, reply=action.input))
            self.context.add("subagent_error", spec.name, err.to_dict())
            return
        self._spawning = step
        outcome = await self.tools.call(spec, task.model_dump(mode="json"))
        self.context.add("subagent_output" if outcome.ok else "subagent_error", spec.name, outcome.payload)

    def _spawner(self, sub: type[Agent]) -> Handler:
        async def spawn(arguments: dict[str, Any]) -> ToolOutcome:
            task = sub.parse_input(arguments)
            await self._tell("subagent", agent=sub.mode, phase="started", input=bounded(task.model_dump(mode="json")))
            started = anyio.current_time()
            model = self.scope.own_model(sub) or self.model
            result = await run_loop(sub, task, model, self.tools, depth=1, scope=self.scope)
            record = SubagentCallRecord(
                agent=sub.mode,
                input=task.model_dump(mode="json"),
                termination_reason=result.termination_reason,
                output=result.output,
                iterations=result.iterations,
                tool_calls=result.tool_calls,
                duration_seconds=anyio.current_time() - started,
                steps=result.steps,
                usage=result.usage,
                error=result.error,
            )
            self.subagent_calls.append(record)
            self.usage.add(result.usage)
            if self._spawning is not None:
                self._spawning.subagent = record
            await self._tell("subagent", agent=sub.mode, phase="finished", termination_reason=result.termination_reason)
            if result.ok:
                return ToolOutcome(ok=True, payload=result.output)
            return ToolOutcome(
                ok=False, payload={"termination_reason": result.termination_reason, **(result.error or {})}
            )

        return spawn

    def partial(self) -> PartialOutput:
        kept, _ = self.context.visible()
        valid = False
        if self.last_output is not None:
            try:
                self._validate_output(self.last_output)
                valid = True
            except ValidationError:
                valid = False
        return PartialOutput(
            last_output=self.last_output,
            valid=valid,
            observations=[observation.render() for observation in kept[-_PARTIAL_OBSERVATIONS:]],
        )


async def run_loop(
    agent: type[Agent],
    task: BaseModel,
    model: Model,
    tools: Toolbox,
    *,
    depth: int = 0,
    deadline: float = math.inf,
    scope: RunScope | None = None,
) -> RunResult:
    """Run `agent` on an already validated `task`; tools are narrowed to the agent's allowlist.

    `scope` carries what a run shares with its subagents (ledger, events, settings); a new one
    with the agent's budget is made when none is given.
    """
    scope = scope or RunScope(agent.budget)
    run = _Run(agent, task, model, tools, scope, depth)
    started = anyio.current_time()
    deadline = min(deadline, scope.deadline, started + agent.budget.timeout_seconds)
    if depth == 0:
        scope.deadline = deadline
    ending: Ending = _stop("timeout", "the run's time budget is spent", seconds=agent.budget.timeout_seconds)
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent.mode, **model_attributes(model)}
    with span(f"invoke_agent {agent.mode}", attributes) as current:
        with anyio.CancelScope(deadline=deadline):
            try:
                ending = await run.drive()
            except AwbError as err:  # a model or toolbox that raises instead of replying is a model error
                ending = "model_error", None, err.to_dict()
        reason, output, error = ending
        if reason != "done":
            current.set_attribute("error.type", reason)
        set_attributes(
            current,
            {
                "gen_ai.usage.input_tokens": run.usage.input_tokens,
                "gen_ai.usage.output_tokens": run.usage.output_tokens,
            },
        )
    result = RunResult(
        agent=agent.mode,
        output=output,
        termination_reason=reason,
        iterations=run.iterations,
        tool_calls=run.tool_calls,
        subagent_calls=run.subagent_calls,
        usage=run.usage,
        error=error,
        steps=run.steps,
        duration_seconds=anyio.current_time() - started,
        partial=None if reason == "done" else run.partial(),
    )
    await scope.tell(
        RunEvent(
            type="done",
            agent=agent.mode,
            depth=depth,
            step=run.iterations,
            data={"result": result.model_dump(mode="json")},
        )
    )
    return result
