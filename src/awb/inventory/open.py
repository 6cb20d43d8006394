"""Choosing the inventory's store from the configuration: SQLite by default, PostgreSQL by URL."""

from __future__ import annotations

from awb.config import Config
from awb.inventory.store import Store


def open_store(config: Config) -> Store:
    """`PostgresStore` when `inventory_url` is set (migrating it if needed), else `SQLiteStore`."""
    if config.inventory_url:
        from awb.inventory.postgres import PostgresStore

        return PostgresStore(
            config.inventory_url,
            max_tools=config.max_tools,
            pgvector=config.search.pgvector,
            pool_wait=config.inventory_pool_wait_seconds,
        )
    from awb.inventory.sqlite import SQLiteStore

    return SQLiteStore(config.inventory_path)


def describe(config: Config) -> str:
    """Where the inventory lives, for messages (a PostgreSQL URL without its password)."""
    if config.inventory_url:
        from awb.inventory.postgres_pool import redacted

        return redacted(config.inventory_url)
    return str(config.inventory_path)


__all__ = ["describe", "open_store"]
