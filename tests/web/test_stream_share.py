"""The panel's event streams over the real HTTP server: one remote client (an agent that has the token)
holds at most its share of them, so it cannot lock the operator's panel out."""

from __future__ import annotations

import contextlib
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx
import pytest
from http_support import serving_app
from pydantic import SecretStr
from starlette.requests import ClientDisconnect
from uvicorn.protocols.utils import ClientDisconnected

from awb.config import Config
from awb.server.http_guard import guard_http
from awb.web import Panel, create_panel, stream
from awb.workbench import Workbench

pytestmark = pytest.mark.anyio

TOKEN = "a-long-enough-proxy-token-0123"


async def test_a_remote_client_with_many_addresses_of_its_64_leaves_the_operator_an_event_stream(
    workbench: Workbench, config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stream, "MAX_STREAMS", 4)  # one remote client's share: 3
    config = config.model_copy(update={"auth_token": SecretStr(TOKEN)})
    config.http.trusted_proxies = ["127.0.0.1"]
    panel = create_panel(workbench)
    try:
        with anyio.fail_after(60):
            async with (
                serving_app(lambda config: guard_http(panel, config), config) as running,
                AsyncExitStack() as held,
            ):

                async def open_events(address: str) -> httpx.Response:
                    headers = {"Authorization": f"Bearer {TOKEN}", "X-Forwarded-For": address}
                    http = await held.enter_async_context(httpx.AsyncClient(base_url=running.url, timeout=10))
                    response = await http.send(http.build_request("GET", "/events", headers=headers), stream=True)
                    held.push_async_callback(response.aclose)
                    return response

                # Each stream from another address of one /64: one client all the same.
                hoarded = [await open_events(f"2001:db8::{n + 1}") for n in range(4)]
                refusal = (await hoarded[-1].aread()).decode() if hoarded[-1].status_code == 503 else ""
                operator = await open_events("203.0.113.9")  # elsewhere
                statuses = [response.status_code for response in (*hoarded, operator)]
    finally:
        panel.close()
    assert statuses == [200, 200, 200, 503, 200]
    assert refusal.startswith("this address has 3 event streams open, its share of the 4")


def _events_scope(spec_version: str) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": spec_version},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/events",
        "raw_path": b"/events",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("203.0.113.7", 40000),
        "server": ("127.0.0.1", 8765),
    }


@pytest.mark.parametrize("spec_version", ["2.3", "2.4"])
async def test_a_client_that_hangs_up_before_its_stream_starts_gives_its_share_back(
    panel: Panel, spec_version: str
) -> None:
    # A client that closes its connection right after asking: uvicorn answers `receive` with a disconnect
    # at once, and its `send` raises. The stream's body never started; its share must come back all the same,
    # or a few such requests held every stream the panel serves, for good.
    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        raise ClientDisconnected()

    with anyio.fail_after(10):
        for _ in range(stream.MAX_STREAMS + 1):
            with contextlib.suppress(OSError, ClientDisconnect):
                await panel(_events_scope(spec_version), receive, send)
    assert panel.streams.open == 0
    assert panel.streams.held_by(("address", "203.0.113.7")) == 0


async def test_head_of_the_event_stream_answers_its_headers_at_once_and_holds_no_stream(
    workbench: Workbench, config: Config
) -> None:
    """HEAD /events (`curl -I`, a monitor) streamed on unseen for five minutes: the client had its headers
    and sent its next request on the same connection, which waited behind the stream, and each such HEAD
    held one of the panel's streams meanwhile."""
    panel = create_panel(workbench)
    try:
        with anyio.fail_after(10):
            async with (
                serving_app(lambda config: guard_http(panel, config), config) as running,
                httpx.AsyncClient(base_url=running.url, timeout=5) as http,
            ):
                head = await http.head("/events")
                held = panel.streams.open
                after = await http.get("/")  # the same keep-alive connection
    finally:
        panel.close()
    assert head.status_code == 200 and head.headers["content-type"].startswith("text/event-stream")
    assert head.content == b""
    assert held == 0
    assert after.status_code == 200
