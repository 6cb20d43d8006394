"""Connections to a PostgreSQL inventory: psycopg's pool, set up and migrated, and the URL as messages
show it (without its password). The store (awb.inventory.postgres) and the blueprint sessions' tables
(awb.blueprints.session_tables) each keep a pool of their own."""

from __future__ import annotations

from typing import Any

from awb.errors import ConfigError
from awb.inventory.postgres_migrations import migrate

#: Connections a server's inventory pool keeps at most.
POOL_MAX = 8


def psycopg_modules() -> Any:
    """psycopg and psycopg_pool, or `ConfigError` saying how to install them."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError(
            "inventory_url points at PostgreSQL, but psycopg is not installed: pip install 'agent-workbench[postgres]'",
            missing=str(exc.name),
        ) from exc
    return psycopg, psycopg_pool


def redacted(url: str) -> str:
    """`url` without its password, for messages."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def open_pool(url: str, *, max_size: int = POOL_MAX, migrate_schema: bool = True, durable: bool = False) -> Any:
    """A psycopg connection pool on the inventory at `url` (autocommit: reads are one round trip, writes
    open their own transaction), after migrating its schema; `ConfigError` when it cannot be reached."""
    psycopg, psycopg_pool = psycopg_modules()

    def configure(conn: Any) -> None:
        if not durable:
            # Like SQLite's WAL with synchronous=NORMAL: a commit returns before its WAL record is on
            # disk. A crash of the database host can lose the last moments of commits, never corrupt
            # or half-apply one; every commit costs a round trip instead of an fsync.
            conn.execute("SET synchronous_commit = off")

    try:
        if migrate_schema:
            with psycopg.connect(url, autocommit=True) as conn:
                migrate(conn, where=redacted(url))
        return psycopg_pool.ConnectionPool(
            url,
            min_size=1,
            max_size=max(max_size, 1),
            open=True,
            name="awb-inventory",
            kwargs={"autocommit": True},
            configure=configure,
        )
    except psycopg.OperationalError as exc:
        raise ConfigError(f"cannot reach the inventory at {redacted(url)}: {exc}", url=redacted(url)) from exc
