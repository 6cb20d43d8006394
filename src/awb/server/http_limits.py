"""The HTTP server's connection limits, against clients that connect and never finish a request.

uvicorn bounds idle keep-alive time but not the time a client takes to send its request, so a
"slowloris" client can hold connections open forever by trickling header (or body) bytes.
`guarded_h11` is uvicorn's h11 protocol with three additions: a deadline for the headers of each
request (from the connection, or from the previous response), a deadline for its body (from the end of
the headers), and a cap on open connections that, when reached, closes the oldest connection still
waiting for its headers (or else its body) rather than turning new clients away.
`uvicorn_config` also decides whose `X-Forwarded-For` / `X-Forwarded-Proto` the server believes: only
`http.trusted_proxies`' (none by default), never uvicorn's default of any process on this machine.
"""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from awb.config import Config

#: How often each server looks for requests past their deadline, as a share of the shorter deadline (at
#: most `_SWEEP_SECONDS`): a slow client is closed at most that much past its deadline.
_SWEEP_SHARE = 0.1
_SWEEP_SECONDS = 1.0


def guarded_h11(max_connections: int, header_timeout: float, body_timeout: float) -> type[H11Protocol]:
    """An h11 protocol class with header and body deadlines and a connection cap (uvicorn's `http=`)."""
    sweep_every = min(_SWEEP_SECONDS, _SWEEP_SHARE * min(header_timeout, body_timeout))
    #: The loop whose timer sweeps the connections next (None: no timer set, no connection open).
    sweeping: list[asyncio.AbstractEventLoop | None] = [None]

    def sweep(connections: set[Any], loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        for connection in list(connections):
            if isinstance(connection, GuardedH11Protocol):
                connection.check_deadline(now)
        if connections:
            loop.call_later(sweep_every, sweep, connections, loop)
        else:
            sweeping[0] = None

    class GuardedH11Protocol(H11Protocol):
        # What the client owes (its headers: IDLE, its body: SEND_BODY; None: nothing) and since when. The
        # deadlines are checked by one sweep of every connection a server has, not a timer each: set and
        # cancelled on every request, the timer cost more than the rest of these checks together.
        _awaiting: type[h11.IDLE] | type[h11.SEND_BODY] | None = None
        _waiting_since: float = 0.0
        _body_since: float = 0.0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._await_headers()
            if sweeping[0] is not self.loop:
                sweeping[0] = self.loop
                self.loop.call_later(sweep_every, sweep, self.connections, self.loop)
            if len(self.connections) > max_connections:
                self._make_room()

        def connection_lost(self, exc: Exception | None) -> None:
            self._awaiting = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            state = self.conn.their_state
            if state is h11.SEND_BODY:
                if self._awaiting is not h11.SEND_BODY:  # the headers are in: the body's deadline starts
                    self._awaiting = h11.SEND_BODY
                    self._body_since = self.loop.time()
            elif state is not h11.IDLE:
                self._awaiting = None

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._await_headers()

        def _await_headers(self) -> None:
            self._awaiting = h11.IDLE
            self._waiting_since = self.loop.time()

        def check_deadline(self, now: float) -> None:
            """Close the connection if its client owes headers or a body past their deadline."""
            state = self._awaiting
            if state is None:
                return
            if state is h11.IDLE:
                late = now - self._waiting_since >= header_timeout
            else:
                late = now - self._body_since >= body_timeout
            if late and self.conn.their_state is state and not self.transport.is_closing():
                self._awaiting = None
                self.transport.close()

        def waiting_for_request(self) -> bool:
            """Whether the client is still sending its request (headers or body): nothing is served yet."""
            return self._awaiting is not None and not self.transport.is_closing()

        def _make_room(self) -> None:
            # Connections whose request has not all arrived go first, those still without headers before
            # those in the middle of a body, the oldest first: a client that trickles a body on every
            # connection (each lasts `body_timeout`, and it opens another) otherwise left none to close.
            waiting = [c for c in self.connections if c is not self and isinstance(c, GuardedH11Protocol)]
            waiting = [c for c in waiting if c.waiting_for_request()]
            if waiting:
                oldest = min(waiting, key=lambda c: (c._awaiting is not h11.IDLE, c._waiting_since))
                oldest.transport.close()
            else:
                # Every other connection is serving a request: this one waits for nothing.
                self.transport.close()

    return GuardedH11Protocol


def forwarded_allow_ips(trusted_proxies: list[str]) -> list[str]:
    """uvicorn's list of peers whose forwarding headers it believes: `trusted_proxies` (networks), and
    each IPv4 network as an IPv6 socket sees it too (`::ffff:10.0.0.5`: a server bound to `::` takes
    IPv4 connections with such peer addresses, which an IPv4 network never contains)."""
    allowed = list(trusted_proxies)
    for entry in trusted_proxies:
        network = ipaddress.ip_network(entry, strict=False)
        if network.version == 4:
            allowed.append(f"::ffff:{network.network_address}/{96 + network.prefixlen}")
    return allowed


def uvicorn_config(app: Any, config: Config, **overrides: Any) -> uvicorn.Config:
    """uvicorn settings for `app` under `config`'s limits."""
    limits = config.http
    settings: dict[str, Any] = {
        "host": config.host,
        "port": config.port,
        "log_level": "warning",
        "lifespan": "on",
        "http": guarded_h11(limits.max_connections, limits.header_timeout_seconds, limits.body_timeout_seconds),
        "timeout_keep_alive": limits.keep_alive_seconds,
        # One request at a time per HTTP/1.1 connection, so the connection cap bounds requests in
        # flight; uvicorn's own cap answers 503 only past it (our protocol keeps connections under it).
        "limit_concurrency": limits.max_connections + 1,
        "h11_max_incomplete_event_size": 16 * 1024,
        "server_header": False,
        # uvicorn believes X-Forwarded-For/-Proto from 127.0.0.1 and ::1 unless told otherwise (or from
        # FORWARDED_ALLOW_IPS): any local process could then name any client address, past the
        # credential limiter and each client's slot share. Only `http.trusted_proxies` are believed.
        "proxy_headers": bool(limits.trusted_proxies),
        "forwarded_allow_ips": forwarded_allow_ips(limits.trusted_proxies),
        # No WebSocket endpoint anywhere (the guard closes such scopes): uvicorn need not load a
        # WebSocket implementation, ~25 ms of start-up.
        "ws": "none",
        **overrides,
    }
    return uvicorn.Config(app, **settings)
