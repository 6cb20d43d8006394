"""The panel's event streams over the real HTTP server: one remote client (an agent that has the token)
holds at most its share of them, so it cannot lock the operator's panel out."""

from __future__ import annotations

from contextlib import AsyncExitStack

import anyio
import httpx
import pytest
from http_support import serving_app
from pydantic import SecretStr

from awb.config import Config
from awb.server.http_guard import guard_http
from awb.web import create_panel, stream
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
