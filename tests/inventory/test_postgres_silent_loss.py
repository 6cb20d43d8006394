"""A database that goes away without a word: its host gone, a failover to another address, a NAT or
firewall that forgot an idle flow. Nothing arrives on the store's connections (no FIN, no RST), so only
what the store sends can tell it: TCP keepalives on every connection. The change feed, which never
sends, would otherwise follow nothing for ever; the pool would hand the dead connections to requests.

The loss is made by a loopback proxy that closes its side of each connection in TCP repair mode (no
segment goes out; what the store sends next is answered with an RST), which needs CAP_NET_ADMIN."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from urllib.parse import urlsplit, urlunsplit

import pytest
from test_store_contract import make_tool

from awb.inventory import postgres_pool
from awb.inventory.postgres import PostgresStore
from awb.inventory.postgres_notify import Change

#: Linux's TCP_REPAIR socket option (not in Python's socket module).
TCP_REPAIR = 19


class VanishingProxy:
    """Forwards loopback connections to PostgreSQL until `vanish`, which drops those open without a word."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.pairs: list[tuple[socket.socket, socket.socket]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                return
            with self.lock:
                self.pairs.append((client, server))
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        with suppress(OSError):
            while not self.stopping.is_set():
                ready, _, _ = select.select([client, server], [], [], 0.05)
                for end in ready:
                    data = end.recv(65536)
                    if not data:
                        raise OSError
                    (server if end is client else client).sendall(data)
            return  # stopped by `vanish`, which closes both ends its own way
        with suppress(OSError):
            client.close()
            server.close()

    def vanish(self) -> None:
        with self.lock:
            pairs, self.pairs = self.pairs, []
        self.stopping.set()
        time.sleep(0.2)  # every pump has seen it
        self.stopping.clear()
        for client, server in pairs:
            with suppress(OSError):
                client.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
            with suppress(OSError):
                client.close()
                server.close()

    def close(self) -> None:
        self.listener.close()
        self.vanish()


@contextmanager
def through_proxy(url: str) -> Iterator[tuple[str, VanishingProxy]]:
    probe = socket.socket()
    try:
        probe.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
    except OSError:
        pytest.skip("TCP repair mode needs CAP_NET_ADMIN")
    finally:
        probe.close()
    parts = urlsplit(url)
    proxy = VanishingProxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    try:
        yield urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy.port}")), proxy
    finally:
        proxy.close()


def until(condition: Callable[[], bool], seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s"
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
            heard: list[Change] = []
            follower.subscribe_changes(heard.append)
            writer.add_tool(make_tool("kept"))
            until(lambda: any(c.kind == "crafted" for c in heard))
            assert follower.get("tool_kept") is not None  # cached now
            proxy.vanish()
            writer.update("tool_kept", status="deleted")
            until(lambda: any(c.kind == "resync" for c in heard))
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
            time.sleep(3)  # past the keepalive's first probe, answered with an RST
            assert store.count_active() == 1
        finally:
            store.close()
