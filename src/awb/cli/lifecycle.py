"""`awb init`, `awb start`, `awb stop`: set a workspace up, serve it, stop its server."""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from awb import __version__
from awb.cli import output
from awb.cli.common import CONFIG_FILENAME, ConfigOption, InventoryOption, JsonOption, config_for, open_store
from awb.cli.output import fail, print_json, say
from awb.cli.pidfile import ServerRecord, held, inspect_pid_file, is_awb_server
from awb.errors import AwbError, ConfigError, NotAnAwbServer, OutputFailed, StopFailed, UsageError

if TYPE_CHECKING:
    from awb.config import Config

log = logging.getLogger("awb.cli")

#: `awb init` keeps the workspace's runtime state out of version control.
AWB_DIR_GITIGNORE = "# Created by awb init: the inventory, pid file and staging area are local state.\n*\n"
STOP_WAIT_SECONDS = 10


def init(
    directory: Annotated[Path, typer.Argument(metavar="dir", help="Where to create the workbench.")] = Path("."),
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing config.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Create awb.config.json, the inventory database, a tools/ directory and .awb/.gitignore."""
    from awb.config import config_from, default_config_data, default_config_json
    from awb.text import os_reason

    config_path = directory / CONFIG_FILENAME
    if directory.exists() and not directory.is_dir():
        fail(UsageError(f"{directory} is a file, not a directory: `awb init DIR` makes DIR a workbench"), as_json)
    if config_path.exists() and not force:
        fail(ConfigError(f"{config_path} already exists; use --force to overwrite it", path=str(config_path)), as_json)
    try:
        # Everything that can be refused is checked before anything is written (the config as it will be
        # loaded, with the environment's overrides, then the inventory it names), and the config file is
        # written last: a failed init leaves no config behind, so running it again after a fix works.
        config = config_from(default_config_data(), config_path)
        _create_inventory(config)
        config.tools_dir.mkdir(parents=True, exist_ok=True)
        state_dir = directory / ".awb"
        state_dir.mkdir(parents=True, exist_ok=True)
        (state_dir / ".gitignore").write_text(AWB_DIR_GITIGNORE, encoding="utf-8")
        _write_atomically(config_path, default_config_json())
    except OSError as error:
        fail(ConfigError(f"cannot create the workbench in {directory}: {os_reason(error)}"), as_json)
    except AwbError as error:
        fail(error, as_json)
    if as_json:
        print_json(
            {
                "config": str(config_path.resolve()),
                "inventory": _inventory_named(config),
                "tools_dir": str(config.tools_dir),
            }
        )
    else:
        say(f"created {config_path}, {config.inventory_path} and {config.tools_dir}/")


def _create_inventory(config: Config) -> None:
    """Open (creating it when absent) the inventory the config names: one that cannot be read is refused."""
    from awb.workbench import Workbench

    Workbench(config, store=open_store(config)).store.close()


def _write_atomically(path: Path, text: str) -> None:
    """`path` holds `text` whole or is left as it was (an interrupted write leaves no half a config)."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def start(
    config_path: ConfigOption = None,
    inventory: InventoryOption = None,
    port: Annotated[
        int | None, typer.Option(help="Port for --transport http (default 7777; 0 = any free port).")
    ] = None,
    host: Annotated[str | None, typer.Option(help="Address for --transport http (default 127.0.0.1).")] = None,
    transport: Annotated[
        str, typer.Option(metavar="stdio|http", help="stdio (for MCP clients that spawn awb) or http.")
    ] = "stdio",
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Debug logging: every request with its time, start-up steps.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Errors as JSON on stderr, for scripts.")] = False,
) -> None:
    """Start the MCP server (stdio by default; `--transport http` serves http://127.0.0.1:7777/mcp)."""
    if transport not in ("stdio", "http"):
        fail(UsageError(f"unknown transport {transport!r}: use stdio or http"), as_json)
    if transport == "stdio" and (port is not None or host is not None):
        # Silently serving stdio would leave whoever asked for a port waiting on one that never opens.
        given = [flag for flag, value in (("--port", port), ("--host", host)) if value is not None]
        verb = "apply" if len(given) > 1 else "applies"
        fail(UsageError(f"{' and '.join(given)} {verb} to --transport http only; stdio serves no port"), as_json)
    started = time.perf_counter()
    config = config_for(config_path, as_json, inventory_path=inventory, port=port, host=host)
    from awb.cli.logs import setup_logging

    try:
        setup_logging(config.log_file, verbose)
    except AwbError as error:
        fail(error, as_json)
    log.debug("config: %s", config.model_dump(mode="json"))
    # uvicorn turns SIGTERM into a graceful shutdown, then raises the signal again once it is done;
    # this handler makes that second one an exception, so the pid file is removed on the way out.
    signal.signal(signal.SIGTERM, _terminated)
    # The terminal that started it closed: a stop like SIGTERM's (uvicorn's graceful one while it serves).
    signal.signal(signal.SIGHUP, _hung_up)
    try:
        if transport == "http":
            _serve_http(config, started)
        else:
            _serve_stdio(config)
    except AwbError as error:
        fail(error, as_json)
    except (KeyboardInterrupt, _Terminated):
        pass
    except BaseExceptionGroup as group:
        # The signal lands inside the server's task group: a group holding only that is a clean stop.
        _, rest = group.split((KeyboardInterrupt, _Terminated))
        if rest is not None:
            raise
    # Stopped: the workbench is closed (its sandbox processes ended) and the pid file removed. Threads
    # may still warm up what no one will use now, the embedding model (ONNX Runtime builds its session
    # in C++, beyond reach) and the REST API's imports: the interpreter's exit would wait for them, most
    # of a stop that comes during warm-up (~1-2.5 s). The process ends without them.
    output.NOTHING_TO_TEAR_DOWN = True


