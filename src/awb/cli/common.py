"""What every `awb` command shares: its options, loading the config, and opening the inventory.

Nothing heavy is imported here (not even the config model, which brings pydantic: `awb --help` needs
neither): the workbench (and with it the sandbox and search) is imported by the
commands that use it, when they run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from awb.cli.output import fail, note
from awb.errors import AwbError, ConfigError, InventoryUnreadable
from awb.meta_tools import MetaNames, MetaVerb, worded_by

if TYPE_CHECKING:
    from awb.config import Config
    from awb.inventory.sqlite import SQLiteStore
    from awb.inventory.store import Store
    from awb.workbench import Workbench

T = TypeVar("T")
#: The name `awb.config.CONFIG_FILENAME` holds, for help texts that must not import the config model.
CONFIG_FILENAME = "awb.config.json"

ConfigOption = Annotated[
    Path | None, typer.Option("--config", "-c", help=f"Path to {CONFIG_FILENAME} (default: ./{CONFIG_FILENAME}).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts (errors as JSON on stderr).")]
ToolArgument = Annotated[str, typer.Argument(help="tool_id or name.")]
InventoryOption = Annotated[Path | None, typer.Option("--inventory", help="Path of the inventory database.")]


#: The CLI's own command for each meta-tool's action it has: what a CLI error tells a person to run. The
#: others (craft, call, update) are named as an MCP client reaches them (`meta_tools.worded_by`).
CLI_COMMANDS: dict[MetaVerb, str] = {
    verb: f"awb inventory {verb}" for verb in ("list", "search", "inspect", "delete", "rollback", "equip", "unequip")
}


def cli_names(config: Config) -> MetaNames:
    """How CLI errors word a meta-tool's action (`Workbench.equip(..., names=...)`)."""
    return worded_by(CLI_COMMANDS, config.tool_names)


def config_for(path: Path | None, as_json: bool = False, **overrides: Any) -> Config:
    """The config `path` (or the usual lookup) gives, with command-line overrides; errors end the command."""
    from awb.config import load_config, with_overrides

    try:
        config = load_config(path)
        return with_overrides(config, **overrides)
    except ConfigError as error:
        fail(error, as_json)


def open_store(config: Config) -> SQLiteStore:
    """The inventory, or `InventoryUnreadable` saying why (a directory, a file that is not SQLite...)."""
    from awb.inventory.open import open_store as open_any

    return open_any(config)  # type: ignore[return-value]  # PostgresStore: the same methods


def absent_inventory(config: Config) -> Path | None:
    """The SQLite file the config names when it does not exist yet; None when there is an inventory to
    read (or one that is not a file: PostgreSQL, `:memory:`)."""
    path = config.inventory_path
    return None if config.inventory_url or str(path) == ":memory:" or inventory_exists(path) else path


def inventory_exists(path: Path) -> bool:
    """Whether the SQLite inventory is there; `InventoryUnreadable` when that cannot be told (a folder on
    the way this user may not enter, such as a `.awb` of another user's)."""
    try:
        return path.exists()
    except OSError as error:
        raise InventoryUnreadable(
            f"cannot reach the inventory {path}: {error.strerror or error}", path=str(path)
        ) from None


def inventory_missing(config: Config, config_path: Path | None, *, then: str = ": nothing to show") -> bool:
    """True (and says so on stderr, followed by `then`) when there is no inventory yet: a check never
    creates one."""
    from awb.config import find_config_file

    path = absent_inventory(config)
    if path is None:
        return False
    where = "" if find_config_file(config_path) is not None else f"no {CONFIG_FILENAME} here; "
    note(f"{where}no inventory at {path} yet (`awb init` or `awb start` creates it){then}")
    return True


def with_workbench(config: Config, as_json: bool, action: Callable[[Workbench], T]) -> T:
    """Run `action` on a workbench over the configured inventory; an `AwbError` ends the command."""
    from awb.workbench import Workbench

    try:
        store = open_store(config)
    except AwbError as error:
        fail(error, as_json)
    workbench = Workbench(config, store=store)
    try:
        return action(workbench)
    except AwbError as error:
        fail(error, as_json)
    finally:
        workbench.store.close()


def with_store(config: Config, as_json: bool, action: Callable[[Store], T]) -> T:
    """Run `action` on the configured inventory alone: for commands that only read it (listing,
    search), which then need neither the sandbox runtimes nor schema validation loaded."""
    try:
        store = open_store(config)
    except AwbError as error:
        fail(error, as_json)
    try:
        return action(store)
    except AwbError as error:
        fail(error, as_json)
    finally:
        store.close()
