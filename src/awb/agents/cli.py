"""`awb agents run|list`, and `artificer agents`, the alias its users know. A thin layer over `run_agent`.

`run` prints the `RunResult` as JSON on stdout. On a terminal it also shows a live progress view
(on stderr); piped, stdout carries only the JSON. `--verbose` writes every event as a JSON line to
stderr. Provider HTTP request logging stays off unless `--log-http`.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from awb.errors import AwbError, ConfigError
from awb.safe_text import visible

if TYPE_CHECKING:
    from awb.agents.agent import Agent
    from awb.agents.events import RunEvent
    from awb.agents.mcp_client import ServerTarget
    from awb.agents.models.settings import ModelSettings
    from awb.agents.result import RunResult

# The agent runtime (the MCP client, the providers, rich) is imported by the commands, not here:
# `awb --help` and every other `awb` command load this module.

agents_app = typer.Typer(help="Run typed agents that use MCP tools: run, list.", no_args_is_help=True)

AgentsDir = Annotated[
    Path, typer.Option("--agents-dir", envvar="AWB_AGENTS_DIR", help="Directory searched for agent classes.")
]
_HTTP_LOGGERS = ("httpx", "httpcore", "httpx2")


def parse_servers(values: list[str]) -> dict[str, ServerTarget]:
    """`--server NAME=COMMAND-or-URL` values; a command inherits the environment."""
    servers: dict[str, ServerTarget] = {}
    for value in values:
        name, sep, target = value.partition("=")
        if not sep or not name or not target:
            raise ConfigError(f"--server takes NAME=COMMAND-or-URL, got {value!r}")
        servers[name] = target
    return servers


def resolve_servers(
    servers_file: Path | None, server_options: list[str], config_file: Path | None
) -> dict[str, ServerTarget]:
    """`--servers FILE`, else `mcp_servers` of the config (file or `AWB_MCP_SERVERS`); `--server` overrides."""
    from awb.agents.servers import configured_servers, load_servers_file
    from awb.config import find_config_file, load_config

    if servers_file is not None:
        servers = load_servers_file(servers_file)
    else:
        config = load_config(config_file)
        found = find_config_file(config_file)
        base = found.parent.resolve() if found is not None else Path.cwd()
        servers = configured_servers(config.mcp_servers, base=base)
    servers.update(parse_servers(server_options))
    return servers


def _fail(err: AwbError, as_json: bool) -> typer.Exit:
    """The one CLI error format: `error (<code>): <message>` on stderr, or `{"error": ...}` with --json."""
    from awb.cli.output import report_error

    report_error(err, as_json)
    return typer.Exit(err.exit_code)


JsonErrors = Annotated[bool, typer.Option("--json", help='Errors as {"error": {...}} on stderr.')]


def _quiet_http(log_http: bool) -> None:
    for name in _HTTP_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO if log_http else logging.WARNING)
    if log_http:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        logging.getLogger("httpx").addHandler(handler)


def _settings(temperature: float | None, max_tokens: int | None, timeout: float | None) -> ModelSettings | None:
    from pydantic import ValidationError

    from awb.agents.models.settings import ModelSettings
    from awb.cli.output import options_error

    try:
        settings = ModelSettings(temperature=temperature, max_tokens=max_tokens, timeout_seconds=timeout)
    except ValidationError as err:
        options = {"temperature": "--temperature", "max_tokens": "--max-tokens", "timeout_seconds": "--timeout"}
        raise options_error(err, options) from None
    return settings if settings != ModelSettings() else None


@agents_app.command("run")
def run_command(
    agent: Annotated[str, typer.Argument(help="Agent name, or pkg.module:ClassName.")],
    input: Annotated[str, typer.Argument(help="JSON input, or a plain string for single-field inputs.")],
    model: Annotated[str | None, typer.Option(help="Model spec, e.g. openai:gpt-4o-mini.")] = None,
    base_url: Annotated[str | None, typer.Option(help="Provider base URL (vLLM, Ollama, ...).")] = None,
    server: Annotated[
        list[str] | None,
        typer.Option(metavar="<NAME=COMMAND-or-URL>", help="An MCP server, by name; repeatable."),
    ] = None,
    servers: Annotated[
        Path | None, typer.Option("--servers", help='MCP servers file: {"mcpServers": {name: {command|url, ...}}}.')
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Path to awb.config.json.")] = None,
    agents_dir: AgentsDir = Path("agents"),
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature.")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Most tokens one reply may have.")] = None,
    timeout: Annotated[float | None, typer.Option(help="Seconds one provider request may take.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Write every run event to stderr.")] = False,
    log_http: Annotated[bool, typer.Option("--log-http", help="Log provider HTTP requests to stderr.")] = False,
    as_json: JsonErrors = False,
) -> None:
    """Run an agent once and print its structured result as JSON."""
    # Console scripts leave the working directory off sys.path; dotted agent paths expect it.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    import anyio
    from rich.console import Console

    from awb.agents.errors import ModelRefused
    from awb.agents.progress import ProgressView
    from awb.agents.registry import load_agent
    from awb.agents.run import run_agent

    _quiet_http(log_http)
    stderr = Console(stderr=True)
    live = sys.stdout.isatty() and not verbose
    try:
        agent_class = load_agent(agent, agents_dir)
        targets = resolve_servers(servers, server or [], config)
        settings = _settings(temperature, max_tokens, timeout)
        view = ProgressView(stderr) if live else None

        def on_event(event: RunEvent) -> None:
            if verbose:
                stderr.print(event.model_dump_json(), markup=False, highlight=False, soft_wrap=True)
            if view is not None:
                view.handle(event)

        async def main() -> RunResult:
            return await run_agent(
                agent_class,
                input,
                model=model,
                servers=targets,
                base_url=base_url,
                model_settings=settings,
                on_event=on_event,
            )

        with view if view is not None else nullcontext():
            result = anyio.run(main)
    except AwbError as err:
        raise _fail(err, as_json) from None
    typer.echo(result.model_dump_json(indent=2))
    if result.termination_reason == "refused":
        raise typer.Exit(ModelRefused.exit_code)
    if not result.ok:
        raise typer.Exit(1)


def _summary(agent: type[Agent]) -> str:
    prompt = agent.system_prompt.strip()
    return prompt.splitlines()[0] if prompt else ""


def _list_line(agent: type[Agent], parents: list[str]) -> str:
    cells = [agent.mode, f"tools={','.join(agent.tools) or '-'}"]
    if agent.subagents:
        cells.append(f"subagents={','.join(sub.mode for sub in agent.subagents)}")
    if parents:
        cells.append(f"(subagent of {','.join(parents)})")
    cells.append(_summary(agent))
    # Tab-separated for scripts; a tab or an escape sequence inside a cell (a prompt's) is shown escaped.
    return "\t".join(visible(cell) for cell in cells)


def _list_entry(agent: type[Agent], parents: list[str]) -> dict[str, object]:
    return {
        "mode": agent.mode,
        "class": agent.__name__,
        "tools": list(agent.tools),
        "subagents": [sub.mode for sub in agent.subagents],
        "subagent_of": parents,
        "summary": _summary(agent),
    }


ListedAgentsDir = Annotated[
    Path | None,
    typer.Option(
        "--agents-dir",
        envvar="AWB_AGENTS_DIR",
        help="Directory searched for agent classes (default: agents/; a missing default lists nothing).",
    ),
]
JsonList = Annotated[
    bool, typer.Option("--json", help='The agents as a JSON array; errors as {"error": {...}} on stderr.')
]


@agents_app.command("list")
def list_command(agents_dir: ListedAgentsDir = None, as_json: JsonList = False) -> None:
    """Show the agents in the agents directory: allowed servers, subagents, first line of the prompt.

    A module that fails to import is one line on stderr; the others are still listed. Without an
    `agents/` directory here (and no --agents-dir) there is nothing to list, which is not an error; a
    directory that was named and is missing is.
    """
    from awb.agents.registry import Scan, scan

    directory = agents_dir if agents_dir is not None else Path("agents")
    try:
        found = scan(directory) if agents_dir is not None or directory.is_dir() else None
    except AwbError as err:
        raise _fail(err, as_json) from None
    if found is None:
        typer.echo(
            f"no agents directory at {directory.resolve()}: no agents to list (--agents-dir names one)", err=True
        )
        found = Scan()
    listed = [(agent, [other.mode for other in found.agents if agent in other.subagents]) for agent in found.agents]
    if as_json:
        typer.echo(json.dumps([_list_entry(agent, parents) for agent, parents in listed], indent=2))
    else:
        for agent, parents in listed:
            typer.echo(_list_line(agent, parents))
    for name, why in found.failures.items():
        typer.echo(visible(f"{name}: cannot import: {why}"), err=True)


def _artificer_app(args: list[str] | None = None) -> typer.Typer:
    """`artificer`, built as `awb` is (`awb.cli.main.plain_app`): plain help, `-h`, no completion options."""
    from awb.cli.main import plain_app

    app = plain_app(name="artificer", help="Artificer: run typed agents (same as `awb agents run`).")
    # The app's callback (its options) keeps `agents` a subcommand even though it is the only one.
    app.command("agents", help="Run an agent: artificer agents <AgentName> '<input>'.")(run_command)
    return app


artificer_app = _artificer_app()


def artificer_main() -> None:
    """The `artificer` console script: errors, usage mistakes included, are one line on stderr as `awb`'s are."""
    from awb.cli.main import main

    main(prog_name="artificer", build=_artificer_app)
