"""The SQLite store's cache of tool records: a hot tool is read from the file once, and nothing written
since (by this store, another connection or another process) is ever answered from the cache."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from test_store_contract import NOW, make_tool

from awb.config import Config
from awb.errors import ToolDeleted
from awb.inventory.models import CallRecord
from awb.inventory.sqlite import SQLiteStore
from awb.inventory.sqlite_cache import ToolCache
from awb.workbench import Workbench
from support import REPO, add_tool


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "inv.db"


@pytest.fixture
def store(path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(path)
    yield opened
    opened.close()


def tool_reads(store: SQLiteStore, read: object) -> int:
    """How many queries of the tools table `read()` ran."""
    executed: list[str] = []
    store._db.set_trace_callback(executed.append)
    try:
        read()  # type: ignore[operator]
    finally:
        store._db.set_trace_callback(None)
    return sum(1 for sql in executed if sql.startswith("SELECT") and "FROM tools t" in sql)


def call(tool_id: str, n: int, *, ok: bool = True) -> CallRecord:
    return CallRecord(
        call_id=f"call_{n}", tool_id=tool_id, version=1, at=NOW + timedelta(seconds=n), duration_ms=1.0, ok=ok
    )


def test_a_hot_tool_is_read_once_and_calls_keep_its_record_exact(store: SQLiteStore, path: Path) -> None:
    store.add_tool(make_tool("hot"))
    assert tool_reads(store, lambda: store.get_by_name("hot", include_deleted=True)) == 1
    for n in range(3):
        store.record_call(call("tool_hot", n))
        assert tool_reads(store, lambda: store.get_by_name("hot", include_deleted=True)) == 0
    store.record_call(call("tool_hot", 3, ok=False))
    cached = store.get("tool_hot")
    fresh = SQLiteStore(path)
    try:
        assert cached == fresh.get("tool_hot")  # counters, last use, tier: as the file has them
    finally:
        fresh.close()
    assert cached is not None and (cached.usage_count, cached.success_count, cached.failure_count) == (3, 3, 1)
    assert cached.last_used_at == NOW + timedelta(seconds=2)


def test_a_promotion_made_by_a_call_is_in_the_cached_record(store: SQLiteStore) -> None:
    store.add_tool(make_tool("climber"))
    store.get("tool_climber")
    counters = store.record_call(call("tool_climber", 0), level_after=lambda level, uses: "medium_term")
    assert (counters.previous_level, counters.memory_level) == ("short_term", "medium_term")
    cached = store.get("tool_climber")
    assert cached is not None and cached.memory_level == "medium_term"


def test_every_write_of_this_store_is_seen(store: SQLiteStore) -> None:
    assert store.get_by_name("later") is None
    assert store.get("tool_later") is None  # a miss by id is cached too...
    store.add_tool(make_tool("later"))
    assert store.get("tool_later") is not None  # ...until anything is written
    found = store.get_by_name("later")
    assert found is not None and found.description == "does a thing"
    store.update("tool_later", description="now does another thing")
    found = store.get_by_name("later")
    assert found is not None and found.description == "now does another thing"
    store.update("tool_later", status="deleted")
    assert store.get_by_name("later") is None
    deleted = store.get_by_name("later", include_deleted=True)
    assert deleted is not None and deleted.status == "deleted"


def test_a_commit_of_another_connection_is_seen(store: SQLiteStore, path: Path) -> None:
    store.add_tool(make_tool("shared"))
    assert store.get_by_name("shared") is not None
    other = SQLiteStore(path)
    try:
        other.update("tool_shared", description="changed elsewhere")
        other.record_call(call("tool_shared", 0))
    finally:
        other.close()
    found = store.get_by_name("shared")
    assert found is not None and (found.description, found.usage_count) == ("changed elsewhere", 1)


def test_a_change_made_by_another_process_is_seen(store: SQLiteStore, path: Path) -> None:
    store.add_tool(make_tool("edited"))
    assert store.get("tool_edited") is not None
    script = textwrap.dedent(
        """
        import sys
        from awb.inventory.sqlite import SQLiteStore
        store = SQLiteStore(sys.argv[1])
        store.update("tool_edited", code="def run(params):\\n    return 2\\n", version=2)
        store.close()
        """
    )
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, cwd=REPO, timeout=60)
    found = store.get("tool_edited")
    assert found is not None and (found.version, found.code) == (2, "def run(params):\n    return 2\n")


def test_a_rolled_back_write_empties_the_cache(store: SQLiteStore) -> None:
    store.add_tool(make_tool("steady"))
    store.get("tool_steady")
    with pytest.raises(RuntimeError), store._writing() as db:
        db.execute("UPDATE tools SET description = 'half done' WHERE tool_id = 'tool_steady'")
        raise RuntimeError("the transaction fails")
    assert tool_reads(store, lambda: store.get("tool_steady")) == 1
    found = store.get("tool_steady")
    assert found is not None and found.description == "does a thing"


def test_the_cache_keeps_at_most_its_size_and_forgets_names_with_their_tools(store: SQLiteStore) -> None:
    cache = ToolCache(store._db, max_tools=2)
    cache.check()
    for name in ("a", "b", "c"):
        cache.put_tool(cache.generation(), f"tool_{name}", make_tool(name))
    assert "tool_a" not in cache.tools
    assert cache.tool_named("a") is None
    assert cache.tool_named("c") == make_tool("c")
    assert len(cache.tools) == 2 and set(cache.names) == {"b", "c"}


@pytest.mark.anyio
async def test_a_server_calls_the_version_another_workbench_made_a_moment_ago(tmp_path: Path) -> None:
    """Two workbenches on one inventory file (as `awb start` and the CLI beside it): the one that keeps
    calling a tool runs the new version, and sees the deletion, as soon as the other has committed."""
    config = Config(inventory_path=tmp_path / "inv.db")
    async with Workbench(config) as server, Workbench(config) as cli:
        await server.craft(add_tool("shared_adder"))
        assert (await server.call("shared_adder", {"a": 1, "b": 2})).result == 3
        await cli.update(
            "shared_adder",
            code="def run(params):\n    return params['a'] + params['b'] + 100\n",
            examples=[{"params": {"a": 1, "b": 2}, "expected": 103}],
        )
        called = await server.call("shared_adder", {"a": 1, "b": 2})
        assert (called.result, called.version, called.usage_count) == (103, 2, 2)
        cli.delete("shared_adder")
        with pytest.raises(ToolDeleted):
            await server.call("shared_adder", {"a": 1, "b": 2})
