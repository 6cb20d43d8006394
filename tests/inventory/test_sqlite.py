"""The SQLite inventory: schema version, WAL, persistence, two processes on one file."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_store_contract import NOW, make_tool

from awb.config import Config
from awb.errors import ConfigError
from awb.inventory.models import CallRecord
from awb.inventory.sqlite import MIGRATIONS, SCHEMA_VERSION, SQLiteStore
from awb.inventory.sqlite_schema import statements
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


def test_an_inventory_from_before_call_ids_migrates_and_keeps_its_rows(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "inv.db")
    for script in MIGRATIONS[:3]:
        db.executescript(script)
    db.execute(
        "INSERT INTO tools (tool_id, name, search_name, description, language, runtime, code, input_schema, "
        "created_at, updated_at) VALUES ('tool_old', 'old_tool', 'old tool', 'an old tool', 'python', 'monty', "
        "'def run(params):\n    return 1\n', '{}', '2024-01-01T00:00:00+00:00', '2024-01-01T00:00:00+00:00')"
    )
    db.execute(
        "INSERT INTO calls (tool_id, version, at, duration_ms, ok, error_code) "
        "VALUES ('tool_old', 1, '2024-01-02T00:00:00+00:00', 1.5, 0, 'timeout')"
    )
    db.execute(
        "INSERT INTO staged_writes (tool_id, call_id, path, content, created_at) "
        "VALUES ('tool_old', '', '/tmp/old.txt', 'old content', '2024-01-02T00:00:00+00:00')"
    )
    db.execute("PRAGMA user_version = 3")
    db.commit()
    db.close()

    store = SQLiteStore(tmp_path / "inv.db")
    assert store.schema_version() == SCHEMA_VERSION
    tool = store.get("tool_old")
    assert tool is not None and tool.name == "old_tool"
    [old_call] = store.calls("tool_old")
    assert (old_call.call_id, old_call.ok, old_call.error_code, old_call.duration_ms) == ("", False, "timeout", 1.5)
    [old_write] = store.staged_writes()
    assert (old_write["call_id"], old_write["content"]) == ("", "old content")
    new_call = old_call.model_copy(update={"call_id": "call_0123456789abcdef", "ok": True, "error_code": None})
    store.record_call(new_call)
    assert [c.call_id for c in store.calls("tool_old")] == ["call_0123456789abcdef", ""]
    store.close()


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


@pytest.mark.parametrize("from_schema", [None, SCHEMA_VERSION - 1])
def test_a_call_finds_its_tool_by_name_through_an_index_deleted_tools_included(
    tmp_path: Path, from_schema: int | None
) -> None:
    """`awb_call` by name looks deleted tools up too (to say the tool was deleted): that lookup must
    not read the whole table, on a new inventory or one migrated from the schema before the index."""
    path = tmp_path / "inv.db"
    if from_schema is not None:
        db = sqlite3.connect(path)
        for script in MIGRATIONS[:from_schema]:
            for statement in statements(script):
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {from_schema}")
        db.commit()
        db.close()
    store = SQLiteStore(path)
    executed: list[str] = []
    try:
        store._db.set_trace_callback(executed.append)
        assert store.get_by_name("missing_tool", include_deleted=True) is None
        store._db.set_trace_callback(None)
        [lookup] = [sql for sql in executed if "missing_tool" in sql]
        plan = " ".join(str(step[3]) for step in store._db.execute(f"EXPLAIN QUERY PLAN {lookup}"))
    finally:
        store.close()
    assert "USING INDEX tools_name" in plan and "SCAN t" not in plan, plan


def test_a_tag_filter_reads_its_own_tools_and_older_inventories_gain_the_tag_rows(tmp_path: Path) -> None:
    """Listing by tag read every tool's JSON tags (0.1-0.36 s at 100,000 tools); it reads tool_tags,
    which the migration fills from the tools an older inventory already holds."""
    from test_store_contract import make_tool

    path = tmp_path / "inv.db"
    store = SQLiteStore(path)
    store.add_tool(make_tool("alpha", tags=["math", "demo"]))
    store.add_tool(make_tool("beta", tags=["math"]))
    store.close()
    db = sqlite3.connect(path)  # as schema 7 left it: no tag rows, no triggers, no case_variant
    db.executescript(
        "DROP TRIGGER tool_tags_insert; DROP TRIGGER tool_tags_update; DROP TRIGGER tool_tags_delete;"
        "DROP TABLE tool_tags; DROP INDEX tools_live_name_folded; ALTER TABLE tools DROP COLUMN case_variant;"
        "PRAGMA user_version = 7;"
    )
    db.close()
    store = SQLiteStore(path)
    executed: list[str] = []
    try:
        assert store.schema_version() == SCHEMA_VERSION
        store._db.set_trace_callback(executed.append)
        page, total = store.page_summaries(tag="math")
        store._db.set_trace_callback(None)
        assert (sorted(s.name for s in page), total) == (["alpha", "beta"], 2)
        [listing] = [sql for sql in executed if "'math'" in sql]
        plan = " ".join(str(step[3]) for step in store._db.execute(f"EXPLAIN QUERY PLAN {listing}"))
    finally:
        store.close()
    assert "tool_tags" in plan and "SCAN tools" not in plan, plan


def test_a_long_history_is_pruned_in_chunks_each_its_own_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from awb.inventory import sqlite_records

    store = SQLiteStore(tmp_path / "inv.db")
    store.add_tool(make_tool("long_history"))
    for n in range(9):
        store.record_call(
            CallRecord(call_id=f"call_{n}", tool_id="tool_long_history", version=1, at=NOW, duration_ms=1.0, ok=True)
        )
    monkeypatch.setattr(sqlite_records, "PRUNE_CHUNK", 2)
    executed: list[str] = []
    store._db.set_trace_callback(executed.append)
    assert store.prune_calls(2) == 7
    store._db.set_trace_callback(None)
    assert sum(sql.startswith("DELETE FROM calls") for sql in executed) == 4  # 2 + 2 + 2 + 1
    assert [c.call_id for c in store.calls("tool_long_history")] == ["call_8", "call_7"]
    store.close()


def test_the_staging_caps_are_checked_without_reading_what_is_pending(tmp_path: Path) -> None:
    """Each staged write checks the pending bytes and writes: summing the lengths of the pending contents
    read every one of them (49 ms a write with 200,000 pending writes, 7.5 ms with 16 MB pending) under
    the store's lock. The sizes come from an index now, whatever is pending."""
    store = SQLiteStore(tmp_path / "inv.db")
    caps = {"max_tool_bytes": 64 << 20, "max_total_bytes": 64 << 20, "max_tool_writes": 100, "max_total_writes": 100}
    for n in range(12):
        store.stage_write(f"tool_{n % 3}", f"/tmp/{n}", "x" * (4 << 20), NOW, call_id=f"call_{n:016x}", **caps)
    took = []
    for n in range(9):
        started = time.perf_counter()
        store.stage_write("tool_0", f"/tmp/small{n}", "", NOW, call_id=f"call_{n:016x}", **caps)
        took.append(time.perf_counter() - started)
    # ~0.3 ms a write here, against 25 ms when 48 MB pending were read for each check.
    assert sorted(took)[4] < 0.005, took
    assert [write["id"] for write in store.staged_writes("pending")][-9:] == list(range(13, 22))
    store.close()
