"""The agent loop: build the prompt, take exactly one action from the model, execute it
(`executor.py`), remember the observation, repeat until `done` or a limit. Mechanical on purpose:
every decision belongs to the model, every limit to the agent's budget.

A step is one accepted action. A reply the runtime cannot use (malformed, or a `done` whose
output does not validate) is fed back within the same step, up to `output_retries` times; the
next accepted reply restores the count. Every step is recorded, rejected replies included.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import anyio
from pydantic import BaseModel, ValidationError

from awb.agents.actions import Action, Done, check_nesting
from awb.agents.agent import Agent
from awb.agents.context import Context, to_text
from awb.agents.errors import MalformedAction, ModelError, ModelRefused, validation_errors
from awb.agents.events import EventType, RunEvent
from awb.agents.executor import ActionExecutor
from awb.agents.models.base import Model, Prompt
from awb.agents.models.connections import connections_kept
from awb.agents.models.functions import function_overflow
from awb.agents.models.settings import ModelSettings
from awb.agents.repeats import written_elsewhere
from awb.agents.result import (
    Ending,
    PartialOutput,
    RejectedAction,
    RunResult,
    StepRecord,
    SubagentCallRecord,
    Usage,
    stopped,
)
from awb.agents.scope import RunScope
from awb.agents.telemetry import chat_attributes, model_attributes, set_attributes, span, usage_attributes
from awb.agents.toolbox import Handler, Toolbox, ToolOutcome, ToolSpec
from awb.errors import AwbError
from awb.redaction import off_loop
from awb.text import bounded

#: Observations a partial result carries, newest last.
_PARTIAL_OBSERVATIONS = 8


class _Retry(Exception):
    """The reply was rejected and fed back; ask again within the same step."""


class _GiveUp(Exception):
    """A rejected reply with no corrections left ends the run."""

    def __init__(self, ending: Ending) -> None:
        super().__init__(ending[2])
        self.ending = ending


def _gave_up(err: MalformedAction) -> str:
    """Why a run whose corrections ran out ended: a reply cut off at the length limit says what to raise."""
    if err.details.get("cut_off"):
        limit = err.details.get("max_tokens")
        where = f"max_tokens ({limit})" if limit else "the provider's default length limit"
        return f"the model's replies were cut off at {where}: raise max_tokens"
    return "the model kept replying with malformed actions"


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
        self.executor = ActionExecutor(
            agent, self.tools, scope, self.context, self._tell, depth=depth, subagents=self.subagents
        )
        self.subagent_calls: list[SubagentCallRecord] = []
        self.steps: list[StepRecord] = []
        self.usage = Usage()
        self.last_output: Any = None

    async def _tell(self, kind: EventType, **data: Any) -> None:
        await self.scope.tell(
            RunEvent(type=kind, agent=self.agent.mode, depth=self.depth, step=self.iterations, data=data)
        )

    async def drive(self) -> Ending:
        budget = self.agent.budget
        while self.iterations < budget.max_iterations:
            spent = self.scope.exhausted(budget)
            if spent is not None:
                return stopped(spent[0], spent[1], **spent[2])
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
        return stopped("max_iterations", "the iteration budget is spent", limit=budget.max_iterations)

    async def _step(self, step: StepRecord) -> Ending | None:
        await self._tell("step_started")
        retries = self.agent.output_retries
        while True:
            try:
                return await self._turn(step, retries)
            except _Retry:
                retries -= 1
                await self.executor.tell_rejected(step)
                # A correction is another request: the token and cost limits hold within a step too.
                spent = self.scope.exhausted(self.agent.budget)
                if spent is not None:
                    return stopped(spent[0], spent[1], **spent[2])
            except ModelError as err:
                return "model_error", None, err.to_dict()
            except ModelRefused as err:  # the model's answer, not a failure: no correction asks it again
                return "refused", None, err.to_dict()
            except _GiveUp as give_up:
                await self.executor.tell_rejected(step)
                return give_up.ending

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
                    stopped("output_invalid", "the output did not match the Output model", errors=errors)
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
        return await self.executor.execute(step, action)

    async def _ask(self, step: StepRecord, retries: int) -> Action:
        prompt = Prompt(
            self.context.system_prompt,
            self.context.render(),
            self.agent.Output.model_json_schema(),
            settings=self.settings,
            code_mode=self.executor.code_mode,
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
                return check_nesting(await self.model.call(prompt, tools))
            except MalformedAction as err:
                current.set_attribute("error.type", err.code)
                reply = err.details.get("reply")
                self._reject(step, retries, err.code, err.message, reply, err.details.get("errors", []), err.details)
                raise _GiveUp(stopped("output_invalid", _gave_up(err), **err.details)) from None
            except ModelError as err:
                current.set_attribute("error.type", err.code)
                raise
            except AwbError:
                raise
            except Exception as err:  # boundary: an adapter (or a user's Model) that cannot read a reply ends the run
                current.set_attribute("error.type", ModelError.code)
                raise ModelError(f"the model failed: {type(err).__name__}: {err}", model=repr(self.model)) from err
            finally:
                spent = self.scope.charge(self.model, self.model.usage.minus(before))
                step.usage.add(spent)
                self.usage.add(spent)
                set_attributes(current, usage_attributes(spent))

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

    def _spawner(self, sub: type[Agent]) -> Handler:
        async def spawn(arguments: dict[str, Any]) -> ToolOutcome:
            task = sub.parse_input(arguments)
            await self._tell("subagent", agent=sub.mode, phase="started", input=bounded(task.model_dump(mode="json")))
            started = anyio.current_time()
            model = self.scope.own_model(sub) or self.model
            result = await run_loop(sub, task, model, self.tools, depth=1, scope=self.scope)
            index = len(self.subagent_calls)
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
            if self.executor.spawning is not None:
                self.executor.spawning.subagent = record
            if self.scope.listening:
                # The subagent's ending, its large values named where this run's own result (told last) has
                # them; tens of megabytes of JSON at worst, made in a worker thread.
                told = await off_loop(
                    lambda: written_elsewhere(
                        result.model_dump(mode="json"),
                        RunResult,
                        record,
                        where=f"the {self.agent.mode} run's result",
                        at=f"subagent_calls[{index}]",
                    )
                )
                await self.scope.tell(
                    RunEvent(type="done", agent=sub.mode, depth=1, step=result.iterations, data={"result": told})
                )
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
    with the agent's budget is made when none is given. A top-level run (`depth` 0) tells its `done`
    event here; a subagent's is told by its parent, which knows where its result holds the values.
    """
    scope = scope or RunScope(agent.budget)
    run = _Run(agent, task, model, tools, scope, depth)
    started = anyio.current_time()
    deadline = min(deadline, scope.deadline, started + agent.budget.timeout_seconds)
    if depth == 0:
        scope.deadline = deadline
    ending: Ending = stopped("timeout", "the run's time budget is spent", seconds=agent.budget.timeout_seconds)
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent.mode, **model_attributes(model)}
    with span(f"invoke_agent {agent.mode}", attributes) as current:
        with anyio.CancelScope(deadline=deadline):
            try:
                # The run's model steps share kept-alive connections to the provider, closed when it ends.
                async with connections_kept([model]):
                    ending = await run.drive()
            except AwbError as err:  # a model or toolbox that raises instead of replying is a model error
                ending = "model_error", None, err.to_dict()
        reason, output, error = ending
        if reason == "refused":
            # The model's answer, not an error of the provider or the runtime: error rates leave it out.
            current.set_attribute("awb.refused", True)
        elif reason != "done":
            current.set_attribute("error.type", reason)
        set_attributes(current, usage_attributes(run.usage))
    result = RunResult(
        agent=agent.mode,
        output=output,
        termination_reason=reason,
        iterations=run.iterations,
        tool_calls=run.executor.tool_calls,
        subagent_calls=run.subagent_calls,
        usage=run.usage,
        error=error,
        steps=run.steps,
        duration_seconds=anyio.current_time() - started,
        partial=None if reason == "done" else run.partial(),
    )
    # A subagent's ending is told by its parent, which knows where its values are. The result's JSON can be
    # tens of megabytes: made in a worker thread, and only for someone listening.
    if depth == 0 and scope.listening:
        dumped = await off_loop(partial(result.model_dump, mode="json"))
        await scope.tell(
            RunEvent(type="done", agent=agent.mode, depth=depth, step=run.iterations, data={"result": dumped})
        )
    return result
