"""`awb cache status|clear`: the tool vector cache `awb plan` keeps between runs, and its `awb doctor` row.

Neither loads numpy nor the embedding model: the file is read as SQLite, read-only
(`awb.search.vector_cache_upkeep`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from awb.cli.common import ConfigOption, JsonOption, config_for
from awb.cli.output import confirm, fail, note, print_json, say, table
from awb.errors import AwbError, Unavailable, UsageError

if TYPE_CHECKING:
    from awb.config import Config
    from awb.search.vector_cache_upkeep import CacheContents

cache_app = typer.Typer(
    help="The tool vector cache `awb plan` keeps between runs: status (what it holds), clear (empty it).",
    no_args_is_help=True,
)

CHECK = "tool vector cache"


def cache_path(config: Config) -> Path:
    """The file the configured cache is (`search.vector_cache`, else the user's cache folder);
    `Unavailable` when there is no home folder to hold it."""
    if config.search.vector_cache is not None:
        return config.search.vector_cache
    from awb.search.vector_cache import default_cache_path

    try:
        return default_cache_path()
    except RuntimeError as exc:  # Path.home() without HOME or a passwd entry
        raise Unavailable(f"no place for the tool vector cache ({exc}): set search.vector_cache") from None


def size_text(size: int) -> str:
    if size < 1000:
        return f"{size} bytes"
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.1f} KB"


def vector_cache_check(config: Config) -> dict[str, Any]:
    """The `awb doctor` row: where the cache is, its entries and size, the models they are keyed to. A
    file that cannot be read is a warning saying what to do, never a failure (a planner goes on without
    it)."""
    from awb.search.vector_cache_upkeep import look

    row = {"check": CHECK, "ok": True, "warning": False}
    try:
        contents = look(cache_path(config))
    except AwbError as error:
        return {**row, "warning": True, "detail": error.message}
    off = config.search.vector_cache_entries == 0
    if contents.problem is not None:
        return {**row, "warning": True, "detail": contents.problem}
    where = str(contents.path)
    if not contents.exists:
        detail = f"{where}: none yet" + ("" if off else " (`awb plan` makes it)")
    else:
        detail = f"{where}: {_held(contents)}"
        if not off:
            detail += f" (at most {config.search.vector_cache_entries})"
        if contents.models:
            detail += f"; keyed to {_models(contents)}"
    if off:
        detail = f"off (search.vector_cache_entries is 0); {detail}"
    return {**row, "detail": detail}


def _held(contents: CacheContents) -> str:
    return f"{contents.entries} {'entry' if contents.entries == 1 else 'entries'}, {size_text(contents.size_bytes)}"


def _models(contents: CacheContents) -> str:
    return ", ".join(f"{model} ({count})" for model, count in contents.models.items())


def _look(config_path: Path | None, as_json: bool) -> CacheContents:
    from awb.search.vector_cache_upkeep import look

    config = config_for(config_path, as_json)
    try:
        return look(cache_path(config))
    except AwbError as error:
        fail(error, as_json)


@cache_app.command("status")
def status_command(config_path: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Show where the cache is, its entries and size on disk, and the models its entries are keyed to."""
    contents = _look(config_path, as_json)
    if as_json:
        print_json(contents.to_dict())
        return
    rows: list[tuple[str, Any]] = [("path", contents.path), ("exists", "yes" if contents.exists else "no")]
    if contents.exists:
        rows += [("entries", contents.entries), ("size", size_text(contents.size_bytes))]
        rows += [(f"model {model}", count) for model, count in contents.models.items()]
    if contents.problem is not None:
        rows.append(("problem", contents.problem))
    table("tool vector cache", ["field", "value"], rows)


@cache_app.command("clear")
def clear_command(
    config_path: ConfigOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Empty the cache (a damaged file is removed): the next `awb plan` embeds its tools again."""
    from awb.search.vector_cache_upkeep import clear, size_on_disk

    contents = _look(config_path, as_json)
    if contents.problem is not None and not contents.exists:  # its folder cannot be reached
        fail(Unavailable(contents.problem), as_json)
    if not contents.exists or (contents.entries == 0 and contents.problem is None):
        if as_json:
            print_json({"path": str(contents.path), "cleared": 0, "freed_bytes": 0})
        else:
            say(
                f"nothing to clear: {'the cache is empty' if contents.exists else 'there is no cache'} at {contents.path}"
            )
        return
    what = contents.problem or f"{_held(contents)} at {contents.path}"
    if not yes:
        if not sys.stdin.isatty():
            fail(
                UsageError("refusing to clear the cache without confirmation: no terminal to ask on; pass --yes"),
                as_json,
            )
        note(what)
        if not confirm("clear the tool vector cache? the next `awb plan` embeds its tools again"):
            note("nothing cleared")
            raise typer.Exit(1)
    try:
        cleared = clear(contents.path)
        left = size_on_disk(contents.path)
    except (AwbError, OSError) as error:
        fail(error if isinstance(error, AwbError) else Unavailable(str(error)), as_json)
    freed = max(0, contents.size_bytes - left)
    if as_json:
        print_json({"path": str(contents.path), "cleared": cleared, "freed_bytes": freed})
    elif contents.damaged:
        say(f"removed the damaged cache {contents.path} ({size_text(freed)})")
    else:
        say(
            f"cleared {cleared} {'entry' if cleared == 1 else 'entries'} from {contents.path}, {size_text(freed)} freed"
        )
