"""`awb blueprints validate|run|list|schemas`: the REST API's blueprint endpoints from the terminal.

A thin layer over `awb.blueprints`; blueprints run here may start MCP servers by command (the user runs
their own file), and `workbench` arms get this workbench's own tools in-process. The blueprint runtime
is imported by each command, so other commands (and `awb start`) never load it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from awb.safe_text import visible

if TYPE_CHECKING:
    from awb.blueprints.runner import RunReply
    from awb.blueprints.schema import Blueprint
    from awb.config import Config

blueprints_app = typer.Typer(
    help="Validate, run and list agent blueprints (YAML): validate, run, list, schemas.", no_args_is_help=True
)

ConfigOption = Annotated[Path | None, typer.Option("--config", "-c", help="Path to awb.config.json.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


def _read(source: str, config: Config) -> Blueprint:
    """A blueprint from a file path, or by id from the blueprints directory."""
    from awb.blueprints.files import BlueprintFiles, parse_yaml, read_blueprint_text
    from awb.errors import InvalidParams

    bases = tuple(config.blueprints.knowledge)
    path = Path(source)
    if path.is_file():
        return parse_yaml(read_blueprint_text(path, str(path)), source=str(path), knowledge_bases=bases)
    found = BlueprintFiles(config.blueprints_dir, knowledge_bases=bases).find(source)
    if found is None:
        raise InvalidParams(f"{source!r} is neither a file nor the id of a saved blueprint", source=source)
    return found


@blueprints_app.command("validate")
def validate_command(
    file: Annotated[Path, typer.Argument(help="Blueprint YAML (or JSON) file.")],
    config_path: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check a blueprint file; print its id and normalized form, or every field error."""
    from awb.cli.output import fail, print_json
    from awb.config import load_config
    from awb.errors import AwbError

    try:
        blueprint = _read(str(file), load_config(config_path))
    except AwbError as err:
        fail(err, as_json)
    if as_json:
        print_json(
            {"valid": True, "blueprint_id": blueprint.blueprint_id(), "blueprint": blueprint.model_dump(mode="json")}
        )
    else:
        typer.echo(visible(f"valid: {blueprint.blueprint_id()} ({blueprint.name}, {blueprint.legs.mode})"))


async def _run(config: Config, blueprint: Blueprint, message: str, session_id: str | None) -> RunReply:
    import os
    from contextlib import AsyncExitStack

    from awb.blueprints.compile import RuntimeOptions
    from awb.blueprints.schema import WorkbenchArm
    from awb.blueprints.service import BlueprintService
    from awb.blueprints.session_tables import open_session_store
    from awb.server.mcp import McpFace
    from awb.workbench import Workbench

    async with AsyncExitStack() as stack:
        target = None
        if any(isinstance(arm, WorkbenchArm) for arm in blueprint.arms):
            workbench = await stack.enter_async_context(Workbench(config))
            target = McpFace(workbench).server
        options = RuntimeOptions(
            environ=dict(os.environ),
            tavily_base_url=config.blueprints.tavily_base_url,
            workbench_target=target,
            allow_mcp_commands=True,
        )
        service = BlueprintService(config, open_session_store(config), options=options)
        stack.callback(service.close)
        reply, _ = await service.run(message=message, blueprint=blueprint, blueprint_id=None, session_id=session_id)
    return reply


