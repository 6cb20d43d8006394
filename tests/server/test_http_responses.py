"""How MCP requests are answered over HTTP: one JSON body by default (`http.json_response`), an SSE stream
when that is turned off; SDK clients work either way. (Tool-list changes over HTTP, which go out on the
session's own stream, are tested against a real `awb start` in test_equip_mcp.py.)"""

from __future__ import annotations

import anyio
import httpx
import pytest
from http_support import INITIALIZE, MCP_HEADERS, serving
from mcp import Client

from awb.config import Config
from awb.workbench import Workbench
from journey import abandoned_call, call
from support import add_tool, announcing

pytestmark = pytest.mark.anyio


def answering(config: Config, json_response: bool) -> Config:
    config = config.model_copy(deep=True)
    config.http.json_response = json_response
    return config


@pytest.mark.parametrize(("json_response", "content_type"), [(True, "application/json"), (False, "text/event-stream")])
async def test_a_request_is_answered_as_configured_and_clients_take_either(
    workbench: Workbench, config: Config, json_response: bool, content_type: str
) -> None:
    await workbench.craft(add_tool())
    with anyio.fail_after(60):
        async with serving(workbench, answering(config, json_response)) as running:
            async with httpx.AsyncClient(timeout=10) as http:
                answer = await http.post(f"{running.url}/mcp", json=INITIALIZE, headers=MCP_HEADERS)
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith(content_type)
            async with Client(f"{running.url}/mcp") as session:
                result = await call(session, "awb_call", {"name": "add_numbers", "params": {"a": 2, "b": 3}})
                assert result["result"] == 5


@pytest.mark.parametrize(
    ("mode", "json_response"),
    [
        ("legacy", True),  # 2025-11-25: the client POSTs notifications/cancelled
        ("auto", False),  # 2026-07-28: the client drops the request's SSE stream
        ("auto", True),  # 2026-07-28: the client drops the request awaiting its JSON body
    ],
)
async def test_a_call_abandoned_over_http_is_recorded_as_cancelled(
    workbench: Workbench, config: Config, mode: str, json_response: bool
) -> None:
    runtime = await announcing(workbench)
    with anyio.fail_after(60):
        async with (
            serving(workbench, answering(config, json_response)) as running,
            Client(f"{running.url}/mcp", mode=mode, cache=None) as session,  # type: ignore[arg-type]
        ):
            inspected = await abandoned_call(session, runtime)
    [record] = inspected["recent_calls"]
    assert (record["ok"], record["error_code"]) == (False, "cancelled")
