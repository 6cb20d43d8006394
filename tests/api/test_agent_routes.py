"""Running blueprints over real HTTP against fake model and Tavily servers: parameters, tools, domains,
guardrails, sessions, logs, and the error mapping."""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from awb.api import whole_listing
from awb.api.app import create_api
from awb.blueprints.journal import LogEntry
from awb.blueprints.sessions import LOG_PAGE_BYTES, LOG_PAGE_MAX

from .blueprints_data import TAVILY, blueprint
from .conftest import OPENAI_KEY, TAVILY_KEY, Api, make_service
from .fakes import FakeServer, answer, serving, tool_call, user_text, uvicorn_serving

TINY_SERVER = Path(__file__).parents[1] / "agents" / "tiny_mcp_server.py"


def tavily_results(*urls: str) -> tuple[int, Any]:
    return 200, {"query": "q", "results": [{"title": u, "url": u, "content": f"about {u}", "score": 0.9} for u in urls]}


def test_run_sends_the_heads_model_prompt_and_sampling_settings_and_returns_the_answer(
    api: Api, fake_model: FakeServer
) -> None:
    fake_model.queue(answer("Paris."))
    data = blueprint(
        head={
            "provider": "openai",
            "model": "gpt-4o",
            "system_prompt": "You are terse.\nAnswer in one word.",
            "temperature": 0.25,
            "max_tokens": 77,
        }
    )
    response = api.post("/api/agents/run", {"blueprint": data, "message": "Capital of France?"})
    assert response.status_code == 200, response.text
    reply = response.json()
    assert reply["response"] == "Paris." and reply["status"] == "ok" and reply["cache_hit"] is False
    sent = fake_model.requests[0]
    assert sent["path"] == "/chat/completions"
    assert sent["headers"]["Authorization"] == f"Bearer {OPENAI_KEY}"
    body = sent["body"]
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("gpt-4o", 0.25, 77)
    assert body["messages"][0] == {"role": "system", "content": "You are terse.\nAnswer in one word."}
    assert "Capital of France?" in user_text(body)


def test_tavily_arm_searches_with_the_key_and_the_agent_sees_the_results(
    api: Api, fake_model: FakeServer, fake_tavily: FakeServer
) -> None:
    fake_model.queue(tool_call("tavily__search", {"query": "awb release"}), answer("It shipped."))
    fake_tavily.queue(tavily_results("https://news.example.com/awb"))
    reply = api.post("/api/agents/run", {"blueprint": blueprint(arms=[TAVILY]), "message": "News?"}).json()
    assert reply["response"] == "It shipped."
    assert [c["tool"] for c in reply["tool_calls"]] == ["tavily.search"] and reply["tool_calls"][0]["success"]
    search = fake_tavily.requests[0]
    assert search["path"] == "/search"
    assert search["headers"]["Authorization"] == f"Bearer {TAVILY_KEY}"
    assert search["body"] == {"query": "awb release", "max_results": 3, "search_depth": "advanced"}
    tools = [t["function"]["name"] for t in fake_model.requests[0]["body"]["tools"]]
    assert "tavily__search" in tools
    assert "news.example.com/awb" in user_text(fake_model.requests[1]["body"])


def test_allowed_domains_go_out_as_include_domains_and_other_results_are_dropped_and_logged(
    api: Api, fake_model: FakeServer, fake_tavily: FakeServer
) -> None:
    fake_model.queue(tool_call("tavily__search", {"query": "docs"}), answer("done"))
    fake_tavily.queue(
        tavily_results("https://docs.example.com/a", "https://evil.test/b", "https://example.com.evil.test/c")
    )
    data = blueprint(arms=[TAVILY], spine={"allowed_domains": ["example.com"]})
    reply = api.post("/api/agents/run", {"blueprint": data, "message": "find docs", "session_id": "dom"}).json()
    assert fake_tavily.requests[0]["body"]["include_domains"] == ["example.com"]
    seen = user_text(fake_model.requests[1]["body"])
    assert "docs.example.com/a" in seen and "evil.test" not in seen
    entries = api.get("/api/agents/logs", session_id=reply["session_id"]).json()["entries"]
    violations = [e for e in entries if e["kind"] == "guardrail_violation"]
    assert [v["data"]["url"] for v in violations] == ["https://evil.test/b", "https://example.com.evil.test/c"]
    assert all(v["data"]["guardrail"] == "allowed_domains" and v["at"] for v in violations)


