"""`awb blueprints validate|run|list|schemas`: the CLI mirrors of the REST endpoints."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from api.fakes import FakeServer, answer, serving
from awb.cli.main import app
from clitools import assert_one_error_line, clean_env, run_awb

runner = CliRunner()

GOOD = {
    "name": "helper",
    "head": {"provider": "openai", "model": "gpt-4o-mini", "system_prompt": "Help.", "temperature": 0.5},
    "legs": {"mode": "single_agent"},
    "heart": {"memory": {"enabled": True, "history_length": 5}},
}


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    for name in ("AWB_CONFIG", "AWB_INVENTORY_PATH", "AWB_BLUEPRINTS_DIR"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "good.yaml").write_text(yaml.safe_dump(GOOD), encoding="utf-8")
    (tmp_path / "bad.yaml").write_text("head: {provider: nope, model: x}\nlegs: {mode: team}\n", encoding="utf-8")
    yield tmp_path


def test_validate_prints_the_id_or_every_field_error(workdir: Path) -> None:
    ok = runner.invoke(app, ["blueprints", "validate", "good.yaml", "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["blueprint_id"].startswith("bp_")
    bad = runner.invoke(app, ["blueprints", "validate", "bad.yaml", "--json"])
    assert bad.exit_code == 2
    paths = [e["path"] for e in json.loads(bad.output)["error"]["details"]["errors"]]
    assert paths == ["head.provider", "legs.members"]


def test_run_uses_the_configured_model_and_keeps_the_session(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with serving(FakeServer()) as model:
        monkeypatch.setenv("OPENAI_BASE_URL", model.url)
        model.queue(answer("first"), answer("second"))
        first = runner.invoke(app, ["blueprints", "run", "good.yaml", "hello"])
        assert first.exit_code == 0, first.output
        session = json.loads(first.output)["session_id"]
        second = runner.invoke(app, ["blueprints", "run", "good.yaml", "again", "--session-id", session])
        assert json.loads(second.output)["response"] == "second"
    assert model.requests[0]["body"]["temperature"] == 0.5
    assert "hello" in model.requests[1]["body"]["messages"][-1]["content"]


def test_a_run_the_model_declines_prints_its_words_and_exits_3(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with serving(FakeServer()) as model:
        monkeypatch.setenv("OPENAI_BASE_URL", model.url)
        model.queue((200, {"choices": [{"message": {"role": "assistant", "refusal": "I can't help with that."}}]}))
        declined = runner.invoke(app, ["blueprints", "run", "good.yaml", "hello"])
    assert declined.exit_code == 3, declined.output  # as `awb agents run`: neither an answer (0) nor a failure (1)
    reply = json.loads(declined.stdout)
    assert (reply["status"], reply["response"]) == ("refused", "I can't help with that.")


def test_list_shows_saved_files_and_schemas_prints_one_part(workdir: Path) -> None:
    (workdir / "blueprints").mkdir()
    (workdir / "blueprints" / "helper-1.yaml").write_text(yaml.safe_dump(GOOD), encoding="utf-8")
    listed = runner.invoke(app, ["blueprints", "list", "--json"])
    assert [entry["name"] for entry in json.loads(listed.output)] == ["helper"]
    spine = runner.invoke(app, ["blueprints", "schemas", "--part", "spine"])
    assert json.loads(spine.output)["max_tool_calls"] == {"minimum": 1, "maximum": 100, "default": 10}


def test_a_file_that_is_not_utf8_is_blueprint_invalid_and_the_listing_still_works(workdir: Path) -> None:
    (workdir / "blueprints").mkdir()
    (workdir / "blueprints" / "helper-1.yaml").write_text(yaml.safe_dump(GOOD), encoding="utf-8")
    latin1 = yaml.safe_dump({**GOOD, "name": "caf\xe9"}, allow_unicode=True).encode("latin-1")
    (workdir / "blueprints" / "latin1.yaml").write_bytes(latin1)
    listed = runner.invoke(app, ["blueprints", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    by_file = {entry["file"]: entry for entry in json.loads(listed.output)}
    assert by_file["helper-1.yaml"]["name"] == "helper"
    assert by_file["latin1.yaml"]["error"]["message"].startswith("latin1.yaml is not UTF-8 text")
    checked = runner.invoke(app, ["blueprints", "validate", "blueprints/latin1.yaml"])
    assert checked.exit_code == 2
    assert checked.stderr.startswith("error (blueprint_invalid): blueprints/latin1.yaml is not UTF-8 text (")


def _chat(content: str) -> tuple[int, object]:
    choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
    return 200, {"id": "c", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini", "choices": [choice]}


def test_run_can_target_agno_and_its_session_goes_on_in_the_next_command(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving(FakeServer()) as model:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{model.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        model.queue(_chat("from agno"), _chat("still agno"))
        result = runner.invoke(app, ["blueprints", "run", "good.yaml", "hi", "--target", "agno"])
        assert result.exit_code == 0, result.output
        first = json.loads(result.output)
        again = ["blueprints", "run", "good.yaml", "and now?", "--target", "agno", "--session-id", first["session_id"]]
        second = runner.invoke(app, again)
    assert second.exit_code == 0, second.output
    assert first["response"] == "from agno" and json.loads(second.output)["response"] == "still agno"
    assert model.requests[0]["body"]["temperature"] == 0.5
    history = json.dumps(model.requests[1]["body"]["messages"])
    assert "hi" in history and "from agno" in history
    assert (workdir / ".awb" / "agno.db").is_file()
    wrong = runner.invoke(app, ["blueprints", "run", "good.yaml", "hi", "--target", "langchain"])
    assert wrong.exit_code == 2 and "targets: awb, agno" in wrong.output


def test_knowledge_bases_come_from_the_config_file(workdir: Path) -> None:
    (workdir / "awb.config.json").write_text(json.dumps({"blueprints": {"knowledge": {"handbook": "docs"}}}))
    heart = runner.invoke(app, ["blueprints", "schemas", "--part", "heart"])
    assert json.loads(heart.output)["knowledge"]["knowledge_bases"] == ["handbook"]
    (workdir / "kb.yaml").write_text(
        yaml.safe_dump(GOOD | {"heart": {"knowledge": {"enabled": True, "knowledge_base": "wiki"}}}), encoding="utf-8"
    )
    bad = runner.invoke(app, ["blueprints", "validate", "kb.yaml", "--json"])
    assert bad.exit_code == 2
    (error,) = json.loads(bad.output)["error"]["details"]["errors"]
    assert error["path"] == "heart.knowledge.knowledge_base" and error["allowed"] == ["handbook"]


def test_run_checks_the_session_id_and_message_as_the_rest_api_does_before_asking_the_model(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving(FakeServer()) as model:
        monkeypatch.setenv("OPENAI_BASE_URL", model.url)
        for args, said in (
            (["hello", "--session-id", "team/alpha"], "session id 'team/alpha' is not 1 to 128 of"),
            (["hello", "--session-id", "x" * 129], "is not 1 to 128 of"),
            ([""], "the message must be 1 to 100000 characters (got 0)"),
        ):
            result = runner.invoke(app, ["blueprints", "run", "good.yaml", *args])
            assert result.exit_code == 2, result.output
            assert result.stderr.startswith("error (invalid_params): ") and said in result.stderr, result.stderr
            assert len(result.stderr.strip().splitlines()) == 1
            as_json = runner.invoke(app, ["blueprints", "run", "good.yaml", *args, "--json"])
            assert json.loads(as_json.stderr)["error"]["code"] == "invalid_params"
        assert model.requests == []


def test_a_yaml_syntax_error_is_one_line(workdir: Path) -> None:
    (workdir / "s.yaml").write_text("a: [1\n", encoding="utf-8")
    result = runner.invoke(app, ["blueprints", "validate", "s.yaml"])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error (blueprint_invalid): s.yaml is not valid YAML: ")


def test_a_run_without_a_provider_key_names_what_to_set_and_no_option_the_command_lacks(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text(yaml.safe_dump(GOOD), encoding="utf-8")
    env = {k: v for k, v in clean_env().items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    line = assert_one_error_line(run_awb(tmp_path, "blueprints", "run", "good.yaml", "hello", env=env), "model_error")
    assert "OPENAI_API_KEY is not set" in line and "OPENAI_BASE_URL" in line
    # `awb blueprints run` (like the REST API) takes no --base-url: an option the message names is one
    # of this command's, or the message says which commands take it.
    help_text = run_awb(tmp_path, "blueprints", "run", "--help").stdout
    for option in re.findall(r"--[a-z][a-z-]*", line):
        assert option in help_text or "awb agents run" in line, (option, line)
