"""A cap on what an MCP server sends over HTTP. The SDK reads a reply whole (a 100 MB tool result took
1 GB here), and a blueprint may name any public server: one that answers without end must fail itself,
not fill the process's memory. The cap counts each response's bytes as they arrive; the client asks for
them uncompressed, so the count is what is kept."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2

#: The most one HTTP response of an MCP server may hold: far above any tool result a model can use (the run
#: keeps a bounded part), far below what harms the process. A long-lived event stream counts as one response.
MAX_MCP_REPLY_BYTES = 64 * 1024 * 1024


def _too_large(limit: int, request: httpx2.Request) -> httpx2.ReadError:
    return httpx2.ReadError(f"the MCP server's reply is over the {limit}-byte limit", request=request)


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, stream: httpx2.AsyncByteStream, limit: int, request: httpx2.Request) -> None:
        self._stream, self._limit, self._request = stream, limit, request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._stream:
            seen += len(chunk)
            if seen > self._limit:
                raise _too_large(self._limit, self._request)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class CappedTransport(httpx2.AsyncBaseTransport):
    """`inner`, its responses cut at `MAX_MCP_REPLY_BYTES` (read when each response starts)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        limit = MAX_MCP_REPLY_BYTES
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await response.aclose()
            raise _too_large(limit, request)
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)  # an async transport's responses stream
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_CappedStream(stream, limit, request),
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def capped_client(
    headers: dict[str, str],
    timeout: httpx2.Timeout,
    inner: httpx2.AsyncBaseTransport | None = None,
    *,
    trust_env: bool = True,
) -> httpx2.AsyncClient:
    """An MCP HTTP client like the SDK's own (no redirects of its own: the SDK's transport follows those
    within the endpoint's origin), its replies capped and asked for uncompressed (a compressed reply would
    be counted before it inflates). `trust_env=False` takes no proxy from the environment either."""
    return httpx2.AsyncClient(
        headers={"Accept-Encoding": "identity", **headers},
        timeout=timeout,
        transport=CappedTransport(inner or httpx2.AsyncHTTPTransport(trust_env=trust_env)),
        trust_env=trust_env,
    )
