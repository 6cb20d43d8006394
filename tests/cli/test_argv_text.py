"""A command-line argument that is not UTF-8 (Python makes each such byte a lone surrogate, `\\udcff`):
the commands that hand text to a model refuse it as `invalid_params` before asking one. It failed on the
way to the model (`model_error`) or printing the result (`internal_error` from `awb plan`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from api.fakes import FakeServer, serving
from awb.cli.main import app
from clitools import AWB, clean_env, run_program

runner = CliRunner()
#: What Python makes of the byte 0xff in an argument (os.fsdecode's surrogateescape).
NOT_UTF8 = "hi \udcff"
BLUEPRINT = {
    "name": "helper",
    "head": {"provider": "openai", "model": "gpt-4o-mini", "system_prompt": "Help."},
    "legs": {"mode": "single_agent"},
}
AGENT = """
from pydantic import BaseModel
from awb.agents import Agent

class Said(BaseModel):
    text: str

class Echo(Agent):
    mode = "echo"
    Input = Said
    Output = Said
    system_prompt = "Echo."
"""


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "helper.yaml").write_text(yaml.safe_dump(BLUEPRINT), encoding="utf-8")
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "echo.py").write_text(AGENT, encoding="utf-8")
    for name in ("AWB_CONFIG", "AWB_INVENTORY_PATH", "AWB_BLUEPRINTS_DIR", "AWB_MCP_SERVERS"):
        monkeypatch.delenv(name, raising=False)
    with serving(FakeServer()) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        yield fake


@pytest.mark.parametrize(
    ("command", "field"),
    [
        (["blueprints", "run", "helper.yaml", NOT_UTF8], "message"),
        (["agents", "run", "echo", NOT_UTF8, "--model", "openai:gpt-4o-mini"], "input/text"),
        (["plan", NOT_UTF8, "--model", "openai:gpt-4o-mini"], "task"),
    ],
)
def test_text_for_a_model_that_is_not_utf8_is_invalid_params_before_any_model_request(
    model: FakeServer, command: list[str], field: str
) -> None:
    result = runner.invoke(app, [*command, "--json"])
    assert result.exit_code == 2, result.output
    error = json.loads(result.stderr)["error"]
    assert error["code"] == "invalid_params" and error["details"]["field"] == field, error
    assert "not valid Unicode" in error["message"]
    assert model.requests == []


def test_the_awb_executable_refuses_a_message_argument_holding_a_byte_that_is_not_utf8(
    model: FakeServer, tmp_path: Path
) -> None:
    env = clean_env(OPENAI_BASE_URL=model.url, OPENAI_API_KEY="sk-test-not-a-real-key")
    argv: list[str | bytes] = [AWB, "blueprints", "run", "helper.yaml", b"hi \xff"]
    done = run_program(argv, tmp_path, env=env)  # type: ignore[arg-type]
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error (invalid_params): message holds text that is not valid Unicode")
    assert model.requests == []
