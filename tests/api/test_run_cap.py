"""Model runs posted over HTTP (`/api/agents/run`, `/api/instructions/improve`) have a server-wide cap,
and one remote client (its address, an IPv6 address by its /64) holds at most three quarters of it: past
either, a new run is `429 busy` with `Retry-After`, at once, and the runs already going are untouched."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from http_support import serving_app

from awb.api.app import http_app
from awb.config import Config, SearchConfig
from awb.server.http_guard import guard_http
from awb.server.mcp import McpFace
from awb.server.mcp_http import mcp_app
from awb.workbench import Workbench

from .blueprints_data import blueprint
from .fakes import FakeServer, Reply, answer

pytestmark = pytest.mark.anyio

TOKEN = "a-long-enough-proxy-token-0123"
IMPROVE = {"instructions": "you answer questions", "goals": "be concise"}


async def test_runs_past_the_cap_or_a_clients_share_are_busy(
    tmp_path: Path, fake_model: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_model.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    gate = threading.Event()

    def held(body: dict[str, Any]) -> Reply:
        gate.wait(timeout=30)  # the model answers once the test lets it: each run is going until then
        return answer("ok")

    fake_model.responder = held
    config = Config(
        inventory_path=tmp_path / "inventory.db",
        search=SearchConfig(mode="text"),
        auth_token=TOKEN,
        http={"trusted_proxies": ["127.0.0.1"]},
        blueprints={"max_concurrent_runs": 4},  # one client's share: 3
    )
    statuses: list[int] = []
    refused: dict[str, httpx.Response] = {}
    async with Workbench(config) as workbench:
        face = McpFace(workbench)
        app, service = http_app(workbench, mcp_app(face, config), face.server)
        try:
            with anyio.fail_after(60):
                async with serving_app(lambda config: guard_http(app, config), config) as running:

                    async def post(address: str, path: str, body: dict[str, Any], wait: float = 5) -> httpx.Response:
                        # A refusal comes at once: 5 s is plenty, and a run let through fails the test there.
                        headers = {"Authorization": f"Bearer {TOKEN}", "X-Forwarded-For": address}
                        async with httpx.AsyncClient(base_url=running.url, timeout=wait, headers=headers) as http:
                            return await http.post(path, json=body)

                    async def run(address: str) -> None:
                        reply = await post(address, "/api/agents/run", {"blueprint": blueprint(), "message": "go"}, 30)
                        statuses.append(reply.status_code)

                    async def going(runs: int) -> None:
                        while len(fake_model.requests) < runs:
                            await anyio.sleep(0.005)

                    try:
                        async with anyio.create_task_group() as runner:
                            # Three runs from three addresses of one /64: one client, at its share.
                            for n in range(3):
                                runner.start_soon(run, f"2001:db8::{n + 1}")
                            await going(3)
                            refused["run_client"] = await post(
                                "2001:db8::9", "/api/agents/run", {"blueprint": blueprint(), "message": "go"}
                            )
                            refused["improve_client"] = await post("2001:db8::a", "/api/instructions/improve", IMPROVE)
                            # Another client still gets the fourth run; then the server is at its cap.
                            runner.start_soon(run, "198.51.100.7")
                            await going(4)
                            refused["run_server"] = await post(
                                "192.0.2.1", "/api/agents/run", {"blueprint": blueprint(), "message": "go"}
                            )
                            refused["improve_server"] = await post("192.0.2.1", "/api/instructions/improve", IMPROVE)
                            gate.set()
                    finally:
                        gate.set()
                    # The runs that ended gave their room back.
                    again = await post("2001:db8::1", "/api/agents/run", {"blueprint": blueprint(), "message": "go"})
        finally:
            service.close()
    assert statuses == [200, 200, 200, 200]
    assert again.status_code == 200, again.text
    for name, reply in refused.items():
        assert reply.status_code == 429, (name, reply.text)
        assert reply.headers["retry-after"] == "5"
        error = reply.json()["error"]
        assert error["code"] == "busy"
        assert error["details"]["scope"] == name.split("_")[1], (name, error)
        assert "blueprints.max_concurrent_runs" in error["message"]
    assert len(fake_model.requests) == 5  # no refused run reached the model
