"""What only the shared store has to hold: concurrent starts, atomic counters, limits, the change feed."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from test_store_contract import NOW, make_tool

import pg_support
from awb.config import Config, MemoryConfig
from awb.errors import ConfigError, LimitExceeded
from awb.inventory.memory import MemoryPolicy
from awb.inventory.models import CallRecord
from awb.inventory.postgres import PostgresStore
from awb.inventory.postgres_migrations import SCHEMA_VERSION
from awb.inventory.postgres_notify import Change


@pytest.fixture
def fresh_url() -> Iterator[str]:
    """A database of its own, never migrated."""
    yield from pg_support.create_database()


def test_servers_starting_together_migrate_the_schema_exactly_once(fresh_url: str) -> None:
    code = "import sys; from awb.inventory.postgres import PostgresStore; PostgresStore(sys.argv[1]).close()"
    starts = [subprocess.Popen([sys.executable, "-c", code, fresh_url], stderr=subprocess.PIPE) for _ in range(4)]
    for process in starts:
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err.decode()
    with psycopg.connect(fresh_url) as conn:
        rows = conn.execute("SELECT version FROM awb_migrations ORDER BY version").fetchall()
    assert [r[0] for r in rows] == list(range(1, SCHEMA_VERSION + 1))


def test_a_database_from_a_newer_awb_is_refused_clearly(fresh_url: str) -> None:
    PostgresStore(fresh_url).close()
    with psycopg.connect(fresh_url, autocommit=True) as conn:
        conn.execute("INSERT INTO awb_migrations(version, name) VALUES (%s, 'future')", (SCHEMA_VERSION + 1,))
    with pytest.raises(ConfigError, match="newer than this awb"):
        PostgresStore(fresh_url)


def test_an_unreachable_server_is_a_clear_config_error() -> None:
    with pytest.raises(ConfigError, match="cannot reach the inventory"):
        PostgresStore("postgresql://nobody:secret@127.0.0.1:1/none?connect_timeout=2")


def test_many_servers_calling_one_tool_lose_no_count_and_promote_on_the_true_count(clean_pg_url: str) -> None:
    policy = MemoryPolicy(MemoryConfig(promotion_threshold_medium=40, promotion_threshold_long=1000))
    stores = [PostgresStore(clean_pg_url) for _ in range(2)]
    try:
        stores[0].add_tool(make_tool("shared"))
        stale = stores[0].get("tool_shared")
        assert stale is not None

        def call(i: int) -> None:
            record = CallRecord(
                call_id=f"call_{i:016x}", tool_id="tool_shared", version=1, at=NOW, duration_ms=1, ok=True
            )
            stores[i % 2].record_call(record, level_after=policy.level_after_success)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(call, range(80)))
        tool = stores[1].get("tool_shared")
        assert tool is not None
        assert (tool.usage_count, tool.success_count, tool.memory_level) == (80, 80, "medium_term")
        assert stores[1].versions("tool_shared")[0].usage_count == 80
    finally:
        for store in stores:
            store.close()


def test_servers_recording_groups_of_calls_on_the_same_tools_lose_no_count_and_never_deadlock(
    clean_pg_url: str,
) -> None:
    """Groups name the tools in different orders. A group that failed (a deadlock among them included)
    would be recorded one call at a time, which this test refuses."""
    policy = MemoryPolicy(MemoryConfig(promotion_threshold_medium=60, promotion_threshold_long=1000))
    stores = [PostgresStore(clean_pg_url) for _ in range(3)]
    names = ["t0", "t1", "t2", "t3"]
    try:
        for name in names:
            stores[0].add_tool(make_tool(name))
        for store in stores:

            def one_at_a_time(call: CallRecord, **_: object) -> None:
                raise AssertionError("a group was recorded one call at a time")

            store.record_call = one_at_a_time  # type: ignore[method-assign]

        def group(g: int) -> list[object]:
            order = names[g % 4 :] + names[: g % 4]  # a different first tool for each group
            order = order if g % 2 else order[::-1]
            calls = [
                CallRecord(
                    call_id=f"call_{g:04d}_{i:02d}",
                    tool_id=f"tool_{name}",
                    version=1,
                    at=NOW,
                    duration_ms=1,
                    ok=i % 5 != 0,
                )
                for i, name in enumerate(order * 5)
            ]
            return list(stores[g % 3].record_calls(calls, level_after=policy.level_after_success))

        with ThreadPoolExecutor(6) as pool:
            results = [r for rs in pool.map(group, range(48)) for r in rs]
        assert not [r for r in results if isinstance(r, Exception)]
        for name in names:
            tool = stores[2].get(f"tool_{name}")
            assert tool is not None
            # 48 groups x 5 calls of each tool; every fifth call of a group fails
            assert (tool.usage_count + tool.failure_count, tool.memory_level) == (240, "medium_term")
            assert (
                tool.usage_count
                == tool.success_count
                == stores[2].versions(f"tool_{name}")[0].usage_count - tool.failure_count
            )
    finally:
        for store in stores:
            store.close()


def test_a_tier_another_server_moved_meanwhile_stands_over_one_a_group_of_calls_earned(
    clean_pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = MemoryPolicy(MemoryConfig(promotion_threshold_medium=2, promotion_threshold_long=1000))
    ours, theirs = PostgresStore(clean_pg_url), PostgresStore(clean_pg_url)
    try:
        ours.add_tool(make_tool("raced"))
        write_together = ours._write_together

        def then_another_server_moves_the_tier(*args: object) -> object:
            found = write_together(*args)  # type: ignore[arg-type]
            theirs.update("tool_raced", memory_level="long_term")  # e.g. a person's pin, between the two
            return found

        monkeypatch.setattr(ours, "_write_together", then_another_server_moves_the_tier)
        calls = [
            CallRecord(call_id=f"call_r{i}", tool_id="tool_raced", version=1, at=NOW, duration_ms=1, ok=True)
            for i in range(3)
        ]
        results = ours.record_calls(calls, level_after=policy.level_after_success)
        assert [getattr(r, "memory_level", r) for r in results] == ["short_term"] * 3
        assert [getattr(r, "usage_count", r) for r in results] == [1, 2, 3]
        tool = ours.get("tool_raced")
        assert tool is not None and (tool.usage_count, tool.memory_level) == (3, "long_term")
    finally:
        ours.close()
        theirs.close()


def test_max_tools_holds_when_servers_craft_at_the_same_moment(clean_pg_url: str) -> None:
    stores = [PostgresStore(clean_pg_url, max_tools=5) for _ in range(2)]
    refused: list[str] = []

    def add(i: int) -> None:
        try:
            stores[i % 2].add_tool(make_tool(f"t{i}"))
        except LimitExceeded:
            refused.append(f"t{i}")

    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(add, range(12)))
        assert stores[0].count_active() == 5 and len(refused) == 7
    finally:
        for store in stores:
            store.close()


def test_a_change_in_one_server_reaches_the_others_feed_and_never_its_own(clean_pg_url: str) -> None:
    writer, reader = PostgresStore(clean_pg_url), PostgresStore(clean_pg_url)
    heard: queue.Queue[Change] = queue.Queue()
    own: list[Change] = []
    try:
        reader.subscribe_changes(heard.put)
        writer.subscribe_changes(own.append)
        writer.add_tool(make_tool("fed"))
        assert heard.get(timeout=5) == Change("crafted", ("tool_fed",), False)
        writer.update("tool_fed", equipped=True)
        assert heard.get(timeout=5) == Change("updated", ("tool_fed",), True)
        writer.put_vector("tool_fed", "m", [1.0])
        assert heard.get(timeout=5).kind == "vector"
        writer.update("tool_fed", status="deleted", equipped=False)
        assert heard.get(timeout=5) == Change("deleted", ("tool_fed",), True)
        # A change announced by the reader itself arrives at the writer, proving the writer's feed
        # listens; nothing the writer sent came back to it.
        reader.announce("resync", [])
        event = threading.Event()
        writer.subscribe_changes(lambda change: event.set())
        reader.announce("resync", [])
        assert event.wait(timeout=5)
        assert all(c.kind == "resync" for c in own)
        assert writer.data_version() >= 1
    finally:
        writer.close()
        reader.close()


def test_doctor_facts_name_the_server_the_schema_and_the_vector_path(clean_pg_url: str) -> None:
    store = PostgresStore(clean_pg_url)
    try:
        info = store.server_info()
    finally:
        store.close()
    assert info["server_version"].split(".")[0].isdigit()
    assert info["schema"] == info["schema_expected"] == SCHEMA_VERSION
    assert "in memory per server: exact cosine up to 20,000 tools" in info["vector_search"]


def test_inventory_url_comes_from_the_environment() -> None:
    from awb.config import load_config

    config = load_config(environ={"AWB_INVENTORY_URL": "postgresql://u@db.example:5432/awb"})
    assert config.inventory_url == "postgresql://u@db.example:5432/awb"
    with pytest.raises(ConfigError, match="inventory_url"):
        load_config(environ={"AWB_INVENTORY_URL": "mysql://nope"})
    assert Config().inventory_url is None


def test_each_servers_text_ranking_follows_crafts_and_deletes_made_by_another(clean_pg_url: str) -> None:
    writer, reader = PostgresStore(clean_pg_url), PostgresStore(clean_pg_url)
    heard: queue.Queue[Change] = queue.Queue()
    try:
        writer.add_tool(make_tool("parse_csv", "Parse a CSV file into rows"))
        assert [s.name for s in reader.search_summaries(["csv"], limit=5)] == ["parse_csv"]  # index built
        reader.subscribe_changes(heard.put)
        writer.add_tool(make_tool("csv_to_json", "Convert CSV text to JSON"))
        assert heard.get(timeout=5).kind == "crafted"
        assert {s.name for s in reader.search_summaries(["csv"], limit=5)} == {"parse_csv", "csv_to_json"}
        writer.update("tool_parse_csv", description="Read spreadsheet rows")
        writer.update("tool_csv_to_json", status="deleted")
        assert heard.get(timeout=5).kind == "updated" and heard.get(timeout=5).kind == "deleted"
        assert [s.name for s in reader.search_summaries(["csv", "json"], limit=5)] == ["parse_csv"]
        assert [s.name for s in reader.search_summaries(["spreadsheet"], limit=5)] == ["parse_csv"]
    finally:
        writer.close()
        reader.close()


@pytest.mark.parametrize("text_search", ["bm25", "fts"])
def test_both_text_rankings_keep_the_contract_best_first_archived_last(clean_pg_url: str, text_search: str) -> None:
    store = PostgresStore(clean_pg_url, text_search=text_search)  # type: ignore[arg-type]
    try:
        store.add_tool(make_tool("resize_image", "Resize an image to a width"))
        store.add_tool(make_tool("crop", "Crop an image", memory_level="archived", status="archived"))
        store.add_tool(make_tool("image_meta", "Read the metadata of a picture file"))
        for filler in ("weather", "translate", "hash_text", "zip_files"):
            store.add_tool(make_tool(filler, f"{filler} for you"))
        hits = store.search_summaries(["resize", "image"], limit=5)
        assert [h.name for h in hits] == ["resize_image", "image_meta", "crop"]
        scores = [h.score or 0.0 for h in hits[:2]]
        assert scores[0] > scores[1] > 0
    finally:
        store.close()


def test_a_database_at_schema_one_gains_the_journal_sessions_and_peak_memory_and_keeps_its_calls(
    fresh_url: str,
) -> None:
    PostgresStore(fresh_url).close()
    with psycopg.connect(fresh_url, autocommit=True) as conn:  # back to what the first release made
        conn.execute("ALTER TABLE calls DROP COLUMN peak_memory_bytes")
        conn.execute("DROP TABLE workbench_events, blueprint_messages, blueprint_run_logs")
        conn.execute("DROP FUNCTION awb_append_event")
        conn.execute("DELETE FROM awb_migrations WHERE version > 1")
        conn.execute(
            "INSERT INTO calls (call_id, tool_id, version, at, duration_ms, ok) "
            "VALUES ('call_00000000000000c1', 'tool_a', 1, '2026-01-01T00:00:00+00:00', 1.5, true)"
        )
    store = PostgresStore(fresh_url)
    try:
        assert store.schema_version() == SCHEMA_VERSION
        [record] = store.calls("tool_a")
        assert (record.call_id, record.duration_ms, record.peak_memory_bytes) == ("call_00000000000000c1", 1.5, None)
        assert store.append_event("crafted", "tool_a", {"name": "a"}, NOW) == store.events_head()
    finally:
        store.close()
