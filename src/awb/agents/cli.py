"""`awb agents run|list`, and `artificer agents`, the alias its users know. A thin layer over `run_agent`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from awb.errors import AwbError, ConfigError

if TYPE_CHECKING:
    from awb.agents.mcp_client import ServerTarget
    from awb.agents.result import RunResult

# The agent runtime (and the MCP client under it) is imported by the commands, not here: `awb --help`
# and every other `awb` command load this module.
agents_app = typer.Typer(help="Run typed agents that use MCP tools: run, list.", no_args_is_help=True)

AgentsDir = Annotated[
    Path, typer.Option("--agents-dir", envvar="AWB_AGENTS_DIR", help="Directory searched for agent classes.")
]


def parse_servers(values: list[str]) -> dict[str, ServerTarget]:
    servers: dict[str, ServerTarget] = {}
    for value in values:
        name, sep, target = value.partition("=")
        if not sep or not name or not target:
            raise ConfigError(f"--server takes NAME=COMMAND-or-URL, got {value!r}")
        servers[name] = target
    return servers


def _fail(err: AwbError) -> typer.Exit:
    typer.echo(json.dumps({"error": err.to_dict()}, default=str), err=True)
    return typer.Exit(err.exit_code)


@agents_app.command("run")
def run_command(
    agent: Annotated[str, typer.Argument(help="Agent name, or pkg.module:ClassName.")],
    input: Annotated[str, typer.Argument(help="JSON input, or a plain string for single-field inputs.")],
    model: Annotated[str | None, typer.Option(help="Model spec, e.g. openai:gpt-4o-mini.")] = None,
    base_url: Annotated[str | None, typer.Option(help="Provider base URL (vLLM, Ollama, ...).")] = None,
    server: Annotated[list[str] | None, typer.Option(help="MCP server NAME=COMMAND-or-URL; repeatable.")] = None,
    agents_dir: AgentsDir = Path("agents"),
) -> None:
    """Run an agent once and print its structured result as JSON."""
    # Console scripts leave the working directory off sys.path; dotted agent paths expect it.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    import anyio

    from awb.agents.registry import load_agent
    from awb.agents.run import run_agent

    try:
        agent_class = load_agent(agent, agents_dir)
        servers = parse_servers(server or [])

        async def main() -> RunResult:
            return await run_agent(agent_class, input, model=model, servers=servers, base_url=base_url)

        result = anyio.run(main)
    except AwbError as err:
        raise _fail(err) from None
    typer.echo(result.model_dump_json(indent=2))
    if not result.ok:
        raise typer.Exit(1)


@agents_app.command("list")
def list_command(agents_dir: AgentsDir = Path("agents")) -> None:
    """Show the agents found in the agents directory."""
    from awb.agents.registry import discover

    for agent in discover(agents_dir):
        summary = agent.system_prompt.strip().splitlines()[0] if agent.system_prompt.strip() else ""
        typer.echo(f"{agent.mode}\ttools={','.join(agent.tools) or '-'}\t{summary}")


artificer_app = typer.Typer(help="Artificer: run typed agents (same as `awb agents run`).", no_args_is_help=True)
artificer_app.command("agents", help="Run an agent: artificer agents <AgentName> '<input>'.")(run_command)


@artificer_app.callback()
def _artificer() -> None:
    """Keeps `agents` a subcommand even though it is the only one."""


def artificer_main() -> None:
    artificer_app()
