"""`awb`: initialise, start and stop the workbench, check its health, and look into the inventory.

Each command lives in its own module; this one only assembles them: a command group or a command is
one line of `ENTRIES`. A run imports and builds only the command it names (`awb inventory list`
builds neither `awb agents` nor `awb inventory search`: typer builds every parameter of what it is
given, and each module imports what it needs), and modules import what is heavy (the workbench, the
MCP SDK, the agent runtime) inside the commands that need it, so `awb --help` or a listing starts in
a fraction of a second (`benchmarks/cli_startup.py`).

Every error, ours or the command line's, is one line on stderr, `error (<code>): <message>` (JSON on
stderr with `--json`), with a non-zero exit code; `--debug` adds details and tracebacks.
"""

from __future__ import annotations

import copy
import gc
import logging
import os
import sys
from collections.abc import Callable
from importlib import import_module
from typing import Annotated, Any, Literal

import typer

from awb import __version__
from awb.cli import output
from awb.errors import AwbError, UsageError

CONTEXT = {"help_option_names": ["-h", "--help"]}
HELP = (
    "Agent Workbench: a crafting table for AI agents, served over MCP. Commands: init, start, stop, "
    "doctor, maintain, reindex, inventory, agents, staged, plan, blueprints, db, cache."
)
#: `awb`'s commands and command groups in the order help lists them: name -> kind, module, attribute.
ENTRIES: dict[str, tuple[Literal["command", "group"], str, str]] = {
    "init": ("command", "awb.cli.lifecycle", "init"),
    "start": ("command", "awb.cli.lifecycle", "start"),
    "stop": ("command", "awb.cli.lifecycle", "stop"),
    "doctor": ("command", "awb.cli.doctor", "doctor"),
    "maintain": ("command", "awb.cli.upkeep", "maintain"),
    "reindex": ("command", "awb.cli.upkeep", "reindex"),
    "inventory": ("group", "awb.cli.inventory", "inventory_app"),
    "agents": ("group", "awb.agents.cli", "agents_app"),
    "staged": ("group", "awb.cli.staged", "staged_app"),
    "db": ("group", "awb.cli.db", "db_app"),
    "cache": ("group", "awb.cli.cache", "cache_app"),
    "plan": ("command", "awb.planner.cli", "plan_command"),
    "blueprints": ("group", "awb.cli.blueprints", "blueprints_app"),
}


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"awb {__version__}")
        raise typer.Exit(0)


def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="On errors, print details and tracebacks.")] = False,
) -> None:
    """Agent Workbench: a crafting table for AI agents, served over MCP."""
    output.DEBUG = output.DEBUG or debug


def plain_app(name: str, help: str) -> typer.Typer:
    """A top-level app as every console script of awb's is built: plain help (no `<bool>` metavars, and
    rich is not imported to print it), `-h`, `--version` and `--debug`, no shell-completion options, no
    rich tracebacks."""
    app = typer.Typer(
        name=name,
        help=help,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings=CONTEXT,
    )
    app.callback()(_root)
    return app


def build_app(args: list[str] | None = None) -> typer.Typer:
    """The `awb` app: every command, or with `args`, only the command they run (and its group's one
    subcommand) when they name one. Anything else (help, an unknown name) gets the whole app, so
    listings and typer's own errors are the same."""
    app = plain_app(name="awb", help=HELP)
    named, sub = (args[0], args[1:2]) if args and args[0] in ENTRIES else (None, [])
    for name, (kind, module, attribute) in ENTRIES.items():
        if named is not None and name != named:
            continue
        entry = getattr(import_module(module), attribute)
        if kind == "command":
            app.command(name)(entry)
        else:
            app.add_typer(_only(entry, sub[0]) if sub else entry, name=name)
    return app


def _only(group: typer.Typer, name: str) -> typer.Typer:
    """`group` with only its command `name`; `group` itself when it has no such command or has groups
    of its own."""
    found = [
        info
        for info in group.registered_commands
        if info.callback is not None and (info.name or typer.main.get_command_name(info.callback.__name__)) == name
    ]
    if len(found) != 1 or group.registered_groups:
        return group
    narrowed = copy.copy(group)
    narrowed.registered_commands = found
    return narrowed


def __getattr__(name: str) -> Any:
    # `app`, the whole of it, for tests and tools that walk the command tree; `awb` builds its own.
    if name == "app":
        return build_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _usage_error(error: typer.TyperException, prog_name: str) -> UsageError:
    ctx: Any = getattr(error, "ctx", None)
    command = ctx.command_path if ctx is not None else prog_name
    return UsageError(f"{error.format_message()} (see `{command} --help`)")


