"""`awb doctor`: check config, environment, inventory, FTS5, every sandbox runtime, search and port.

A check never writes: without an inventory it says so and probes the sandboxes on an in-memory one.
The checks use the parts they check (the runtimes, the search engine, the store), not a whole
`Workbench`: importing that (validation, crafting, maintenance, anyio) would cost more than `--quick`
does altogether.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from awb.cli.common import CONFIG_FILENAME, ConfigOption, JsonOption
from awb.cli.output import print_json, table
from awb.cli.probe_processes import ProbeProcesses, launch_probe_processes
from awb.errors import AwbError, ConfigError

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable

    from awb.config import Config
    from awb.inventory.models import Tool
    from awb.inventory.store import Store
    from awb.sandbox.base import Limits, Runtime

PROBES = {
    "python": "def run(params):\n    return params['x'] + 1\n",
    "javascript": "function run(params) { return params.x + 1; }",
    # The ABI of `awb.sandbox.wasm`, compiled in a compile process, loaded and run as a tool's module is. Its
    # answer is 42 whatever the params: reading the JSON in WAT would be most of the probe.
    "wasm": (
        '(module (memory (export "memory") 1) (data (i32.const 0) "42")'
        ' (func (export "alloc") (param i32) (result i32) (i32.const 1024))'
        ' (func (export "run") (param i32 i32) (result i64) (i64.const 2)))'
    ),
}


def _check(name: str, ok: bool, detail: str, *, warn: bool = False) -> dict[str, Any]:
    return {"check": name, "ok": ok, "warning": warn, "detail": detail}


def _port_free(host: str, port: int) -> bool:
    if port == 0:
        return True
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError:
        return False
    return True


async def _sandbox_checks(runtimes: dict[str, Runtime], limits: Limits, quick: bool = False) -> list[dict[str, Any]]:
    """Probe every runtime that can run, all at once; only Monty, the default, is required to pass.
    `quick`: no worker is started, so there are no protection rows (workers report those)."""
    import asyncio

    from awb.sandbox.registry import describe_protections

    described = describe_protections(runtimes)
    # Each probe mostly waits for worker processes to start: side by side they cost the slowest one.
    rows = await asyncio.gather(*(_probe(runtimes, limits, name, entry, quick) for name, entry in described.items()))
    from awb.sandbox.report import protection_checks

    if quick:
        # The protection rows come from the layers workers report applying: none ran.
        detail = "not checked: --quick started no worker (plain `awb doctor` runs a probe in each runtime)"
        return [*rows, _check("sandbox protections", True, detail, warn=True)]
    return list(rows) + [{"warning": False, **check} for check in protection_checks(runtimes)]


async def _closed(runtimes: dict[str, Runtime]) -> None:
    """Every runtime closed at once: each mostly waits for its processes to end."""
    import asyncio

    await asyncio.gather(*(runtime.close() for runtime in runtimes.values()))


async def _probe(
    runtimes: dict[str, Runtime], limits: Limits, name: str, entry: dict[str, Any], quick: bool
) -> dict[str, Any]:
    from awb.sandbox.host import HostBridge

    required = name == "monty"
    runtime = runtimes.get(name)
    if runtime is None or not entry["available"]:
        detail = f"not available: {entry.get('reason', 'not installed')}"
        return _check(f"sandbox:{name}", not required, detail, warn=not required)
    active = ", ".join(layer for layer, on in entry["protections"].items() if on)
    probe = PROBES.get(runtime.language)
    if probe is None:
        return _check(f"sandbox:{name}", True, f"available; {active}")
    if quick:
        return _check(f"sandbox:{name}", True, f"available, not probed (--quick); {active}")
    try:
        host = HostBridge(read_dirs=[], stage=None, max_log_bytes=1024)
        result = await runtime.execute(probe, {"x": 41}, limits, host)
        return _check(f"sandbox:{name}", result.value == 42, f"probe ran; {active}")
    except AwbError as error:
        return _check(f"sandbox:{name}", not required, f"probe failed: {error.message}", warn=not required)


class _Equipped:
    """The equipped tools of a store, as `Workbench.equipped_tools` gives them (`Armory.equipped`)."""

    def __init__(self, store: Store, config: Config) -> None:
        from awb.equip import Armory
        from awb.events import EventBus

        self.config = config
        self._armory = Armory(store, config, EventBus())

    def equipped_tools(self) -> list[Tool]:
        return self._armory.equipped()


def _listing_checks(store: Store, config: Config) -> list[dict[str, Any]]:
    from awb.cli.common import cli_names
    from awb.server.listing import listing_checks  # the MCP SDK loads only when a tool is equipped

    return [{"warning": False, **check} for check in listing_checks(_Equipped(store, config), cli_names(config))]


def _name_cases_check(store: Store) -> dict[str, Any]:
    """A warning naming the live tools whose names differ only in case (kept from an older inventory)."""
    from awb.inventory.names import RULE, variants_warning

    groups = store.case_variants()
    if not groups:
        return _check("tool name cases", True, f"every live tool's name is its own ({RULE})")
    return _check("tool name cases", True, variants_warning(groups), warn=True)


def _inventory_check(config: Config) -> tuple[dict[str, Any], Any]:
    """The inventory row, and the store to probe with (in memory when there is no inventory yet)."""
    from awb.cli.common import open_store
    from awb.inventory.sqlite import SCHEMA_VERSION, SQLiteStore

    path = config.inventory_path
    if config.inventory_url:
        from awb.inventory.open import describe
        from awb.inventory.postgres_migrations import SCHEMA_VERSION as SHARED_SCHEMA_VERSION

        try:
            shared = open_store(config)
        except AwbError as error:
            return _check("inventory", False, error.message), None
        version = shared.schema_version()
        detail = f"{describe(config)}, schema {version}/{SHARED_SCHEMA_VERSION}"
        return _check("inventory", version == SHARED_SCHEMA_VERSION, detail), shared
    from awb.cli.common import inventory_exists

    try:
        exists = str(path) == ":memory:" or inventory_exists(path)
    except AwbError as error:
        return _check("inventory", False, error.message), None
    if not exists:
        parent = next((p for p in [path.parent, *path.parent.parents] if p.exists()), Path("/"))
        import os

        writable = os.access(parent, os.W_OK)
        detail = f"{path} does not exist yet (`awb init` or `awb start` creates it)"
        if not writable:
            detail += f"; {parent} is not writable"
        return _check("inventory", writable, detail, warn=writable), SQLiteStore(":memory:")
    try:
        store = open_store(config)
    except AwbError as error:
        return _check("inventory", False, error.message), None
    version = store.schema_version()
    detail = f"{path}, schema {version}/{SCHEMA_VERSION}"
    return _check("inventory", version == SCHEMA_VERSION, detail), store


async def _doctor_checks(
    config: Config,
    config_path: Path | None,
    quick: bool,
    report: Callable[[list[dict[str, Any]]], bool],
    processes: ProbeProcesses | None = None,
) -> bool:
    """The checks, `report`ed (what it returns: whether all passed) while the runtimes close. `processes`: the
    probes' processes, started ahead."""
    import asyncio

    from awb.config import find_config_file, unknown_env_names
    from awb.sandbox.registry import build_runtimes, limits_for

    # The runtimes a workbench would have, not started, and no warm pools: a probe starts the one worker
    # it runs in (a pool of one forked a worker of its own beside the probe's, and another when the
    # probe's was spent). A probe imports nothing: the cpython zygote skips importing the modules tools
    # commonly need. No embedding model either (no check needs it).
    probing = config.model_copy(update={"sandbox": config.sandbox.model_copy(update={"pool_size": 0})})
    started = processes or ProbeProcesses()
    runtimes = build_runtimes(
        probing,
        preload=False,
        launched_zygote=started.zygote,
        launched_javascript=started.javascript,
        launched_wasm=started.wasm,
    )
    # A probe mostly waits for its worker processes to start, and closing its runtime for them to end:
    # the store's checks run meanwhile, in a thread (the store's connection lives there), rather than
    # before or after them, and the report is written while the runtimes close.
    closing: asyncio.Future[None] | None = None
    try:
        file = find_config_file(config_path)
        # The built-in defaults are the product as `make run` serves it, not a fault: the row passes and says so.
        source = (
            f"{file}: valid"
            if file is not None
            else f"no {CONFIG_FILENAME} here: the built-in defaults (`awb init` writes a file to change them)"
        )
        checks = [_check("config", True, source)]
        unknown = unknown_env_names()
        if unknown:
            detail = f"ignored, not configuration: {', '.join(unknown)}"
            checks.append(_check("environment", True, detail, warn=True))
        sandbox = asyncio.ensure_future(_sandbox_checks(runtimes, limits_for(probing), quick))
        try:
            store = await asyncio.to_thread(_store_checks, config, probing)
        finally:
            sandbox_rows = await sandbox
        closing = asyncio.ensure_future(_closed(runtimes))
        checks.extend(store.before)
        if store.opened:  # without a store to check, neither are the sandboxes reported nor what follows
            checks.extend(sandbox_rows)
            checks.extend(store.after)
        # Written in a thread: the event loop meanwhile ends the runtimes' processes and reaps them.
        return await asyncio.to_thread(report, checks)
    finally:
        await (closing if closing is not None else _closed(runtimes))


