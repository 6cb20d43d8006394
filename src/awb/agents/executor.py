"""Executing one accepted action of the loop: a tool call, a plan (`run_code`) or a subagent.

Each is checked against the tool-call budget, told as events, traced, recorded on its step, and
remembered in working memory as an observation; a call the runtime cannot make (an unknown tool or
subagent) is an observation too, never an exception. Asking the model is the loop's part (`loop.py`).
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anyio

from awb.agents.actions import Action, CallTool, RunCode, SpawnSubagent
from awb.agents.agent import Agent
from awb.agents.context import Context, to_text
from awb.agents.events import EventType
from awb.agents.result import (
    Ending,
    RejectedAction,
    StepRecord,
    SubagentCallRecord,
    ToolCallRecord,
    ToolError,
    stopped,
)
from awb.agents.scope import RunScope, StopRun
from awb.agents.telemetry import span
from awb.agents.toolbox import Toolbox, ToolOutcome, ToolSpec
from awb.errors import InvalidParams
from awb.text import bounded

#: Names an unknown-name observation lists: a catalogue of thousands (a server's, in a run whose model writes
#: actions as text) would otherwise be copied into the record at every miss.
NAMES_LISTED = 40


def unknown_name(kind: str, name: str, available: list[str]) -> str:
    """What the model is told of a tool or subagent it named that is not there: the names closest to it
    first (a model that changed the case or a letter finds the right one), then at most `NAMES_LISTED`."""
    by_lower = {known.lower(): known for known in available}
    close = [by_lower[near] for near in difflib.get_close_matches(name.lower(), list(by_lower), n=3)]
    message = f"no {kind} named {name!r} is available; "
    if close:
        message += f"did you mean {' or '.join(repr(known) for known in close)}? "
    listed = available[:NAMES_LISTED]
    message += f"available: {listed}"
    if len(available) > len(listed):
        message += f" (and {len(available) - len(listed)} more)"
    return message


class Tell(Protocol):
    """Tells one event of the run (the loop's: it knows the agent, the depth and the step)."""

    def __call__(self, kind: EventType, **data: Any) -> Awaitable[None]: ...


class ActionExecutor:
    """The loop's hands: runs the actions of one agent's run against its tools (subagents included)."""

    def __init__(
        self,
        agent: type[Agent],
        tools: Toolbox,
        scope: RunScope,
        context: Context,
        tell: Tell,
        *,
        depth: int,
        subagents: dict[str, type[Agent]],
    ) -> None:
        self.agent, self.tools, self.scope, self.context = agent, tools, scope, context
        self._tell = tell
        self.depth, self.subagents = depth, subagents
        self.tool_calls: list[ToolCallRecord] = []
        #: Calls counted against max_tool_calls (a lookup such as the planner's search_tools is not).
        self._counted_calls = 0
        #: The step whose `spawn_subagent` is running, so the subagent's record lands in it.
        self.spawning: StepRecord | None = None

    async def execute(self, step: StepRecord, action: Action) -> Ending | None:
        """Run `action` (anything but `done`); an ending when it ends the run."""
        budget = self.agent.budget
        if isinstance(action, CallTool):
            spec = self.tools.resolve(action.tool, "tool")
            counted = spec is None or spec.counted
            if counted and (
                self._counted_calls >= budget.max_tool_calls
                or self.scope.tool_calls >= self.scope.budget.max_tool_calls
            ):
                limit = min(budget.max_tool_calls, self.scope.budget.max_tool_calls)
                return stopped("max_tool_calls", "the tool-call budget is spent", limit=limit)
            outcome = await self._call_tool(step, action, spec)
            if outcome is not None and not outcome.ok and self.agent.stop_on_tool_error:
                return stopped("tool_error", f"tool {action.tool!r} failed", result=to_text(outcome.payload))
        elif isinstance(action, SpawnSubagent):
            await self._spawn(step, action)
            return self._stopped_with(step.subagent)
        elif isinstance(action, RunCode):
            return await self._run_code(step, action)
        return None

    def _stopped_with(self, member: SubagentCallRecord | None) -> Ending | None:
        """The run's ending when `member` was stopped by the run's own tool-call budget, which it shares:
        the run ends as a whole, as it would had this agent tried the call, rather than spawn members that
        can call nothing, a model request each, until its iterations run out. A member that spent only a
        smaller budget of its own leaves the run going."""
        if member is None or member.termination_reason != "max_tool_calls":
            return None
        if self.scope.tool_calls < self.scope.budget.max_tool_calls:
            return None
        return stopped("max_tool_calls", "the tool-call budget is spent", limit=self.scope.budget.max_tool_calls)

    async def tell_rejected(self, step: StepRecord) -> None:
        rejected = step.rejected[-1]
        await self._tell("rejected", code=rejected.code, message=rejected.message)

    @property
    def code_mode(self) -> bool:
        """Whether this agent may run plans: it asks for code mode itself, and the run can execute them. A
        subagent does not get `run_code` from a parent that has it: its tools are what it declares."""
        return self.agent.code_mode and self.scope.code_runner is not None

    async def _run_code(self, step: StepRecord, action: RunCode) -> Ending | None:
        runner = self.scope.code_runner
        if runner is None or not self.code_mode:
            self.context.add("tool_error", "run_code", "run_code is not available in this run; use call_tool")
            return None
        try:
            # The runner serves the top-level agent's tools; a subagent's plans reach only its own.
            servers = None if self.depth == 0 else self.agent.tools
            await self._invoke(step, "run_code", {"code": action.code}, lambda: runner(action.code, servers))
        except StopRun as stop:
            return stopped(stop.reason, stop.message, **stop.details)
        return None

    def _unknown(self, step: StepRecord, kind: str, name: str) -> None:
        available = [s.name for s in self.tools.specs("tool" if kind == "tool" else "subagent")]
        message = unknown_name(kind, name, available)
        step.rejected.append(RejectedAction(code=f"{kind}_not_found", message=message, reply=name))
        self.context.add("tool_error", name, message)

    async def _call_tool(self, step: StepRecord, action: CallTool, spec: ToolSpec | None) -> ToolOutcome | None:
        """`action` on the tool it names (`spec`, resolved by the caller; None when there is none)."""
        if spec is None:
            self._unknown(step, "tool", action.tool)
            await self.tell_rejected(step)
            return None
        self.scope.tool_calls += spec.counted
        self._counted_calls += spec.counted
        try:
            return await self._invoke(
                step, spec.name, action.arguments, lambda: self.tools.call(spec, action.arguments)
            )
        finally:  # a call the run's end cut off is recorded too
            if step.tool_call is not None:
                self.tool_calls.append(step.tool_call)

    async def _invoke(
        self, step: StepRecord, name: str, arguments: dict[str, Any], call: Callable[[], Awaitable[ToolOutcome]]
    ) -> ToolOutcome:
        """Run one tool call (or plan): told as events, traced, recorded on the step, remembered."""
        await self._tell("tool_call", tool=name, arguments=bounded(arguments))
        started = anyio.current_time()
        with span(
            f"execute_tool {name}", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
        ) as current:
            stop: StopRun | None = None
            try:
                outcome = await call()
            except StopRun as raised:
                if raised.outcome is None:
                    raise
                stop, outcome = raised, raised.outcome
            except anyio.get_cancelled_exc_class():
                self._abandoned(step, name, arguments, anyio.current_time() - started)
                raise
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
            # A failure's message can be a tool's whole reply: cut, as the call's arguments are.
            error=None if error is None else bounded(error.model_dump()),
        )
        self.context.add("tool_result" if outcome.ok else "tool_error", name, outcome.payload)
        if stop is not None:  # what the call did before it stopped is recorded and remembered first
            raise stop
        return outcome

    def _abandoned(self, step: StepRecord, name: str, arguments: dict[str, Any], duration: float) -> None:
        """Record and remember a call the run's end (its deadline, a cancel) cut off: it may have had its
        effect, and the result should say which call was running. No awaits: the run is being cancelled."""
        error = ToolError(code="cancelled", message=f"the run ended after {duration:.2f} s while {name} ran")
        step.tool_call = ToolCallRecord(
            name=name, arguments=arguments, duration_seconds=duration, ok=False, error=error
        )
        self.context.add("tool_error", name, error.message)

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
        self.spawning = step
        outcome = await self.tools.call(spec, task.model_dump(mode="json"))
        self.context.add("subagent_output" if outcome.ok else "subagent_error", spec.name, outcome.payload)