def main(
    argv: list[str] | None = None,
    *,
    prog_name: str = "awb",
    build: Callable[[list[str]], typer.Typer] = build_app,
) -> None:
    """The `awb` console script: runs `app` and turns every error into one line (or JSON) on stderr.

    `argv` None: the process's own command line, and the process ends with the command. `prog_name` and
    `build` (the app for the arguments) serve another console script the same way (`artificer`)."""
    # One BLAS thread, as the search already asks once the model loads (awb.search.embeddings): numpy,
    # imported by any search, otherwise starts a thread per core that spins on import, ~65 ms of CPU
    # a command pays for and another process's core loses. An explicit setting wins.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # No pydantic plugins, unless the environment says which (an empty value keeps them all): awb uses
    # none, and the first model built would otherwise look for them in every installed package's entry
    # points (`importlib.metadata`), ~10 ms of every command that validates (`awb doctor`, `awb start`).
    # Pydantic reads the variable as each model is built, so setting it here, before awb builds any, is enough.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if argv is None:
        output.hold_standard_streams()
    args = list(sys.argv[1:] if argv is None else argv)
    # `--debug` counts wherever it is written (`awb start --debug` as well as `awb --debug start`).
    if "--debug" in args:
        output.DEBUG = True
        args = ["--debug", *[a for a in args if a != "--debug"]]
    as_json = "--json" in args
    named = [a for a in args if a != "--debug"]
    if argv is None and (named[:2] == ["inventory", "search"] or named[:1] == ["doctor"]):
        # A search reads and ends within a second, and so does `awb doctor`. The cyclic garbage collector
        # would walk, again and again, the objects that typer's, pydantic's, numpy's and ONNX Runtime's
        # (doctor: wasmtime's) imports make (~12% of importing numpy and ONNX Runtime, 2-5% of the whole
        # command's CPU in A/B runs here), to free memory the system takes back when the process ends anyway.
        gc.disable()
    command = typer.main.get_command(build(named))
    try:
        code = command.main(args, prog_name=prog_name, standalone_mode=False)
    except typer.TyperException as error:
        ctx: Any = getattr(error, "ctx", None)
        if type(error).__name__ == "NoArgsIsHelpError" and ctx is not None:
            # `awb inventory` alone: the group's help, as `no_args_is_help` promises.
            typer.echo(ctx.get_help())
        else:
            output.report_error(_usage_error(error, prog_name), as_json)
        code = 2
    except typer.Abort:
        typer.echo("aborted", err=True)
        code = 1
    except AwbError as error:
        output.report_error(error, as_json)
        code = error.exit_code
    except BrokenPipeError as error:
        if not output.stdout_closed():  # another pipe (an MCP server's): a failure, said as any other
            _report_unexpected(error, as_json)
            code = 1
        else:  # the reader of the output stopped reading (`| head -1`): it has what it wanted
            output.drop_stdout()
            code = 0
    except Exception as error:
        if output.DEBUG:
            raise
        failed = output.output_failure(error) if isinstance(error, OSError) else None
        if failed is not None:  # not a fault of awb's: the output had nowhere to go (`> /dev/full`)
            output.report_error(failed, as_json)
        else:
            _report_unexpected(error, as_json)
        code = 1
    if argv is None:
        # The `awb` process itself ends here. Its last garbage collection would walk every object typer,
        # pydantic and rich made (~0.04 s, a tenth of a listing) to free memory the system takes back
        # anyway; frozen, they are left out of it. Not when called with arguments (a test, a program
        # that goes on running).
        gc.freeze()
        try:
            sys.stdout.flush()  # the last of the output: a failure is said here, not by the interpreter's exit
        except BrokenPipeError:  # its reader went away (`| head -1`)
            output.drop_stdout()
        except OSError as error:
            output.drop_stdout()
            output.report_error(output.output_failure(error) or AwbError(str(error)), as_json)
            code = 1
        if output.NOTHING_TO_TEAR_DOWN:
            # A search that loaded the embedding model: freeing ONNX Runtime's session alone takes
            # ~15 ms, the rest of the teardown ~10 more, all for memory the system takes back. The
            # command only read (its store is closed) and started no process, so the process ends here.
            # A stopped server's last log lines are written first (the interpreter's exit would).
            logging.shutdown()
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except OSError:  # a reader that went away (`| head`): nothing more can reach it
                    pass
            os._exit(code if isinstance(code, int) else 0)
    sys.exit(code if isinstance(code, int) else 0)


def _report_unexpected(error: Exception, as_json: bool) -> None:
    if output.DEBUG:
        raise error
    message = f"{type(error).__name__}: {error} (run with --debug for the traceback)"
    output.report_error(AwbError(message), as_json)


if __name__ == "__main__":
    main()
