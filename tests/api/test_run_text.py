"""Text from the outside that is not valid Unicode (a lone surrogate, which a `\\ud800` escape in JSON
carries): a model's answer, a provider's error, a search result. A run answers with U+FFFD in its place
and keeps its session and log; it ended in a 500 after the run had finished."""

from __future__ import annotations

from .blueprints_data import TAVILY, blueprint
from .conftest import Api
from .fakes import FakeServer, answer, tool_call, user_text

#: A reply body as a provider sends it: valid JSON whose text holds a lone surrogate once decoded.
LONE = "\\ud800"


def test_an_answer_holding_a_lone_surrogate_is_kept_with_a_replacement_character(
    api: Api, fake_model: FakeServer
) -> None:
    # The done call's arguments are a JSON string inside the JSON body: the escape is decoded in the second.
    call = {"id": "c1", "type": "function", "function": {"name": "done", "arguments": '{"response": "a' + LONE + 'b"}'}}
    fake_model.queue((200, {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}))
    fake_model.queue(answer("second"))
    data = blueprint(heart={"memory": {"enabled": True}})
    first = api.post("/api/agents/run", {"blueprint": data, "message": "hi", "session_id": "lone"})
    assert first.status_code == 200, first.text
    assert first.json()["response"] == "a\ufffdb"
    second = api.post("/api/agents/run", {"blueprint": data, "message": "again", "session_id": "lone"})
    assert second.status_code == 200, second.text
    assert "a\ufffdb" in user_text(fake_model.requests[1]["body"])  # the exchange was stored
    logs = api.get("/api/agents/logs", session_id="lone")
    assert logs.status_code == 200 and [e["data"].get("status") for e in logs.json()["entries"]][-1] == "ok"


def test_a_provider_error_holding_a_lone_surrogate_is_a_502(api: Api, fake_model: FakeServer) -> None:
    fake_model.queue((404, {"error": {"message": "bad\ud800request"}}))
    response = api.post("/api/agents/run", {"blueprint": blueprint(), "message": "hi"})
    assert response.status_code == 502, response.text
    assert "bad\ufffdrequest" in response.json()["error"]["message"]


def test_a_search_result_holding_a_lone_surrogate_reaches_the_model_and_the_log(
    api: Api, fake_model: FakeServer, fake_tavily: FakeServer
) -> None:
    fake_model.queue(tool_call("tavily__search", {"query": "q"}), answer("done"))
    result = {"title": "t\ud800", "url": "https://example.com/a", "content": "c\udfff"}
    fake_tavily.queue((200, {"results": [result]}))
    response = api.post(
        "/api/agents/run", {"blueprint": blueprint(arms=[TAVILY]), "message": "hi", "session_id": "search"}
    )
    assert response.status_code == 200, response.text
    assert "t\ufffd" in user_text(fake_model.requests[1]["body"])
    assert api.get("/api/agents/logs", session_id="search").status_code == 200


def test_a_search_reply_nested_past_the_decoder_is_a_failed_search_and_the_run_goes_on(
    api: Api, fake_model: FakeServer, fake_tavily: FakeServer
) -> None:
    """It raised RecursionError out of the run: a 500, and the run's log lost with it."""
    fake_model.queue(tool_call("tavily__search", {"query": "q"}), answer("done"))
    fake_tavily.queue((200, b'{"results": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"))
    response = api.post(
        "/api/agents/run", {"blueprint": blueprint(arms=[TAVILY]), "message": "hi", "session_id": "deep"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["tool_calls"][0]["success"] is False
    entries = api.get("/api/agents/logs", session_id="deep").json()["entries"]
    assert entries[-1]["kind"] == "run_end" and entries[-1]["data"]["status"] == "ok"
