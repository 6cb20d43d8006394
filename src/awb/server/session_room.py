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

The manager keeps its sessions and its admission step private (`_server_instances`, `_admit_session`);
this module is the one place that reaches into them (tests/server/test_session_room.py checks it works
with the SDK installed; an SDK without them gets the SDK's own refusal, and a warning).
"""

from __future__ import annotations

import heapq
import logging
import math
from typing import Any

from awb.log_limit import PER_REQUEST

log = logging.getLogger("awb.server")

#: Sessions ended at once, as a share of the limit: finding the stalest is a scan of every session, so
#: ending a batch keeps the scan's cost per new session small while a client floods the table.
BATCH_SHARE = 0.01


def make_room_for_new_sessions(manager: Any) -> None:
    """Let `manager` (the SDK's `StreamableHTTPSessionManager`) end idle sessions to admit new ones."""
    if not all(hasattr(manager, name) for name in ("_admit_session", "_server_instances", "_session_owners")):
        log.warning("this MCP SDK's session manager has changed: a full session table refuses new sessions")
        return
    admit = manager._admit_session

    def admitting(requestor: Any) -> Any:
        limit = manager.max_sessions
        if limit is not None and len(manager._server_instances) >= limit:
            _end_stalest(manager, max(1, int(limit * BATCH_SHARE)))
        return admit(requestor)

    manager._admit_session = admitting


def _end_stalest(manager: Any, count: int) -> None:
    """End up to `count` idle sessions, the longest unused first."""
    idle = (
        (scope.deadline, session_id)
        for session_id, transport in manager._server_instances.items()
        if (scope := transport.idle_scope) is not None and math.isfinite(scope.deadline) and not scope.cancel_called
    )
    stalest = heapq.nsmallest(count, idle)
    for _, session_id in stalest:
        transport = manager._server_instances.pop(session_id)
        manager._session_owners.pop(session_id, None)
        # The session's own task sees its idle scope cancelled, ends as on an idle timeout and terminates
        # its transport; forgotten first, its id answers 404 from now on.
        transport.idle_scope.cancel()
    if stalest:
        log.info(
            "ended %d idle sessions to open a new one (http.max_sessions is reached)", len(stalest), extra=PER_REQUEST
        )


__all__ = ["BATCH_SHARE", "make_room_for_new_sessions"]
