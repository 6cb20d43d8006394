"""The faces are built after the server is ready, MCP first, then REST and the panel: a request that comes
before its face waits for it (or is told why it cannot be served), never a 404 in between."""

from __future__ import annotations

import sqlite3

import anyio
import httpx
import pytest
from http_support import INITIALIZE, MCP_HEADERS
from starlette.types import Receive, Scope, Send

from awb.config import Config
from awb.errors import StartupFailed
from awb.inventory.sqlite_schema import SCHEMA_VERSION
from awb.server import deferred_faces
from awb.server.deferred_faces import DeferredFaces
from awb.server.mcp import McpFace
from awb.workbench import Workbench

pytestmark = pytest.mark.anyio


async def mcp_stub(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"mcp"})


def client(app: DeferredFaces) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def initialize_into(http: httpx.AsyncClient, answers: list[httpx.Response]) -> None:
    """An MCP client's opening request, its answer put in `answers` whenever it comes."""
    answers.append(await http.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS))


async def test_an_mcp_request_made_before_the_mcp_face_is_built_waits_and_is_answered_by_it(
    workbench: Workbench, config: Config
) -> None:
    faces = DeferredFaces()
    answers: list[httpx.Response] = []
    async with client(faces) as http:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(initialize_into, http, answers)
                await anyio.wait_all_tasks_blocked()
                assert answers == []  # waiting for the face, not refused
                async with faces.serving_mcp(workbench, config):
                    while not answers:
                        await anyio.sleep(0.01)
    assert answers[0].status_code == 200
    assert answers[0].json()["result"]["serverInfo"]["name"] == "agent-workbench"


async def test_an_mcp_face_that_cannot_start_is_startup_failed_and_the_waiting_requests_hear_why(
    workbench: Workbench, config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> None:
        raise ImportError("no module named 'mcp.server.lowlevel'")

    monkeypatch.setattr(deferred_faces, "_import_mcp", broken)
    faces = DeferredFaces()
    answers: list[httpx.Response] = []
    async with client(faces) as http:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(initialize_into, http, answers)
                await anyio.wait_all_tasks_blocked()
                with pytest.raises(StartupFailed, match=r"no module named 'mcp\.server\.lowlevel'"):
                    async with faces.serving_mcp(workbench, config):
                        pass
    assert answers[0].status_code == 503
    error = answers[0].json()["error"]
    assert error["code"] == "unavailable" and "the MCP face did not start" in error["message"]
    assert faces.mcp_failure == "ImportError: no module named 'mcp.server.lowlevel'"


async def test_mcp_is_served_at_once_and_rest_once_built(workbench: Workbench) -> None:
    faces = DeferredFaces(mcp_stub)
    answers: dict[str, httpx.Response] = {}
    async with client(faces) as http:

        async def get(path: str) -> None:
            answers[path] = await http.get(path)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(get, "/api/openapi.json")
            tasks.start_soon(get, "/")
            with anyio.fail_after(10):
                assert (await http.get("/mcp")).text == "mcp"
            assert answers == {}  # REST and the panel wait for their build
            await faces.build(workbench, McpFace(workbench))
        assert answers["/api/openapi.json"].status_code == 200
        assert answers["/api/openapi.json"].json()["info"]["title"] == "Agent Workbench API"
        assert answers["/"].status_code == 200
        assert (await http.get("/mcp")).text == "mcp"  # through the whole app now
    faces.close()


async def test_a_failed_build_leaves_mcp_serving_and_says_why_elsewhere(
    workbench: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> None:
        raise ImportError("no module named 'fastapi'")

    monkeypatch.setattr(deferred_faces, "_import_faces", broken)
    faces = DeferredFaces(mcp_stub)
    await faces.build(workbench, McpFace(workbench))
    async with client(faces) as http:
        refused = await http.get("/api/openapi.json")
        assert refused.status_code == 503
        error = refused.json()["error"]
        assert error["code"] == "unavailable" and "no module named 'fastapi'" in error["message"]
        assert (await http.get("/mcp")).text == "mcp"
    faces.close()


async def test_faces_built_after_a_newer_awb_migrated_the_inventory_serve_like_mcp(workbench: Workbench) -> None:
    """An upgrade while the server starts: a newer awb migrates the file between the server's opening
    of its inventory and the build of REST and the panel. MCP serves on, on the store it opened; the
    panel and REST opened the file again, checked its schema again, and answered 503 for good."""
    newer = sqlite3.connect(workbench.config.inventory_path)
    newer.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    newer.close()
    faces = DeferredFaces(mcp_stub)
    await faces.build(workbench, McpFace(workbench))
    async with client(faces) as http:
        assert (await http.get("/api/openapi.json")).status_code == 200
        assert (await http.get("/")).status_code == 200
    faces.close()