def test_a_large_tool_argument_reaches_the_tool_whole_and_its_log_cut_with_size_and_hash(
    api: Api, fake_model: FakeServer, fake_tavily: FakeServer
) -> None:
    """The log stored every argument whole: a model could make a run store megabytes per call."""
    query = "q" * 100_000
    fake_model.queue(tool_call("tavily__search", {"query": query}), answer("done"))
    fake_tavily.queue(tavily_results("https://example.com/x"))
    response = api.post(
        "/api/agents/run", {"blueprint": blueprint(arms=[TAVILY]), "message": "go", "session_id": "big"}
    )
    assert response.status_code == 200 and "q" * 5000 not in response.text  # the reply names the calls only
    assert [(c["tool"], c["success"]) for c in response.json()["tool_calls"]] == [("tavily.search", True)]
    assert fake_tavily.requests[0]["body"]["query"] == query
    logs = api.get("/api/agents/logs", session_id="big")
    assert len(logs.text) < 10_000
    [call] = [e for e in logs.json()["entries"] if e["kind"] == "tool_call"]
    prefix, marker = call["data"]["arguments"]["query"].split("…[cut: ")
    assert prefix == "q" * len(prefix) and 3900 < len(prefix) < 4000
    assert marker == f"100000 characters in all, sha256 {hashlib.sha256(query.encode()).hexdigest()}]"


def test_the_log_limits_are_the_configured_ones(
    tmp_path: Path, fake_model: FakeServer, fake_tavily: FakeServer
) -> None:
    service = make_service(
        tmp_path, fake_model, fake_tavily, blueprints={"log_value_chars": 300, "log_run_chars": 5000}
    )
    fake_model.queue(*(tool_call("tavily__search", {"query": f"{i}" + "q" * 2000}) for i in range(5)), answer("ok"))
    fake_tavily.responder = lambda body: tavily_results("https://example.com/x")
    with uvicorn_serving(create_api(service)) as url, httpx.Client(base_url=url, timeout=30) as client:
        data = blueprint(arms=[TAVILY])
        reply = client.post("/api/agents/run", json={"blueprint": data, "message": "go", "session_id": "cfg"})
        assert reply.status_code == 200, reply.text
        entries = client.get("/api/agents/logs", params={"session_id": "cfg"}).json()["entries"]
    service.close()
    queries = [e["data"]["arguments"]["query"] for e in entries if e["kind"] == "tool_call"]
    assert [q.split("q")[0] for q in queries] == ["0", "1", "2", "3", "4"]
    assert all(len(q.split("…[cut: ")[0]) < 300 for q in queries)
    assert sum(len(json.dumps(e["data"])) for e in entries) < 5000 + 10 * 400


