"""Telling connected MCP clients that the tool list changed, in both protocol generations.

2025-11-25 sessions get `notifications/tools/list_changed` on their standalone channel: the SDK keeps
no list of live sessions, so a middleware remembers each connection it sees. 2026-07-28 clients get a
`ToolsListChanged` event on their `subscriptions/listen` stream. Changes made in this process arrive as
workbench events; changes made by another process (the `awb` CLI) are noticed by watching the store's
data version and comparing the equipped set.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types import SubscriptionsListenRequestParams, SubscriptionsListenResult
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from awb.events import Event
from awb.workbench import Workbench

log = logging.getLogger("awb.mcp.notify")

#: How often the server looks for inventory changes made by another process.
POLL_SECONDS = 0.5
#: A client that does not take a notification within this time is skipped (and dropped when broken).
SEND_TIMEOUT_SECONDS = 2.0


class ListChangedNotifier:
    """Fans tool-list changes out to every connected client, on any transport."""

    def __init__(self, workbench: Workbench, poll_seconds: float = POLL_SECONDS) -> None:
        self.workbench = workbench
        self.poll_seconds = poll_seconds
        self.bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self.bus)
        #: Open `subscriptions/listen` streams that asked for tool-list changes.
        self.tool_list_listeners = 0
        self._sessions: dict[Hashable, ServerSession] = {}
        # Created inside the event loop by `running` (anyio events need one).
        self._wake: anyio.Event | None = None
        self._running = 0
        #: The event loop's thread and token: a shared store reports changes from a thread of its own.
        self._loop_thread: int | None = None
        self._token: Any = None
        self._signature = self._equipped_signature()
        self.sent = 0
        workbench.events.subscribe(self._on_event)

    # --- learning who is connected -------------------------------------------------------------

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Server middleware: remember every handshake-era connection that sends us a request."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self.remember(ctx.session)
        return await call_next(ctx)

    def remember(self, session: ServerSession) -> None:
        # A ServerSession is per request, but its standalone channel belongs to the connection, so the
        # connection is the key. The SDK exposes no public handle on it; fall back to the session.
        connection = getattr(session, "_connection", None)
        key: Hashable = id(connection) if connection is not None else id(session)
        if key in self._sessions:
            return
        self._sessions[key] = session
        stack = getattr(connection, "exit_stack", None)
        if stack is not None:
            stack.callback(self._sessions.pop, key, None)
        else:
            weakref.finalize(session, self._sessions.pop, key, None)

    @property
    def session_count(self) -> int:
        return len(self._sessions)

    async def listen_handler(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        """The SDK's listen handler, counting the streams that carry tool-list changes."""
        wants = bool(params.notifications.tools_list_changed)
        self.tool_list_listeners += wants
        try:
            return await self._listen(ctx, params)
        finally:
            self.tool_list_listeners -= wants

    def can_notify(self, ctx: ServerRequestContext[Any, Any]) -> bool:
        """Whether the client behind this request hears about tool-list changes.

        A handshake-era connection does when it has a standalone channel (stdio, the HTTP GET stream);
        a 2026-07-28 client only through a listen stream (with no session to tell clients apart, any
        open one counts)."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return self.tool_list_listeners > 0
        connection = getattr(ctx.session, "_connection", None)
        return bool(getattr(connection, "has_standalone_channel", True))

    # --- noticing changes -----------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        if not event.changes_tool_list or self._wake is None:
            return
        if self._loop_thread in (None, threading.get_ident()):
            self._wake_sender()
        else:
            try:
                anyio.from_thread.run_sync(self._wake_sender, token=self._token)
            except RuntimeError:  # the loop is shutting down
                pass

    def _wake_sender(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _equipped_signature(self) -> tuple[tuple[Any, ...], ...]:
        return tuple((t.tool_id, t.name, t.version, t.description) for t in self.workbench.equipped_tools())

    async def _watch_store(self) -> None:
        """Wake the sender when another process changed the equipped set (e.g. `awb inventory equip`)."""
        if callable(getattr(self.workbench.store, "subscribe_changes", None)):
            return  # a shared store pushes its changes (LISTEN/NOTIFY): nothing to poll
        seen = self.workbench.store.data_version()
        while True:
            await anyio.sleep(self.poll_seconds)
            try:
                version = self.workbench.store.data_version()
                if version == seen:
                    continue
                seen = version
                if self._equipped_signature() != self._signature and self._wake is not None:
                    self._wake.set()
            except Exception:  # a locked or briefly unavailable store must not end the watch
                log.warning("could not check the inventory for outside changes", exc_info=True)

    async def _send_loop(self) -> None:
        while True:
            assert self._wake is not None
            await self._wake.wait()
            self._wake = anyio.Event()
            await self.notify_all()

    # --- telling clients ------------------------------------------------------------------------

    async def notify_all(self) -> None:
        """Send one tools/list_changed to every known legacy session and every listen stream."""
        try:
            # On the store's lane: a shared inventory's read must not hold up the loop.
            self._signature = await self.workbench.lane.call(self._equipped_signature)
        except Exception:
            log.warning("could not read the equipped set", exc_info=True)
        # All at once: a session that takes nothing (a client that stopped reading its stream) costs
        # the others at most one SEND_TIMEOUT_SECONDS, not one each in turn.
        async with anyio.create_task_group() as tasks:
            for key, session in list(self._sessions.items()):
                tasks.start_soon(self._tell, key, session)
        await self.bus.publish(ToolsListChanged())
        self.sent += 1
        log.info("sent tools/list_changed to %d sessions and the listen streams", len(self._sessions))

    async def _tell(self, key: Hashable, session: ServerSession) -> None:
        try:
            with anyio.fail_after(SEND_TIMEOUT_SECONDS):
                await session.send_tool_list_changed()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._sessions.pop(key, None)
        except Exception:
            log.debug("tools/list_changed not delivered to a session", exc_info=True)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the sender and the store watch while the context is open; re-entrant (one set of tasks)."""
        self._running += 1
        if self._running > 1:
            try:
                yield
            finally:
                self._running -= 1
            return
        self._wake = anyio.Event()
        self._loop_thread = threading.get_ident()
        self._token = anyio.lowlevel.current_token()
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._send_loop)
                tasks.start_soon(self._watch_store)
                try:
                    yield
                finally:
                    tasks.cancel_scope.cancel()
        finally:
            self._running -= 1
            self._wake = None
            self._listen.close()
