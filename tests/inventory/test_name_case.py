"""Tool names are unique ignoring case, on both stores, enforced by the database; an inventory that
already holds case-variants (from before the rule) opens with both kept, and `awb doctor` names them."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from mcp import Client
from test_store_contract import make_tool

import pg_support
from awb.clock import ManualClock
from awb.config import Config, SearchConfig
from awb.errors import NameConflict
from awb.events import Event
from awb.inventory import postgres_migrations
from awb.inventory import sqlite as sqlite_store
from awb.inventory.models import Tool
from awb.inventory.open import open_store
from awb.inventory.postgres import PostgresStore
from awb.inventory.rows import first_version, tool_values, version_values
from awb.inventory.sqlite import SQLiteStore
from awb.inventory.sqlite_schema import MIGRATIONS, statements
from awb.inventory.store import Store
from awb.inventory.transfer import export_lines, import_lines
from awb.server.mcp import McpFace
from awb.workbench import Workbench
from support import add_tool, awb_env, once_after

pytestmark = pytest.mark.anyio

RULE = "names are unique ignoring case"


def named(name: str, tool_id: str) -> Tool:
    return make_tool(name).model_copy(update={"tool_id": tool_id})


def test_a_tool_named_like_a_live_one_but_for_case_is_refused_naming_the_live_one(store: Store) -> None:
    store.add_tool(named("fetch_page", "tool_lower"))
    with pytest.raises(NameConflict) as refused:
        store.add_tool(named("Fetch_Page", "tool_mixed"))
    assert refused.value.code == "name_conflict"
    assert "'fetch_page' already exists" in refused.value.message and RULE in refused.value.message
    assert refused.value.details == {"name": "Fetch_Page", "existing": "fetch_page", "tool_id": "tool_lower"}
    assert store.get("tool_mixed") is None and store.count_active() == 1
    # Lookup stays exact: the other case reaches nothing; the name's holder is found ignoring case.
    assert store.get_by_name("Fetch_Page") is None
    holder = store.name_holder("FETCH_PAGE")
    assert holder is not None and holder.tool_id == "tool_lower"
    # A deleted tool frees its name in every case.
    store.update("tool_lower", status="deleted")
    store.add_tool(named("Fetch_Page", "tool_mixed"))
    assert store.get_by_name("Fetch_Page") is not None


async def test_the_workbench_refuses_a_craft_of_a_case_variant_before_running_its_examples(
    store_config: Config,
) -> None:
    config = store_config.model_copy(update={"search": SearchConfig(mode="text")})
    async with Workbench(config, clock=ManualClock()) as workbench:
        first = await workbench.craft(add_tool("fetch_page"))
        heard: list[Event] = []
        workbench.events.subscribe(heard.append)
        with pytest.raises(NameConflict) as refused:
            await workbench.craft(add_tool("Fetch_Page"))
        assert refused.value.message == (
            "a tool named 'fetch_page' already exists; names are unique ignoring case, so 'Fetch_Page' is taken"
        )
        assert refused.value.details["tool_id"] == first.tool_id
        assert heard == []  # refused before admission: no "crafting ..." toast
        assert [t.name for t in workbench.list_tools()] == ["fetch_page"]


async def test_a_craft_that_loses_its_name_to_another_servers_case_variant_says_which(store_config: Config) -> None:
    """Both crafts found the name free; the other server's `Fetch_Page` went in first."""
    config = store_config.model_copy(update={"search": SearchConfig(mode="text")})
    async with Workbench(config, clock=ManualClock()) as one, Workbench(config, clock=ManualClock()) as other:
        heard: list[Event] = []
        one.events.subscribe(heard.append)
        once_after(one.store, lambda: other.store.add_tool(named("Fetch_Page", "tool_other")), "check_room")
        with pytest.raises(NameConflict, match=r"^a tool named 'Fetch_Page' already exists; names are unique"):
            await one.craft(add_tool("fetch_page"))
    assert [e.kind for e in heard] == ["craft_started", "craft_rejected"]