@dataclass
class _StoreChecks:
    before: list[dict[str, Any]]
    after: list[dict[str, Any]]
    opened: bool


def _store_checks(config: Config, probing: Config) -> _StoreChecks:
    """The store, inventory and FTS5 rows (before the sandboxes'), and the listing, search and port rows."""
    import sqlite3

    from awb.cli.db import store_check

    # The inventory is opened first: opening it is what enables pgvector, which the store line then says.
    inventory, store = _inventory_check(config)
    before = [{"warning": False, **store_check(config)}, inventory]
    try:
        sqlite3.connect(":memory:").execute("CREATE VIRTUAL TABLE probe USING fts5(x)")
        before.append(_check("fts5", True, f"SQLite {sqlite3.sqlite_version} with FTS5"))
    except sqlite3.OperationalError as error:
        before.append(_check("fts5", False, str(error)))
    from awb.cli.cache import vector_cache_check

    before.append(vector_cache_check(config))  # read-only, and neither numpy nor the model
    if store is None:
        return _StoreChecks(before, [], opened=False)
    from awb.search.hybrid import search_engine

    try:
        after = [*_listing_checks(store, probing), _name_cases_check(store)]
        status = search_engine(store, probing.search).status().to_dict()
    finally:
        store.close()
    detail = f"mode {status['mode']} (search.mode is '{config.search.mode}'): {status.get('reason', '')}"
    if status["mode"] == "hybrid":
        detail += f"; vectors: {status['vector_path']}"
    if status.get("needs_reindex"):
        detail += " (vectors from another model or missing: a serving awb makes them in the background, `awb reindex` at once)"
    after.append(_check("search", True, detail))
    after.append(_port_check(config))
    return _StoreChecks(before, after, opened=True)