def test_tool_call_limit_ends_the_run_with_422_naming_the_guardrail_and_logs_it(
    api: Api, fake_model: FakeServer, fake_tavily: FakeServer
) -> None:
    fake_model.responder = lambda body: tool_call("tavily__search", {"query": "again"})
    fake_tavily.responder = lambda body: tavily_results("https://example.com/x")
    data = blueprint(arms=[TAVILY], spine={"max_tool_calls": 2})
    response = api.post("/api/agents/run", {"blueprint": data, "message": "loop", "session_id": "calls"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "guardrail_violated" and error["details"]["guardrail"] == "max_tool_calls"
    assert error["details"]["limit"] == 2
    assert len(fake_tavily.requests) == 2
    entries = api.get("/api/agents/logs", session_id="calls").json()["entries"]
    assert [e["kind"] for e in entries] == ["run_start", "tool_call", "tool_call", "guardrail_violation", "run_end"]
    assert entries[-1]["data"]["status"] == "guardrail_violated"


def test_team_members_share_one_tool_call_budget(api: Api, fake_model: FakeServer, fake_tavily: FakeServer) -> None:
    def play(body: dict[str, Any]) -> tuple[int, Any]:
        names = [t["function"]["name"] for t in body.get("tools", [])]
        if "subagent__analyst" in names:
            return tool_call("subagent__analyst", {"message": "research this"})
        return tool_call("tavily__search", {"query": "more"})

    fake_model.responder = play
    fake_tavily.responder = lambda body: tavily_results("https://example.com/x")
    team = {"mode": "team", "members": [{"name": "analyst", "role": "Researcher", "instructions": "Search."}]}
    data = blueprint(arms=[TAVILY], legs=team, spine={"max_tool_calls": 3})
    response = api.post("/api/agents/run", {"blueprint": data, "message": "go", "session_id": "team"})
    assert response.status_code == 422
    assert response.json()["error"]["details"]["guardrail"] == "max_tool_calls"
    assert len(fake_tavily.requests) == 3
    # The run ends as a whole at the member's refused call: the coordinator asks its model nothing more
    # (it went on spawning members that could call nothing, 24 more requests, until its turns ran out).
    assert len(fake_model.requests) == 5  # the coordinator's spawn, the member's three searches and its fourth
    entries = api.get("/api/agents/logs", session_id="team").json()["entries"]
    assert [e["kind"] for e in entries][-2:] == ["guardrail_violation", "run_end"]


def test_timeout_ends_the_run_with_422_naming_the_guardrail(api: Api, fake_model: FakeServer) -> None:
    fake_model.hang_paths.add("/chat/completions")
    data = blueprint(spine={"timeout_seconds": 1})
    response = api.post("/api/agents/run", {"blueprint": data, "message": "slow", "session_id": "slow"})
    assert response.status_code == 422
    assert response.json()["error"]["details"]["guardrail"] == "timeout_seconds"
    entries = api.get("/api/agents/logs", session_id="slow").json()["entries"]
    violation = next(e for e in entries if e["kind"] == "guardrail_violation")
    assert violation["data"]["guardrail"] == "timeout_seconds" and violation["data"]["limit"] == 1


def _history_echo(body: dict[str, Any]) -> tuple[int, Any]:
    task = json.loads(user_text(body).split("## Task\n", 1)[1].split("\n## Working memory", 1)[0])
    seen = [turn["user"] for turn in task["history"]]
    return answer(f"{task['message']} after {seen}")


def test_session_memory_restores_the_last_exchanges_across_three_messages(api: Api, fake_model: FakeServer) -> None:
    fake_model.responder = _history_echo
    data = blueprint(heart={"memory": {"enabled": True, "history_length": 2}})
    blueprint_id = api.post("/api/blueprints/validate-and-compile", data).json()["blueprint_id"]
    first = api.post("/api/agents/run", {"blueprint_id": blueprint_id, "message": "one"}).json()
    session = first["session_id"]
    second = api.post("/api/agents/run", {"blueprint_id": blueprint_id, "message": "two", "session_id": session})
    third = api.post("/api/agents/run", {"blueprint_id": blueprint_id, "message": "three", "session_id": session})
    fourth = api.post("/api/agents/run", {"blueprint_id": blueprint_id, "message": "four", "session_id": session})
    assert first["response"] == "one after []"
    assert second.json()["response"] == "two after ['one']"
    assert third.json()["response"] == "three after ['one', 'two']"
    assert fourth.json()["response"] == "four after ['two', 'three']"  # history_length 2
    assert third.json()["cache_hit"] is True
    task = user_text(fake_model.requests[2]["body"])
    assert "one after []" in task and "two after ['one']" in task
    other = api.post("/api/agents/run", {"blueprint_id": blueprint_id, "message": "new", "session_id": "fresh"})
    assert other.json()["response"] == "new after []"


def test_a_session_continues_on_another_replica_of_a_postgres_inventory(
    tmp_path: Path, clean_pg_url: str, fake_model: FakeServer, fake_tavily: FakeServer
) -> None:
    fake_model.responder = _history_echo
    data = blueprint(heart={"memory": {"enabled": True, "history_length": 5}})
    services = [make_service(tmp_path / name, fake_model, fake_tavily, inventory_url=clean_pg_url) for name in "ab"]
    try:
        with (
            uvicorn_serving(create_api(services[0])) as first,
            uvicorn_serving(create_api(services[1])) as second,
            httpx.Client(timeout=30) as http,
        ):
            one = http.post(f"{first}/api/agents/run", json={"blueprint": data, "message": "one"}).json()
            session = one["session_id"]
            two = http.post(
                f"{second}/api/agents/run", json={"blueprint": data, "message": "two", "session_id": session}
            ).json()
            assert two["response"] == "two after ['one']"  # the history came from the shared database
            logs = [
                http.get(f"{url}/api/agents/logs", params={"session_id": session}).json() for url in (first, second)
            ]
    finally:
        for service in services:
            service.close()
    assert logs[0] == logs[1]
    assert [e["kind"] for e in logs[0]["entries"]] == ["run_start", "run_end"] * 2


def test_memory_off_is_stateless(api: Api, fake_model: FakeServer) -> None:
    fake_model.responder = _history_echo
    for message in ("a", "b"):
        reply = api.post("/api/agents/run", {"blueprint": blueprint(), "message": message, "session_id": "s"}).json()
        assert reply["response"] == f"{message} after []"


def test_run_logs_are_chronological_with_redacted_arguments_durations_and_summaries(
    api: Api, fake_model: FakeServer, fake_tavily: FakeServer
) -> None:
    fake_model.queue(
        tool_call("tavily__search", {"query": f"leak {TAVILY_KEY} please"}),
        tool_call("tavily__search", {"query": "second"}),
        answer("ok"),
    )
    fake_tavily.queue(tavily_results("https://example.com/1"), (500, {"detail": "down"}))
    reply = api.post("/api/agents/run", {"blueprint": blueprint(arms=[TAVILY]), "message": "m", "session_id": "log"})
    blueprint_id = reply.json()["blueprint_id"]
    entries = api.get("/api/agents/logs", session_id="log").json()["entries"]
    assert [e["kind"] for e in entries] == ["run_start", "tool_call", "tool_call", "run_end"]
    assert [e["at"] for e in entries] == sorted(e["at"] for e in entries)
    assert entries[0]["data"]["blueprint_id"] == blueprint_id
    first, second = entries[1]["data"], entries[2]["data"]
    assert first["tool"] == "tavily.search" and first["success"] is True and first["duration_ms"] >= 0
    assert first["arguments"] == {"query": "leak *** please"}
    assert "example.com/1" in first["output_summary"]
    assert second["success"] is False and "HTTP 500" in second["output_summary"]
    assert entries[-1]["data"]["status"] == "ok" and entries[-1]["data"]["latency_ms"] > 0
    assert TAVILY_KEY not in json.dumps(entries)
    assert api.get("/api/agents/logs", session_id="nobody").json()["entries"] == []


def test_provider_error_is_a_502_carrying_the_providers_message(api: Api, fake_model: FakeServer) -> None:
    fake_model.queue((404, {"error": {"message": "model overloaded: try later"}}))
    response = api.post("/api/agents/run", {"blueprint": blueprint(), "message": "hi"})
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "model_error" and "model overloaded: try later" in error["message"]
    assert OPENAI_KEY not in response.text


def test_unexpected_error_is_a_generic_500_with_details_only_in_the_log(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(session_id: str, **page: int) -> list[Any]:
        raise RuntimeError("secret internal state")

    api.service.sessions.log_page = broken  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="awb.api"):
        response = api.get("/api/agents/logs", session_id="x")
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["code"] == "internal_error" and "secret" not in response.text
    assert any("secret internal state" in (r.exc_text or str(r.exc_info)) for r in caplog.records)


def test_workflow_steps_run_in_order_each_output_the_next_input(api: Api, fake_model: FakeServer) -> None:
    fake_model.queue(answer("draft text"), answer("FINAL TEXT"))
    legs = {
        "mode": "workflow",
        "steps": [
            {"name": "draft", "instructions": "Write a draft."},
            {"name": "polish", "instructions": "Polish it."},
        ],
    }
    reply = api.post("/api/agents/run", {"blueprint": blueprint(legs=legs), "message": "topic"}).json()
    assert reply["response"] == "FINAL TEXT"
    first, second = (r["body"] for r in fake_model.requests)
    assert "Write a draft." in first["messages"][0]["content"] and "topic" in user_text(first)
    assert "Polish it." in second["messages"][0]["content"] and "draft text" in user_text(second)


def test_mcp_arm_tools_are_called_through_the_mcp_client(api: Api, fake_model: FakeServer) -> None:
    fake_model.queue(tool_call("tiny__shout", {"text": "hello"}), answer("done"))
    arm = {"type": "mcp", "name": "tiny", "command": [sys.executable, str(TINY_SERVER)]}
    reply = api.post("/api/agents/run", {"blueprint": blueprint(arms=[arm]), "message": "shout", "session_id": "mcp"})
    assert reply.status_code == 200, reply.text
    assert "HELLO" in user_text(fake_model.requests[1]["body"])
    entries = api.get("/api/agents/logs", session_id="mcp").json()["entries"]
    assert entries[1]["data"]["tool"] == "tiny.shout" and entries[1]["data"]["success"] is True


def test_anthropic_heads_send_their_settings_to_the_messages_api(api: Api, fake_model: FakeServer) -> None:
    fake_model.queue(
        (200, {"content": [{"type": "tool_use", "id": "t", "name": "done", "input": {"response": "hej"}}]})
    )
    head = {
        "provider": "anthropic",
        "model": "claude-haiku-4-5",
        "system_prompt": "Svenska.",
        "temperature": 1.5,
        "max_tokens": 99,
    }
    reply = api.post("/api/agents/run", {"blueprint": blueprint(head=head), "message": "hi"})
    assert reply.status_code == 200, reply.text
    assert reply.json()["response"] == "hej"
    sent = fake_model.requests[0]
    assert sent["path"] == "/v1/messages"
    body = sent["body"]
    assert (body["model"], body["temperature"], body["max_tokens"], body["system"]) == (
        "claude-haiku-4-5",
        1.5,
        99,
        "Svenska.",
    )


def test_an_invalid_inline_blueprint_gets_the_same_field_level_errors(api: Api) -> None:
    data = blueprint(arms=[{"type": "tavily_search", "max_results": 99}], spine={"timeout_seconds": 301})
    response = api.post("/api/agents/run", {"blueprint": data, "message": "hi"})
    assert response.status_code == 400
    errors = {e["path"]: e for e in response.json()["error"]["details"]["errors"]}
    assert errors["blueprint.arms[0].max_results"]["allowed"] == {"minimum": 1, "maximum": 20}
    assert errors["blueprint.spine.timeout_seconds"]["allowed"] == {"minimum": 1, "maximum": 300}
    # The code a posted blueprint gets (the README's `blueprint_invalid`), not a malformed request's.
    assert response.json()["error"]["code"] == "blueprint_invalid"
    assert response.json()["error"]["message"].startswith("invalid blueprint: ")
    # A request wrong beside its blueprint stays a malformed request.
    both = api.post("/api/agents/run", {"blueprint": data, "message": ""})
    assert (both.status_code, both.json()["error"]["code"]) == (400, "bad_request")


def test_an_mcp_url_that_answers_with_something_else_is_a_502_that_never_quotes_its_answer(
    api: Api, fake_model: FakeServer
) -> None:
    """A blueprint may name any URL: what answers there (a metadata service, an internal page) must not
    come back in the error, only that it is not an MCP server."""
    with serving(FakeServer()) as internal:
        internal.responder = lambda body: (200, "SECRET-INTERNAL-DATA " * 3)
        arm = {"type": "mcp", "name": "internal", "url": f"{internal.url}/latest/meta-data"}
        response = api.post("/api/agents/run", {"message": "hi", "blueprint": blueprint(arms=[arm])})
    assert internal.requests, "the server did connect"
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "server_unavailable" and "cannot reach MCP server 'internal'" in error["message"]
    assert "SECRET" not in response.text and "\n" not in error["message"]


def test_a_garbled_model_reply_is_a_502_model_error_and_the_run_is_logged(api: Api, fake_model: FakeServer) -> None:
    """A reply whose message is not an object raised out of the loop: a 500 and no run log."""
    fake_model.queue((200, {"choices": [{"message": "garbled"}]}))
    response = api.post("/api/agents/run", {"blueprint": blueprint(), "message": "hi", "session_id": "garbled"})
    assert response.status_code == 502, response.text
    assert response.json()["error"]["code"] == "model_error"
    entries = api.get("/api/agents/logs", session_id="garbled").json()["entries"]
    assert [e["kind"] for e in entries] == ["run_start", "run_end"]
    assert entries[-1]["data"]["status"] == "model_error"


@pytest.mark.anyio
async def test_a_run_cancelled_by_its_caller_still_logs_how_it_ended(
    tmp_path: Path, fake_model: FakeServer, fake_tavily: FakeServer
) -> None:
    """A caller that goes away (a REST client hanging up) cancels the run; its log was lost with it."""
    service = make_service(tmp_path, fake_model, fake_tavily)
    fake_model.hang_paths.add("/chat/completions")
    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(
                    partial(service.run, message="hi", blueprint=blueprint(), blueprint_id=None, session_id="gone")
                )
                # Cancelled while it waits on its model, not (on a loaded machine) before it has begun.
                assert await anyio.to_thread.run_sync(fake_model.hanging.wait, 15)
                tasks.cancel_scope.cancel()
            entries = await service.logs("gone")
    finally:
        service.close()
    assert [e.kind for e in entries] == ["run_start", "run_end"]
    assert entries[-1].data["status"] == "cancelled"


def test_a_field_the_request_does_not_take_is_a_400_naming_it_before_any_model_request(
    api: Api, fake_model: FakeServer
) -> None:
    """A misspelt `sessionId` was dropped without a word: the run went to a new session, and the client lost
    the conversation it meant to continue."""
    for path, body, field in (
        ("/api/agents/run", {"blueprint": blueprint(), "message": "hi", "sessionId": "chat-1"}, "sessionId"),
        ("/api/instructions/improve", {"instructions": "be brief", "goal": "cite sources"}, "goal"),
    ):
        response = api.post(path, body)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["code"] == "bad_request" and error["details"]["errors"][0]["path"] == field, error
    assert fake_model.requests == []


def test_a_run_or_improve_body_that_is_not_json_says_so_as_the_blueprint_routes_do(
    api: Api, fake_model: FakeServer
) -> None:
    """FastAPI's words for it were `malformed request: [0]: JSON decode error`, a path no body has, where
    the blueprint routes say `the body is not JSON: <why>` at `(body)`."""
    for path in ("/api/agents/run", "/api/instructions/improve", "/api/blueprints/validate-and-compile"):
        response = api.client.post(path, content=b"{not json", headers={"content-type": "application/json"})
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["code"] == "bad_request", error
        assert error["message"].startswith("the body is not JSON: Expecting property name"), error
        assert error["details"]["errors"][0]["path"] == "(body)", error
    assert fake_model.requests == []


def test_a_run_that_fails_unexpectedly_is_a_500_and_its_log_still_says_how_it_ended(
    api: Api, fake_model: FakeServer, fake_tavily: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only awb's own errors and cancellation were logged as the run's end: anything else (a bug in a tool's
    handler) left a log with a start and no end, as if the run were still going."""

    def broken(url: str, domains: list[str]) -> bool:
        raise RuntimeError("secret internal state")

    monkeypatch.setattr("awb.blueprints.tavily.domain_allowed", broken)
    fake_model.queue(tool_call("tavily__search", {"query": "q"}))
    fake_tavily.queue(tavily_results("https://example.com/a"))
    response = api.post(
        "/api/agents/run", {"blueprint": blueprint(arms=[TAVILY]), "message": "hi", "session_id": "bug"}
    )
    assert response.status_code == 500 and response.json()["error"]["code"] == "internal_error"
    entries = api.get("/api/agents/logs", session_id="bug").json()["entries"]
    assert [e["kind"] for e in entries] == ["run_start", "tool_call", "run_end"]
    assert entries[-1]["data"]["status"] == "internal_error" and "secret" not in json.dumps(entries)


def test_run_logs_come_a_page_at_a_time_with_the_cursor_of_the_next(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """The logs of a session came back whole in one reply, however many runs had written them, built in
    memory. Asked without `limit` they still come whole (the spec: all entries, in order), sent while they
    are read a page at a time; with `limit`, a page and where the next starts."""
    monkeypatch.setattr(whole_listing, "PAGE", 7)
    at = datetime.now(UTC)
    written = [LogEntry(at=at, run_id=f"r{n // 2}", kind="run_start", data={"n": n}) for n in range(40)]
    api.service.sessions.append_logs("long", written)
    pages: list[int] = []
    log_page = api.service.log_page

    async def counted(session_id: str, *, after: int, limit: int) -> Any:
        pages.append(limit)
        return await log_page(session_id, after=after, limit=limit)

    monkeypatch.setattr(api.service, "log_page", counted)
    whole = api.get("/api/agents/logs", session_id="long")
    assert whole.headers["content-type"] == "application/json"
    assert whole.json() == {
        "session_id": "long",
        "entries": [json.loads(entry.model_dump_json()) for entry in written],
        "next_after": None,
    }
    assert pages == [7] * 6  # 40 entries read 7 at a time, never all at once
    assert api.get("/api/agents/logs", session_id="nobody").json() == {
        "session_id": "nobody",
        "entries": [],
        "next_after": None,
    }
    later = api.get("/api/agents/logs", session_id="long", after="35").json()  # whole from a cursor on
    assert [e["data"]["n"] for e in later["entries"]] == [35, 36, 37, 38, 39]
    seen, after = [], 0
    while after is not None:
        page = api.get("/api/agents/logs", session_id="long", limit="2", after=str(after)).json()
        assert len(page["entries"]) <= 2
        seen += [e["data"]["n"] for e in page["entries"]]
        after = page["next_after"]
    assert seen == list(range(40))
    for bad in ({"limit": "0"}, {"limit": str(LOG_PAGE_MAX + 1)}, {"after": "-1"}):
        response = api.get("/api/agents/logs", session_id="long", **bad)
        assert response.status_code == 400 and response.json()["error"]["code"] == "bad_request"


def test_a_refusal_is_a_finished_run_answering_200_with_the_models_words_and_its_log_saved(
    api: Api, fake_model: FakeServer
) -> None:
    """A model that declines is a run that ended normally, not a provider that failed (no 502)."""
    refusal = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    fake_model.queue((200, {"choices": [{"message": refusal, "finish_reason": "stop"}]}))
    response = api.post("/api/agents/run", {"blueprint": blueprint(), "message": "hi", "session_id": "declined"})
    assert response.status_code == 200, response.text
    reply = response.json()
    assert (reply["status"], reply["response"]) == ("refused", "I can't help with that.")
    assert (reply["session_id"], reply["usage"]["requests"]) == ("declined", 1)
    entries = api.get("/api/agents/logs", session_id="declined").json()["entries"]
    assert [e["kind"] for e in entries] == ["run_start", "run_end"]
    assert entries[-1]["data"]["status"] == "refused"
    assert entries[-1]["data"]["refusal"] == "I can't help with that."


def test_a_runs_usage_says_when_its_token_counts_are_estimates(api: Api, fake_model: FakeServer) -> None:
    status, reply = answer("Paris.")
    del reply["usage"]
    fake_model.queue((status, reply))
    response = api.post("/api/agents/run", {"blueprint": blueprint(), "message": "Capital of France?"})
    assert response.status_code == 200, response.text
    usage = response.json()["usage"]
    assert (usage["estimated_replies"], usage["estimated"]) == (1, True) and usage["input_tokens"] > 0
    fake_model.queue(answer("Paris."))
    usage = api.post("/api/agents/run", {"blueprint": blueprint(), "message": "Again?"}).json()["usage"]
    assert (usage["input_tokens"], usage["estimated_replies"], usage["estimated"]) == (10, 0, False)


def test_a_workflow_step_that_refuses_ends_the_run_refused_and_the_session_remembers_it(
    api: Api, fake_model: FakeServer
) -> None:
    refusal = {"role": "assistant", "content": None, "refusal": "Not this topic."}
    fake_model.queue((200, {"choices": [{"message": refusal}]}), answer("a draft"), answer("polished"))
    legs = {
        "mode": "workflow",
        "steps": [
            {"name": "draft", "instructions": "Write a draft."},
            {"name": "polish", "instructions": "Polish it."},
        ],
    }
    data = blueprint(legs=legs, heart={"memory": {"enabled": True, "history_length": 5}})
    reply = api.post("/api/agents/run", {"blueprint": data, "message": "topic", "session_id": "wf"}).json()
    assert (reply["status"], reply["response"], len(fake_model.requests)) == ("refused", "Not this topic.", 1)
    # The refusal is the session's answer to that message: the next run's history holds it.
    again = api.post("/api/agents/run", {"blueprint": data, "message": "other", "session_id": "wf"}).json()
    assert again["status"] == "ok"
    assert "Not this topic." in user_text(fake_model.requests[1]["body"])


def test_a_page_of_big_log_entries_ends_at_its_byte_cap_with_the_cursor_of_the_next(api: Api) -> None:
    """`limit` entries made a page as big as they were: 10,000 entries of 4,000-character values is 40 MB."""
    at = datetime.now(UTC)
    written = [LogEntry(at=at, run_id="r", kind="tool_call", data={"n": n, "t": "x" * 1_000_000}) for n in range(12)]
    api.service.sessions.append_logs("big", written)
    seen: list[int] = []
    sizes: list[int] = []
    after: int | None = 0
    while after is not None:
        response = api.get("/api/agents/logs", session_id="big", limit="12", after=str(after))
        assert response.status_code == 200
        sizes.append(len(response.content))
        page = response.json()
        seen += [entry["data"]["n"] for entry in page["entries"]]
        after = page["next_after"]
    assert seen == list(range(12))
    assert len(sizes) == 2 and max(sizes) <= LOG_PAGE_BYTES + 1024  # the entries, and the reply around them
    whole = api.get("/api/agents/logs", session_id="big").json()  # no limit: still every entry, in order
    assert [entry["data"]["n"] for entry in whole["entries"]] == list(range(12)) and whole["next_after"] is None


def test_a_log_cursor_past_what_the_store_keeps_is_a_400_not_a_500(api: Api) -> None:
    """`after` had a floor and no ceiling: 2**63 reached SQLite, whose integers stop at 2**63-1, and the
    OverflowError was a 500 internal_error (a traceback in the log per request). The largest stored id
    still reads (an empty page); one past it is the client's error."""
    api.service.sessions.append_logs("s", [LogEntry(at=datetime.now(UTC), run_id="r", kind="run_start", data={})])
    largest = api.get("/api/agents/logs", session_id="s", after=str(2**63 - 1), limit="1")
    assert largest.status_code == 200 and largest.json()["entries"] == []
    for after in (str(2**63), "9" * 30):
        for paged in ({}, {"limit": "1"}):
            response = api.get("/api/agents/logs", session_id="s", after=after, **paged)
            assert response.status_code == 400, (after, paged, response.text)
            assert response.json()["error"]["code"] == "bad_request"
            assert response.json()["error"]["details"]["errors"][0]["path"] == "after"


def test_a_session_the_panel_could_not_open_is_refused_before_any_model_request(
    api: Api, fake_model: FakeServer
) -> None:
    """`.` and `..` ran and logged, and the panel's /runs/.. link is / in every browser. Their logs, which an
    older awb may have written, can still be read."""
    for session_id in (".", ".."):
        response = api.post("/api/agents/run", {"blueprint": blueprint(), "message": "hi", "session_id": session_id})
        assert response.status_code == 400, response.text
        assert response.json()["error"]["details"]["errors"][0]["path"] == "session_id"
        assert api.get("/api/agents/logs", session_id=session_id).status_code == 200
    assert fake_model.requests == []
    fake_model.queue(answer("ok"))
    taken = api.post("/api/agents/run", {"blueprint": blueprint(), "message": "hi", "session_id": "..."})
    assert taken.status_code == 200 and taken.json()["session_id"] == "..."


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded", "application/yaml"])
def test_a_json_body_sent_as_another_type_is_a_400_naming_the_type_it_must_be(
    api: Api, fake_model: FakeServer, content_type: str | None
) -> None:
    """The body was read as bytes and refused as 'Input should be a valid dictionary', which says nothing
    of the header that was wrong; the blueprint endpoints named it already."""
    body = json.dumps({"blueprint": blueprint(), "message": "hi"}).encode()
    headers = {} if content_type is None else {"content-type": content_type}
    for path in ("/api/agents/run", "/api/instructions/improve"):
        response = api.client.post(path, content=body, headers=headers)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["code"] == "bad_request" and "application/json" in error["message"], error
        assert error["details"]["errors"][0]["path"] == "(content-type)"
    assert fake_model.requests == []
    charset = api.client.post(
        "/api/agents/run",
        content=json.dumps({"blueprint_id": "bp_none", "message": "hi"}).encode(),
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert charset.status_code == 404
