"""The creation moment, live: the workbench's event feed as Server-Sent Events, each with the sentence
its toast shows ("crafting image_resizer…", "image_resizer v1 ready and sandboxed (monty)", …).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import StreamingResponse

from awb.feed import EventFeed, FeedEvent
from awb.shares import Shares
from awb.sign_outs import StreamSignIn
from awb.web.numbers import whole_number

#: A comment line this often keeps proxies and the browser from timing the stream out.
KEEPALIVE_SECONDS = 15.0
#: A stream ends after this long; EventSource reconnects with Last-Event-ID, so nothing is lost, and a
#: server that stops never waits on a stream that would otherwise last forever.
STREAM_SECONDS = 300.0
#: Streams open at once; more get 503 and the browser retries. One remote client (an address:
#: `awb.shares`) may hold three quarters of them.
MAX_STREAMS = 32
#: A stream's headers: never cached, never buffered by a proxy (nginx holds it back otherwise).
HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
#: The last frame of a stream whose sign-in ended: the page goes to the sign-in page, and does not reconnect.
SIGNED_OUT = 'event: signed_out\ndata: {"sign_in": "/login"}\n\n'
#: How long a refused browser is asked to wait (EventSource itself retries after its `retry:` time).
RETRY_HEADERS = {"Retry-After": "5"}


def toast(event: FeedEvent) -> dict[str, Any] | None:
    """The toast an event shows: its sentence and tone, or None for events that show none."""
    data = event.data
    name = str(data.get("name") or event.tool_id or "a tool")
    version = data.get("version")
    runtime = data.get("runtime")
    label = f"{name} v{version}" if version else name
    if event.kind == "craft_started":
        return {"text": f"crafting {name}…", "tone": "info"}
    if event.kind == "crafted":
        where = f" ({runtime})" if runtime else ""
        return {"text": f"{label} ready and sandboxed{where}", "tone": "success"}
    if event.kind == "craft_rejected":
        return {"text": f"{name} rejected: {data.get('reason') or 'its admission test failed'}", "tone": "error"}
    if event.kind == "updated":
        return {"text": f"{label} is now current", "tone": "success"}
    if event.kind == "deleted":
        return {"text": f"{name} deleted", "tone": "info"}
    if event.kind in ("equipped", "unequipped"):
        return {"text": f"{name} {event.kind}", "tone": "info"}
    return None


def _frame(event: FeedEvent) -> str:
    payload = {"id": event.id, "kind": event.kind, "tool_id": event.tool_id, "data": event.data, "toast": toast(event)}
    return f"id: {event.id}\nevent: workbench\ndata: {json.dumps(payload, default=str)}\n\n"


class HeldStream(StreamingResponse):
    """A stream that holds one of the panel's streams: `release` gives it back when the response ends, however
    it ends. Given back by the body's own `finally`, a client that hung up before its body started (uvicorn
    answers `receive` with a disconnect at once, and the body is never iterated) kept its stream for good."""

    def __init__(self, content: AsyncIterator[str], *, release: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._release: Callable[[], None] | None = release

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


def refusal(streams: Shares, scope: str) -> str:
    """Why a stream was refused: every stream is taken (`server`), or this client's share is (`client`)."""
    if scope == "client":
        return (
            f"this address has {streams.share} event streams open, its share of the {streams.limit} the panel "
            "serves at once; close a panel tab"
        )
    return "too many event streams are open"


def start_cursor(request: Request, feed: EventFeed) -> int | None:
    """Where a reconnecting browser left off (Last-Event-ID), or None to start at the newest event."""
    # An id that is no number is as good as none: the stream starts at the newest event.
    return whole_number(request.headers.get("last-event-id"))


async def event_stream(
    request: Request, feed: EventFeed, cursor: int | None, sign_in: StreamSignIn
) -> AsyncIterator[str]:
    """The feed's events after `cursor` as Server-Sent Events, for as long as `sign_in` lasts (at most
    STREAM_SECONDS): once it ends (Sign out, the pass expired) not one more event is sent."""
    head = await anyio.to_thread.run_sync(feed.head)
    # An id past the newest event (another inventory's, or a made-up one) would wait for ids that may
    # never come: the stream resumes at the newest event instead.
    cursor = head if cursor is None else min(cursor, head)
    # The browser waits this long before reconnecting after the stream ends.
    yield "retry: 1000\n\n"
    started = last_sent = time.monotonic()
    while time.monotonic() - started < STREAM_SECONDS:
        if await request.is_disconnected():
            return
        if sign_in.ended():
            yield SIGNED_OUT
            return
        events = await anyio.to_thread.run_sync(feed.after, cursor, 100)
        for event in events:
            # Looked at before each event: a sign-out while a batch is sent stops it there.
            if sign_in.ended():
                break
            cursor = event.id
            yield _frame(event)
        now = time.monotonic()
        if events:
            last_sent = now
        elif now - last_sent >= KEEPALIVE_SECONDS:
            last_sent = now
            yield ": keepalive\n\n"
        if not events:
            # Until the feed has news (a PostgreSQL feed is woken by NOTIFY, a SQLite one polls), or the
            # sign-in ends: Sign out cuts the wait short.
            with sign_in.bounded():
                await feed.wait(cursor)
