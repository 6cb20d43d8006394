"""Choosing the inventory's store from the configuration: SQLite by default, PostgreSQL by URL."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from awb.config import Config
from awb.errors import AwbError, InventoryUnreadable
from awb.inventory.store import Store
from awb.text import os_reason


def open_store(config: Config) -> Store:
    """`PostgresStore` when `inventory_url` is set (migrating it if needed), else `SQLiteStore`."""
    if config.inventory_url:
        from awb.inventory.postgres import PostgresStore

        return PostgresStore(
            config.inventory_url,
            max_tools=config.max_tools,
            pgvector=config.search.pgvector,
            pool_wait=config.inventory_pool_wait_seconds,
            statement_timeout=config.inventory_statement_timeout_seconds,
        )
    from awb.inventory.sqlite import SQLiteStore

    try:
        return SQLiteStore(config.inventory_path)
    except AwbError:
        raise
    except (sqlite3.Error, OSError) as error:
        raise unopenable(config.inventory_path, error) from None


def unopenable(path: Path, error: Exception) -> InventoryUnreadable:
    """`InventoryUnreadable` for the SQLite inventory at `path`, saying why where SQLite does not: "unable
    to open database file" is all it says of a file or folder this user may not read or write, and
    "disk I/O error" of a full disk (it cannot make its journal, even to read)."""
    why = str(error)
    if isinstance(error, OSError) and error.strerror:  # making its folder: not Python's "[Errno 13] ..."
        why = error.strerror if error.filename in (None, str(path)) else os_reason(error)
    elif why == "unable to open database file":
        try:
            with open(path, "r+b"):  # only to learn why SQLite could not open it
                pass
        except FileNotFoundError:
            pass
        except OSError as reason:
            why = reason.strerror or str(reason)
        else:
            if not os.access(path.parent, os.W_OK | os.X_OK):
                why = f"{path.parent} is not writable (SQLite keeps its journal beside the inventory)"
    elif why in ("disk I/O error", "database or disk is full") and _full(path.parent):
        why += f" (no space left on the device of {path.parent})"
    return InventoryUnreadable(f"cannot open the inventory {path}: {why}", path=str(path))


def _full(folder: Path) -> bool:
    try:
        return os.statvfs(folder).f_bavail == 0
    except OSError:
        return False


def describe(config: Config) -> str:
    """Where the inventory lives, for messages (a PostgreSQL URL without its password)."""
    if config.inventory_url:
        from awb.inventory.postgres_pool import redacted

        return redacted(config.inventory_url)
    return str(config.inventory_path)


__all__ = ["describe", "open_store", "unopenable"]
