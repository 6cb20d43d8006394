"""A blueprint run's log masks credentials wherever they come from (the model's arguments, a tool's result),
in the REST log and on the panel alike, and a tool result of 20 MB is logged while the event loop goes on."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx
import pytest
from mcp.server.mcpserver import MCPServer

from awb.blueprints.compile import RuntimeOptions
from awb.blueprints.service import BlueprintService
from awb.blueprints.session_tables import open_session_store
from awb.config import Config
from awb.web import create_panel
from awb.workbench import Workbench
from support import MAX_MASKED_ON_LOOP, ORIGIN, run_while_ticking

from .blueprints_data import TAVILY, blueprint
from .conftest import OPENAI_KEY, Api
from .fakes import FakeServer, answer, serving, tool_call

TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZGEifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
KEY = "sk-proj-" + "K" * 32
GITHUB = "ghp_" + "G" * 36
SECRETS = (TOKEN, KEY, GITHUB)
#: The most CPU the loop's thread may spend between two ticks while a run logs a 20 MB result (see tests/planner/test_big_results).
MAX_GAP_SECONDS = 0.75


def leaked(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret[:12] in text]


def test_credentials_in_a_tools_result_and_the_models_arguments_are_masked_in_the_rest_log_and_the_panel(
    api: Api, fake_model: FakeServer, fake_tavily: FakeServer
) -> None:
    fake_model.queue(tool_call("tavily__search", {"query": f"repos of {GITHUB}"}), answer("found it"))
    content = f"send Authorization: Bearer {TOKEN} with the key {KEY}"
    fake_tavily.queue((200, {"results": [{"title": "t", "url": "https://e.x/1", "content": content}]}))
    reply = api.post("/api/agents/run", {"blueprint": blueprint(arms=[TAVILY]), "message": "m", "session_id": "keys"})
    assert reply.status_code == 200, reply.text
    assert fake_tavily.requests[0]["body"]["query"] == f"repos of {GITHUB}"  # the tool gets it whole
    assert KEY in json.dumps(fake_model.bodies()[1])  # and the model sees the result whole, within the run
    logs = api.get("/api/agents/logs", session_id="keys")
    assert leaked(logs.text) == []
    [call] = [e["data"] for e in logs.json()["entries"] if e["kind"] == "tool_call"]
    assert call["arguments"] == {"query": "repos of ***"}
    assert "send Authorization: *** with the key ***" in call["output_summary"]
    panel_page = anyio.run(_panel_page, api.config, "keys")
    assert "with the key ***" in panel_page and leaked(panel_page) == []
    assert OPENAI_KEY not in logs.text + panel_page  # the environment's secrets stay masked as before


async def _panel_page(config: Config, session_id: str) -> str:
    """The panel's page of the session, served by a workbench on the same inventory."""
    async with Workbench(config) as workbench:
        panel = create_panel(workbench)
        try:
            transport = httpx.ASGITransport(app=panel)
            async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
                return (await client.get(f"/runs/{session_id}")).text
        finally:
            panel.close()


#: About 20 MB of text with credentials at its start (where the log's summary shows them) and its end.
BIG = f"Bearer {TOKEN} {KEY} " + "lorem ipsum dolor " * 1_150_000 + f"Bearer {TOKEN}"


def big_workbench() -> MCPServer:
    server = MCPServer("awb")

    @server.tool()
    def dump(note: str = "") -> str:
        """Dump everything."""
        return BIG

    return server


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_20_mb_of_tool_result_and_of_arguments_are_logged_masked_while_the_event_loop_goes_on(
    tmp_path: Path,
) -> None:
    model = FakeServer()
    # The model sends the 20 MB as its argument too: the log masks both (the arguments whole, for their digest).
    model.queue(tool_call("workbench__dump", {"note": BIG}), answer("dumped"))
    config = Config(inventory_path=tmp_path / "inventory.db", blueprints_dir=tmp_path / "blueprints")
    with serving(model) as fake:
        environ = {"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": fake.url}
        options = RuntimeOptions(environ=environ, workbench_target=big_workbench())
        service = BlueprintService(config, open_session_store(config), options=options)
        try:
            data = blueprint(arms=[{"type": "workbench"}])
            (reply, _), loop = await run_while_ticking(
                lambda: service.run(message="dump", blueprint=data, blueprint_id=None, session_id="big")
            )
            entries, _ = await service.log_page("big", after=0, limit=10)
        finally:
            service.close()
    assert reply.response == "dumped"
    print(f"longest gap {loop.held:.3f} s")
    assert loop.held < MAX_GAP_SECONDS, f"the event loop was held {loop.held:.2f} s of CPU"
    assert loop.masked_on_loop < MAX_MASKED_ON_LOOP, f"the event loop masked {loop.masked_on_loop} characters itself"
    [call] = [entry.data for entry in entries if entry.kind == "tool_call"]
    assert call["output_summary"].startswith('{"result": "*** *** lorem')
    assert (
        call["arguments"]["note"].startswith("*** *** lorem")
        and "characters in all, sha256" in call["arguments"]["note"]
    )
    assert leaked(json.dumps([entry.model_dump(mode="json") for entry in entries])) == []
