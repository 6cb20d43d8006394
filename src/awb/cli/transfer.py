"""`awb inventory export|import`: an inventory as JSON Lines, to move it between SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from awb.cli.common import absent_inventory
from awb.cli.export_sink import ExportSink
from awb.cli.output import drop_stdout, fail, note, print_json
from awb.errors import AwbError, OutputFailed, UsageError

if TYPE_CHECKING:
    from awb.config import Config

ConfigOption = Annotated[Path | None, typer.Option("--config", "-c", help="Path to awb.config.json.")]
UrlOption = Annotated[
    str | None, typer.Option("--inventory-url", help="Use this PostgreSQL inventory instead of the config's.")
]
PathOption = Annotated[
    Path | None, typer.Option("--inventory", help="Use this SQLite file instead of the config's inventory.")
]


def _config(config_path: Path | None, url: str | None, path: Path | None, as_json: bool) -> Config:
    from awb.config import load_config, with_overrides  # pydantic loads only when a command runs

    try:
        if path is not None and url is not None:
            raise UsageError("--inventory and --inventory-url name two inventories; give one")
        config = load_config(config_path)
        if path is not None:
            return config.model_copy(update={"inventory_path": path.resolve(), "inventory_url": None})
        # Validated as every command's options are: a bad URL is a usage error naming --inventory-url.
        return with_overrides(config, inventory_url=url)
    except AwbError as error:
        fail(error, as_json)


def register(inventory_app: typer.Typer) -> None:
    """Add `export` and `import` to `awb inventory`."""

    @inventory_app.command("export")
    def export_command(
        output: Annotated[Path | None, typer.Option("--output", "-o", help="File to write (default: stdout).")] = None,
        config_path: ConfigOption = None,
        inventory_url: UrlOption = None,
        inventory: PathOption = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="Errors as JSON on stderr (the export is JSON Lines).")
        ] = False,
        version: Annotated[
            int,
            typer.Option(
                "--format",
                metavar="2|3",
                help="Export format: 3 (the default), or 2, which an awb from before format 3 reads (to go back to it).",
            ),
        ] = 3,
    ) -> None:
        """Write every tool with its versions, calls and staged writes, and every blueprint session, as JSON Lines."""
        from awb.blueprints.session_tables import open_session_store
        from awb.config import find_config_file
        from awb.inventory.export_formats import WRITABLE_FORMATS, as_format_2
        from awb.inventory.open import open_store
        from awb.inventory.transfer import export_lines

        if version not in WRITABLE_FORMATS:
            fail(UsageError(f"--format takes 2 or 3, not {version}", option="--format"), as_json)
        config = _config(config_path, inventory_url, inventory, as_json)
        try:
            missing = absent_inventory(config)
            if missing is not None:
                # Not an empty export: written over an earlier one, it would lose that one's tools.
                raise UsageError(
                    f"no inventory at {missing}: nothing to export (`--config` or `--inventory` names one)"
                )
            inventory_file = None if config.inventory_url else config.inventory_path
            sink = ExportSink(output, inventory_file, find_config_file(config_path))
            store = open_store(config)
        except AwbError as error:
            fail(error, as_json)
        count = 0
        try:
            sessions = open_session_store(config, inventory=store)
            try:
                with sink as file:
                    lines = export_lines(store, sessions)
                    for line in as_format_2(lines) if version == 2 else lines:
                        file.write(line + "\n")
                        count += 1
                    file.flush()  # stdout's last lines fail here, not at exit
            finally:
                sessions.close()
        except BrokenPipeError:
            # The reader stopped reading (`| head -1`): it has what it wanted; end quietly, as a listing does.
            drop_stdout()
            raise typer.Exit(0) from None
        except OSError as exc:
            if output is None:
                drop_stdout()  # what is still buffered would fail again at exit
            fail(OutputFailed(f"cannot write the export to {output or 'stdout'}: {exc.strerror or exc}"), as_json)
        finally:
            store.close()
        records = count - 1
        note(f"exported {count} lines: the header and {records} record{'' if records == 1 else 's'}")

    @inventory_app.command("import")
    def import_command(
        source: Annotated[Path, typer.Argument(metavar="file", help="A file written by `awb inventory export`.")],
        config_path: ConfigOption = None,
        inventory_url: UrlOption = None,
        inventory: PathOption = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
    ) -> None:
        """Add the tools (with their calls and staged writes) and blueprint sessions of an export; tools and
        sessions already present are skipped."""
        from awb.blueprints.session_tables import open_session_store
        from awb.inventory.open import open_store
        from awb.inventory.transfer import check_lines, file_lines, import_lines

        config = _config(config_path, inventory_url, inventory, as_json)

        lines = file_lines(source)

        try:
            check_lines(lines())  # unreadable or malformed: said before the inventory is opened (or made)
            store = open_store(config)
            try:
                sessions = open_session_store(config, inventory=store)
                try:
                    report = import_lines(store, lines, sessions)
                finally:
                    sessions.close()
            finally:
                store.close()
        except AwbError as error:
            fail(error, as_json)
        except OSError as exc:
            fail(UsageError(f"cannot read {source}: {exc.strerror or exc}"), as_json)
        if as_json:
            print_json(dataclasses.asdict(report))
        else:
            note(
                f"imported {report.imported} tools ({report.calls} calls, {report.staged} staged writes) and "
                f"{report.sessions} sessions; skipped {report.skipped} tools and {report.sessions_skipped} "
                "sessions already present"
                # Vectors are not exported: until they are made, hybrid search ranks these tools by text alone,
                # under the relevance floor of a listing by query.
                + (
                    "; a serving awb gives them their search vectors in the background (`awb reindex`: now)"
                    if report.imported
                    else ""
                )
            )
