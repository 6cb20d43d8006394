"""`awb plan "<task>"`: a thin shell over `execute_mcp_task`, printing the result as JSON."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from awb.agents.events import RunEvent
    from awb.planner.task import MCPTaskResult

# The command is registered on `awb` at start-up; what it runs is imported when it runs, so that
# `awb --help` does not pay for the MCP SDK and the agent runtime.


def plan_command(
    task: Annotated[str, typer.Argument(help="What to do, in words.")],
    model: Annotated[str, typer.Option(help="Model spec, e.g. openai:gpt-4o-mini.")] = "openai:gpt-4o-mini",
    base_url: Annotated[str | None, typer.Option(help="Provider base URL (vLLM, Ollama, ...).")] = None,
    servers: Annotated[
        Path | None, typer.Option("--servers", help='MCP servers file: {"mcpServers": {name: {command|url, ...}}}.')
    ] = None,
    server: Annotated[
        list[str] | None,
        typer.Option(metavar="<NAME=COMMAND-or-URL>", help="An MCP server, by name; repeatable."),
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Path to awb.config.json.")] = None,
    mode: Annotated[
        str, typer.Option(metavar="auto|direct|code", help="auto (model chooses), direct (no plans) or code.")
    ] = "auto",
    search_mode: Annotated[
        str,
        typer.Option(
            metavar="auto|text|hybrid",
            help="Tool ranking: auto (hybrid when the embed extra is installed), text or hybrid.",
        ),
    ] = "auto",
    max_steps: Annotated[int, typer.Option(help="Most model turns.")] = 10,
    max_tool_calls: Annotated[int, typer.Option(help="Most tool calls, plans' included.")] = 30,
    max_code_runs: Annotated[int, typer.Option(help="Most plans run.")] = 3,
    max_cost_usd: Annotated[float, typer.Option(help="Most LLM spend (priced models only).")] = 0.50,
    workspace: Annotated[
        Path | None, typer.Option(help="Where full payloads of summarised results are stored.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help='Errors as {"error": {...}} on stderr.')] = False,
) -> None:
    """Run one task with the planner: search tools, call them or run a sandboxed plan, print the result."""
    import anyio
    from pydantic import ValidationError
    from rich.console import Console

    from awb.agents.cli import resolve_servers
    from awb.cli.output import fail, options_error
    from awb.cli.safe_text import plain
    from awb.config import load_config
    from awb.errors import AwbError
    from awb.planner.budget import Budget
    from awb.planner.task import Mode, execute_mcp_task
    from awb.search.vector_cache import vector_cache_at

    if mode not in ("auto", "direct", "code"):
        raise typer.BadParameter("mode must be auto, direct or code", param_hint="--mode")
    if search_mode not in ("auto", "text", "hybrid"):
        raise typer.BadParameter("search mode must be auto, text or hybrid", param_hint="--search-mode")
    stderr = Console(stderr=True)
    progress = sys.stderr.isatty()

    def on_event(event: RunEvent) -> None:
        if progress and event.type in ("tool_call", "done") and event.depth == 0:
            # A tool's name comes from an MCP server: shown literally, never as markup or escape sequences.
            line = plain(f"step {event.step}", style="dim") + plain(f" {event.type} {event.data.get('tool', '')}")
            stderr.print(line, highlight=False)

    try:
        budget = Budget(
            max_steps=max_steps,
            max_tool_calls=max_tool_calls,
            max_code_runs=max_code_runs,
            max_llm_cost_usd=max_cost_usd,
        )
    except ValidationError as err:
        options = {
            "max_steps": "--max-steps",
            "max_tool_calls": "--max-tool-calls",
            "max_code_runs": "--max-code-runs",
            "max_llm_cost_usd": "--max-cost-usd",
        }
        fail(options_error(err, options), as_json)
    try:
        targets = resolve_servers(servers, server or [], config)
        settings = load_config(config).search
        cache = vector_cache_at(settings.vector_cache, settings.vector_cache_entries)
        chosen: Mode = "auto" if mode == "auto" else "direct" if mode == "direct" else "code"

        async def main() -> MCPTaskResult:
            return await execute_mcp_task(
                task,
                servers=targets,
                model=model,
                base_url=base_url,
                budget=budget,
                mode=chosen,
                workspace=workspace,
                search_mode="text" if search_mode == "text" else "hybrid" if search_mode == "hybrid" else "auto",
                on_event=on_event,
                vector_cache=cache if cache is not None else "off",
            )

        try:
            result = anyio.run(main)
        finally:
            if cache is not None:
                cache.close()
    except AwbError as err:
        fail(err, as_json)
    typer.echo(result.model_dump_json(indent=2))
    if result.termination_reason == "refused":
        # As `awb agents run`: the result is printed, and the exit code says the model declined, not a failure.
        from awb.agents.errors import ModelRefused

        raise typer.Exit(ModelRefused.exit_code)
    if not result.success:
        raise typer.Exit(1)
