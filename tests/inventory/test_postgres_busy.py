"""A PostgreSQL inventory that answers but cannot serve a request in time: a pool whose every connection is
lent (said `busy`, the database not taken for down), and a statement blocked behind another session's lock
(ended by the statement timeout, said `unavailable`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from test_store_contract import make_tool

from awb.errors import AwbError
from awb.inventory import postgres_pool
from awb.inventory.postgres import PostgresStore

#: What the pool waits for a connection in these tests.
WAIT = 1.0


@pytest.fixture
def store(clean_pg_url: str) -> Iterator[PostgresStore]:
    opened = PostgresStore(clean_pg_url, pool_size=1, pool_wait=WAIT)
    try:
        opened.add_tool(make_tool("steady"))
        yield opened
    finally:
        opened.close()


def test_a_pool_whose_every_connection_is_lent_says_busy_within_its_wait_not_that_the_database_is_down(
    store: PostgresStore,
) -> None:
    with store.connection():  # the pool's only connection, lent to a slow request
        started = time.monotonic()
        with pytest.raises(AwbError) as raised:
            store.schema_version()
        waited = time.monotonic() - started
    assert raised.value.code == "busy"
    assert "pool is exhausted" in raised.value.message
    assert "all 1 connections" in raised.value.message
    assert WAIT - 0.1 <= waited < WAIT + 5  # the pool wait, with room for a loaded machine
    # Not taken for down: the next request gets the connection given back, without a probe.
    assert store.schema_version() >= 1
    assert store._pool._down is None


def test_a_statement_blocked_behind_another_sessions_lock_ends_unavailable_within_the_statement_timeout(
    store: PostgresStore, clean_pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_pool, "STATEMENT_SECONDS", 1.0, raising=False)
    store.close()  # its connections were configured with the default timeout
    blocked = PostgresStore(clean_pg_url, pool_wait=WAIT)
    locker = psycopg.connect(clean_pg_url)

    def end_the_lock() -> None:
        with psycopg.connect(clean_pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (locker.info.backend_pid,))

    # Never held for ever, whatever the store does: the lock's session ends after 15 s.
    release = threading.Timer(15, end_the_lock)
    release.start()
    try:
        locker.execute("LOCK TABLE tools IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        with pytest.raises(AwbError) as raised:
            blocked.list_tools()
        waited = time.monotonic() - started
        assert raised.value.code == "unavailable"
        assert "did not finish a statement in time" in raised.value.message
        assert waited < 1.0 + 7  # the statement timeout (1 s), not the lock's 15 s
    finally:
        release.cancel()
        locker.close()
        blocked.close()
