"""`awb`: initialise, start and stop the workbench, check its health, and look into the inventory."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer

from awb import __version__
from awb.agents.cli import agents_app
from awb.cli.db import db_app, store_check
from awb.cli.logs import setup_logging
from awb.cli.output import console, errors, fail, print_json, table
from awb.cli.staged import staged_app
from awb.cli.transfer import register as register_transfer
from awb.config import CONFIG_FILENAME, Config, default_config_json, load_config
from awb.errors import AwbError, ConfigError
from awb.inventory.models import MemoryLevel
from awb.inventory.open import describe
from awb.planner.cli import plan_command
from awb.workbench import Workbench

app = typer.Typer(
    name="awb",
    help="Agent Workbench: a crafting table for AI agents, served over MCP.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
inventory_app = typer.Typer(help="Look into the inventory: list, search, inspect.", no_args_is_help=True)
app.add_typer(inventory_app, name="inventory")
app.add_typer(agents_app, name="agents")
app.add_typer(staged_app, name="staged")
app.add_typer(db_app, name="db")
register_transfer(inventory_app)
app.command("plan")(plan_command)

ConfigOption = Annotated[
    Path | None, typer.Option("--config", "-c", help=f"Path to {CONFIG_FILENAME} (default: ./{CONFIG_FILENAME}).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
ToolArgument = Annotated[str, typer.Argument(help="tool_id or name.")]
InventoryOption = Annotated[Path | None, typer.Option("--inventory", help="Path of the inventory database.")]


def _config(path: Path | None, as_json: bool = False, **overrides: Any) -> Config:
    try:
        config = load_config(path)
    except ConfigError as error:
        fail(error, as_json)
    updates = {key: value for key, value in overrides.items() if value is not None}
    if "inventory_path" in updates:
        updates["inventory_path"] = Path(updates["inventory_path"]).resolve()
    return config.model_copy(update=updates) if updates else config


# --- set-up and life cycle ---------------------------------------------------------------------


@app.command()
def init(
    directory: Annotated[Path, typer.Argument(help="Where to create the workbench.")] = Path("."),
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing config.")] = False,
) -> None:
    """Create awb.config.json, the inventory database and a tools/ directory."""
    directory.mkdir(parents=True, exist_ok=True)
    config_path = directory / CONFIG_FILENAME
    if config_path.exists() and not force:
        errors.print(f"[red]{config_path} already exists[/]; use --force to overwrite it")
        raise typer.Exit(1)
    config_path.write_text(default_config_json(), encoding="utf-8")
    config = load_config(config_path)
    config.tools_dir.mkdir(parents=True, exist_ok=True)
    Workbench(config).store.close()
    console.print(f"created {config_path}, {config.inventory_path} and {config.tools_dir}/")


@app.command()
def start(
    config_path: ConfigOption = None,
    inventory: InventoryOption = None,
    port: Annotated[int | None, typer.Option(help="Port for --transport http (default 7777).")] = None,
    host: Annotated[str | None, typer.Option(help="Address for --transport http (default 127.0.0.1).")] = None,
    transport: Annotated[str, typer.Option(help="stdio (for MCP clients that spawn awb) or http.")] = "stdio",
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Start the MCP server (stdio by default; `--transport http` serves http://127.0.0.1:7777/mcp)."""
    from awb.server.transports import serve_http, serve_stdio

    if transport not in ("stdio", "http"):
        errors.print(f"[red]unknown transport {transport!r}[/]: use stdio or http")
        raise typer.Exit(2)
    config = _config(config_path, inventory_path=inventory, port=port, host=host)
    setup_logging(config.log_file, verbose)
    config.pid_file.parent.mkdir(parents=True, exist_ok=True)
    config.pid_file.write_text(str(os.getpid()), encoding="utf-8")
    if transport == "http":
        errors.print(f"awb {__version__}: MCP on http://{config.host}:{config.port}/mcp (inventory {describe(config)})")
    try:
        workbench = Workbench(config)
        if transport == "http":
            anyio.run(serve_http, workbench, config.host, config.port)
        else:
            anyio.run(serve_stdio, workbench)
    except AwbError as error:
        fail(error)
    except KeyboardInterrupt:
        pass
    finally:
        config.pid_file.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        # An exited child its parent has not reaped yet is a zombie: gone for our purposes.
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


