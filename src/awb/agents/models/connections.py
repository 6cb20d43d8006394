"""Keep-alive connections to a provider, held open by whoever runs the model (a run, a blueprint run, a
`with` of the caller's), one pool per event loop.

A request without a pool of its own paid a TCP connect and a TLS handshake (100-300 ms of wall against a
remote provider, and CPU) every model step. While `held()` is open, requests on that event loop share one
`httpx.AsyncClient`, and the connections it keeps; the last holder to leave closes it, on the loop that
opened it. Pools are per loop because a connection belongs to the loop that made it: a model used from two
`anyio.run`s, or from threads with loops of their own, gets one pool in each. A request outside any hold
gets a client of its own, closed when it is answered, as before: nothing is left open that no owner closes.

A pooled connection the server has closed while it sat idle is noticed when it is next taken (httpcore
sees it readable) and replaced by a fresh one. One closed in the very moment it is reused fails without an
answer, and httpx does not send again: `ProviderClient` sends such a request once more at once.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import httpx

if TYPE_CHECKING:
    import ssl

#: Idle connections kept per pool: a run's model steps are sequential, its subagents a few at once.
MAX_IDLE_CONNECTIONS = 8
#: How long an idle connection is kept. Steps are apart by the tools run between them (seconds, rarely
#: more); httpx's default of 5 s would lose the connection to a slow tool. Longer is not worth it: a
#: provider's own idle limit is 60 s or more, and a local server's (uvicorn's 5 s) is seen before reuse.
KEEPALIVE_SECONDS = 30.0
#: The longest the last holder waits for its pool to close.
CLOSE_SECONDS = 5.0


def _loop() -> object:
    """The running event loop (asyncio's loop, or trio's token): what a pooled connection belongs to."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        trio = importlib.import_module("trio")  # the only other backend anyio runs on
        return trio.lowlevel.current_trio_token()


@dataclass
class _Pool:
    client: httpx.AsyncClient
    holders: int = 0


class Connections:
    """Pooled clients for one provider, one per event loop, open while someone holds them."""

    def __init__(self, verify: Callable[[], ssl.SSLContext]) -> None:
        #: Makes the TLS context (`awb.agents.models.http.tls_context`) when a client is first made, not before:
        #: a model that is never called need not load the CA bundle.
        self._verify = verify
        self._pools: dict[object, _Pool] = {}

    def _client(self) -> httpx.AsyncClient:
        # No client-wide timeout: each request passes its own (a run's settings may change it per call).
        limits = httpx.Limits(max_keepalive_connections=MAX_IDLE_CONNECTIONS, keepalive_expiry=KEEPALIVE_SECONDS)
        return httpx.AsyncClient(verify=self._verify(), limits=limits)

    @property
    def pools(self) -> int:
        """How many loops have a pool open (for tests: 0 once every holder has left)."""
        return len(self._pools)

    def holding(self) -> bool:
        """Whether this loop's requests go over kept connections (someone holds them)."""
        return _loop() in self._pools

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """Keep connections on this loop until the block ends (the last holder's end closes them)."""
        key = _loop()
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = _Pool(self._client())
        pool.holders += 1
        try:
            yield
        finally:
            pool.holders -= 1
            if pool.holders == 0:
                del self._pools[key]
                # Closed even when the holder was cancelled: a pool left open would leak its sockets. Closing
                # sends nothing (httpcore does not wait for TLS close_notify); bounded all the same.
                with anyio.CancelScope(shield=True, deadline=anyio.current_time() + CLOSE_SECONDS):
                    await pool.client.aclose()

    @asynccontextmanager
    async def client(self) -> AsyncIterator[httpx.AsyncClient]:
        """The held client of this loop, or, when none is held, one for this request alone."""
        pool = self._pools.get(_loop())
        if pool is not None:
            # Held for the request too: a call from outside the holder's block (the same model, used elsewhere
            # on the loop) is not left with a closed client when the holder leaves before it is answered.
            async with self.held():
                yield pool.client
            return
        async with self._client() as client:
            yield client


@asynccontextmanager
async def connections_kept(models: Iterable[object]) -> AsyncIterator[None]:
    """Hold the connections of each model that keeps some (adapters with `connections()`; a scripted
    model has none) for the block."""
    async with AsyncExitStack() as stack:
        for model in {id(m): m for m in models}.values():
            hold = getattr(model, "connections", None)
            if callable(hold):
                await stack.enter_async_context(hold())
        yield
