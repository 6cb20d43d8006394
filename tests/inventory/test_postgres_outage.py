"""The shared inventory's database going away and coming back under a running store, and databases that
cannot be reached at all: every wait bounded, every failure a clear `unavailable` or config error,
recovery without a restart. Only this test session's own database is cut off (its backends terminated,
its connections refused for a moment); the PostgreSQL server itself keeps running for everyone else."""

from __future__ import annotations

import logging
import os
import resource
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import psycopg_pool
import pytest
from test_store_contract import NOW, make_tool

import pg_support
from awb.errors import ConfigError, InventoryUnavailable
from awb.inventory import postgres_pool
from awb.inventory.models import CallRecord
from awb.inventory.postgres import PostgresStore
from awb.inventory.postgres_pool import redacted

#: What the pool waits for a connection in these tests (the default is POOL_WAIT_SECONDS).
WAIT = 1.0


def database_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def terminate_backends(url: str) -> None:
    """End every connection to this test's database (as a database restart would) and wait, bounded,
    until they are gone."""
    name = database_of(url)
    with psycopg.connect(pg_support.ADMIN_URL, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        deadline = time.monotonic() + 10
        while admin.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (name,)).fetchone()[0]:
            assert time.monotonic() < deadline, "backends still there after 10 s"
            time.sleep(0.02)


@contextmanager
def database_down(url: str) -> Iterator[None]:
    """This test's database refuses connections and has none open; it takes them again afterwards."""
    name = database_of(url)
    with psycopg.connect(pg_support.ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
    try:
        terminate_backends(url)
        yield
    finally:
        with psycopg.connect(pg_support.ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')


def call_of(tool_id: str, n: int) -> CallRecord:
    return CallRecord(call_id=f"call_{n:016x}", tool_id=tool_id, version=1, at=NOW, duration_ms=1, ok=True)


def test_connections_the_database_closed_while_idle_are_replaced_before_a_request_gets_one(
    clean_pg_url: str,
) -> None:
    store = PostgresStore(clean_pg_url, pool_wait=WAIT)
    try:
        store.add_tool(make_tool("steady"))
        store.record_call(call_of("tool_steady", 0))
        terminate_backends(clean_pg_url)
        for n in range(1, 4):  # each would have drawn a dead connection
            assert store.record_call(call_of("tool_steady", n)).usage_count == n + 1
    finally:
        store.close()


def test_the_idle_check_works_on_descriptors_past_1024(clean_pg_url: str) -> None:
    """A busy server holds thousands of descriptors (one per HTTP connection): the pool's connections
    then get numbers past `select`'s limit of 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this machine allows {hard} descriptors per process")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    store = None
    try:
        store = PostgresStore(clean_pg_url, pool_wait=WAIT)
        store.add_tool(make_tool("steady"))
        terminate_backends(clean_pg_url)
        for n in range(1, 3):
            assert store.record_call(call_of("tool_steady", n)).usage_count == n
    finally:
        if store is not None:
            store.close()
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_while_the_database_is_down_requests_fail_with_unavailable_in_bounded_time_and_recover_after(
    clean_pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each wait of a request for a pooled connection (one per slice of the pool wait), counted rather
    # than timed: a loaded machine makes every request slow, a request that waits still asks the pool.
    waits: list[float | None] = []
    getconn = psycopg_pool.ConnectionPool.getconn

    def counted(pool: psycopg_pool.ConnectionPool, timeout: float | None = None) -> psycopg.Connection[Any]:
        waits.append(timeout)
        return getconn(pool, timeout)

    monkeypatch.setattr(psycopg_pool.ConnectionPool, "getconn", counted)
    store = PostgresStore(clean_pg_url, pool_wait=WAIT)
    try:
        store.add_tool(make_tool("patient"))
        with database_down(clean_pg_url):
            took, waited = [], []
            for n in range(3):
                started, asked = time.monotonic(), len(waits)
                with pytest.raises(InventoryUnavailable) as caught:
                    store.record_call(call_of("tool_patient", n))
                took.append(time.monotonic() - started)
                waited.append(len(waits) - asked)
                assert caught.value.code == "unavailable" and caught.value.http_status == 503
                assert redacted(clean_pg_url) in caught.value.message
        assert took[0] < WAIT + 5  # the pool's wait, bounded
        assert waited[0] >= 1, waited  # the first found no connection in the pool
        # Known down: the later ones fail without waiting for the pool again (each waited up to WAIT
        # when they did; now each at most asks the database itself, at once refused).
        assert waited[1:] == [0, 0], waited
        # Back: the next request finds it so, and the store serves again without a restart (its pool's
        # own reconnection would back off further the longer the database was away).
        deadline = time.monotonic() + 15
        while True:
            try:
                counters = store.record_call(call_of("tool_patient", 9))
                break
            except InventoryUnavailable:
                assert time.monotonic() < deadline, "the store did not serve again within 15 s"
                time.sleep(0.05)
        assert counters.usage_count == 1
    finally:
        store.close()


def test_a_database_that_refuses_connections_is_said_unavailable_at_once_not_after_the_pools_wait(
    clean_pg_url: str,
) -> None:
    """A restart: the database closes its connections and refuses new ones. The pool's own attempt to
    open one fails at once, so the request need not wait `pool_wait` for one that cannot come (a wait
    that, on a server, held up every other request on its event loop as long)."""
    store = PostgresStore(clean_pg_url, pool_wait=10)
    try:
        store.add_tool(make_tool("restarting"))
        with database_down(clean_pg_url):
            started = time.monotonic()
            with pytest.raises(InventoryUnavailable) as caught:
                store.record_call(call_of("tool_restarting", 1))
            took = time.monotonic() - started
        # Far from the pool's 10 s wait however loaded the machine (it is two refused connection attempts).
        assert took < 5, f"waited {took:.1f} s for a connection the database refused"
        assert redacted(clean_pg_url) in caught.value.message
        deadline = time.monotonic() + 15
        while True:  # and it serves again once the database takes connections
            try:
                assert store.record_call(call_of("tool_restarting", 2)).usage_count == 1
                break
            except InventoryUnavailable:
                assert time.monotonic() < deadline, "the store did not serve again within 15 s"
                time.sleep(0.05)
    finally:
        store.close()


@contextmanager
def silent_server() -> Iterator[int]:
    """A loopback port that accepts connections and never says a word (a host that swallows packets)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def test_a_database_that_never_answers_is_a_config_error_within_the_connect_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(postgres_pool, "CONNECT_SECONDS", 1.0)
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    outcome: list[BaseException] = []
    with silent_server() as port:

        def start() -> None:
            try:
                PostgresStore(f"postgresql://nobody@127.0.0.1:{port}/none")
            except BaseException as exc:
                outcome.append(exc)

        attempt = threading.Thread(target=start, daemon=True)
        attempt.start()
        attempt.join(timeout=15)
        assert not attempt.is_alive(), "opening the store still waited after 15 s"
    assert len(outcome) == 1 and isinstance(outcome[0], ConfigError)
    assert "cannot reach the inventory" in outcome[0].message


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:s3cret@127.0.0.1:1/db", "postgresql://u:***@127.0.0.1:1/db"),
        ("postgresql://u@127.0.0.1:1/db?password=s3cret&sslmode=disable", "password=***"),
        ("postgresql://u:s3cret@127.0.0.1:notaport/db", "postgresql://u:***@127.0.0.1:notaport/db"),
    ],
)
def test_messages_never_show_the_password_and_a_bad_url_is_named_not_a_crash(url: str, shown: str) -> None:
    assert shown in redacted(url) and "s3cret" not in redacted(url)
    with pytest.raises(ConfigError) as caught:
        PostgresStore(url + ("&" if "?" in url else "?") + "connect_timeout=2")
    assert "cannot reach the inventory" in caught.value.message and "s3cret" not in caught.value.message


