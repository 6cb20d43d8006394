"""Upgrading in place: an inventory the previous awb made (SQLite schema 8, PostgreSQL migration 3) opens
with this awb, upgraded once, its tools, versions, calls, staged writes and sessions intact."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import anyio
import psycopg
import pytest
from mcp import Client
from test_store_contract import make_tool

import pg_support
from awb.blueprints.session_tables import open_session_store
from awb.cli.db import store_status
from awb.config import Config, SearchConfig
from awb.errors import ConfigError, OutputExceeded
from awb.feed import SQLiteEventFeed
from awb.inventory import postgres_migrations
from awb.inventory.postgres import PostgresStore
from awb.inventory.sqlite import MIGRATIONS, SCHEMA_VERSION, SQLiteStore
from awb.inventory.sqlite_schema import statements
from awb.server.mcp import McpFace
from awb.workbench import Workbench

#: What the previous awb wrote to disk: its eight migrations, then rows it wrote as it served.
SCHEMA_8 = (Path(__file__).parent / "sqlite_schema8.sql").read_text(encoding="utf-8")
ADDER, WRITER, UPPER, DOOMED = (
    "tool_7c8db1a8f26142a0",
    "tool_bdc77a1d9ecf4338",
    "tool_c68910b4eec6415d",
    "tool_862d5c91a8734a31",
)
#: Pending staged writes of `writer` in the fixture, in bytes: 'héllo wörld', '', 5000 x, 'plain'.
STAGED_SIZES = [13, 0, 5000, 5]
NOW = datetime(2026, 11, 28, 5, 0, tzinfo=UTC)


def schema_8_inventory(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.executescript(SCHEMA_8)
    db.close()
    return path


def rows(path: Path) -> dict[str, int]:
    db = sqlite3.connect(path)
    try:
        tables = ("tools", "tool_versions", "calls", "staged_writes", "blueprint_messages", "blueprint_run_logs")
        return {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in (*tables, "workbench_events")}
    finally:
        db.close()


def test_the_previous_awbs_inventory_opens_at_todays_schema_with_its_data_intact(tmp_path: Path) -> None:
    path = schema_8_inventory(tmp_path / "inventory.db")
    before = rows(path)
    config = Config(inventory_path=path)
    assert (store_status(config)["schema"], store_status(config)["pending"]) == (8, [9, 10, 11])

    store = SQLiteStore(path)
    try:
        assert store.schema_version() == SCHEMA_VERSION == 11
        assert rows(path) == before
        adder = store.get(ADDER)
        assert adder is not None
        assert (adder.version, adder.usage_count, adder.memory_level, adder.metadata.tags) == (
            3,
            8,
            "medium_term",
            ["math", "demo"],
        )
        assert [(v.version, v.usage_count) for v in store.versions(ADDER)] == [(1, 7), (2, 0), (3, 1)]
        assert len(store.calls(ADDER)) == 8
        upper, doomed = store.get(UPPER), store.get(DOOMED)
        assert upper is not None and upper.equipped
        assert doomed is not None and doomed.status == "deleted"
        # The text index and the tag rows the old triggers kept answer as today's do.
        assert [s.name for s in store.page_summaries(tag="math")[0]] == ["adder"]
        assert [tool.tool_id for tool, _ in store.search_text(["add", "numbers"], 5)][:1] == [ADDER]

        # Staged writes keep their sizes, and today's caps count them: 5018 bytes and 4 writes pending.
        old_writes_count_against_the_caps(store)
        with pytest.raises(OutputExceeded, match="max_staged_writes_total"):
            store.stage_write(WRITER, "/srv/workspace/tools/out/c.txt", "", NOW, call_id="c3", max_total_writes=5)
        plan = " ".join(
            str(step[3])
            for step in store._db.execute(
                "EXPLAIN QUERY PLAN SELECT count(*), coalesce(sum(length(CAST(content AS BLOB))), 0) "
                "FROM staged_writes WHERE status = 'pending' AND tool_id = ?",
                (WRITER,),
            )
        )
        assert "staged_pending" in plan, plan
    finally:
        store.close()

    sessions = open_session_store(path)
    try:
        assert [e.message for e in sessions.exchanges("upgrade-s1")] == ["hello there", "second"]
        assert [e.kind for e in sessions.logs("upgrade-s1")] == ["run_start", "run_end"] * 2
    finally:
        sessions.close()
    assert (store_status(config)["schema"], store_status(config)["pending"]) == (11, [])


@pytest.mark.anyio
async def test_a_server_on_the_previous_awbs_inventory_serves_its_tools_over_mcp(tmp_path: Path) -> None:
    config = Config(inventory_path=schema_8_inventory(tmp_path / "inventory.db"), search=SearchConfig(mode="text"))
    async with Workbench(config) as workbench, Client(McpFace(workbench).server) as client:
        with anyio.fail_after(30):
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert "upper" in listed  # equipped by the previous awb: a tool of its own
            upper = await client.call_tool("upper", {"s": "abc"})
            assert upper.structured_content == {"result": "ABC"}
            added = await client.call_tool("awb_call", {"name": "adder", "params": {"a": 2, "b": 2}})
            assert added.structured_content is not None and not added.is_error
            assert (added.structured_content["result"], added.structured_content["version"]) == (4, 3)
            assert added.structured_content["usage_count"] == 9
            page = await client.call_tool("awb_list", {})
            assert page.structured_content is not None and page.structured_content["total"] == 3
            updated = await client.call_tool("awb_update", {"name": "adder", "description": "Add two numbers, v4"})
            assert updated.structured_content is not None and updated.structured_content["version"] == 4
            deleted = await client.call_tool("awb_call", {"name": "doomed", "params": {}})
            assert deleted.structured_content is not None
            assert deleted.structured_content["error"]["code"] == "tool_deleted"


def test_an_upgraded_inventory_is_not_migrated_again(tmp_path: Path) -> None:
    path = schema_8_inventory(tmp_path / "inventory.db")
    SQLiteStore(path).close()
    executed: list[str] = []
    sqlite3_connect = sqlite3.connect

    def traced(*args: object, **kwargs: object) -> sqlite3.Connection:
        db = sqlite3_connect(*args, **kwargs)  # type: ignore[arg-type]
        db.set_trace_callback(executed.append)
        return db

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sqlite3, "connect", traced)
        SQLiteStore(path).close()
    migrating = [sql for sql in executed if sql.startswith("PRAGMA user_version =") or "staged_pending" in sql]
    assert "PRAGMA user_version" in executed and migrating == []


def test_servers_opening_the_previous_inventory_together_upgrade_it_once(tmp_path: Path) -> None:
    path = schema_8_inventory(tmp_path / "inventory.db")
    before = rows(path)
    assert open_together(lambda: SQLiteStore(path).close(), 4, timeout=30) == []
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        indexes = db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'staged_pending'").fetchone()[0]
    finally:
        db.close()
    assert indexes == 1
    assert rows(path) == before


def test_an_inventory_at_todays_schema_opens_while_another_process_holds_the_write_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every open took the write lock to check the schema, and failed past the busy timeout (5 s) while
    another process held it: one upgrading 2 GB of staged writes holds it ~11 s from a cold disk."""
    import awb.inventory.sqlite as sqlite_store

    path = tmp_path / "inventory.db"
    SQLiteStore(path).close()
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_MS", 50)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        store = SQLiteStore(path)
        try:
            assert store.schema_version() == SCHEMA_VERSION
            assert store.get(ADDER) is None
        finally:
            store.close()
    finally:
        holder.close()


