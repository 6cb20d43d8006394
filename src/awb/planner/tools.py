"""What the planner's model can do besides `done`: search tools, call one directly, or run a plan.

Every result passes through the same gate before it enters the context: redacted, and summarised
when it is large (`summarize_payload`), with the full payload stored when a workspace is given.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from awb.agents.scope import RunScope
from awb.agents.toolbox import Toolbox, ToolOutcome, ToolSpec
from awb.planner.budget import Budget
from awb.planner.calls import CallMade
from awb.planner.code_mode import CodeMode
from awb.planner.discovery import DetailLevel, ToolIndex
from awb.planner.plan_runner import PlanRunner, SandboxResult
from awb.planner.summaries import needs_summary, summarize_payload
from awb.planner.telemetry import TaskTelemetry
from awb.redaction import off_loop, redact_payload

SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What the tool should do, in a few words."},
        "detail_level": {
            "type": "string",
            "enum": ["summary", "full"],
            "description": "`full` adds each tool's whole description and input schema.",
        },
        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "How many tools (default 10)."},
    },
    "required": ["query"],
}
CALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "server": {"type": "string", "description": "The server, as search_tools gave it."},
        "tool": {"type": "string", "description": "The tool, as search_tools gave it."},
        "arguments": {"type": "object", "description": "The tool's arguments, matching its parameters."},
    },
    "required": ["server", "tool"],
}


class PlannerTools:
    def __init__(
        self,
        servers: Toolbox,
        index: ToolIndex,
        runner: PlanRunner,
        scope: RunScope,
        budget: Budget,
        telemetry: TaskTelemetry,
        *,
        summarize: bool,
        summary_threshold: int,
        storage: Path | None,
    ) -> None:
        self.servers, self.index, self.runner, self.scope = servers, index, runner, scope
        self.budget, self.telemetry = budget, telemetry
        self.summarize, self.summary_threshold, self.storage = summarize, summary_threshold, storage
        self.code_mode = CodeMode(
            runner,
            scope,
            max_tool_calls=budget.max_tool_calls,
            max_code_runs=budget.max_code_runs,
            for_context=self._for_context,
            on_run=self._told,
        )
        self.storage_refs: list[str] = []
        #: Every call of a server's tool, direct or from a plan, in order: what a stopped task reports.
        self.calls: list[CallMade] = []
        self._labels = 0

    def toolbox(self) -> Toolbox:
        tools = Toolbox()
        tools.add(
            ToolSpec(
                "planner.search_tools", "Find tools of the connected servers.", SEARCH_SCHEMA, "planner", counted=False
            ),
            self.search_tools,
        )
        tools.add(
            ToolSpec("planner.call_tool", "Call one tool of a connected server directly.", CALL_SCHEMA, "planner"),
            self.call_tool,
        )
        return tools

    async def search_tools(self, arguments: dict[str, Any]) -> ToolOutcome:
        query = str(arguments.get("query", ""))
        detail: DetailLevel = "full" if arguments.get("detail_level") == "full" else "summary"
        limit = arguments.get("limit", 10)
        # Servers may have changed their tools since the task began (a workbench crafts and equips
        # mid-task): re-read those that said so (list_changed), that we called since, or that cannot say.
        before = sum(self.servers.relisted.values())
        await self.servers.refresh()
        await self.index.refresh_off_loop(self.servers.specs("tool"))
        rows = await self.index.search_off_loop(
            query, detail_level=detail, limit=limit if isinstance(limit, int) else 10
        )
        relisted = sum(self.servers.relisted.values()) - before
        self.telemetry.emit("mcp.search.run", query=query, detail_level=detail, results=len(rows), relisted=relisted)
        return ToolOutcome(ok=True, payload=rows)

    async def call_tool(self, arguments: dict[str, Any]) -> ToolOutcome:
        server, tool = str(arguments.get("server", "")), str(arguments.get("tool", ""))
        payload = arguments.get("arguments") or {}
        spec = self.servers.resolve(f"{server}.{tool}", "tool")
        if spec is None and await self.servers.refresh(force=True):
            # A tool the model knows of before we heard of it (crafted a moment ago): read the lists again.
            await self.index.refresh_off_loop(self.servers.specs("tool"))
            spec = self.servers.resolve(f"{server}.{tool}", "tool")
        if spec is None or not isinstance(payload, dict):
            message = (
                f"arguments of {server}.{tool} must be an object"
                if spec is not None
                else f"no tool {tool!r} on server {server!r}; find tools with planner.search_tools"
            )
            self.telemetry.emit("mcp.action.called", server=server, tool=tool, ok=False, error=message)
            return ToolOutcome(
                ok=False, payload=message, error_code="tool_not_found" if spec is None else "invalid_params"
            )
        made = CallMade(spec.namespace, spec.name[len(spec.namespace) + 1 :], "direct")
        self.calls.append(made)
        outcome = await self.servers.call(spec, payload)
        made.outcome = "ok" if outcome.ok else "failed"
        result = await self._for_context(f"{server}.{tool}", outcome.payload)
        self.telemetry.emit(
            "mcp.action.called",
            server=server,
            tool=tool,
            request=payload,
            ok=outcome.ok,
            summary_ref=result.get("storage_ref") if isinstance(result, dict) and "storage_ref" in result else None,
        )
        return ToolOutcome(ok=outcome.ok, payload=result, error_code=outcome.error_code)

    def _told(self, result: SandboxResult) -> None:
        self.calls.extend(result.calls)
        self.telemetry.emit(
            "mcp.sandbox.run",
            success=result.success,
            tool_calls=result.tool_calls,
            timed_out=result.timed_out,
            error_code=result.error_code,
            log_lines=len(result.logs),
        )

    async def _for_context(self, label: str, payload: Any) -> Any:
        """A result as the model may see it: redacted, and summarised past the threshold. Made in a worker
        thread (`off_loop`): a 20 MB result held the event loop 1.5 s while it was redacted."""
        if not self.summarize or not await off_loop(needs_summary, payload, self.summary_threshold):
            return await off_loop(redact_payload, payload)
        self._labels += 1
        shorten = partial(summarize_payload, purpose="for_planning", storage_dir=self.storage)
        summary = await off_loop(shorten, f"{self._labels:02d}-{label}", payload)
        if summary["storage_ref"]:
            self.storage_refs.append(summary["storage_ref"])
        self.telemetry.emit(
            "mcp.summary.created",
            label=summary["label"],
            original_size=summary["original_size"],
            storage_ref=summary["storage_ref"],
        )
        return summary