@app.command()
def stop(config_path: ConfigOption = None) -> None:
    """Stop a workbench started with `awb start` (reads its pid file)."""
    config = _config(config_path)
    try:
        pid = int(config.pid_file.read_text(encoding="utf-8").strip())
    except (FileNotFoundError, ValueError):
        console.print(f"no workbench is running (no pid file at {config.pid_file})")
        raise typer.Exit(0) from None
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        config.pid_file.unlink(missing_ok=True)
        console.print(f"no workbench is running (stale pid {pid} removed)")
        raise typer.Exit(0) from None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not _alive(pid):
            break
        time.sleep(0.05)
    else:
        errors.print(f"[red]workbench (pid {pid}) did not stop within 10 s[/]")
        raise typer.Exit(1)
    config.pid_file.unlink(missing_ok=True)
    console.print(f"stopped workbench (pid {pid})")


# --- health ----------------------------------------------------------------------------------


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


PROBES = {
    "python": "def run(params):\n    return params['x'] + 1\n",
    "javascript": "function run(params) { return params.x + 1; }",
}


async def _sandbox_checks(workbench: Workbench) -> list[dict[str, Any]]:
    """Probe every runtime that can run; only Monty, the default, is required to pass."""
    from awb.sandbox.host import HostBridge
    from awb.sandbox.registry import describe_protections

    checks = []
    for name, entry in describe_protections(workbench.runtimes).items():
        required = name == "monty"
        runtime = workbench.runtimes.get(name)
        if runtime is None or not entry["available"]:
            detail = f"not available: {entry.get('reason', 'not installed')}"
            checks.append({"check": f"sandbox:{name}", "ok": not required, "detail": detail})
            continue
        active = ", ".join(layer for layer, on in entry["protections"].items() if on)
        probe = PROBES.get(runtime.language)
        if probe is None:
            checks.append({"check": f"sandbox:{name}", "ok": True, "detail": f"available; {active}"})
            continue
        try:
            host = HostBridge(read_dirs=[], stage=None, max_log_bytes=1024)
            result = await runtime.execute(probe, {"x": 41}, workbench.limits, host)
            checks.append({"check": f"sandbox:{name}", "ok": result.value == 42, "detail": f"probe ran; {active}"})
        except AwbError as error:
            checks.append({"check": f"sandbox:{name}", "ok": not required, "detail": f"probe failed: {error.message}"})
    from awb.sandbox.report import protection_checks

    return checks + protection_checks(workbench.runtimes)


def _listing_checks(workbench: Workbench) -> list[dict[str, Any]]:
    from awb.server.listing import listing_checks  # the MCP SDK loads only when doctor runs

    return listing_checks(workbench)


async def _doctor_checks(config: Config) -> list[dict[str, Any]]:
    from awb.inventory.open import open_store
    from awb.inventory.postgres_migrations import SCHEMA_VERSION as SHARED_SCHEMA_VERSION
    from awb.inventory.sqlite import SCHEMA_VERSION, SQLiteStore

    checks: list[dict[str, Any]] = [{"check": "config", "ok": True, "detail": "valid"}, store_check(config)]
    try:
        store = open_store(config)
    except Exception as error:
        return [*checks, {"check": "inventory", "ok": False, "detail": f"{describe(config)}: {error}"}]
    version = store.schema_version()
    expected = SCHEMA_VERSION if isinstance(store, SQLiteStore) else SHARED_SCHEMA_VERSION
    checks.append(
        {
            "check": "inventory",
            "ok": version == expected,
            "detail": f"{describe(config)} writable, schema {version}/{expected}",
        }
    )
    import sqlite3

    try:
        sqlite3.connect(":memory:").execute("CREATE VIRTUAL TABLE probe USING fts5(x)")
        checks.append({"check": "fts5", "ok": True, "detail": f"SQLite {sqlite3.sqlite_version} with FTS5"})
    except sqlite3.OperationalError as error:
        checks.append({"check": "fts5", "ok": False, "detail": str(error)})
    async with Workbench(config, store=store) as workbench:
        checks.extend(await _sandbox_checks(workbench))
        checks.extend(_listing_checks(workbench))
        status = workbench.search_engine.status().to_dict()
    detail = f"mode {status['mode']}: {status.get('reason', '')}"
    if status.get("needs_reindex"):
        detail += " (vectors from another model or missing: run `awb reindex`)"
    checks.append({"check": "search", "ok": True, "detail": detail})
    free = _port_free(config.host, config.port)
    checks.append(
        {
            "check": "port",
            "ok": free,
            "detail": f"{config.host}:{config.port} " + ("free" if free else "in use (is awb already running?)"),
        }
    )

    return checks