def _port_check(config: Config) -> dict[str, Any]:
    """The configured port is free, or this workspace's own server is the one serving it (the usual
    case once `awb start --transport http` runs: that is not a problem to report). Whatever the port, a
    server of this workspace that runs (its pid file says where: `--port 0` picks any port) is named
    with its address."""
    from awb.cli.pidfile import inspect_pid_file
    from awb.server.address import http_url

    where = f"{config.host}:{config.port}"
    try:
        found = inspect_pid_file(config.pid_file)
    except AwbError as error:
        found, unreadable = None, error.message
    else:
        unreadable = ""
    record = found.record if found is not None and found.alive else None
    running = ""
    if record is not None:
        url = http_url(record.host or config.host, record.port, "/mcp")
        running = f"this workspace's awb runs on port {record.port}: {url} ({record.describe()})"
    if record is not None and record.port == config.port:
        return _check("port", True, f"{where} served by this workspace's awb ({record.describe()}) at {url}")
    free = _port_free(config.host, config.port)
    if free:
        detail = f"{where} free"
    elif running:
        detail = f"{where} in use by another process"
    else:
        detail = f"{where} in use by another process (start awb with --port N, or --port 0)"
    if running:
        detail += f"; {running}"
    elif found is not None and not found.alive:
        detail += f"; {found.problem} ({config.pid_file}; `awb stop` removes it)"
    if unreadable:
        detail += f"; {unreadable}"
    return _check("port", free and not unreadable, detail)


def doctor(
    config_path: ConfigOption = None,
    as_json: JsonOption = False,
    quick: Annotated[
        bool,
        typer.Option(
            "--quick", help="Start no sandbox worker: check what is installed and what this machine offers, not a run."
        ),
    ] = False,
) -> None:
    """Check config, environment, inventory, FTS5, sandboxes (a probe in each), search and port; exit 0 only
    when all pass."""
    import asyncio

    def report(checks: list[dict[str, Any]]) -> bool:
        ok = all(check["ok"] for check in checks)
        if as_json:
            print_json({"ok": ok, "checks": checks})
        else:
            from awb.cli.safe_text import plain

            def result(check: dict[str, Any]) -> Any:
                if not check["ok"]:
                    return plain("FAIL", style="red")
                return plain("warn", style="yellow") if check["warning"] else plain("pass", style="green")

            table("awb doctor", ["check", "result", "detail"], [(c["check"], result(c), c["detail"]) for c in checks])
        return ok

    # asyncio's own loop: the runtimes are asyncio code, and anyio's import costs ~0.03 s.
    ok = asyncio.run(_doctor(config_path, quick, report))
    # Every runtime is closed (its processes reaped), the store too, and the report written: the interpreter's
    # teardown would only free what the system takes back (wasmtime's engine and module, the MCP SDK's and
    # pydantic's objects), ~0.01-0.02 s of doctor's wall since the wasm probe.
    from awb.cli import output

    output.NOTHING_TO_TEAR_DOWN = True
    raise typer.Exit(0 if ok else 1)


async def _doctor(config_path: Path | None, quick: bool, report: Callable[[list[dict[str, Any]]], bool]) -> bool:
    from awb.config import load_config

    # The probes' processes start first, to import while this process loads its config (`probe_processes`).
    processes = ProbeProcesses() if quick else await launch_probe_processes()
    try:
        config = load_config(config_path)
    except BaseException as error:
        await processes.discard()
        if not isinstance(error, ConfigError):
            raise
        return report([_check("config", False, error.message)])
    return await _doctor_checks(config, config_path, quick, report, processes)
