"""Knowledge bases over real HTTP: the schemas list the configured ones, a blueprint naming another gets a
field-level error that lists them, and an agent's `search_knowledge` call brings back the passage."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from awb.api.app import create_api
from awb.blueprints.compile import RuntimeOptions
from awb.blueprints.service import BlueprintService
from awb.blueprints.session_tables import open_session_store
from awb.config import Config

from .blueprints_data import blueprint
from .conftest import OPENAI_KEY, Api
from .fakes import FakeServer, answer, tool_call, user_text, uvicorn_serving

REFUNDS = "Refunds are paid within 14 days of the return, to the card that paid."
HEART = {"knowledge": {"enabled": True, "knowledge_base": "handbook"}}


@pytest.fixture
def kb_api(tmp_path: Path, fake_model: FakeServer) -> Iterator[Api]:
    docs = tmp_path / "handbook"
    (docs / "policies").mkdir(parents=True)
    (docs / "policies" / "refunds.md").write_text(
        f"# Policies\n\n## Refunds\n\n{REFUNDS}\n\n## Travel\n\nTake the train.\n"
    )
    (docs / "welcome.txt").write_text("Welcome aboard. The office opens at nine.\n")
    config = Config(
        inventory_path=tmp_path / "inventory.db",
        blueprints_dir=tmp_path / "blueprints",
        blueprints={"knowledge": {"handbook": docs, "glossary": tmp_path / "glossary"}},
    )
    options = RuntimeOptions(environ={"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": fake_model.url})
    service = BlueprintService(config, open_session_store(config.inventory_path), options=options)
    with uvicorn_serving(create_api(service)) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield Api(url, client, service, config)
    service.close()


def test_component_schemas_list_the_configured_knowledge_bases(kb_api: Api) -> None:
    heart = kb_api.get("/api/components/schemas").json()["heart"]
    assert heart["knowledge"]["knowledge_bases"] == ["glossary", "handbook"]


def test_a_blueprint_naming_an_unconfigured_base_gets_a_field_error_listing_the_configured(kb_api: Api) -> None:
    heart = {"knowledge": {"enabled": True, "knowledge_base": "the wiki"}}
    for response in (
        kb_api.post("/api/blueprints/validate-and-compile", blueprint(heart=heart)),
        kb_api.post("/api/agents/run", {"blueprint": blueprint(heart=heart), "message": "hi"}),
    ):
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["code"] == "blueprint_invalid"
        (field,) = error["details"]["errors"]
        assert field["path"].endswith("heart.knowledge.knowledge_base")
        assert field["allowed"] == ["glossary", "handbook"]
        assert "configured: glossary, handbook" in field["message"]
    missing = kb_api.post("/api/blueprints/validate-and-compile", blueprint(heart={"knowledge": {"enabled": True}}))
    assert missing.json()["error"]["details"]["errors"][0]["allowed"] == ["glossary", "handbook"]


def test_the_agent_calls_search_knowledge_and_gets_the_passage(kb_api: Api, fake_model: FakeServer) -> None:
    compiled = kb_api.post("/api/blueprints/validate-and-compile", blueprint(heart=HEART)).json()
    assert "knowledge" in compiled["compiled"]["tools"]
    fake_model.queue(tool_call("search_knowledge", {"query": "when are refunds paid"}), answer("Within 14 days."))
    reply = kb_api.post(
        "/api/agents/run", {"blueprint_id": compiled["blueprint_id"], "message": "Refunds?", "session_id": "kb"}
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["response"] == "Within 14 days."
    offered = {tool["function"]["name"] for tool in fake_model.requests[0]["body"]["tools"]}
    assert "search_knowledge" in offered
    seen = user_text(fake_model.requests[1]["body"])
    assert REFUNDS in seen and "policies/refunds.md" in seen and "Policies > Refunds" in seen
    (call,) = [e for e in kb_api.get("/api/agents/logs", session_id="kb").json()["entries"] if e["kind"] == "tool_call"]
    assert call["data"]["tool"] == "search_knowledge" and call["data"]["success"] is True


def test_a_configured_base_whose_directory_is_gone_fails_the_call_not_the_run(
    kb_api: Api, fake_model: FakeServer
) -> None:
    heart = {"knowledge": {"enabled": True, "knowledge_base": "glossary"}}
    fake_model.queue(tool_call("search_knowledge", {"query": "term"}), answer("No glossary."))
    reply = kb_api.post(
        "/api/agents/run", {"blueprint": blueprint(heart=heart), "message": "define", "session_id": "g"}
    )
    assert reply.status_code == 200 and reply.json()["tool_calls"][0]["success"] is False
    assert "no directory to read" in user_text(fake_model.requests[1]["body"])
    assert (
        str(kb_api.config.blueprints.knowledge["glossary"])
        not in fake_model.requests[1]["body"]["messages"][-1]["content"]
    )