class _Terminated(Exception):
    """SIGTERM arrived: unwind (closing the workbench and removing the pid file), then exit 0."""


def _terminated(signum: int, frame: object) -> None:
    raise _Terminated


def _hung_up(signum: int, frame: object) -> None:
    signal.raise_signal(signal.SIGTERM)


def _serve_stdio(config: Config) -> None:
    import anyio

    from awb.cli.output import stdout_held_closed
    from awb.server import sdk_modules

    if stdout_held_closed():  # `awb start >&-`: said before a runtime or the inventory is touched
        raise OutputFailed("cannot serve MCP on stdio: standard output is closed")
    sdk_modules.serve_first()
    from awb.server.address import MCP_PATH
    from awb.server.transports import serve_stdio
    from awb.workbench import Workbench

    if sys.stdin.isatty():
        # Typed at a prompt, stdio waits in silence for a client's JSON-RPC on this very terminal; whoever
        # wanted a server to reach is told how, before anything starts.
        from awb.server.address import http_url

        output.note(
            "awb: MCP on stdio for a client that spawns awb: it reads JSON-RPC from this terminal, one message "
            f"a line (Ctrl-C stops it). To serve {http_url(config.host, config.port, MCP_PATH)} instead: "
            "awb start --transport http"
        )
    anyio.run(serve_stdio, Workbench(config, store=open_store(config)))


def _serve_http(config: Config, started: float) -> None:
    import anyio

    from awb.server import sdk_modules

    # The SDK's client and the rest come when something asks for them; its server side and protocol
    # models once the server listens (awb.server.deferred_faces).
    sdk_modules.serve_first(wire_models=False)
    from awb.server.address import MCP_PATH, http_url
    from awb.server.http_guard import check_exposure
    from awb.server.transports import bind, serve_http
    from awb.workbench import Workbench

    # The lock first: a second server on this workspace is refused before it touches the port.
    with held(config.pid_file) as pid_file:
        sock = bind(config.host, config.port)  # an address that cannot be served is said first
        try:
            # An exposed address without a token is refused before anything is announced or recorded.
            check_exposure(config)
            port = sock.getsockname()[1]
            # Before the banner: an inventory that cannot be reached is said in one line, not after
            # lines saying where the server serves.
            store = open_store(config)
            inventory = _inventory_named(config)
            pid_file.write(
                ServerRecord(pid=os.getpid(), transport="http", host=config.host, port=port, inventory=inventory)
            )
            # Plain lines, not `note`: the server prints nothing else through rich, and loading it for
            # these two costs start-up ~50 ms (a path with "[" in it is not taken for markup either).
            sys.stderr.write(
                f"awb {__version__}: MCP on {http_url(config.host, port, MCP_PATH)}, REST on /api "
                f"(inventory {inventory})\n"
                f"awb: web panel on {http_url(config.host, port)}\n"
            )
            sys.stderr.flush()
            workbench = Workbench(config, store=store)
            anyio.run(serve_http, workbench, sock, started)
        finally:
            sock.close()


def _inventory_named(config: Config) -> str:
    """The inventory this server serves, as the banner and the pid file name it: the PostgreSQL URL
    (without its password) when one is set, not the SQLite path it does not use."""
    if config.inventory_url:
        from awb.inventory.postgres_pool import redacted

        return redacted(config.inventory_url)
    return str(config.inventory_path)


def stop(config_path: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Stop the workspace's `awb start --transport http` server (checks its pid file first)."""
    config = config_for(config_path, as_json)
    try:
        found = inspect_pid_file(config.pid_file)
    except AwbError as error:
        fail(error, as_json)
    if found is None:
        _stopped(as_json, None, f"no workbench is running (no pid file at {config.pid_file})")
        return
    if not found.alive:
        config.pid_file.unlink(missing_ok=True)
        _stopped(as_json, None, f"no workbench is running ({found.problem}; removed {config.pid_file})")
        return
    record = found.record
    if record is None:
        fail(StopFailed(f"not stopping: {found.problem}; pid file {config.pid_file}"), as_json)
    is_awb, cmdline = is_awb_server(record.pid)
    if not is_awb:
        fail(
            NotAnAwbServer(
                f"not stopping pid {record.pid}: it is not an awb server ({cmdline}); pid file {config.pid_file}",
                pid=record.pid,
            ),
            as_json,
        )
    try:
        os.kill(record.pid, signal.SIGTERM)
    except ProcessLookupError:
        config.pid_file.unlink(missing_ok=True)
        _stopped(as_json, None, f"no workbench is running (pid {record.pid} is gone; removed {config.pid_file})")
        return
    deadline = time.monotonic() + STOP_WAIT_SECONDS
    while time.monotonic() < deadline:
        if not _alive(record.pid):
            break
        time.sleep(0.05)
    else:
        late = StopFailed(f"workbench ({record.describe()}) did not stop within {STOP_WAIT_SECONDS} s", pid=record.pid)
        fail(late, as_json)
    _stopped(as_json, record, f"stopped workbench ({record.describe()})")


def _stopped(as_json: bool, record: ServerRecord | None, message: str) -> None:
    """What `awb stop` did: `record` is the server it stopped, None when none was running."""
    if as_json:
        print_json(
            {"stopped": record is not None, "server": None if record is None else record.__dict__, "message": message}
        )
    else:
        say(message)


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
