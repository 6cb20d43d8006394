"""Room for a new handshake-era MCP session when `http.max_sessions` are open: the least recently active
idle sessions end, as if their idle timeout had passed, instead of the new client being refused.

The SDK's session manager refuses a new session with `503 Too many open sessions` while the limit is
reached, and sessions end only after `http.session_idle_timeout_seconds` (30 minutes) without a request.
One client opening sessions and never using them (about 100 `initialize` requests a second on a small
machine) locked every other client out for that long. Now the sessions that go are the ones no request
has used for longest: a session with a request in flight or an open GET stream (whose number
`awb.server.http_streams` bounds) is never ended, and a client that keeps using its session keeps it.
A client whose idle session ended gets `404 Session not found` on its next request, which the MCP spec
tells it to answer by opening a new session.
One client on another machine (its address: `awb.shares`) holds at most three quarters of the table: past
that, a new session of its ends its own idle sessions, never another client's (or is refused when all of
its are in use). Otherwise a client that opens sessions fast ended every other client's idle sessions.

The manager keeps its sessions and its admission step private (`_server_instances`, `_admit_session`);
this module is the one place that reaches into them (tests/server/test_session_room.py checks it works
with the SDK installed; an SDK without them gets the SDK's own refusal, and a warning).
"""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Hashable, Iterable
from contextvars import ContextVar
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from awb.log_limit import PER_REQUEST
from awb.shares import client_address, default_share, share_key

log = logging.getLogger("awb.server")

#: Sessions ended at once, as a share of the limit: finding the stalest is a scan of every session, so
#: ending a batch keeps the scan's cost per new session small while a client floods the table.
BATCH_SHARE = 0.01


#: Who sends the request being served (`SessionOpeners`), for the session it may open.
_opener: ContextVar[Hashable | None] = ContextVar("awb_session_opener", default=None)


class SessionOpeners:
    """ASGI middleware around the MCP app: says who each request is from, for the session table's shares."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = _opener.set(share_key(client_address(scope), None))
        try:
            await self.app(scope, receive, send)
        finally:
            _opener.reset(token)


def make_room_for_new_sessions(manager: Any) -> None:
    """Let `manager` (the SDK's `StreamableHTTPSessionManager`) end idle sessions to admit new ones."""
    if not all(hasattr(manager, name) for name in ("_admit_session", "_server_instances", "_session_owners")):
        log.warning("this MCP SDK's session manager has changed: a full session table refuses new sessions")
        return
    admit = manager._admit_session
    opened = _OpenedBy(manager._server_instances)

    def admitting(requestor: Any) -> Any:
        limit = manager.max_sessions
        client = _opener.get()
        if limit is None:
            return admit(requestor)
        batch = max(1, int(limit * BATCH_SHARE))
        # At its share, a remote client makes room among its own sessions only; all in use, the SDK refuses (503).
        at_share = client is not None and opened.count(client) >= default_share(limit)
        if at_share and not _end_stalest(manager, batch, opened.sessions(client)):
            return None
        if len(manager._server_instances) >= limit:
            _end_stalest(manager, batch, manager._server_instances)
        transport = admit(requestor)
        if transport is not None and client is not None:
            opened.add(client, transport.mcp_session_id, limit)
        return transport

    manager._admit_session = admitting


class _OpenedBy:
    """The sessions each remote client opened, of those still open (`live`: the manager's table)."""

    def __init__(self, live: Any) -> None:
        self._live = live
        self._by_client: dict[Hashable, set[str]] = {}
        self._tracked = 0

    def sessions(self, client: Hashable) -> set[str]:
        own = self._by_client.get(client, set())
        before = len(own)
        own.intersection_update(self._live)  # those that ended are no longer its
        self._tracked -= before - len(own)
        return own

    def count(self, client: Hashable) -> int:
        return len(self.sessions(client))

    def add(self, client: Hashable, session_id: str, limit: int) -> None:
        self._by_client.setdefault(client, set()).add(session_id)
        self._tracked += 1
        if self._tracked > 2 * limit:
            # Clients that went away keep the ids of their ended sessions until this sweep.
            for known in list(self._by_client):
                if not self.sessions(known):
                    del self._by_client[known]


def _end_stalest(manager: Any, count: int, among: Iterable[str]) -> int:
    """End up to `count` idle sessions of `among`, the longest unused first; how many ended."""
    sessions = manager._server_instances
    idle = (
        (scope.deadline, session_id)
        for session_id in among
        if (transport := sessions.get(session_id)) is not None
        and (scope := transport.idle_scope) is not None
        and math.isfinite(scope.deadline)
        and not scope.cancel_called
    )
    stalest = heapq.nsmallest(count, idle)
    for _, session_id in stalest:
        transport = sessions.pop(session_id)
        manager._session_owners.pop(session_id, None)
        # The session's own task sees its idle scope cancelled, ends as on an idle timeout and terminates
        # its transport; forgotten first, its id answers 404 from now on.
        transport.idle_scope.cancel()
    if stalest:
        log.info(
            "ended %d idle sessions to open a new one (http.max_sessions or a client's share is reached)",
            len(stalest),
            extra=PER_REQUEST,
        )
    return len(stalest)


__all__ = ["BATCH_SHARE", "SessionOpeners", "make_room_for_new_sessions"]
