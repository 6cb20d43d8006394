"""A loopback TCP proxy to PostgreSQL that a test can turn against the store behind it, for the two ways a
database fails without closing anything:

- `freeze`: it stops forwarding, every socket left open, so the database looks hung (a peer gone silent, a
  host that answers nothing), not down; `thaw` lets everything held through.
- `vanish`: the connections open now are dropped without a word (no FIN, no RST: closed in TCP repair mode,
  which needs CAP_NET_ADMIN), as when the host is gone or a NAT forgot the flow; what the store sends on
  them next is answered with an RST. New connections are forwarded as before.

Otherwise it forwards faithfully, a close included: when one end closes, the proxy closes the other."""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

#: Linux's TCP_REPAIR socket option (not in Python's socket module).
TCP_REPAIR = 19
#: How long a pump may take to see that it is to stop (it looks every `TICK` seconds).
STOP_WITHIN = 10.0
TICK = 0.05


@dataclass
class _Pair:
    """One connection through the proxy: the store's end (`client`) and the database's (`server`)."""

    client: socket.socket
    server: socket.socket
    #: The store's address as the proxy sees it: its end of the connection is known by it.
    peer: tuple[str, int]
    stop: threading.Event = field(default_factory=threading.Event)
    pump: threading.Thread | None = None


class PgProxy:
    """Forwards loopback connections to `target` until told otherwise: see the module's docstring."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.flowing = threading.Event()
        self.flowing.set()
        #: Set when a byte arrived while frozen: a request is waiting on the database.
        self.holding = threading.Event()
        #: The store's addresses of the connections `vanish` dropped.
        self.vanished: list[tuple[str, int]] = []
        self._pairs: list[_Pair] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="pg-proxy-accept", daemon=True).start()

    def freeze(self, at_most: float = 20) -> None:
        """Hold every byte until `thaw`, or `at_most` seconds: a server whose event loop waits on the database
        itself (where no test's deadline can fire) gets its answer then, and the test fails, not hangs."""
        self.holding.clear()
        self.flowing.clear()
        guard = threading.Timer(at_most, self.thaw)
        guard.daemon = True
        guard.start()

    def thaw(self) -> None:
        self.flowing.set()

    def vanish(self) -> None:
        """Drop every connection open now without a word: the store's side is told nothing."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        # Each pump stops before its sockets go: one that saw them fail would close the store's end aloud.
        self._stop(pairs)
        for pair in pairs:
            with suppress(OSError):  # already closed, the database having closed it first
                pair.client.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
            self.vanished.append(pair.peer)
            _close(pair)

    def unnoticed(self) -> int:
        """How many of the connections `vanish` dropped the store's kernel still takes for established:
        it learns otherwise only from what it sends on them (a keepalive probe, a request)."""
        ours = {port for _, port in self.vanished}
        established = 0
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            local, remote, state = line.split()[1:4]
            if state == "01" and int(remote.split(":")[1], 16) == self.port and int(local.split(":")[1], 16) in ours:
                established += 1
        return established

    def close(self) -> None:
        with suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread; close alone does not
        self.listener.close()
        self.flowing.set()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        self._stop(pairs)
        for pair in pairs:
            _close(pair)

    def _accept(self) -> None:
        while True:
            try:
                client, peer = self.listener.accept()
                server = socket.create_connection(self.target, timeout=5)
                server.settimeout(None)
            except OSError:
                return
            pair = _Pair(client, server, peer)
            pair.pump = threading.Thread(target=self._pump, args=(pair,), name="pg-proxy-pump", daemon=True)
            with self._lock:
                self._pairs.append(pair)
            pair.pump.start()

    def _pump(self, pair: _Pair) -> None:
        client, server = pair.client, pair.server
        try:
            while not pair.stop.is_set():
                ready, _, _ = select.select([client, server], [], [], TICK)
                if ready and not self.flowing.is_set():
                    self.holding.set()
                    self.flowing.wait(TICK)  # held, not read: the sender's bytes wait in the socket
                    continue
                for end in ready:
                    data = end.recv(65536)
                    if not data:
                        raise EOFError
                    (server if end is client else client).sendall(data)
        except (OSError, ValueError, EOFError):
            # One end closed (or failed): the other is closed too, as a direct connection would have been.
            _close(pair)
        # Stopped by `vanish` or `close`, which close the sockets their own way.

    @staticmethod
    def _stop(pairs: list[_Pair]) -> None:
        for pair in pairs:
            pair.stop.set()
        for pair in pairs:
            if pair.pump is not None:
                pair.pump.join(STOP_WITHIN)
                assert not pair.pump.is_alive(), f"a proxy pump did not stop within {STOP_WITHIN} s"


def _close(pair: _Pair) -> None:
    for sock in (pair.client, pair.server):
        with suppress(OSError):
            sock.close()


def skip_without_tcp_repair() -> None:
    """`vanish` closes sockets in TCP repair mode, which needs CAP_NET_ADMIN: skip the test without it."""
    probe = socket.socket()
    try:
        probe.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
    except OSError:
        pytest.skip("TCP repair mode needs CAP_NET_ADMIN")
    finally:
        probe.close()


@contextmanager
def pg_proxy(url: str) -> Iterator[tuple[str, PgProxy]]:
    """`url` rewritten to go through a `PgProxy`, and the proxy (closed afterwards)."""
    parts = urlsplit(url)
    proxy = PgProxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    try:
        yield urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy.port}")), proxy
    finally:
        proxy.close()
