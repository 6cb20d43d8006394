"""What the workbench's ASGI layer does when a client hangs up on a 2026-07-28 request answered with JSON
(the dropped call itself is in test_http_responses.py): which requests it listens on, and that a client
leaving halfway through its request costs the server nothing."""

from __future__ import annotations

import json
import logging

import anyio
import pytest
from http_support import serving
from mcp import Client

from awb.config import Config
from awb.server.hangup import single_exchange
from awb.workbench import Workbench
from journey import call
from support import add_tool

pytestmark = pytest.mark.anyio


def _scope(method: str, version: bytes | None) -> dict[str, object]:
    headers = [(b"content-type", b"application/json")]
    if version is not None:
        headers.append((b"mcp-protocol-version", version))
    return {"type": "http", "method": method, "headers": headers}


def test_only_posts_the_sdk_serves_in_their_own_task_are_listened_on() -> None:
    assert single_exchange(_scope("POST", b"2026-07-28"))
    assert single_exchange(_scope("POST", b"2099-01-01"))  # the SDK routes unknown versions there too
    assert not single_exchange(_scope("POST", b"2025-11-25"))  # a session's request, cancelled by notification
    assert not single_exchange(_scope("POST", None))  # an initialize
    assert not single_exchange(_scope("GET", b"2026-07-28"))


async def test_a_client_that_leaves_while_sending_its_request_is_let_go_quietly(
    workbench: Workbench, config: Config, caplog: pytest.LogCaptureFixture
) -> None:
    await workbench.craft(add_tool())
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "awb_list"}}).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with anyio.fail_after(30):
        async with serving(workbench, config) as running:
            # Where uvicorn logs an app's exception (handlers set once the server is configured).
            server_log = logging.getLogger("uvicorn.error")
            server_log.addHandler(caplog.handler)
            try:
                stream = await anyio.connect_tcp("127.0.0.1", running.port)
                await stream.send(head + body[:10])
                tasks = running.server.server_state.tasks  # the server's request tasks
                while not tasks:  # until the request is served, waiting for the rest of its body
                    await anyio.sleep(0.005)
                await stream.aclose()
                while tasks:  # until the request has been let go
                    await anyio.sleep(0.005)
            finally:
                server_log.removeHandler(caplog.handler)
            async with Client(f"{running.url}/mcp") as session:
                result = await call(session, "awb_call", {"name": "add_numbers", "params": {"a": 2, "b": 3}})
    assert result["result"] == 5
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
