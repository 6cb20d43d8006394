"""What MCP servers over HTTP may make the workbench hold, and how their failures reach it.

Each reply is capped, a compressed one is refused, and a tool list paged on and on stops at one reply's
worth: a blueprint posted to the REST API names any URL, and a 400 MB reply took a serving workbench from
0.4 GB to 1.6 GB of memory. A server that fails once connected is `ServerUnavailable`, not an exception
group."""

from __future__ import annotations

import gzip
import socket
from typing import Any

import anyio
import mcp_types as types
import pytest
import uvicorn
from mcp.server.lowlevel import Server
from starlette.types import Receive, Scope, Send

from api.fakes import uvicorn_serving
from awb.agents import mcp_http
from awb.agents.errors import ServerUnavailable
from awb.agents.mcp_client import connect_servers

pytestmark = pytest.mark.anyio

LIMIT = 1024 * 1024


@pytest.fixture(autouse=True)
def small_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_http, "MAX_REPLY_BYTES", LIMIT)


class Hostile:
    """Answers every POST with a JSON reply of `size` bytes (spaces, then `{}`), gzip-compressed when asked."""

    def __init__(self, size: int, *, compressed: bool = False) -> None:
        self.size, self.compressed = size, compressed
        self.sent = 0
        self.accept_encodings: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        headers = dict(scope["headers"])
        self.accept_encodings.append(headers.get(b"accept-encoding", b"").decode())
        while (await receive()).get("more_body"):
            pass
        body = b" " * (self.size - 2) + b"{}"
        extra = []
        if self.compressed:
            body = gzip.compress(body)
            extra = [(b"content-encoding", b"gzip")]
        start = {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), *extra],
        }
        await send(start)
        for at in range(0, len(body), 64 * 1024):
            chunk = body[at : at + 64 * 1024]
            self.sent += len(chunk)
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


async def connect(target: Any) -> None:
    with anyio.fail_after(30):
        async with connect_servers({"far": target}):
            pass


async def test_a_reply_over_the_cap_is_refused_before_it_is_read_whole() -> None:
    hostile = Hostile(8 * LIMIT)
    with uvicorn_serving(hostile) as url, pytest.raises(ServerUnavailable, match=f"over the {LIMIT}-byte limit"):
        await connect(f"{url}/mcp")
    assert hostile.accept_encodings and set(hostile.accept_encodings) == {"identity"}


async def test_a_compressed_reply_is_refused_whatever_it_inflates_to() -> None:
    hostile = Hostile(64 * LIMIT, compressed=True)  # 64 MB of spaces: 64 KB on the wire
    with uvicorn_serving(hostile) as url, pytest.raises(ServerUnavailable, match="gzip-compressed reply"):
        await connect(f"{url}/mcp")


async def test_a_tool_list_paged_past_one_replys_worth_is_refused() -> None:
    pages: list[str | None] = []

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        pages.append(params.cursor if params is not None else None)
        tool = types.Tool(name=f"t{len(pages)}", description="d" * (LIMIT // 4), input_schema={"type": "object"})
        return types.ListToolsResult(tools=[tool], next_cursor=str(len(pages)))

    app = Server("pager", on_list_tools=list_tools).streamable_http_app()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.serve, [sock])
        try:
            with pytest.raises(ServerUnavailable, match=f"tool list is over {LIMIT} bytes"):
                await connect(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp")
        finally:
            server.should_exit = True
    sock.close()
    assert len(pages) == 4  # not the 50 pages a run would otherwise read


async def test_a_server_that_fails_its_tool_list_is_server_unavailable_not_an_exception_group() -> None:
    """Raised inside the open clients' task groups, it came out as an ExceptionGroup: a 500 from the REST face."""

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        raise RuntimeError("no list today")

    with pytest.raises(ServerUnavailable, match="cannot reach MCP server 'far'"):
        await connect(Server("failing", on_list_tools=list_tools))


async def test_what_the_body_raises_leaves_the_servers_as_itself() -> None:
    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[])

    with anyio.fail_after(30), pytest.raises(ServerUnavailable, match="raised in the body"):
        async with connect_servers({"far": Server("fine", on_list_tools=list_tools)}):
            raise ServerUnavailable("raised in the body")