def test_opening_an_older_inventory_waits_for_the_process_upgrading_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upgrade holds the write lock for as long as its indexes take to build: another process opening
    the file meanwhile waits for it (up to MIGRATION_WAIT_MS) rather than failing at the busy timeout."""
    import awb.inventory.sqlite as sqlite_store

    path = schema_8_inventory(tmp_path / "inventory.db")
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_MS", 50)
    monkeypatch.setattr(sqlite_store, "MIGRATION_WAIT_MS", 30_000)
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA journal_mode = WAL")  # as the previous awb left its inventories
    holder.execute("BEGIN IMMEDIATE")
    # The holder lets go a while after the opener is blocked on the lock: well past the busy timeout.
    release = threading.Timer(0.5, lambda: holder.execute("COMMIT"))
    release.start()
    try:
        store = SQLiteStore(path)
        try:
            assert store.schema_version() == SCHEMA_VERSION
        finally:
            store.close()
    finally:
        release.join(10)
        holder.close()


def test_a_store_opened_before_a_newer_awb_migrated_the_file_keeps_working(tmp_path: Path) -> None:
    """What an older server sees when a newer awb upgrades the file under it: the schema checked when it
    opened, not on every statement; a newer migration only adds to the schema."""
    path = schema_8_inventory(tmp_path / "inventory.db")
    store = SQLiteStore(path)
    try:
        newer = sqlite3.connect(path)
        newer.executescript(
            f"CREATE INDEX IF NOT EXISTS staged_by_time ON staged_writes(created_at); PRAGMA user_version = {SCHEMA_VERSION + 1};"
        )
        newer.close()
        store.add_tool(make_tool("after_upgrade"))
        store.stage_write(WRITER, "/srv/workspace/tools/out/n.txt", "new", NOW, call_id="c9", max_tool_writes=10)
        assert [w["content"] for w in store.staged_writes("pending")][-1] == "new"
        assert store.get_by_name("after_upgrade") is not None
        feed = SQLiteEventFeed(path, migrated=True)
        try:
            assert feed.head() == 12
        finally:
            feed.close()
    finally:
        store.close()
    with pytest.raises(ConfigError, match="newer than this awb"):
        SQLiteStore(path)  # but opened again, this awb is the older one: refused, the file untouched
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        db.close()


def test_todays_first_eight_migrations_build_the_schema_the_previous_awb_left(tmp_path: Path) -> None:
    """A shipped migration is never edited (an inventory made before the edit never runs it again):
    today's migrations 1-8 must build exactly what the previous awb's did."""
    previous = schema_8_inventory(tmp_path / "previous.db")
    today = sqlite3.connect(tmp_path / "today.db")
    for script in MIGRATIONS[:8]:
        for statement in statements(script):
            today.execute(statement)
    today.commit()
    today.close()

    def schema(path: Path) -> set[tuple[str, str, str]]:
        db = sqlite3.connect(path)
        try:
            return set(db.execute("SELECT type, name, coalesce(sql, '') FROM sqlite_master"))
        finally:
            db.close()

    assert schema(tmp_path / "today.db") == schema(previous)


# --- PostgreSQL ---------------------------------------------------------------------------------

#: The SQL of every shipped PostgreSQL migration. A database migrated before an edit never runs the
#: edited text; a change of schema is the next migration, never an edit of one of these.
SHIPPED = {
    1: "a33ec9d32bf39d34",
    2: "e3011e1664b682d1",
    3: "e5e3d9e04a8b7f0a",
    4: "0469d1805ac9cc3a",
    5: "81f5128920651479",
    6: "ef3364ecb5277366",
}


@pytest.fixture
def migration_3_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A database as the previous awb left it: migrations 1-3 (its last), with a tool and staged writes."""
    for url in pg_support.create_database():
        with monkeypatch.context() as previous:
            previous.setattr(postgres_migrations, "MIGRATIONS", postgres_migrations.MIGRATIONS[:3])
            previous.setattr(postgres_migrations, "SCHEMA_VERSION", 3)
            with psycopg.connect(url, autocommit=True) as conn:
                postgres_migrations.migrate(conn)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO tools (tool_id, name, search_name, description, language, runtime, code, input_schema, "
                "created_at, updated_at, usage_count, success_count) VALUES (%s, 'writer', 'writer', "
                "'Write a text to a file for review', 'python', 'cpython', 'def run(params):\n    return 1\n', "
                "'{\"type\": \"object\"}', '2026-11-28T04:46:43+00:00', '2026-11-28T04:46:43+00:00', 4, 4)",
                (WRITER,),
            )
            for n, content in enumerate(["héllo wörld", "", "x" * 5000, "plain"]):
                conn.execute(
                    "INSERT INTO staged_writes (tool_id, call_id, path, content, created_at) VALUES (%s, %s, %s, %s, %s)",
                    (
                        WRITER,
                        f"call_{n:016x}",
                        f"/srv/workspace/tools/out/f{n}.txt",
                        content,
                        "2026-11-28T04:46:43+00:00",
                    ),
                )
        yield url