@app.command()
def doctor(config_path: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Check config, inventory, FTS5, sandbox and port. Exit code 0 only when all pass."""
    try:
        config = load_config(config_path)
    except ConfigError as error:
        checks = [{"check": "config", "ok": False, "detail": error.message}]
    else:
        checks = anyio.run(_doctor_checks, config)
    ok = all(check["ok"] for check in checks)
    if as_json:
        print_json({"ok": ok, "checks": checks})
    else:
        table(
            "awb doctor",
            ["check", "result", "detail"],
            [(c["check"], "[green]pass[/]" if c["ok"] else "[red]FAIL[/]", c["detail"]) for c in checks],
        )
    raise typer.Exit(0 if ok else 1)


@app.command()
def maintain(config_path: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Run memory maintenance now: demote idle medium-term tools, archive idle short-term ones."""
    config = _config(config_path, as_json)
    workbench = Workbench(config)
    try:
        changes = workbench.maintain()
    finally:
        workbench.store.close()
    rows = [
        {"tool_id": c.tool_id, "name": c.name, "before": c.before, "after": c.after, "reason": c.reason}
        for c in changes
    ]
    if as_json:
        print_json({"changes": rows})
    elif not rows:
        console.print("nothing to do: every tool is where it belongs")
    else:
        table(
            "maintenance",
            ["tool", "from", "to", "why"],
            [(r["name"], r["before"], r["after"], r["reason"]) for r in rows],
        )


@app.command()
def reindex(config_path: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Recompute every live tool's embedding with the current model (hybrid search), with progress."""
    from awb.cli.reindex import reindex_command

    reindex_command(config_path, as_json)


# --- inventory -----------------------------------------------------------------------------


def _with_workbench(config_path: Path | None, as_json: bool, action: Any) -> Any:
    config = _config(config_path, as_json)
    workbench = Workbench(config)
    try:
        return action(workbench)
    except AwbError as error:
        fail(error, as_json)
    finally:
        workbench.store.close()


def _summary_rows(tools: list[Any]) -> list[tuple[Any, ...]]:
    return [
        (
            t.name,
            t.tool_id,
            t.memory_level,
            t.usage_count,
            "" if t.score is None else f"{t.score:.3f}",
            t.description[:60],
        )
        for t in tools
    ]


SUMMARY_COLUMNS = ["name", "tool_id", "memory", "uses", "score", "description"]


@inventory_app.command("list")
def inventory_list(
    config_path: ConfigOption = None,
    memory_level: Annotated[str | None, typer.Option(help="short_term, medium_term, long_term or archived.")] = None,
    tag: Annotated[str | None, typer.Option(help="Only tools with this tag.")] = None,
    query: Annotated[str | None, typer.Option(help="Only tools matching this search.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 50,
    offset: Annotated[int, typer.Option(help="Skip this many (a previous page's next_offset).")] = 0,
    as_json: JsonOption = False,
) -> None:
    """List tools, hot ones first."""
    if memory_level is not None and memory_level not in ("short_term", "medium_term", "long_term", "archived"):
        errors.print(f"[red]unknown memory level {memory_level!r}[/]")
        raise typer.Exit(2)
    level: MemoryLevel | None = memory_level  # type: ignore[assignment]
    page = _with_workbench(
        config_path,
        as_json,
        lambda wb: wb.list_page(memory_level=level, tag=tag, query=query, limit=limit, offset=offset),
    )
    if as_json:
        print_json({**page.model_dump(mode="json"), "count": len(page.tools)})
    else:
        table(f"{len(page.tools)} of {page.total} tools", SUMMARY_COLUMNS, _summary_rows(page.tools))


@inventory_app.command("search")
def inventory_search(
    query: Annotated[str, typer.Argument(help="Words describing the tool.")],
    config_path: ConfigOption = None,
    limit: Annotated[int, typer.Option("--limit", "--top-k", help="At most this many.")] = 10,
    as_json: JsonOption = False,
) -> None:
    """Search tools by what they do."""
    result = _with_workbench(config_path, as_json, lambda wb: wb.search(query, limit=limit))
    if as_json:
        print_json(result.model_dump(mode="json"))
    else:
        table(f"search {query!r} ({result.mode})", SUMMARY_COLUMNS, _summary_rows(result.results))


@inventory_app.command("inspect")
def inventory_inspect(
    tool: ToolArgument,
    config_path: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a tool's full record, code, versions and recent calls."""
    found = _with_workbench(config_path, as_json, lambda wb: wb.inspect(tool))
    if as_json:
        print_json(found.model_dump(mode="json"))
        return
    record = found.tool
    table(
        f"{record.name} ({record.tool_id})",
        ["field", "value"],
        [
            ("description", record.description),
            ("language / runtime", f"{record.language} / {record.runtime}"),
            ("version", record.version),
            ("status", record.status),
            ("memory level", record.memory_level),
            ("usage / ok / failed", f"{record.usage_count} / {record.success_count} / {record.failure_count}"),
            ("last used", record.last_used_at),
            ("tags", ", ".join(record.metadata.tags)),
            ("input schema", json.dumps(record.input_schema)),
        ],
    )
    console.print(record.code)


@inventory_app.command("equip")
def inventory_equip(
    tool: ToolArgument,
    config_path: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Equip a tool: running servers list it as its own MCP tool and notify their clients."""
    _print_equip(_with_workbench(config_path, as_json, lambda wb: (wb.equip(tool), wb.equipped_tools())), as_json)


@inventory_app.command("unequip")
def inventory_unequip(
    tool: ToolArgument,
    config_path: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Unequip a tool: it leaves the servers' tool lists but stays in the inventory."""
    _print_equip(_with_workbench(config_path, as_json, lambda wb: (wb.unequip(tool), wb.equipped_tools())), as_json)


def _print_equip(outcome: Any, as_json: bool) -> None:
    record, equipped = outcome
    names = [t.name for t in equipped]
    if as_json:
        print_json(
            {"tool_id": record.tool_id, "name": record.name, "equipped": record.equipped, "equipped_tools": names}
        )
    else:
        state = "equipped" if record.equipped else "not equipped"
        console.print(f"{record.name} is {state}; equipped now: {', '.join(names) or '(none)'}")


@inventory_app.command("versions")
def inventory_versions(
    tool: ToolArgument,
    config_path: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a tool's versions with per-version usage and failures (* marks the current one)."""
    found = _with_workbench(config_path, as_json, lambda wb: wb.inspect(tool))
    if as_json:
        print_json(
            {
                "tool_id": found.tool.tool_id,
                "current": found.tool.version,
                "versions": [v.model_dump(mode="json", exclude={"code"}) for v in found.versions],
            }
        )
        return
    table(
        f"{found.tool.name} ({found.tool.tool_id})",
        ["version", "created", "uses", "failures", "description"],
        [
            (
                f"{'*' if v.version == found.tool.version else ' '}{v.version}",
                v.created_at,
                v.usage_count,
                v.failure_count,
                v.description[:60],
            )
            for v in found.versions
        ],
    )


@inventory_app.command("rollback")
def inventory_rollback(
    tool: ToolArgument,
    to_version: Annotated[int, typer.Argument(help="The version to make current.")],
    config_path: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make an earlier version of a tool current again."""
    record = _with_workbench(config_path, as_json, lambda wb: wb.rollback(tool, to_version))
    if as_json:
        print_json({"tool_id": record.tool_id, "name": record.name, "version": record.version})
    else:
        console.print(f"{record.name} is now at version {record.version}")


@inventory_app.command("purge")
def inventory_purge(
    config_path: ConfigOption = None,
    archived_before: Annotated[
        float | None, typer.Option("--archived-before", help="Remove tools archived more than DAYS days ago.")
    ] = None,
    deleted: Annotated[bool, typer.Option("--deleted", help="Remove soft-deleted tools too.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Remove archived and/or deleted tools for good, with their versions and call records."""
    if archived_before is None and not deleted:
        errors.print("[red]say what to purge[/]: --archived-before DAYS, --deleted, or both")
        raise typer.Exit(2)

    def plan(wb: Workbench) -> Any:
        return wb.purge(archived_before_days=archived_before, deleted=deleted, dry_run=True)

    doomed = _with_workbench(config_path, as_json, plan)
    if not doomed:
        if as_json:
            print_json({"purged": [], "count": 0})
        else:
            console.print("nothing to purge")
        return
    if not as_json:
        table(
            f"{len(doomed)} tools to remove for good",
            [*SUMMARY_COLUMNS, "status"],
            [(*row, t.status) for row, t in zip(_summary_rows(doomed), doomed, strict=True)],
        )
    if not yes:
        if not sys.stdin.isatty():
            errors.print("[red]refusing to purge without confirmation[/]: no terminal to ask on; pass --yes")
            raise typer.Exit(1)
        if not typer.confirm(f"remove these {len(doomed)} tools for good?", default=False):
            errors.print("nothing removed")
            raise typer.Exit(1)
    ids = {t.tool_id for t in doomed}

    # Only what was shown: anything archived or deleted since then waits for the next purge.
    removed = _with_workbench(
        config_path,
        as_json,
        lambda wb: wb.purge(archived_before_days=archived_before, deleted=deleted, only=ids),
    )
    if as_json:
        print_json({"purged": [t.model_dump(mode="json") for t in removed], "count": len(removed)})
    else:
        console.print(f"removed {len(removed)} tools for good")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
