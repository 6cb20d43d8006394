"""`awb db migrate|status`: the inventory's schema, and what `awb doctor` says about the store.

SQLite inventories migrate themselves when opened; PostgreSQL ones too (under an advisory lock), but
an operator may prefer to migrate once, before rolling out new servers: `awb db migrate`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from awb.cli.output import fail, print_json, say, table
from awb.errors import AwbError, ConfigError

if TYPE_CHECKING:
    from awb.config import Config

db_app = typer.Typer(help="The inventory database: migrate its schema, show its status.", no_args_is_help=True)

ConfigOption = Annotated[Path | None, typer.Option("--config", "-c", help="Path to awb.config.json.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


def _load(config_path: Path | None, as_json: bool) -> Config:
    from awb.config import load_config  # pydantic loads only when a command runs

    try:
        return load_config(config_path)
    except ConfigError as error:
        fail(error, as_json)


def store_status(config: Config) -> dict[str, Any]:
    """Engine, location, schema (applied and expected), pending migrations and the vector search path;
    `config_invalid` for a database migrated by a newer awb, which this awb refuses to open or migrate."""
    status = _read_status(config)
    if status["schema"] > status["schema_expected"]:
        # "pending []" would read as up to date, yet `awb start` and `awb db migrate` refuse this database.
        raise ConfigError(
            f"inventory {status['location']} has schema {status['schema']}, newer than this awb "
            f"({status['schema_expected']}): it was migrated by a newer awb; upgrade agent-workbench",
            schema=status["schema"],
            schema_expected=status["schema_expected"],
        )
    return status


def _read_status(config: Config) -> dict[str, Any]:
    from awb.inventory.open import describe
    from awb.search.vector_index import SEARCH_PATH

    if config.inventory_url:
        import psycopg

        from awb.inventory.postgres_migrations import SCHEMA_VERSION, applied_versions, pending
        from awb.inventory.postgres_pool import connect
        from awb.inventory.postgres_vectors import probe
        from awb.text import first_line

        try:
            with connect(config.inventory_url) as conn:
                server = str(conn.execute("SHOW server_version").fetchone()[0])
                applied = applied_versions(conn)
                waiting = [m.version for m in pending(conn)]
                # Read-only: a server creates the extension when it opens the inventory, not this command.
                pgvector = probe(conn, config.search.pgvector)
        except psycopg.Error as exc:  # unreachable, refused, or a URL libpq cannot read
            raise ConfigError(f"cannot reach the inventory at {describe(config)}: {first_line(exc)}") from exc
        return {
            "store": "postgresql",
            "location": describe(config),
            "server_version": server,
            "schema": max(applied, default=0),
            "schema_expected": SCHEMA_VERSION,
            "pending": waiting,
            "vector_search": pgvector.path,
        }
    import sqlite3

    from awb.inventory.sqlite import SCHEMA_VERSION as SQLITE_SCHEMA

    version = 0
    from awb.cli.common import inventory_exists
    from awb.inventory.open import unopenable

    if inventory_exists(config.inventory_path):
        try:
            with sqlite3.connect(config.inventory_path) as db:
                version = int(db.execute("PRAGMA user_version").fetchone()[0])
        except sqlite3.Error as error:
            raise unopenable(config.inventory_path, error) from None
    return {
        "store": "sqlite",
        "location": str(config.inventory_path),
        "server_version": sqlite3.sqlite_version,
        "schema": version,
        "schema_expected": SQLITE_SCHEMA,
        "pending": list(range(version + 1, SQLITE_SCHEMA + 1)),
        "vector_search": SEARCH_PATH,
    }


def store_check(config: Config) -> dict[str, Any]:
    """The `store` line of `awb doctor`."""
    try:
        status = store_status(config)
    except AwbError as error:
        return {"check": "store", "ok": False, "detail": error.message}
    detail = (
        f"{status['store']} {status['server_version']} at {status['location']}; "
        f"schema {status['schema']}/{status['schema_expected']}; vectors: {status['vector_search']}"
    )
    # Reachable is what this line checks; the `inventory` line checks the schema once opened (migrated).
    return {"check": "store", "ok": True, "detail": detail}


@db_app.command("status")
def status_command(config_path: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Show the store, its server version, schema and pending migrations."""
    from awb.cli.common import inventory_missing

    config = _load(config_path, as_json)
    try:
        status = store_status(config)
        # Schema 0 with every migration pending reads as an old inventory to migrate, where a mistyped
        # --config names a folder with none: said on stderr, as the listings say it.
        inventory_missing(config, config_path, then="")
    except AwbError as error:
        fail(error, as_json)
    if as_json:
        print_json(status)
    else:
        table("inventory database", ["field", "value"], [(k, v) for k, v in status.items()])


@db_app.command("migrate")
def migrate_command(config_path: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Bring the schema up to date (once, even with servers starting at the same moment)."""
    config = _load(config_path, as_json)
    try:
        before = store_status(config)
        from awb.inventory.open import open_store

        open_store(config).close()
        after = store_status(config)
    except AwbError as error:
        fail(error, as_json)
    applied = [v for v in before["pending"] if v not in after["pending"]]
    if as_json:
        print_json({"applied": applied, "schema": after["schema"], "store": after["store"]})
    elif applied:
        say(f"applied migrations {applied}; {after['store']} schema is now {after['schema']}")
    else:
        say(f"{after['store']} schema {after['schema']} is up to date")
