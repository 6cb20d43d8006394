"""Instruction improvement over real HTTP: an agent on the configured model, and what a failure returns."""

from __future__ import annotations

from .conftest import Api
from .fakes import FakeServer, tool_call, user_text


def test_improve_returns_improved_instructions_with_an_explanation(api: Api, fake_model: FakeServer) -> None:
    improved = {"improved_instructions": "You are a concise research assistant.", "explanation": "Named the role."}
    fake_model.queue(tool_call("done", improved))
    request = {"instructions": "you help with research", "goals": "be concise"}
    response = api.post("/api/instructions/improve", request)
    assert response.status_code == 200, response.text
    assert response.json() == {**improved, "status": "ok", "original_instructions": "you help with research"}
    body = fake_model.requests[0]["body"]
    assert body["model"] == api.config.blueprints.improve_model.partition(":")[2]
    assert "you help with research" in user_text(body) and "be concise" in user_text(body)


def test_improve_failure_returns_the_original_instructions_and_the_error(api: Api, fake_model: FakeServer) -> None:
    fake_model.queue((401, {"error": {"message": "invalid api key"}}))
    response = api.post("/api/instructions/improve", {"instructions": "keep me", "goals": "x"})
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "improve_failed" and "invalid api key" in error["message"]
    assert error["details"]["original_instructions"] == "keep me"


def test_improve_the_model_declines_is_answered_with_its_words_and_the_original(
    api: Api, fake_model: FakeServer
) -> None:
    fake_model.queue((200, {"choices": [{"message": {"role": "assistant", "refusal": "I won't rewrite that."}}]}))
    response = api.post("/api/instructions/improve", {"instructions": "keep me", "goals": "x"})
    assert response.status_code == 200, response.text  # the model's answer, not a provider failure (502)
    assert response.json() == {
        "improved_instructions": "keep me",
        "explanation": "the model declined: I won't rewrite that.",
        "status": "refused",
        "original_instructions": "keep me",
    }


def test_improve_rejects_instructions_over_the_limit(api: Api) -> None:
    response = api.post("/api/instructions/improve", {"instructions": "x" * 10_001})
    assert response.status_code == 400
    assert response.json()["error"]["details"]["errors"][0]["path"] == "instructions"
