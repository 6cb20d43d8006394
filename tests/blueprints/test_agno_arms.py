"""The Agno target's arms and heart against a fake OpenAI-compatible server on 127.0.0.1: `mcp` arms through
Agno's `MCPTools` (stdio and streamable HTTP), a `workbench` arm that crafts and then calls a tool in a real
`awb start`, memory in an Agno SQLite db across runs, knowledge, an Anthropic head, and the spine."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from agno_replies import calls, offered, said, text, tool_results
from mcp.server.mcpserver import MCPServer

from api.fakes import FakeServer, serving
from awb.agents.errors import ServerUnavailable
from awb.blueprints.agno_arms import toolkits_of
from awb.blueprints.agno_target import compile_to_agno, run_agno, workspace_workbench
from awb.blueprints.compile import RuntimeOptions
from awb.blueprints.errors import BlueprintInvalid, GuardrailViolated
from awb.blueprints.journal import RunJournal
from awb.blueprints.knowledge import KnowledgeLibrary
from awb.blueprints.schema import Blueprint, validate_blueprint
from awb.errors import Unavailable
from awb.inventory.sqlite import SQLiteStore

pytestmark = pytest.mark.anyio

TINY_SERVER = Path(__file__).parents[1] / "agents" / "tiny_mcp_server.py"
WORD_COUNT = {
    "name": "word_count",
    "description": "Count the words of a text",
    "code": "def run(params):\n    return {'words': len(params['text'].split())}\n",
    "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "output_schema": {"type": "object", "properties": {"words": {"type": "integer"}}, "required": ["words"]},
    "examples": [{"params": {"text": "a b"}, "expected": {"words": 2}}],
}


@pytest.fixture
def model() -> Iterator[FakeServer]:
    with serving(FakeServer()) as fake:
        yield fake


def _blueprint(**parts: Any) -> Blueprint:
    data: dict[str, Any] = {
        "name": "scout",
        "head": {"provider": "openai", "model": "gpt-4o-mini", "system_prompt": "Be brief."},
        "legs": {"mode": "single_agent"},
    }
    return validate_blueprint(data | parts, knowledge_bases=("handbook",))


def _options(model: FakeServer, **extra: Any) -> RuntimeOptions:
    env = {"OPENAI_BASE_URL": f"{model.url}/v1", "OPENAI_API_KEY": "sk-test-agno"}
    return RuntimeOptions(environ=env, allow_mcp_commands=True, **extra)


async def _run(blueprint: Blueprint, options: RuntimeOptions, message: str, **kwargs: Any) -> tuple[str, RunJournal]:
    journal = RunJournal("run", blueprint.spine.max_tool_calls, options.secrets())
    target = compile_to_agno(blueprint, options, journal=journal, db_file=kwargs.pop("db_file", None))
    with anyio.fail_after(90):
        answer = await run_agno(target, blueprint, message, journal=journal, **kwargs)
    return answer, journal


def _tool_calls(journal: RunJournal) -> list[tuple[str, bool]]:
    return [(e.data["tool"], e.data["success"]) for e in journal.entries if e.kind == "tool_call"]


async def test_mcp_arm_by_command_is_agnos_mcptools_over_stdio(model: FakeServer) -> None:
    model.queue(calls("tiny_shout", {"text": "hello"}), text("It says HELLO."))
    blueprint = _blueprint(arms=[{"type": "mcp", "name": "tiny", "command": [sys.executable, str(TINY_SERVER)]}])
    journal = RunJournal("run", 10)
    target = compile_to_agno(blueprint, _options(model), journal=journal)
    (toolkit,) = toolkits_of(target)
    assert type(toolkit).__mro__[1].__name__ == "MCPTools" and not toolkit.initialized
    with anyio.fail_after(60):
        answer = await run_agno(target, blueprint, "shout hello", journal=journal)
    assert answer == "It says HELLO."
    assert "tiny_shout" in offered(model.requests[0]["body"])
    assert tool_results(model.requests[1]["body"]) == ["HELLO"]
    assert _tool_calls(journal) == [("tiny_shout", True)]
    assert not toolkit.initialized and toolkit.session is None  # closed with the run


async def test_mcp_arm_by_url_reaches_a_streamable_http_server(model: FakeServer) -> None:
    server = MCPServer("math")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    http = uvicorn.Server(uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on"))
    model.queue(calls("math_add", {"a": 40, "b": 2}), text("42"))
    blueprint = _blueprint(arms=[{"type": "mcp", "name": "math", "url": url, "tools": ["add", "not_there"]}])
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(http.serve, [sock])
        try:
            answer, journal = await _run(blueprint, _options(model), "add")
        finally:
            http.should_exit = True
    assert answer == "42" and tool_results(model.requests[1]["body"]) == ["42"]
    assert _tool_calls(journal) == [("math_add", True)]


async def test_workbench_arm_crafts_a_tool_then_calls_it_in_the_workspace(model: FakeServer, tmp_path: Path) -> None:
    config_file = tmp_path / "awb.config.json"
    config_file.write_text(json.dumps({"inventory_path": "inventory.db", "search": {"mode": "text"}}))
    model.queue(
        calls("workbench_awb_craft", WORD_COUNT, "c1"),
        calls("workbench_awb_call", {"name": "word_count", "params": {"text": "to be or not"}}, "c2"),
        text("Four words."),
    )
    blueprint = _blueprint(arms=[{"type": "workbench", "tools": ["craft", "call"]}])
    options = _options(model, workbench_target=workspace_workbench(config_file))
    answer, journal = await _run(blueprint, options, "count the words of 'to be or not'")
    assert answer == "Four words."
    assert offered(model.requests[0]["body"]) == {"workbench_awb_craft", "workbench_awb_call"}
    crafted, called = tool_results(model.requests[2]["body"])
    assert json.loads(crafted)["name"] == "word_count"
    assert json.loads(called)["result"] == {"words": 4}
    assert _tool_calls(journal) == [("workbench_awb_craft", True), ("workbench_awb_call", True)]
    store = SQLiteStore(tmp_path / "inventory.db")
    try:
        tool = store.get_by_name("word_count")
        assert tool is not None and tool.usage_count == 1  # the workspace's own inventory kept it
    finally:
        store.close()


async def test_a_tool_equipped_in_one_workflow_step_is_offered_to_the_next(model: FakeServer, tmp_path: Path) -> None:
    config_file = tmp_path / "awb.config.json"
    config_file.write_text(json.dumps({"inventory_path": "inventory.db", "search": {"mode": "text"}}))
    model.queue(
        calls("workbench_awb_craft", WORD_COUNT, "c1"),
        calls("workbench_awb_equip", {"name": "word_count"}, "c2"),
        text("Equipped."),
        text("Done."),
    )
    legs = {
        "mode": "workflow",
        "steps": [{"name": "make", "instructions": "Craft and equip."}, {"name": "use", "instructions": "Use it."}],
    }
    blueprint = _blueprint(arms=[{"type": "workbench"}], legs=legs)
    options = _options(model, workbench_target=workspace_workbench(config_file))
    answer, _ = await _run(blueprint, options, "make a word counter")
    assert answer == "Done."
    assert "workbench_word_count" not in offered(model.requests[0]["body"])
    assert "workbench_word_count" in offered(model.requests[3]["body"])


async def test_memory_in_an_agno_sqlite_db_goes_on_across_compiles_within_history_length(
    model: FakeServer, tmp_path: Path
) -> None:
    blueprint = _blueprint(heart={"memory": {"enabled": True, "history_length": 1}})
    db = tmp_path / "agno.db"
    model.queue(text("Noted: blue."), text("Noted: green."), text("Green."), text("I do not know."))
    await _run(blueprint, _options(model), "My colour is blue.", session_id="s1", db_file=db)
    await _run(blueprint, _options(model), "Now it is green.", session_id="s1", db_file=db)
    await _run(blueprint, _options(model), "Which colour?", session_id="s1", db_file=db)
    await _run(blueprint, _options(model), "Which colour?", session_id="other", db_file=db)
    second, third, other = (said(r["body"]) for r in model.requests[1:])
    assert "My colour is blue." in second and "Noted: blue." in second
    # history_length 1: the third run sees the run before it, not the first one.
    assert "Now it is green." in third and "Noted: green." in third and "blue" not in third
    assert "green" not in other and "blue" not in other
    assert db.stat().st_size > 0


@pytest.mark.parametrize(
    "legs",
    [
        {"mode": "workflow", "steps": [{"name": "a", "instructions": "Do A."}, {"name": "b", "instructions": "Do B."}]},
        {"mode": "team", "members": [{"name": "critic", "role": "Critiques", "instructions": "Find flaws."}]},
    ],
)
async def test_teams_and_workflows_keep_their_session_history_in_the_db_too(
    model: FakeServer, tmp_path: Path, legs: dict[str, Any]
) -> None:
    model.responder = lambda body: text(f"reply {len(model.requests)}")
    blueprint = _blueprint(legs=legs, heart={"memory": {"enabled": True, "history_length": 3}})
    await _run(blueprint, _options(model), "first message", session_id="s", db_file=tmp_path / "agno.db")
    before = len(model.requests)
    await _run(blueprint, _options(model), "second message", session_id="s", db_file=tmp_path / "agno.db")
    assert "first message" in said(model.requests[before]["body"])


async def test_without_memory_a_session_id_brings_no_history(model: FakeServer, tmp_path: Path) -> None:
    blueprint = _blueprint()
    model.queue(text("ok"), text("ok"))
    await _run(blueprint, _options(model), "My colour is blue.", session_id="s1")
    await _run(blueprint, _options(model), "Which colour?", session_id="s1")
    assert "blue" not in said(model.requests[1]["body"])


async def test_knowledge_is_a_search_knowledge_function_that_finds_the_passage(
    model: FakeServer, tmp_path: Path
) -> None:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "refunds.md").write_text("# Refunds\n\nRefunds are paid within 14 days of the return.\n")
    library = KnowledgeLibrary({"handbook": tmp_path / "kb"})
    model.queue(calls("search_knowledge", {"query": "refunds paid"}), text("Within 14 days."))
    blueprint = _blueprint(heart={"knowledge": {"enabled": True, "knowledge_base": "handbook"}})
    try:
        answer, journal = await _run(blueprint, _options(model, knowledge=library), "When are refunds paid?")
    finally:
        library.close()
    assert answer == "Within 14 days."
    assert "search_knowledge" in offered(model.requests[0]["body"])
    (result,) = tool_results(model.requests[1]["body"])
    assert "within 14 days of the return" in result and "refunds.md" in result
    assert _tool_calls(journal) == [("search_knowledge", True)]


async def test_max_tool_calls_ends_the_agno_run_with_a_guardrail_error(model: FakeServer, tmp_path: Path) -> None:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "notes.txt").write_text("anything at all\n")
    library = KnowledgeLibrary({"handbook": tmp_path / "kb"})
    model.responder = lambda body: calls("search_knowledge", {"query": "again"}, f"c{len(model.requests)}")
    blueprint = _blueprint(
        heart={"knowledge": {"enabled": True, "knowledge_base": "handbook"}}, spine={"max_tool_calls": 2}
    )
    try:
        with pytest.raises(GuardrailViolated) as caught:
            await _run(blueprint, _options(model, knowledge=library), "loop")
    finally:
        library.close()
    assert caught.value.details == {"guardrail": "max_tool_calls", "limit": 2}
    assert len(model.requests) <= 4


async def test_anthropic_heads_become_agnos_claude_on_the_messages_api(model: FakeServer) -> None:
    message = {"id": "m1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5"}
    usage = {"input_tokens": 3, "output_tokens": 2}
    model.queue(
        (200, message | {"content": [{"type": "text", "text": "hej"}], "stop_reason": "end_turn", "usage": usage})
    )
    head = {"provider": "anthropic", "model": "claude-haiku-4-5", "system_prompt": "Svenska.", "temperature": 0.5}
    blueprint = _blueprint(head=head)
    options = RuntimeOptions(environ={"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "sk-ant-test"})
    answer, _ = await _run(blueprint, options, "hi")
    assert answer == "hej"
    sent = model.requests[0]
    headers = {name.lower(): value for name, value in sent["headers"].items()}
    # The anthropic SDK sends the key as x-api-key (1.x) or as a bearer token (2.x).
    assert sent["path"] == "/v1/messages" and "sk-ant-test" in headers.get("x-api-key", headers.get("authorization"))
    body = sent["body"]
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("claude-haiku-4-5", 0.5, 4096)
    assert "Svenska." in json.dumps(body["system"])


async def test_an_mcp_server_that_cannot_start_ends_the_run_naming_the_arm(model: FakeServer) -> None:
    blueprint = _blueprint(arms=[{"type": "mcp", "name": "broken", "command": [sys.executable, "-c", "pass"]}])
    with pytest.raises(ServerUnavailable) as caught:
        await _run(blueprint, _options(model), "hi")
    assert caught.value.details["server"] == "broken" and model.requests == []


def test_the_runtime_rules_hold_for_the_agno_target_too(model: FakeServer) -> None:
    journal = RunJournal("run", 10)
    command_arm = _blueprint(arms=[{"type": "mcp", "name": "local", "command": ["rm", "-rf", "/"]}])
    with pytest.raises(BlueprintInvalid) as caught:
        compile_to_agno(command_arm, RuntimeOptions(), journal=journal)
    assert caught.value.details["errors"][0]["type"] == "command_not_allowed"
    knowledge = _blueprint(heart={"knowledge": {"enabled": True, "knowledge_base": "handbook"}})
    with pytest.raises(BlueprintInvalid) as caught:
        compile_to_agno(knowledge, _options(model), journal=journal)
    assert caught.value.details["errors"][0]["path"] == "heart.knowledge.knowledge_base"
    in_process = _blueprint(arms=[{"type": "workbench"}])
    with pytest.raises(Unavailable, match="by URL or command"):
        compile_to_agno(in_process, _options(model, workbench_target=MCPServer("awb")), journal=journal)
