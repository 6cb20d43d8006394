"""The web panel's sign-outs in the inventory, on both stores: expired ones dropped, those past the bound
folded into a floor, read on from a number; an inventory of the previous schema (SQLite 10, PostgreSQL
migration 5) upgrades to hold them, its data intact; every server of a PostgreSQL inventory hears of each."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from test_name_case import insert_row, named

import pg_support
from awb.inventory import postgres_migrations
from awb.inventory.panel_sign_outs import FLOOR
from awb.inventory.postgres import PostgresStore
from awb.inventory.sqlite import MIGRATIONS, SCHEMA_VERSION, SQLiteStore
from awb.inventory.sqlite_schema import statements

NOW = 1_900_000_000


def test_expired_sign_outs_go_and_those_past_the_bound_fold_into_a_floor(store: Any) -> None:
    store.record_sign_out("old", NOW - 1, now=NOW - 100, keep=3)
    for n in range(1, 6):
        store.record_sign_out(f"k{n}", NOW + 10 * n, now=NOW, keep=3)
    seq, rows = store.sign_outs_after(0)
    # Five passes, room for three: the two that expire first are in the floor (k1 went with k2's fold).
    assert sorted(rows) == [(FLOOR, NOW + 20), ("k3", NOW + 30), ("k4", NOW + 40), ("k5", NOW + 50)]
    assert store.sign_outs_after(seq) == (seq, [])
    store.record_sign_out("k5", NOW + 50, now=NOW, keep=3)  # signed out twice: one row
    assert store.sign_outs_after(seq) == (seq, [])
    # Once the floor's time has passed it goes too: no pass under it could sign in any more.
    store.record_sign_out("late", NOW + 100, now=NOW + 35, keep=3)
    later, new = store.sign_outs_after(seq)
    assert new == [("late", NOW + 100)] and later > seq
    assert sorted(store.sign_outs_after(0)[1]) == [("k4", NOW + 40), ("k5", NOW + 50), ("late", NOW + 100)]


def test_a_flood_of_sign_outs_leaves_the_table_at_its_bound(store: Any) -> None:
    for n in range(200):
        store.record_sign_out(f"flood{n}", NOW + n, now=NOW, keep=50)
    _, rows = store.sign_outs_after(0)
    assert len(rows) == 51
    assert dict(rows)[FLOOR] == NOW + 149  # each of the 150 passes folded is refused under it


# --- upgrades ---------------------------------------------------------------------------------------


def test_an_inventory_at_schema_10_upgrades_to_keep_sign_outs_with_its_tools_intact(tmp_path: Path) -> None:
    path = tmp_path / "inventory.db"
    db = sqlite3.connect(path, isolation_level=None)
    for script in MIGRATIONS[:10]:
        for statement in statements(script):
            db.execute(statement)
    db.execute("PRAGMA user_version = 10")
    insert_row(db, named("kept_tool", "tool_kept"), "?")
    db.close()
    store = SQLiteStore(path)
    try:
        assert store.schema_version() == SCHEMA_VERSION == 11
        kept = store.get("tool_kept")
        assert kept is not None and kept.name == "kept_tool"
        store.record_sign_out("k", NOW + 10, now=NOW, keep=10)
        assert store.sign_outs_after(0)[1] == [("k", NOW + 10)]
    finally:
        store.close()
    store = SQLiteStore(path)  # opened again: not migrated again, the sign-out still there
    try:
        assert store.sign_outs_after(0)[1] == [("k", NOW + 10)]
    finally:
        store.close()


@pytest.fixture
def migration_5_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A database as the previous awb left it (migrations 1-5), holding a tool."""
    for url in pg_support.create_database():
        with monkeypatch.context() as previous:
            previous.setattr(postgres_migrations, "MIGRATIONS", postgres_migrations.MIGRATIONS[:5])
            previous.setattr(postgres_migrations, "SCHEMA_VERSION", 5)
            with psycopg.connect(url, autocommit=True) as conn:
                postgres_migrations.migrate(conn)
        with psycopg.connect(url, autocommit=True) as conn:
            insert_row(conn, named("kept_tool", "tool_kept"), "%s")
        yield url


def test_a_database_at_migration_5_upgrades_to_keep_sign_outs_and_every_server_hears_of_each(
    migration_5_url: str,
) -> None:
    first, second = PostgresStore(migration_5_url), PostgresStore(migration_5_url)
    try:
        assert first.schema_version() == postgres_migrations.SCHEMA_VERSION == 6
        with psycopg.connect(migration_5_url) as conn:
            assert [r[0] for r in conn.execute("SELECT version FROM awb_migrations ORDER BY version")] == [
                1,
                2,
                3,
                4,
                5,
                6,
            ]
        kept = second.get("tool_kept")
        assert kept is not None and kept.name == "kept_tool"
        heard = threading.Event()
        unsubscribe = second.subscribe_sign_outs(heard.set)
        try:
            first.record_sign_out("k", NOW + 10, now=NOW, keep=10)
            assert heard.wait(timeout=5)
        finally:
            unsubscribe()
        assert second.sign_outs_after(0)[1] == [("k", NOW + 10)]
    finally:
        first.close()
        second.close()
