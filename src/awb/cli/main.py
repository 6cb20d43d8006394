"""`awb`: initialise, start and stop the workbench, check its health, and look into the inventory.

Each command lives in its own module; this one only assembles them: a command group or a command is
one line below. Modules import what is heavy (the workbench, the MCP SDK, the agent runtime) inside
the commands that need it, so `awb --help` or a listing starts in a fraction of a second
(`benchmarks/cli_startup.py`).

Every error, ours or the command line's, is one line on stderr, `error (<code>): <message>` (JSON on
stderr with `--json`), with a non-zero exit code; `--debug` adds details and tracebacks.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer

from awb import __version__
from awb.agents.cli import agents_app
from awb.cli import doctor, lifecycle, output, upkeep
from awb.cli.blueprints import blueprints_app
from awb.cli.db import db_app
from awb.cli.inventory import inventory_app
from awb.cli.staged import staged_app
from awb.cli.transfer import register as register_transfer
from awb.errors import AwbError, UsageError
from awb.planner.cli import plan_command

CONTEXT = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    name="awb",
    help="Agent Workbench: a crafting table for AI agents, served over MCP. Commands: init, start, stop, "
    "doctor, maintain, reindex, inventory, agents, staged, plan, blueprints, db.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: no `<bool>` metavars, and rich is not imported to print it.
    rich_markup_mode=None,
    context_settings=CONTEXT,
)
app.command()(lifecycle.init)
app.command()(lifecycle.start)
app.command()(lifecycle.stop)
app.command()(doctor.doctor)
app.command()(upkeep.maintain)
app.command()(upkeep.reindex)
app.add_typer(inventory_app, name="inventory")
app.add_typer(agents_app, name="agents")
app.add_typer(staged_app, name="staged")
app.add_typer(db_app, name="db")
register_transfer(inventory_app)
app.command("plan")(plan_command)
app.add_typer(blueprints_app, name="blueprints")


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"awb {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="On errors, print details and tracebacks.")] = False,
) -> None:
    """Agent Workbench: a crafting table for AI agents, served over MCP."""
    output.DEBUG = output.DEBUG or debug


def _usage_error(error: typer.TyperException) -> UsageError:
    ctx: Any = getattr(error, "ctx", None)
    command = ctx.command_path if ctx is not None else "awb"
    return UsageError(f"{error.format_message()} (see `{command} --help`)")


def main(argv: list[str] | None = None) -> None:
    """The `awb` console script: runs `app` and turns every error into one line (or JSON) on stderr."""
    # One BLAS thread, as the search already asks once the model loads (awb.search.embeddings): numpy,
    # imported by any search, otherwise starts a thread per core that spins on import, ~65 ms of CPU
    # a command pays for and another process's core loses. An explicit setting wins.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    args = list(sys.argv[1:] if argv is None else argv)
    # `--debug` counts wherever it is written (`awb start --debug` as well as `awb --debug start`).
    if "--debug" in args:
        output.DEBUG = True
        args = ["--debug", *[a for a in args if a != "--debug"]]
    as_json = "--json" in args
    command = typer.main.get_command(app)
    try:
        code = command.main(args, prog_name="awb", standalone_mode=False)
    except typer.TyperException as error:
        ctx: Any = getattr(error, "ctx", None)
        if type(error).__name__ == "NoArgsIsHelpError" and ctx is not None:
            # `awb inventory` alone: the group's help, as `no_args_is_help` promises.
            typer.echo(ctx.get_help())
        else:
            output.report_error(_usage_error(error), as_json)
        code = 2
    except typer.Abort:
        typer.echo("aborted", err=True)
        code = 1
    except AwbError as error:
        output.report_error(error, as_json)
        code = error.exit_code
    except Exception as error:
        if output.DEBUG:
            raise
        message = f"{type(error).__name__}: {error} (run with --debug for the traceback)"
        output.report_error(AwbError(message), as_json)
        code = 1
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
