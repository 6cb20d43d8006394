"""Session stores: the SQLite one (inventory migration) and the memory one behave alike."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from awb.blueprints.journal import LogEntry, redact
from awb.blueprints.sessions import MemorySessionStore, SessionStore, open_session_store
from awb.inventory.sqlite import SQLiteStore


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SessionStore:
    return open_session_store(tmp_path / "inventory.db") if request.param == "sqlite" else MemorySessionStore()


def test_history_returns_the_last_exchanges_oldest_first(store: SessionStore) -> None:
    now = datetime.now(UTC)
    for n in range(5):
        store.add_exchange("s", "bp", now, f"q{n}", f"a{n}")
    store.add_exchange("other", "bp", now, "x", "y")
    assert [(t.user, t.assistant) for t in store.history("s", 2)] == [("q3", "a3"), ("q4", "a4")]
    assert store.history("new", 10) == []


def test_logs_come_back_in_the_order_written(store: SessionStore) -> None:
    at = datetime.now(UTC)
    entries = [
        LogEntry(at=at, run_id="r", kind=k, data={"n": i}) for i, k in enumerate(("run_start", "tool_call", "run_end"))
    ]
    store.append_logs("s", entries[:2])
    store.append_logs("s", entries[2:])
    assert store.logs("s") == entries
    assert store.logs("t") == []


def test_the_inventory_migration_creates_the_session_tables(tmp_path: Path) -> None:
    inventory = SQLiteStore(tmp_path / "inventory.db")
    try:
        names = {row[0] for row in inventory._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        inventory.close()
    assert {"blueprint_messages", "blueprint_run_logs"} <= names


def test_redaction_masks_secret_keys_and_known_secret_values() -> None:
    value = {"query": "use tvly-abc", "api_key": "x", "nested": [{"Authorization": "Bearer y", "ok": "tvly-abc!"}]}
    assert redact(value, ("tvly-abc",)) == {
        "query": "use ***",
        "api_key": "***",
        "nested": [{"Authorization": "***", "ok": "***!"}],
    }
