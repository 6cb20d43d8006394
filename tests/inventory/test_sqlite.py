"""The SQLite inventory: schema version, WAL, persistence, two processes on one file."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from awb.config import Config
from awb.errors import ConfigError
from awb.inventory.sqlite import SCHEMA_VERSION, SQLiteStore
from awb.workbench import Workbench
from support import add_tool, awb_env

pytestmark = pytest.mark.anyio


def test_a_new_inventory_is_migrated_to_the_current_schema_in_wal_mode(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "inv.db")
    assert store.schema_version() == SCHEMA_VERSION
    store.close()
    db = sqlite3.connect(tmp_path / "inv.db")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_an_inventory_from_a_newer_awb_is_refused_clearly(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "inv.db")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(ConfigError, match="newer than this awb"):
        SQLiteStore(tmp_path / "inv.db")


async def test_tools_and_counters_survive_reopening(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db")
    async with Workbench(config) as workbench:
        tool = await workbench.craft(add_tool())
        await workbench.call(tool.tool_id, {"a": 1, "b": 2})
    async with Workbench(config) as workbench:
        again = workbench.resolve("add_numbers")
        assert again.tool_id == tool.tool_id
        assert again.usage_count == 1
        assert workbench.inspect(tool.tool_id).recent_calls[0].ok


async def test_the_cli_reads_an_inventory_the_server_holds_open(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inventory.db")
    async with Workbench(config) as workbench:
        await workbench.craft(add_tool("shared_file_tool"))
        listed = subprocess.run(
            [sys.executable, "-m", "awb", "inventory", "list", "--json"],
            env=awb_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert "shared_file_tool" in listed.stdout
        # ...and the server keeps writing while the CLI has had the file.
        await workbench.call("shared_file_tool", {"a": 2, "b": 2})


async def test_name_is_unique_only_among_live_tools(workbench: Workbench) -> None:
    first = await workbench.craft(add_tool("reused"))
    workbench.delete(first.tool_id)
    second = await workbench.craft(add_tool("reused"))
    assert second.tool_id != first.tool_id
    assert workbench.resolve("reused").tool_id == second.tool_id