def ledger(url: str) -> list[int]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT version FROM awb_migrations ORDER BY version")]


def test_a_database_at_migration_3_is_migrated_to_today_once_with_its_staged_writes_counted(
    migration_3_url: str,
) -> None:
    config = Config(inventory_url=migration_3_url)
    assert (store_status(config)["schema"], store_status(config)["pending"]) == (3, [4, 5, 6])
    assert open_together(lambda: PostgresStore(migration_3_url).close(), 3, timeout=60) == []
    assert ledger(migration_3_url) == [1, 2, 3, 4, 5, 6]
    with psycopg.connect(migration_3_url) as conn:
        index = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'staged_pending'").fetchall()
    assert [row[0].split(" USING ")[1] for row in index] == ["btree (status, tool_id, octet_length(content))"]
    assert (store_status(config)["schema"], store_status(config)["pending"]) == (6, [])

    store = PostgresStore(migration_3_url)
    try:
        tool = store.get(WRITER)
        assert tool is not None and tool.usage_count == 4
        old_writes_count_against_the_caps(store)
        with pytest.raises(OutputExceeded, match="max_staged_writes_per_tool"):
            store.stage_write(WRITER, "/srv/workspace/tools/out/c.txt", "", NOW, call_id="c3", max_tool_writes=5)
    finally:
        store.close()


