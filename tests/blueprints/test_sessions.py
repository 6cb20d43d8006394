"""Session stores: the SQLite one, the PostgreSQL one (both from the inventory's migrations) and the memory
one behave alike."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from awb.blueprints.journal import LogEntry, redact
from awb.blueprints.session_tables import open_session_store
from awb.blueprints.sessions import (
    Exchange,
    MemorySessionStore,
    SessionStore,
    check_run_input,
    log_page_within,
)
from awb.config import Config
from awb.errors import InvalidParams
from awb.inventory.sqlite import SQLiteStore

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    if request.param == "sqlite":
        opened = open_session_store(tmp_path / "inventory.db")
    elif request.param == "postgres":
        opened = open_session_store(Config(inventory_url=request.getfixturevalue("clean_pg_url")))
    else:
        opened = MemorySessionStore()
    yield opened
    opened.close()


def entries(run_id: str, at: datetime = AT) -> list[LogEntry]:
    kinds = ("run_start", "tool_call", "run_end")
    return [LogEntry(at=at + timedelta(seconds=i), run_id=run_id, kind=k, data={"n": i}) for i, k in enumerate(kinds)]


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


def test_texts_of_any_kind_come_back_unchanged(store: SessionStore) -> None:
    odd = "NUL \x00, emoji 🦜, quotes \"'\\ and\nnewlines"
    store.add_exchange("s", "bp", AT, odd, odd[::-1])
    [turn] = store.history("s", 5)
    assert (turn.user, turn.assistant) == (odd, odd[::-1])


def test_sessions_are_listed_most_recently_logged_first_with_their_counts(store: SessionStore) -> None:
    store.append_logs("older", entries("r1") + entries("r2", AT + timedelta(minutes=1)))
    store.append_logs("newer", entries("r3", AT + timedelta(minutes=2)))
    store.add_exchange("chat_only", "bp", AT, "hello", "hi")
    listed = store.sessions(10)
    assert [(s.session_id, s.runs, s.entries) for s in listed] == [("newer", 1, 3), ("older", 2, 6)]
    assert (
        listed[1].first_at == AT.isoformat() and listed[1].last_at == (AT + timedelta(minutes=1, seconds=2)).isoformat()
    )
    assert [s.session_id for s in store.sessions(1)] == ["newer"]


def test_a_session_exports_and_imports_whole_and_only_once(store: SessionStore, tmp_path: Path) -> None:
    store.add_exchange("s", "bp", AT, "q1", "a1")
    store.add_exchange("s", "bp2", AT + timedelta(seconds=5), "q2", "a2")
    store.append_logs("s", entries("r"))
    store.append_logs("logs_only", entries("r2"))
    assert store.session_ids() == ["logs_only", "s"]
    assert store.exchanges("s") == [
        Exchange(blueprint_id="bp", at=AT, message="q1", response="a1"),
        Exchange(blueprint_id="bp2", at=AT + timedelta(seconds=5), message="q2", response="a2"),
    ]
    target = open_session_store(tmp_path / "target.db")
    try:
        for session_id in store.session_ids():
            assert target.import_session(session_id, store.exchanges(session_id), store.logs(session_id)) is True
        assert target.import_session("s", store.exchanges("s"), store.logs("s")) is False  # already there
        assert target.exchanges("s") == store.exchanges("s") and target.logs("s") == store.logs("s")
        assert [(t.user, t.assistant) for t in target.history("s", 5)] == [("q1", "a1"), ("q2", "a2")]
        assert target.logs("logs_only") == entries("r2") and target.exchanges("logs_only") == []
    finally:
        target.close()


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


def test_a_sessions_log_is_read_a_page_at_a_time_in_the_order_written(store: SessionStore) -> None:
    """`logs` read a whole session at once, and a session's log has no bound."""
    written = [*entries("r1"), *entries("r2")]
    store.append_logs("s", written[:4])
    store.append_logs("other", entries("x"))
    store.append_logs("s", written[4:])
    read, after = [], 0
    while page := store.log_page("s", after=after, limit=4):
        assert len(page) <= 4 and all(n > after for n, _ in page)
        read += [entry for _, entry in page]
        after = page[-1][0]
    assert read == written
    assert store.log_page("nobody", limit=4) == []
    assert store.newest_logs("s", 2) == written[-2:]
    assert store.newest_logs("s", 100) == written


