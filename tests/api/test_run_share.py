"""Tools a blueprint's `workbench` arm calls in a run posted over HTTP count against the caller's share of
the execution slots: a client on another machine cannot take every slot through runs."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from http_support import serving_app
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from awb.api.app import http_app
from awb.config import Config, SearchConfig
from awb.server.http_guard import guard_http
from awb.server.mcp import McpFace
from awb.server.mcp_http import mcp_app
from awb.workbench import Workbench
from journey import call
from support import add_tool, announcing

from .blueprints_data import blueprint
from .fakes import FakeServer, tool_call

pytestmark = pytest.mark.anyio

TOKEN = "a-long-enough-proxy-token-0123"


async def test_runs_of_a_remote_client_hold_at_most_its_share_of_the_slots(
    tmp_path: Path, fake_model: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_model.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    # Every model turn calls the tool that waits: each run holds a slot for as long as the tool runs.
    fake_model.responder = lambda body: tool_call("workbench__awb_call", {"name": "waits"})
    config = Config(
        inventory_path=tmp_path / "inventory.db",
        search=SearchConfig(mode="text"),
        auth_token=TOKEN,
        http={"trusted_proxies": ["127.0.0.1"]},
        tool_execution_timeout_ms=3000,  # the waiting tools end, and with them the runs
    )
    config.sandbox.max_concurrent = 4  # a client's share: 3
    runs: list[int] = []
    async with Workbench(config) as workbench:
        await announcing(workbench)
        await workbench.craft(add_tool())
        slots = workbench.slots
        face = McpFace(workbench)
        app, service = http_app(workbench, mcp_app(face, config), face.server)
        data = blueprint(arms=[{"type": "workbench", "tools": ["call"]}], spine={"max_tool_calls": 1})
        try:
            with anyio.fail_after(60):
                async with (
                    serving_app(lambda config: guard_http(app, config), config) as running,
                    AsyncExitStack() as stack,
                ):

                    def headers(address: str) -> dict[str, str]:
                        return {"Authorization": f"Bearer {TOKEN}", "X-Forwarded-For": address}

                    async def run(address: str) -> None:
                        async with httpx.AsyncClient(
                            base_url=running.url, timeout=30, headers=headers(address)
                        ) as http:
                            reply = await http.post("/api/agents/run", json={"blueprint": data, "message": "go"})
                            runs.append(reply.status_code)

                    http = await stack.enter_async_context(create_mcp_http_client(headers=headers("203.0.113.9")))
                    other = await stack.enter_async_context(
                        Client(streamable_http_client(f"{running.url}/mcp", http_client=http), cache=None)
                    )
                    async with anyio.create_task_group() as runner:
                        # Each run from another address of one /64: one client all the same.
                        for n in range(4):
                            runner.start_soon(run, f"2001:db8::{n + 1}")
                        # Three runs' tools run; the fourth run's call is refused, and that run ends.
                        while slots.active < 3 or (slots.active == 3 and not runs):
                            await anyio.sleep(0.005)
                        served: dict[str, Any] = await call(
                            other, "awb_call", {"name": "add_numbers", "params": {"a": 2, "b": 3}}
                        )
                    while slots.active:
                        await anyio.sleep(0.005)
        finally:
            service.close()
    assert served.get("result") == 5, served
    assert len(runs) == 4  # every run ended (at its guardrail of one tool call)
    told = [body for body in fake_model.bodies() if "sandbox.max_concurrent_per_client" in json.dumps(body)]
    assert len(told) == 1  # the fourth run's model was told its call was over the client's share