def test_concurrent_adds_of_case_variants_from_two_servers_store_exactly_one(store_config: Config) -> None:
    stores = [open_store(store_config) for _ in range(2)]
    start = threading.Barrier(2)
    outcomes: dict[str, BaseException | None] = {}

    def add(store: Store, name: str) -> None:
        start.wait(timeout=10)
        try:
            store.add_tool(named(name, f"tool_{name}"), max_active=100)
            outcomes[name] = None
        except BaseException as error:  # returned to the test
            outcomes[name] = error

    try:
        threads = [
            threading.Thread(target=add, args=(store, name))
            for store, name in zip(stores, ["Fetch_Page", "fetch_page"], strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert len(outcomes) == 2
        winners = [name for name, error in outcomes.items() if error is None]
        [loser] = [error for error in outcomes.values() if error is not None]
        assert len(winners) == 1
        assert isinstance(loser, NameConflict) and f"'{winners[0]}' already exists" in loser.message
        assert stores[0].count_active() == 1
    finally:
        for store in stores:
            store.close()


# --- the database itself refuses (writers around the store's check: an older awb, a second server) ---


def test_sqlite_refuses_a_case_variant_written_around_the_store(tmp_path: Path) -> None:
    path = tmp_path / "inventory.db"
    store = SQLiteStore(path)
    store.add_tool(named("fetch_page", "tool_lower"))
    store.close()
    db = sqlite3.connect(path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
            insert_row(db, named("Fetch_Page", "tool_mixed"), "?")
    finally:
        db.close()


def test_postgresql_lets_only_one_of_two_open_transactions_holding_case_variants_commit(clean_pg_url: str) -> None:
    """Two servers' inserts, each past any check of its own: the second waits for the first's commit,
    then fails on the index."""
    PostgresStore(clean_pg_url).close()
    first = psycopg.connect(clean_pg_url)
    second = psycopg.connect(clean_pg_url)
    try:
        insert_row(first, named("Fetch_Page", "tool_mixed"), "%s")
        failed: list[BaseException] = []

        def insert_second() -> None:
            try:
                insert_row(second, named("fetch_page", "tool_lower"), "%s")
                second.commit()
            except BaseException as error:  # returned to the test
                failed.append(error)

        waiting = threading.Thread(target=insert_second)
        waiting.start()
        first.commit()
        waiting.join(timeout=30)
        assert not waiting.is_alive()
        assert len(failed) == 1 and isinstance(failed[0], psycopg.errors.UniqueViolation)
    finally:
        first.close()
        second.close()
    with psycopg.connect(clean_pg_url) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM tools")] == ["Fetch_Page"]


def insert_row(db: Any, tool: Tool, mark: str) -> None:
    """A tool's row and first version as a writer without the store's checks writes them."""
    values = tool_values(tool, sqlite=mark == "?")
    db.execute(
        f"INSERT INTO tools ({', '.join(values)}) VALUES ({', '.join(mark for _ in values)})", list(values.values())
    )
    version = version_values(tool.tool_id, first_version(tool))
    db.execute(f"INSERT INTO tool_versions VALUES ({', '.join(mark for _ in version)})", version)


# --- inventories from before the rule -----------------------------------------------------------

VARIANTS = [named("Fetch_Page", "tool_first"), named("fetch_page", "tool_second"), named("FETCH_PAGE", "tool_gone")]


def schema_9_inventory_with_case_variants(path: Path) -> Path:
    """The previous awb's inventory (schema 9), holding two live case-variants and a deleted third."""
    db = sqlite3.connect(path, isolation_level=None)
    for script in MIGRATIONS[:9]:
        for statement in statements(script):
            db.execute(statement)
    db.execute("PRAGMA user_version = 9")
    for tool in VARIANTS:
        insert_row(db, tool, "?")
    db.execute("UPDATE tools SET status = 'deleted' WHERE tool_id = 'tool_gone'")
    db.close()
    return path


def keeps_both_and_refuses_a_third(store: Store) -> None:
    first, second = store.get_by_name("Fetch_Page"), store.get_by_name("fetch_page")
    assert first is not None and first.tool_id == "tool_first"
    assert second is not None and second.tool_id == "tool_second"
    assert store.count_active() == 2
    assert store.case_variants() == [["Fetch_Page", "fetch_page"]]
    with pytest.raises(NameConflict, match=r"'Fetch_Page' already exists; names are unique ignoring case"):
        store.add_tool(named("fEtch_page", "tool_third"))
    # Deleting one of the pair leaves no variants to report, and the name still taken by the other.
    store.update("tool_first", status="deleted")
    assert store.case_variants() == []
    with pytest.raises(NameConflict, match=r"'fetch_page' already exists"):
        store.add_tool(named("Fetch_Page", "tool_again"))


def test_an_older_sqlite_inventory_holding_case_variants_opens_with_both_kept(tmp_path: Path) -> None:
    path = schema_9_inventory_with_case_variants(tmp_path / "inventory.db")
    store = SQLiteStore(path)
    try:
        assert store.schema_version() == sqlite_store.SCHEMA_VERSION == 11
        keeps_both_and_refuses_a_third(store)
    finally:
        store.close()


@pytest.fixture
def migration_4_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A database as the previous awb left it (migrations 1-4), holding case-variants as the SQLite one."""
    for url in pg_support.create_database():
        with monkeypatch.context() as previous:
            previous.setattr(postgres_migrations, "MIGRATIONS", postgres_migrations.MIGRATIONS[:4])
            previous.setattr(postgres_migrations, "SCHEMA_VERSION", 4)
            with psycopg.connect(url, autocommit=True) as conn:
                postgres_migrations.migrate(conn)
        with psycopg.connect(url, autocommit=True) as conn:
            for tool in VARIANTS:
                insert_row(conn, tool, "%s")
            conn.execute("UPDATE tools SET status = 'deleted' WHERE tool_id = 'tool_gone'")
        yield url


def test_an_older_postgresql_inventory_holding_case_variants_opens_with_both_kept(migration_4_url: str) -> None:
    store = PostgresStore(migration_4_url)
    try:
        assert store.schema_version() == postgres_migrations.SCHEMA_VERSION == 6
        keeps_both_and_refuses_a_third(store)
    finally:
        store.close()


def test_an_export_holding_case_variants_imports_both_and_a_variant_of_a_tool_there_is_refused(
    store: Store, tmp_path: Path
) -> None:
    older = SQLiteStore(schema_9_inventory_with_case_variants(tmp_path / "older.db"))
    lines = list(export_lines(older))
    older.close()
    assert import_lines(store, lambda: lines).imported == 3
    assert [sorted(group) for group in store.case_variants()] == [["Fetch_Page", "fetch_page"]]
    assert import_lines(store, lambda: lines).skipped == 3  # re-run: nothing new, nothing refused

    other = SQLiteStore(tmp_path / "other.db")
    other.add_tool(named("FETCH_page", "tool_elsewhere"))
    foreign = list(export_lines(other))
    other.close()
    with pytest.raises(
        NameConflict,
        match=r"named '\w+' already exists \(tool_\w+\); names are unique ignoring case, so 'FETCH_page' is taken",
    ):
        import_lines(store, lambda: foreign)
    assert store.get("tool_elsewhere") is None


def test_a_search_index_of_other_servers_tools_keeps_names_that_differ_only_in_case() -> None:
    """Other MCP servers' tool names are case-sensitive: the planner's index of them keeps both."""
    index = SQLiteStore(":memory:")
    index.add_tool(named("web__Fetch", "web.Fetch"), keep_case_variants=True)
    index.add_tool(named("web__fetch", "web.fetch"), keep_case_variants=True)
    assert {t.tool_id for t in index.list_tools()} == {"web.Fetch", "web.fetch"}
    index.close()


def test_awb_doctor_warns_of_the_case_variants_an_older_inventory_holds(tmp_path: Path) -> None:
    schema_9_inventory_with_case_variants(tmp_path / "inventory.db")
    done = subprocess.run(
        [sys.executable, "-m", "awb", "doctor", "--quick", "--json"],
        env=awb_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    checks = {c["check"]: c for c in json.loads(done.stdout)["checks"]}
    cases = checks["tool name cases"]
    assert cases["ok"] is True and cases["warning"] is True
    assert "'Fetch_Page' and 'fetch_page'" in cases["detail"] and "delete all but one" in cases["detail"]


async def test_awb_craft_over_mcp_answers_a_case_variant_with_name_conflict_naming_the_tool(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inventory.db", search=SearchConfig(mode="text"))
    async with Workbench(config) as workbench, Client(McpFace(workbench).server) as client:
        with anyio.fail_after(30):
            first = await client.call_tool("awb_craft", add_tool("fetch_page"))
            assert not first.is_error
            second = await client.call_tool("awb_craft", add_tool("FETCH_PAGE"))
    assert second.is_error and second.structured_content is not None
    error = second.structured_content["error"]
    assert error["code"] == "name_conflict"
    assert error["message"] == (
        "a tool named 'fetch_page' already exists; names are unique ignoring case, so 'FETCH_PAGE' is taken"
    )
    assert error["details"]["existing"] == "fetch_page"