def test_an_import_reads_a_session_as_it_comes_and_a_page_at_a_time_gives_it_back(store: SessionStore) -> None:
    """An import held a session's every record in memory (rows built in a list), as the export did."""
    written = [Exchange(blueprint_id="bp", at=AT, message=f"q{n}", response=f"a{n}") for n in range(5)]
    read: list[str] = []

    def reading(items: list[Any], kind: str) -> Iterator[Any]:
        for item in items:
            read.append(kind)
            yield item

    assert store.import_session("s", reading(written, "exchange"), reading(entries("r"), "log")) is True
    assert read == ["exchange"] * 5 + ["log"] * 3
    assert store.import_session("logs_only", iter(()), reading(entries("r2"), "log")) is True
    assert store.import_session("s", reading(written, "again"), reading([], "again")) is False
    assert "again" not in read
    pages, after = [], 0
    while page := store.exchange_page("s", after=after, limit=2):
        pages.append([exchange for _, exchange in page])
        after = page[-1][0]
    assert pages == [written[:2], written[2:4], written[4:]]
    assert store.logs("logs_only") == entries("r2") and store.exchange_page("logs_only") == []


def test_a_log_page_ends_where_its_bytes_run_out_and_says_where_the_next_starts(store: SessionStore) -> None:
    """A page of `limit` entries was as big as its entries: 10,000 of them at 4,000 characters a value."""
    sizes = [100, 100, 5000, 100, 100, 100, 100, 100]
    store.append_logs("s", [LogEntry(at=AT, run_id="r", kind="tool_call", data={"t": "x" * n}) for n in sizes])
    pages: list[list[int]] = []
    after: int | None = 0
    while after is not None:
        page, after = log_page_within(store, "s", after=after, limit=3, max_bytes=600)
        pages.append([len(entry.data["t"]) for entry in page])
    # 3 at most, within 600 bytes of JSON, and an entry over it alone: never left out, never split.
    assert pages == [[100, 100], [5000], [100, 100, 100], [100, 100]]


def test_a_log_page_longer_than_one_read_from_the_store_is_whole_and_in_order(store: SessionStore) -> None:
    store.append_logs("s", [LogEntry(at=AT, run_id="r", kind="tool_call", data={"n": n}) for n in range(600)])
    first, after = log_page_within(store, "s", after=0, limit=550)
    rest, end = log_page_within(store, "s", after=after or 0, limit=550)
    assert [e.data["n"] for e in first + rest] == list(range(600))
    assert len(first) == 550 and after is not None and end is None
    assert log_page_within(store, "s", after=0, limit=600)[1] is None


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_an_entry_logged_before_credentials_were_masked_is_read_masked(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """An older awb stored what a tool returned as it was: every reader of the store gets it masked."""
    if kind == "sqlite":
        store = open_session_store(tmp_path / "inventory.db")
    else:
        store = open_session_store(Config(inventory_url=request.getfixturevalue("clean_pg_url")))
    key = "sk-proj-" + "K" * 32
    data = {"tool": "web.fetch", "arguments": {"api_key": "k"}, "output_summary": f"use Bearer {key}", "n": [1]}
    try:
        store.append_logs("old", [LogEntry(at=AT, run_id="r", kind="tool_call", data=data)])
        read = [store.logs("old"), [e for _, e in store.log_page("old")], store.newest_logs("old", 5)]
    finally:
        store.close()
    masked = {"tool": "web.fetch", "arguments": {"api_key": "***"}, "output_summary": "use ***", "n": [1]}
    assert [[entry.data for entry in entries] for entries in read] == [[masked]] * 3


@pytest.mark.parametrize("session_id", [".", "..", "s1\n", "", "a/b", "x" * 129])
def test_a_session_id_no_panel_page_can_open_is_refused_from_every_face(session_id: str) -> None:
    """A session id is a path segment of the panel's /runs/<id>: a browser resolves /runs/.. to / and /runs/.
    to /runs/ (escaped as %2e too), so those sessions ran and logged and no page showed them; and Python's
    `$` let an id end in a newline that the REST API's own pattern refuses, so its log could not be read."""
    with pytest.raises(InvalidParams, match="session id"):
        check_run_input("hello", session_id)


@pytest.mark.parametrize("session_id", ["...", ".a", "a..b", "s1", "x" * 128, "2026-11-28T10:00:00"])
def test_a_session_id_of_the_allowed_characters_is_taken(session_id: str) -> None:
    check_run_input("hello", session_id)
