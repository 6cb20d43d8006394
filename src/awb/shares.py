"""Whose share a request counts against, for every per-client limit of the HTTP face: the requests in
flight (`awb.server.request_share`), the MCP session table, the model runs posted to the REST API
(`awb.api.run_share`), the execution slots (`sandbox.max_concurrent_per_client`), the MCP notification
streams, the panel's event streams, and the wrong-credential count (`awb.sign_in_limit`).

A client on another machine is its address (an IPv6 address by its /64): the sessions it opens and the
names it gives cost it nothing, so counted apart they would give it as many shares as it likes, and one
client could take every slot and make all the others `busy`. On this machine (loopback) a client is what
it says it is (its session, its name): several local agents are the intended case, and a local process
that wants to harm the server has easier ways. The address is the connection's peer, or the client a
proxy in `http.trusted_proxies` names (`awb.server.http_limits`).
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Hashable
from typing import Any, Literal


def client_key(address: str) -> str:
    """The unit a remote client is counted by: an IPv4 address, or an IPv6 address's /64 (one machine is
    usually given a whole /64, so counting single IPv6 addresses would give it 2**64 shares). An
    IPv4-mapped IPv6 address (`::ffff:192.0.2.7`, as a server bound to `::` sees IPv4 peers) is its IPv4."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address[:100]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def client_address(scope: Any) -> str | None:
    """The request's client address as the server gives it (ASGI `scope`): the peer, or the
    `X-Forwarded-For` address when the peer is one of `http.trusted_proxies`; None on a Unix socket."""
    client = scope.get("client")
    return str(client[0]) if client else None


def is_local(address: str | None) -> bool:
    """Whether `address` is this machine's (loopback, IPv4-mapped too); no address (a Unix socket) is. A
    name is no address: a peer is an IP (`awb.server.address.is_loopback` reads a bind host, `localhost`
    too, on top of this)."""
    if address is None:
        return True
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def share_key(address: str | None, local: Hashable | None) -> Hashable | None:
    """The share a request from `address` counts against: a remote client's address (`client_key`),
    whatever it says about itself; from this machine, `local` (a session, a client name; None for no one
    in particular, held only by the server-wide cap)."""
    remote = None if address is None else _remote_key(address)
    return local if remote is None else remote


@functools.lru_cache(maxsize=4096)
def _remote_key(address: str) -> Hashable | None:
    # Every request asks (a few times: its connection share, its session, its call): parsing an IPv6
    # address and its /64 each time cost ~20 us; a client's address is the same request after request.
    return None if is_local(address) else ("address", client_key(address))


def default_share(limit: int) -> int:
    """What one client may hold of `limit` unless told otherwise: what leaves a quarter to the others."""
    return max(1, limit * 3 // 4)


class Shares:
    """At most `limit` things held at once (open streams; None: no cap of its own), and at most `share` of
    them (by default `default_share(limit)`) by one client.

    Held and given back on one event loop (no lock): each `take` that succeeds is followed by one
    `give_back` with the same client."""

    def __init__(self, limit: int | None, share: int | None = None) -> None:
        if share is None and limit is None:
            raise ValueError("a share needs a limit to be a share of")
        self.limit = limit
        self.share = share if share is not None else default_share(limit or 0)
        self.open = 0
        self._held: dict[Hashable, int] = {}

    def take(self, client: Hashable | None) -> Literal["server", "client"] | None:
        """Hold one for `client` (None: no one in particular); or, held by no one, whose cap is reached."""
        if self.limit is not None and self.open >= self.limit:
            return "server"
        if client is not None:
            held = self._held.get(client, 0)
            if held >= self.share:
                return "client"
            self._held[client] = held + 1
        self.open += 1
        return None

    def give_back(self, client: Hashable | None) -> None:
        self.open -= 1
        if client is not None:
            held = self._held.pop(client) - 1
            if held:
                self._held[client] = held

    def held_by(self, client: Hashable | None) -> int:
        return self._held.get(client, 0) if client is not None else 0


__all__ = ["Shares", "client_address", "client_key", "default_share", "is_local", "share_key"]
