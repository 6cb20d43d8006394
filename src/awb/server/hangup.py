"""A 2026-07-28 MCP request answered with one JSON body is cancelled when its client hangs up.

The SDK serves such a request in the ASGI task and never reads the request's channel again once it
has the body, so it does not hear the client go away: a dropped call ran on to its time limit and was
recorded `timeout`. (With SSE responses the SDK watches for it itself; a handshake-era client cancels
with `notifications/cancelled`.) `HangUpCancels` listens on the channel in the request's stead and
cancels the request's handler when the client disconnects, so the call path records it `cancelled`.
A client that hangs up while still sending its request is let go without an error in the log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_VERSION_HEADER = b"mcp-protocol-version"
_HANDSHAKE_VERSIONS = frozenset(version.encode("ascii") for version in HANDSHAKE_PROTOCOL_VERSIONS)
_DISCONNECT: Message = {"type": "http.disconnect"}
#: How long a request runs before its client is listened for. Listening takes a task of its own, which
#: costs more than everything else this layer does for a fast call; a call that ends sooner never pays
#: for it, and a client that hangs up is heard at most this late (a dropped call used to run on for
#: its whole time limit).
LISTEN_AFTER = 0.2


def single_exchange(scope: Scope) -> bool:
    """A POST the SDK serves in its ASGI task (2026-07-28 and later): one with a protocol-version header
    that names no handshake-era revision, routed as the SDK's session manager routes it."""
    if scope["method"] != "POST":
        return False
    for name, value in scope["headers"]:
        if name == _VERSION_HEADER:
            return value not in _HANDSHAKE_VERSIONS
    return False


class HangUpCancels:
    """ASGI middleware around the MCP app: with `listen` (JSON-response mode), cancels a single-exchange
    request's handler when its client disconnects before the answer is sent. On every request, a client
    that left while sending it is let go quietly: the SDK raises `ClientDisconnect` for it, which the
    server would log as an exception, traceback and all, each time a client does it."""

    def __init__(self, app: ASGIApp, *, listen: bool) -> None:
        self.app = app
        self._listen = listen
        #: Requests not yet listened on, each with the loop time it began at: in the order they began.
        self._waiting: dict[_Listener, float] = {}
        #: The loop whose timer will look at `_waiting` next (None: no timer set).
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._scope_class: Callable[[], anyio.CancelScope] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            if self._listen and single_exchange(scope):
                await self._listening(scope, receive, send)
            else:
                await self.app(scope, receive, send)
        except* ClientDisconnect:
            pass  # nobody is left to answer

    async def _listening(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._scope_class is None:
            # `anyio.CancelScope()` asks sniffio which library runs, on every request (~2 us, a quarter of
            # this layer's cost); a server runs one, whose own scope class is built directly.
            self._scope_class = type(anyio.CancelScope())
        handler = self._scope_class()
        listener = _Listener(receive, handler)
        loop = asyncio.get_running_loop()
        with handler:
            # One timer for every request in flight rather than one each (set and cancelled per request,
            # it cost as much as the rest of this layer): it wakes when the oldest is due.
            self._waiting[listener] = loop.time()
            if self._timer_loop is not loop:
                self._timer_loop = loop
                loop.call_later(LISTEN_AFTER, self._make_due, loop)
            try:
                await self.app(scope, listener.receive, send)
            finally:
                self._waiting.pop(listener, None)
                listener.close()

    def _make_due(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start listening for every request that has run `LISTEN_AFTER` seconds; wake again when the
        next one will have (a timer's callback)."""
        now = loop.time()
        waiting = self._waiting
        while waiting:
            listener = next(iter(waiting))
            wait = waiting[listener] + LISTEN_AFTER - now
            if wait > 0:
                loop.call_later(wait, self._make_due, loop)
                return
            del waiting[listener]
            listener.due()
        self._timer_loop = None


class _Listener:
    """The request's one reader of `receive`: the app's until the body is in; after that, once the
    request has run `LISTEN_AFTER` seconds (or the app asks again), a task's that waits for the client to
    disconnect and then cancels the request's handler.

    After the body the only message left is `http.disconnect` (a server also says it once the response
    is complete); an app that asks again hears it from the task when it comes."""

    def __init__(self, receive: Receive, handler: anyio.CancelScope) -> None:
        self._receive, self._handler = receive, handler
        self._body_read = False
        self._due = False
        self._task: asyncio.Task[None] | None = None
        self._gone: asyncio.Event | None = None  # made once listening starts: most requests never do

    async def receive(self) -> Message:
        if self._body_read:
            gone = self._start()
            await gone.wait()
            return _DISCONNECT
        message = await self._receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            self._body_read = True  # the body is in, or the client left while sending it
            if self._due:
                self._start()
        return message

    def due(self) -> None:
        """The request has run long enough to be worth listening on (a timer's callback)."""
        self._due = True
        if self._body_read:
            self._start()
        # Otherwise the app is still reading the body, and hears a disconnect itself; listening
        # starts once the body is in.

    def _start(self) -> asyncio.Event:
        if self._task is None:
            self._gone = gone = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._listen(gone))
            return gone
        assert self._gone is not None
        return self._gone

    async def _listen(self, gone: asyncio.Event) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass  # no other message comes after the body; nothing to do with one if it did
        gone.set()
        self._handler.cancel()

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()


__all__ = ["HangUpCancels", "single_exchange"]