def test_shipped_postgres_migrations_are_never_edited() -> None:
    texts = {m.version: hashlib.sha256(m.sql.encode()).hexdigest()[:16] for m in postgres_migrations.MIGRATIONS}
    assert {v: texts[v] for v in SHIPPED} == SHIPPED, (
        "a shipped migration changed: databases that ran it never run the new text; add the next migration instead"
    )


def open_together(open_store: Callable[[], None], servers: int, *, timeout: float) -> list[BaseException]:
    """`open_store` run by `servers` threads released at once (servers starting together); what they raised."""
    start = threading.Barrier(servers)
    failures: list[BaseException] = []

    def open_it() -> None:
        start.wait(timeout=10)
        try:
            open_store()
        except BaseException as error:  # returned to the test
            failures.append(error)

    threads = [threading.Thread(target=open_it) for _ in range(servers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    return failures


def old_writes_count_against_the_caps(store: SQLiteStore | PostgresStore) -> None:
    """The staged writes the previous awb left keep their sizes, and today's byte caps count them."""
    writes = store.staged_writes("pending")
    assert [len(w["content"].encode()) for w in writes] == STAGED_SIZES
    assert writes[0]["content"] == "héllo wörld"
    pending = sum(STAGED_SIZES)
    store.stage_write(WRITER, "/srv/workspace/tools/out/a.txt", "a", NOW, call_id="c1", max_tool_bytes=pending + 1)
    with pytest.raises(OutputExceeded, match="max_staged_bytes_per_tool"):
        store.stage_write(WRITER, "/srv/workspace/tools/out/b.txt", "b", NOW, call_id="c2", max_tool_bytes=pending + 1)