@blueprints_app.command("run")
def run_command(
    source: Annotated[
        str, typer.Argument(metavar="file-or-id", help="Blueprint file, or the id of a saved blueprint.")
    ],
    message: Annotated[str, typer.Argument(help="The message to the agent.")],
    session_id: Annotated[str | None, typer.Option("--session-id", help="Continue this session.")] = None,
    target: Annotated[
        str, typer.Option(metavar="awb|agno", help="awb (this runtime) or agno (needs the agno extra).")
    ] = "awb",
    config_path: ConfigOption = None,
    as_json: Annotated[bool, typer.Option("--json", help='Errors as {"error": {...}} on stderr.')] = False,
) -> None:
    """Run a blueprint on one message and print the reply as JSON (session and run ids included)."""
    import logging

    import anyio

    from awb.cli.output import fail, print_json
    from awb.config import load_config
    from awb.errors import AwbError, InvalidParams

    # A guardrail's warning is in the error this command prints; Python's last-resort handler would
    # print it a second time, as a stray log line.
    logging.getLogger("awb").addHandler(logging.NullHandler())
    try:
        config = load_config(config_path)
        blueprint = _read(source, config)
        if target == "agno":
            print_json(anyio.run(_run_agno, config, config_path, blueprint, message, session_id))
            return
        if target != "awb":
            raise InvalidParams(f"unknown target {target!r}; targets: awb, agno", target=target)
        reply = anyio.run(_run, config, blueprint, message, session_id)
    except AwbError as err:
        fail(err, as_json)
    print_json(reply.model_dump(mode="json"))
    if reply.status == "refused":
        # As `awb agents run`: the reply is printed, and the exit code says there is no answer in it.
        from awb.agents.errors import ModelRefused

        raise typer.Exit(ModelRefused.exit_code)


async def _run_agno(
    config: Config, config_path: Path | None, blueprint: Blueprint, message: str, session_id: str | None
) -> dict[str, object]:
    import os
    import uuid

    from awb.blueprints.agno_target import compile_to_agno, run_agno, workspace_workbench
    from awb.blueprints.compile import RuntimeOptions
    from awb.blueprints.journal import RunJournal, log_limits
    from awb.blueprints.knowledge import KnowledgeLibrary
    from awb.config import find_config_file

    knowledge = KnowledgeLibrary.from_config(config)
    options = RuntimeOptions(
        environ=dict(os.environ),
        tavily_base_url=config.blueprints.tavily_base_url,
        workbench_target=workspace_workbench(find_config_file(config_path)),
        allow_mcp_commands=True,
        knowledge=knowledge,
    )
    journal = RunJournal(uuid.uuid4().hex, blueprint.spine.max_tool_calls, options.secrets(), log_limits(config))
    # Agno's sessions sit beside the inventory, so `--session-id` goes on where the last run stopped.
    memory = None if str(config.inventory_path) == ":memory:" else config.inventory_path.parent / "agno.db"
    session_id = session_id or uuid.uuid4().hex
    try:
        agno = compile_to_agno(blueprint, options, journal=journal, db_file=memory)
        response = await run_agno(agno, blueprint, message, journal=journal, session_id=session_id)
    finally:
        knowledge.close()
    entries = [entry.model_dump(mode="json") for entry in journal.entries]
    return {"response": response, "target": "agno", "session_id": session_id, "run_id": journal.run_id, "log": entries}


@blueprints_app.command("list")
def list_command(config_path: ConfigOption = None, as_json: JsonOption = False) -> None:
    """The blueprint files in the blueprints directory, newest first."""
    from awb.blueprints.files import BlueprintFiles
    from awb.cli.output import print_json, table
    from awb.config import load_config

    config = load_config(config_path)
    files = BlueprintFiles(config.blueprints_dir, knowledge_bases=tuple(config.blueprints.knowledge)).scan()
    if as_json:
        print_json([entry.model_dump(mode="json") for entry in files])
        return
    rows = [
        (f.file, f.blueprint_id or "-", f.name or "-", f.mode or "-", (f.error or {}).get("message", "")) for f in files
    ]
    table(f"blueprints in {config.blueprints_dir}", ["file", "id", "name", "mode", "error"], rows)


@blueprints_app.command("schemas")
def schemas_command(
    part: Annotated[str | None, typer.Option(help="Only this part: head, arms, legs, heart, spine, blueprint.")] = None,
    config_path: ConfigOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Errors as JSON on stderr (the schemas are JSON).")] = False,
) -> None:
    """The component schemas the builder uses (choices, ranges and JSON Schema), as JSON."""
    from awb.blueprints.components import component_schemas
    from awb.cli.output import fail, print_json
    from awb.config import load_config
    from awb.errors import AwbError, InvalidParams

    try:
        schemas = component_schemas(tuple(load_config(config_path).blueprints.knowledge))
    except AwbError as err:
        fail(err, as_json)
    if part is not None and part not in schemas:
        fail(InvalidParams(f"unknown part {part!r}; parts: {', '.join(schemas)}", part=part), as_json)
    print_json(schemas if part is None else schemas[part])
