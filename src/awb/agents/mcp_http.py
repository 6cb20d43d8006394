"""The HTTP client the workbench talks to MCP servers with: the SDK's timeouts, and a cap on each reply.

The SDK reads a JSON reply whole (`response.aread()`) before parsing it, so a server that answers with
gigabytes is held in memory whole, several times over as it is parsed: a 400 MB reply to `initialize`
took a serving workbench from 0.4 GB to 1.6 GB, and the URL can come from anyone who may post a
blueprint. Each reply that is not an event stream is cut off at `MAX_REPLY_BYTES` (the SDK caps each
event of a stream itself), and raises what the SDK turns into that request's JSON-RPC error. Replies
are asked for uncompressed, and a compressed one is refused: its size on the wire says nothing of the
size it inflates to.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import httpx2

#: The largest reply (other than an event stream) read from an MCP server over HTTP.
MAX_REPLY_BYTES = 32 * 1024 * 1024
#: The SDK's own defaults: 30 s per operation, 5 min for a server-sent event stream to speak.
TIMEOUT = httpx2.Timeout(30.0, read=300.0)


class ReplyRefused(httpx2.StreamError):
    """A reply over the cap, or compressed: a stream error, which the SDK reports as that request's error."""


class _Capped(httpx2.AsyncByteStream):
    def __init__(self, stream: httpx2.AsyncByteStream, limit: int, party: str) -> None:
        self._stream, self._limit, self._party = stream, limit, party

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._stream:
            seen += len(chunk)
            if seen > self._limit:
                raise ReplyRefused(f"{self._party}'s reply is over the {self._limit}-byte limit")
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class _Refused(httpx2.AsyncByteStream):
    def __init__(self, stream: httpx2.AsyncByteStream, reason: str) -> None:
        self._stream, self._reason = stream, reason

    async def __aiter__(self) -> AsyncIterator[bytes]:
        raise ReplyRefused(self._reason)
        yield b""  # an async generator, as the interface asks

    async def aclose(self) -> None:
        await self._stream.aclose()


def reply_cap(limit: int, *, party: str = "the MCP server") -> Callable[[httpx2.Response], Awaitable[None]]:
    """A response hook: every reply but an event stream read through a cap of `limit` bytes (`party`, who
    sends the replies, for the messages)."""

    async def cap(response: httpx2.Response) -> None:
        if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
            return
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            reason = f"{party} sent a {encoding}-compressed reply, where an uncompressed one was asked for"
            response.stream = _Refused(stream, reason)
        else:
            response.stream = _Capped(stream, limit, party)

    return cap


def mcp_http_client(
    headers: dict[str, str] | None = None, *, public_only: bool = False, limit: int | None = None
) -> httpx2.AsyncClient:
    """An `httpx2.AsyncClient` for an MCP server: its replies capped, and with `public_only` dialling
    public addresses only (`awb.agents.public_reach`)."""
    hooks = {"response": [reply_cap(MAX_REPLY_BYTES if limit is None else limit)]}
    wanted = {"Accept-Encoding": "identity", **(headers or {})}
    if public_only:
        from awb.agents.public_reach import PublicOnlyTransport

        # No proxy from the environment either, which would dial on its behalf. A hook, not a transport,
        # caps the replies: it sees the replies of every transport, a proxy's included.
        transport = PublicOnlyTransport()
        return httpx2.AsyncClient(
            headers=wanted, timeout=TIMEOUT, transport=transport, trust_env=False, event_hooks=hooks
        )
    return httpx2.AsyncClient(headers=wanted, timeout=TIMEOUT, event_hooks=hooks)
