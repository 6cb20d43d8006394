"""The REST API inside the real `awb start --transport http`: /api beside /mcp in one server, and a
blueprint whose `workbench` arm calls the workbench's own meta-tools."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client

from support import awb_env
from support import awb_http as awb_http_server

from .blueprints_data import blueprint
from .fakes import FakeServer, answer, tool_call, user_text

pytestmark = pytest.mark.anyio


@pytest.fixture
def awb_http(tmp_path: Path, fake_model: FakeServer) -> Iterator[str]:
    env = awb_env(
        tmp_path, OPENAI_BASE_URL=fake_model.url, OPENAI_API_KEY="sk-test", AWB_BLUEPRINTS_DIR=str(tmp_path / "bp")
    )
    with awb_http_server(tmp_path, env) as base:
        yield base


async def test_awb_start_serves_rest_beside_mcp_and_workbench_arms_reach_the_meta_tools(
    awb_http: str, fake_model: FakeServer, tmp_path: Path
) -> None:
    fake_model.queue(tool_call("workbench__awb_list", {}), answer("The inventory is empty."))
    data = blueprint(arms=[{"type": "workbench", "tools": ["list", "search"]}])
    with anyio.fail_after(60):
        async with httpx.AsyncClient(base_url=awb_http, timeout=30) as http:
            assert (await http.get("/api/openapi.json")).json()["info"]["title"] == "Agent Workbench API"
            reply = await http.post("/api/agents/run", json={"blueprint": data, "message": "what tools?"})
            assert reply.status_code == 200, reply.text
            assert reply.json()["response"] == "The inventory is empty."
            offered = {t["function"]["name"] for t in fake_model.requests[0]["body"]["tools"]}
            assert offered == {"done", "workbench__awb_list", "workbench__awb_search"}
            assert '"tools": []' in user_text(fake_model.requests[1]["body"])
            logs = (await http.get("/api/agents/logs", params={"session_id": reply.json()["session_id"]})).json()
            assert [e["kind"] for e in logs["entries"]] == ["run_start", "tool_call", "run_end"]
            saved = (await http.post("/api/blueprints", json=data)).json()
            assert (tmp_path / "bp" / saved["file"]).is_file()
            panel = await http.get("/")  # the web panel answers outside /mcp and /api
            assert panel.status_code == 200 and "Active Tools" in panel.text
        async with Client(f"{awb_http}/mcp") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "awb_list" in names
