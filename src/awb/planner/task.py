"""`execute_mcp_task`: one task string in, an `MCPTaskResult` out.

The planner is an agent of the one loop (`awb.agents`): its tools are `planner.search_tools` and
`planner.call_tool`, its `run_code` actions run as sandboxed plans, and the loop's budget carries
steps, tool calls and LLM cost. What the planner adds is context hygiene: only the tools a search
found are shown, large results become summaries, everything is redacted, and every step is told as
telemetry.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field

from awb.agents.agent import Agent
from awb.agents.budget import Budget as RunBudget
from awb.agents.events import Emitter, EventHandler, RunEvent
from awb.agents.loop import run_loop
from awb.agents.mcp_client import CONNECT_TIMEOUT_SECONDS, ServerTarget, connect_servers
from awb.agents.models.base import Model
from awb.agents.models.spec import resolve_model
from awb.agents.pricing import has_price
from awb.agents.result import RunResult, TerminationReason
from awb.agents.scope import RunScope
from awb.agents.toolbox import Toolbox
from awb.errors import InvalidParams, check_unicode
from awb.planner.budget import Budget, BudgetSnapshot
from awb.planner.calls import CallMade, calls_report
from awb.planner.discovery import ToolIndex
from awb.planner.plan_runner import PlanRunner
from awb.planner.prompt import CODE_MODE_OFF, PLANNER_PROMPT
from awb.planner.summaries import SUMMARY_THRESHOLD_BYTES
from awb.planner.telemetry import TaskTelemetry
from awb.planner.tools import PlannerTools
from awb.redaction import redact_payload_off_loop
from awb.search.vector_cache import VectorCache, vector_cache_at

Mode = Literal["auto", "direct", "code"]
#: Budget endings, by the loop's termination reason, named as the planner's budget names them.
_LIMIT_NAMES = {
    "max_iterations": "max_steps",
    "max_tool_calls": "max_tool_calls",
    "max_code_runs": "max_code_runs",
    "max_cost": "max_llm_cost_usd",
    "max_tokens": "max_tokens",
    "timeout": "timeout_seconds",
}


class MCPTaskResult(BaseModel):
    task_id: str
    success: bool
    final_summary: str
    raw_outputs: dict[str, Any] = Field(default_factory=dict)
    budget_usage: BudgetSnapshot
    logs: list[dict[str, Any]] = Field(default_factory=list)
    error: str | None = None
    #: Why the task's run stopped, as a run's `termination_reason`: `done` when it answered, `refused` when the
    #: model declined (not a failure: `awb plan` exits 3), a limit's or a failure's name otherwise.
    termination_reason: TerminationReason = "done"
    #: The model's words when it declined the task (`termination_reason: "refused"`).
    refusal: str | None = None


class PlanTask(BaseModel):
    task: str
    tools: list[dict[str, Any]] = Field(description="The search_tools results for the task: the tool menu.")
    budget: dict[str, Any] = Field(default_factory=dict)
    extra_context: dict[str, Any] | None = None


class TaskOutput(BaseModel):
    summary: str = Field(description="What was done and found, for the user.")
    data: Any = Field(None, description="The task's result: counts, ids, rows (small).")


async def execute_mcp_task(
    task: str,
    *,
    servers: Mapping[str, ServerTarget],
    model: Model | str,
    budget: Budget | None = None,
    extra_context: dict[str, Any] | None = None,
    user_id: str = "singleton",
    mode: Mode = "auto",
    summarize: bool = True,
    summary_threshold: int = SUMMARY_THRESHOLD_BYTES,
    menu_size: int = 12,
    search_mode: Literal["auto", "text", "hybrid"] = "auto",
    workspace: Path | None = None,
    base_url: str | None = None,
    context_chars: int = 24_000,
    on_event: EventHandler | None = None,
    vector_cache: VectorCache | Path | Literal["default", "off"] = "default",
) -> MCPTaskResult:
    """Discover tools on `servers`, plan with `model`, act, and return a structured result.

    `search_mode`: "auto" ranks tools like `awb_search` in hybrid mode (BM25 fused with embeddings) when the
    `embed` extra is installed, by text alone otherwise. `mode`: "auto" lets the model choose direct calls or code plans, "direct" refuses plans, "code"
    still allows direct calls but says plans are preferred. `summarize=False` puts raw results into the
    context (the baseline the code-mode benchmark compares against). Full payloads of summarised
    results are stored under `workspace/tool-results/<task_id>/` when a workspace is given.
    `vector_cache`: where the tools' vectors are kept between tasks ("default": the user's cache
    directory, `awb.search.vector_cache.default_cache_path()`; a path; an open `VectorCache`, which the caller closes; "off").
    """
    check_unicode(task, "task")
    if not task.strip():
        # Nothing to search tools for or to ask a model about: refused before a server starts or a paid request.
        raise InvalidParams("the task is empty: say what to do")
    check_unicode(extra_context, "extra_context")
    budget = budget or Budget()
    task_id = uuid.uuid4().hex[:12]
    telemetry = TaskTelemetry(task_id, user_id)
    chosen = resolve_model(model, base_url=base_url) if isinstance(model, str) else model
    storage = workspace / "tool-results" / task_id if workspace is not None else None
    wait = min(CONNECT_TIMEOUT_SECONDS, budget.timeout_seconds)
    async with connect_servers(servers, timeout=wait, within=budget.timeout_seconds) as toolbox:
        cache = _vector_cache(vector_cache)
        index = ToolIndex(mode=search_mode, vector_cache=cache)
        try:
            return await _plan(
                task,
                toolbox,
                index,
                chosen,
                budget,
                telemetry,
                extra_context=extra_context,
                mode=mode,
                summarize=summarize,
                summary_threshold=summary_threshold,
                menu_size=menu_size,
                storage=storage,
                context_chars=context_chars,
                on_event=on_event,
            )
        finally:
            index.close()
            if cache is not None and cache is not vector_cache:
                cache.close()


def _vector_cache(wanted: VectorCache | Path | Literal["default", "off"]) -> VectorCache | None:
    if isinstance(wanted, VectorCache):
        return wanted
    if wanted == "off":
        return None
    return vector_cache_at(None if wanted == "default" else Path(wanted))


def execute_mcp_task_sync(task: str, **kwargs: Any) -> MCPTaskResult:
    """`execute_mcp_task` for callers without an event loop."""

    async def run() -> MCPTaskResult:
        return await execute_mcp_task(task, **kwargs)

    return anyio.run(run)


async def _plan(
    task: str,
    toolbox: Toolbox,
    index: ToolIndex,
    model: Model,
    budget: Budget,
    telemetry: TaskTelemetry,
    *,
    extra_context: dict[str, Any] | None,
    mode: Mode,
    summarize: bool,
    summary_threshold: int,
    menu_size: int,
    storage: Path | None,
    context_chars: int,
    on_event: EventHandler | None,
) -> MCPTaskResult:
    await index.refresh_off_loop(toolbox.specs("tool"))
    menu = await index.search_off_loop(task, limit=menu_size)
    # Words rarely cover every tool a task needs; the menu's spare room lists others, unranked.
    seen = {(row["server"], row["tool"]) for row in menu}
    unranked = await index.search_off_loop("", limit=menu_size)
    menu += [row for row in unranked if (row["server"], row["tool"]) not in seen]
    menu = menu[:menu_size]
    telemetry.emit("mcp.search.run", query=task, results=len(menu), initial=True)
    run_budget = RunBudget(
        max_iterations=budget.max_steps,
        max_tool_calls=budget.max_tool_calls,
        timeout_seconds=budget.timeout_seconds,
        max_cost_usd=budget.max_llm_cost_usd if budget.max_llm_cost_usd is not None and has_price(model) else None,
    )
    planner_agent = _planner_class(run_budget, code=mode != "direct", context_chars=context_chars)
    emit = Emitter(on_event)

    async def track(event: RunEvent) -> None:
        telemetry.step_index = event.step
        await emit(event)

    scope = RunScope(run_budget, emit=Emitter(track))

    def bridged(server: str, tool: str, payload: dict[str, Any], ok: bool, ms: float) -> None:
        telemetry.emit(
            "mcp.action.called", server=server, tool=tool, request=payload, ok=ok, via="plan", ms=round(ms, 2)
        )

    async with PlanRunner(toolbox, max_tool_calls=budget.max_tool_calls, on_call=bridged) as runner:
        tools = PlannerTools(
            toolbox,
            index,
            runner,
            scope,
            budget,
            telemetry,
            summarize=summarize,
            summary_threshold=summary_threshold,
            storage=storage,
        )
        if mode != "direct":
            scope.code_runner = tools.code_mode
        plan_task = PlanTask(
            task=task,
            tools=menu,
            budget=budget.model_dump(),
            extra_context=await redact_payload_off_loop(extra_context),
        )
        result = await run_loop(planner_agent, plan_task, model, tools.toolbox(), scope=scope)
    return _task_result(task_id=telemetry.task_id, run=result, budget=budget, tools=tools, telemetry=telemetry)


def _planner_class(run_budget: RunBudget, *, code: bool, context_chars: int) -> type[Agent]:
    prompt = PLANNER_PROMPT + ("" if code else CODE_MODE_OFF)
    return type(
        "Planner",
        (Agent,),
        {
            "mode": "planner",
            "tools": ("planner",),
            "Input": PlanTask,
            "Output": TaskOutput,
            "system_prompt": prompt,
            "budget": run_budget,
            "context_chars": context_chars,
            "code_mode": code,
        },
    )


def _task_result(
    *, task_id: str, run: RunResult, budget: Budget, tools: PlannerTools, telemetry: TaskTelemetry
) -> MCPTaskResult:
    snapshot = BudgetSnapshot(
        steps_taken=run.iterations,
        tool_calls=tools.scope.tool_calls,
        code_runs=tools.code_mode.code_runs,
        llm_cost_usd=run.usage.cost_usd,
        input_tokens=run.usage.input_tokens,
        output_tokens=run.usage.output_tokens,
        model_requests=run.usage.requests,
        estimated_model_replies=run.usage.estimated_replies,
        limits=budget,
    )
    raw: dict[str, Any] = {"storage_refs": tools.storage_refs, "tool_calls": [c.as_dict() for c in tools.calls]}
    if run.ok and run.output is not None:
        raw["result"] = run.output.get("data")
        return MCPTaskResult(
            task_id=task_id,
            success=True,
            final_summary=str(run.output.get("summary", "")),
            raw_outputs=raw,
            budget_usage=snapshot,
            logs=telemetry.events,
        )
    reason = run.termination_reason
    message = (run.error or {}).get("message", reason)
    refusal: str | None = None
    limit = _LIMIT_NAMES.get(reason)
    if limit is not None:
        telemetry.emit("mcp.budget.exceeded", limit=limit, reason=reason, usage=snapshot.model_dump(exclude={"limits"}))
        error = f"budget exceeded: {limit} ({message})"
    elif reason == "refused":
        # Already "the model refused: <its words>"; the words alone are `refusal`, as a blueprint run's reply has them.
        error = str(message)
        refusal = str(((run.error or {}).get("details") or {}).get("refusal", ""))
    else:
        error = f"{reason}: {message}"
    return MCPTaskResult(
        task_id=task_id,
        success=False,
        final_summary=_partial_summary(run, tools.calls),
        raw_outputs=raw,
        budget_usage=snapshot,
        logs=telemetry.events,
        error=error,
        termination_reason=reason,
        refusal=refusal,
    )


def _partial_summary(run: RunResult, calls: list[CallMade]) -> str:
    """What the run did before it stopped: the tool calls it made, then its last output if any, else its
    latest observations."""
    lines = [f"(partial) {calls_report(calls)}."]
    partial = run.partial
    if partial is not None and isinstance(partial.last_output, dict) and partial.last_output.get("summary"):
        lines.append(f"Last proposed summary: {partial.last_output['summary']}")
    elif partial is not None:
        lines += [line[:400] for line in partial.observations[-4:]]
    return "\n".join(lines)
