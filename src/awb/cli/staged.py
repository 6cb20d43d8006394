"""`awb staged list|show|apply|discard`: a person reviews what tools asked to write.

Mounted by the main CLI as `awb staged`; a thin layer over `awb.sandbox.staging`. Paths and contents
come from tool code: they are printed as plain text with control characters escaped (`safe_text`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from awb.cli.safe_text import plain
from awb.config import Config, find_config_file, load_config
from awb.errors import AwbError
from awb.inventory.sqlite import SQLiteStore
from awb.sandbox import staging

staged_app = typer.Typer(help="Review, apply or discard the writes tools staged.", no_args_is_help=True)
console = Console()

ConfigOption = Annotated[Path | None, typer.Option("--config", "-c", help="Path to awb.config.json.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _store(config_path: Path | None) -> SQLiteStore:
    return SQLiteStore(_load(config_path).inventory_path)


def _load(config_path: Path | None) -> Config:
    return load_config(config_path)


def _fail(exc: AwbError, as_json: bool) -> typer.Exit:
    if as_json:
        typer.echo(json.dumps({"error": exc.to_dict()}))
    else:
        console.print(Text("error ", style="red") + plain(exc.message))
    return typer.Exit(exc.exit_code)


def _tool_names(store: SQLiteStore, writes: list[staging.StagedWrite]) -> dict[str, str]:
    names = {}
    for tool_id in {w.tool_id for w in writes}:
        tool = store.get(tool_id)
        names[tool_id] = tool.name if tool is not None else tool_id
    return names


@staged_app.command("list")
def list_command(
    status: Annotated[str, typer.Option(help="pending, applied, discarded or all.")] = "pending",
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """List staged writes (pending ones by default)."""
    store = _store(config)
    try:
        writes = staging.list_staged(store, None if status == "all" else status)
        names = _tool_names(store, writes)
    finally:
        store.close()
    if as_json:
        typer.echo(json.dumps([{**w.to_dict(content=False), "tool": names[w.tool_id]} for w in writes], indent=2))
        return
    if not writes:
        console.print(f"no {'' if status == 'all' else status + ' '}staged writes")
        return
    table = Table(title="staged writes")
    for column in ("id", "tool", "call", "path", "bytes", "staged at", "status"):
        table.add_column(column)
    for w in writes:
        table.add_row(
            str(w.id),
            plain(names[w.tool_id]),
            plain(w.call_id or "-"),
            plain(w.path),
            str(w.size),
            plain(w.created_at),
            plain(w.status),
        )
    console.print(table)


@staged_app.command("show")
def show_command(staged_id: int, config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Show one staged write with its content."""
    store = _store(config)
    try:
        write = staging.get_staged(store, staged_id)
        name = _tool_names(store, [write])[write.tool_id]
    except AwbError as exc:
        raise _fail(exc, as_json) from None
    finally:
        store.close()
    if as_json:
        typer.echo(json.dumps({**write.to_dict(), "tool": name}, indent=2))
        return
    header = Text(f"#{write.id} ", style="bold") + plain(
        f"{write.path}  ({write.size} bytes, {write.status}, by {name}, call {write.call_id or '-'})"
    )
    console.print(header, highlight=False)
    console.rule()
    console.print(plain(write.content, multiline=True), highlight=False)


def _change(action: str, staged_id: int, config_path: Path | None, as_json: bool, force: bool = False) -> None:
    config = _load(config_path)
    store = SQLiteStore(config.inventory_path)
    config_file = find_config_file(config_path)
    protected = staging.protected_paths(config, *([config_file] if config_file is not None else []))
    try:
        if action == "apply":
            write = staging.apply_staged(store, staged_id, protected=protected, force=force)
        else:
            write = staging.discard_staged(store, staged_id)
    except AwbError as exc:
        raise _fail(exc, as_json) from None
    finally:
        store.close()
    if as_json:
        typer.echo(json.dumps(write.to_dict(content=False)))
    else:
        console.print(Text(f"{write.status} #{write.id}: ") + plain(write.path), highlight=False)


@staged_app.command("apply")
def apply_command(
    staged_id: int,
    config: ConfigOption = None,
    as_json: JsonOption = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Apply even outside the tool's granted directories (never onto awb's files)."),
    ] = False,
) -> None:
    """Write a staged write's content to its path for real."""
    _change("apply", staged_id, config, as_json, force)


@staged_app.command("discard")
def discard_command(staged_id: int, config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Drop a staged write without writing anything."""
    _change("discard", staged_id, config, as_json)
