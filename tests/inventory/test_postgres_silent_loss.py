"""A database that goes away without a word: its host gone, a failover to another address, a NAT or
firewall that forgot an idle flow. Nothing arrives on the store's connections (no FIN, no RST), so only
what the store sends can tell it: TCP keepalives on every connection. The change feed, which never
sends, would otherwise follow nothing for ever; the pool would hand the dead connections to requests.

The loss is made by a loopback proxy that closes its side of each connection in TCP repair mode (no
segment goes out; what the store sends next is answered with an RST), which needs CAP_NET_ADMIN."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from test_store_contract import make_tool

from awb.inventory import postgres_pool
from awb.inventory.postgres import PostgresStore
from awb.inventory.postgres_notify import Change
from pg_proxy import PgProxy, pg_proxy, skip_without_tcp_repair

#: How long the store may take to notice a loss with the keepalives of `quick_keepalives` (~2 s).
NOTICE_WITHIN = 15.0


@contextmanager
def through_proxy(url: str) -> Iterator[tuple[str, PgProxy]]:
    skip_without_tcp_repair()
    with pg_proxy(url) as proxied:
        yield proxied


class Heard:
    """A change-feed listener that keeps what it hears and lets a test wait for a kind of change."""

    def __init__(self) -> None:
        self.changes: list[Change] = []
        self._news = threading.Condition()

    def __call__(self, change: Change) -> None:
        with self._news:
            self.changes.append(change)
            self._news.notify_all()

    def wait_for(self, kind: str, within: float = NOTICE_WITHIN) -> None:
        with self._news:
            heard = self._news.wait_for(lambda: any(c.kind == kind for c in self.changes), within)
        assert heard, f"no {kind!r} change heard within {within} s: {[c.kind for c in self.changes]}"


def until(condition: Callable[[], bool], what: str, within: float = NOTICE_WITHIN) -> None:
    """Look at `condition` every 50 ms until it holds, failing with `what` past `within` seconds."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"not within {within} s: {what}"
        time.sleep(0.05)


@pytest.fixture
def quick_keepalives(monkeypatch: pytest.MonkeyPatch) -> None:
    # The defaults notice a silent loss within half a minute; a test waits a second or two.
    monkeypatch.setattr(postgres_pool, "KEEPALIVE_IDLE_SECONDS", 1, raising=False)
    monkeypatch.setattr(postgres_pool, "KEEPALIVE_INTERVAL_SECONDS", 1, raising=False)


@pytest.mark.usefixtures("quick_keepalives")
def test_a_change_feed_whose_database_vanished_without_a_word_reconnects_and_follows_again(
    clean_pg_url: str,
) -> None:
    writer = PostgresStore(clean_pg_url)
    with through_proxy(clean_pg_url) as (proxied, proxy):
        follower = PostgresStore(proxied)
        try:
            heard = Heard()
            follower.subscribe_changes(heard)
            writer.add_tool(make_tool("kept"))
            heard.wait_for("crafted")
            assert follower.get("tool_kept") is not None  # cached now
            proxy.vanish()
            writer.update("tool_kept", status="deleted")
            heard.wait_for("resync")  # the feed noticed the loss, reconnected and reloaded
            tool = follower.get("tool_kept")
            assert tool is not None and tool.status == "deleted"
        finally:
            follower.close()
            writer.close()


@pytest.mark.usefixtures("quick_keepalives")
def test_pooled_connections_whose_database_vanished_are_replaced_before_a_request_gets_one(
    clean_pg_url: str,
) -> None:
    with through_proxy(clean_pg_url) as (proxied, proxy):
        store = PostgresStore(proxied, pool_wait=2)
        try:
            store.add_tool(make_tool("steady"))
            proxy.vanish()
            # What tells the store is a keepalive probe, answered with an RST; a request sent before that
            # would draw a connection that looks alive and fail on it.
            until(lambda: proxy.unnoticed() == 0, "the store's kernel learns its connections are gone (a keepalive)")
            assert store.count_active() == 1
        finally:
            store.close()
