"""A loopback TCP proxy to PostgreSQL that a test can freeze: it stops forwarding without closing anything,
so the database looks hung (a peer gone silent, a host that answers nothing), not down. Connections made
while it is frozen are accepted and wait too; `thaw` lets everything held through."""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from urllib.parse import urlsplit, urlunsplit


class FrozenProxy:
    """Forwards loopback connections to `target` while it flows; frozen, it holds every byte."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.flowing = threading.Event()
        self.flowing.set()
        #: Set when a byte arrived while frozen: a request is waiting on the database.
        self.holding = threading.Event()
        self.closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="frozen-proxy-accept", daemon=True).start()

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

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
                server = socket.create_connection(self.target, timeout=5)
                server.settimeout(None)
            except OSError:
                return
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server), name="frozen-proxy-pump", daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        with suppress(OSError, ValueError):
            while not self.closed.is_set():
                ready, _, _ = select.select([client, server], [], [], 0.05)
                if ready and not self.flowing.is_set():
                    self.holding.set()
                    self.flowing.wait(0.05)  # held, not read: the sender's bytes wait in the socket
                    continue
                for end in ready:
                    data = end.recv(65536)
                    if not data:
                        return
                    (server if end is client else client).sendall(data)

    def close(self) -> None:
        self.closed.set()
        self.flowing.set()
        self.listener.close()
        with self._lock:
            for sock in self._sockets:
                with suppress(OSError):
                    sock.close()


@contextmanager
def frozen_proxy(url: str) -> Iterator[tuple[str, FrozenProxy]]:
    """`url` rewritten to go through a `FrozenProxy`, and the proxy (closed afterwards)."""
    parts = urlsplit(url)
    proxy = FrozenProxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    try:
        yield urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy.port}")), proxy
    finally:
        proxy.close()
