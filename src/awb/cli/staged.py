"""`awb staged list|show|apply|discard`: a person reviews what tools asked to write.

Mounted by the main CLI as `awb staged`; a thin layer over `awb.sandbox.staging`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from awb.config import load_config
from awb.errors import AwbError
from awb.inventory.open import open_store
from awb.inventory.sqlite import SQLiteStore
from awb.sandbox import staging

staged_app = typer.Typer(help="Review, apply or discard the writes tools staged.", no_args_is_help=True)
console = Console()

ConfigOption = Annotated[Path | None, typer.Option("--config", "-c", help="Path to awb.config.json.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _store(config_path: Path | None) -> SQLiteStore:
    config = load_config(config_path)
    # The same methods on either store; PostgreSQL keeps staged writes in the shared database.
    store: SQLiteStore = open_store(config)  # type: ignore[assignment]
    return store


def _fail(exc: AwbError, as_json: bool) -> typer.Exit:
    if as_json:
        typer.echo(json.dumps({"error": exc.to_dict()}))
    else:
        console.print(f"[red]error[/red] {exc.message}")
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
        table.add_row(str(w.id), names[w.tool_id], w.call_id or "-", w.path, str(w.size), w.created_at, w.status)
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
    console.print(
        f"[bold]#{write.id}[/bold] {write.path}  ({write.size} bytes, {write.status}, by {name}, "
        f"call {write.call_id or '-'})"
    )
    console.rule()
    console.print(write.content, markup=False, highlight=False)


def _change(action: str, staged_id: int, config: Path | None, as_json: bool) -> None:
    store = _store(config)
    try:
        write = (
            staging.apply_staged(store, staged_id) if action == "apply" else staging.discard_staged(store, staged_id)
        )
    except AwbError as exc:
        raise _fail(exc, as_json) from None
    finally:
        store.close()
    if as_json:
        typer.echo(json.dumps(write.to_dict(content=False)))
    else:
        console.print(f"{write.status} #{write.id}: {write.path}")


@staged_app.command("apply")
def apply_command(staged_id: int, config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Write a staged write's content to its path for real."""
    _change("apply", staged_id, config, as_json)


@staged_app.command("discard")
def discard_command(staged_id: int, config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Drop a staged write without writing anything."""
    _change("discard", staged_id, config, as_json)