def test_the_change_feed_says_once_that_it_lost_the_database_and_once_that_it_is_back(
    clean_pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="awb.inventory.postgres")

    def said(text: str) -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.name == "awb.inventory.postgres" and text in r.getMessage()]

    def until(condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 15
        while not condition():
            assert time.monotonic() < deadline, "not within 15 s"
            time.sleep(0.05)

    store = PostgresStore(clean_pg_url, pool_wait=WAIT)
    try:
        store.subscribe_changes(lambda change: None)
        with database_down(clean_pg_url):
            until(lambda: len(said("lost the inventory change feed")) >= 3)  # it keeps trying
        until(lambda: bool(said("change feed is back")))
    finally:
        store.close()
    lost = said("lost the inventory change feed")
    assert [r.levelno for r in lost][:1] == [logging.WARNING]
    assert {r.levelno for r in lost[1:]} == {logging.DEBUG}
    assert all(r.exc_info is None for r in lost)  # a line, not a traceback a second


def test_inventory_pool_wait_seconds_bounds_a_requests_wait_for_a_pooled_connection(
    clean_pg_url: str, tmp_path: Path
) -> None:
    from contextlib import ExitStack

    from awb.config import Config
    from awb.errors import InventoryBusy
    from awb.inventory.open import open_store
    from awb.inventory.postgres_pool import POOL_MAX

    config = Config(inventory_path=tmp_path / "unused.db", inventory_url=clean_pg_url, inventory_pool_wait_seconds=0.3)
    store = open_store(config)
    try:
        assert isinstance(store, PostgresStore)
        with ExitStack() as held:
            for _ in range(POOL_MAX):  # every pooled connection busy
                held.enter_context(store.connection())
            with pytest.raises(InventoryBusy, match=r"none came free within 0\.3 s"):
                store.count_active()
    finally:
        store.close()
