"""`awb agents run` with MCP servers from an `mcpServers` file, the environment or awb.config.json,
through the real `awb` executable and a workbench started over stdio."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from awb.agents.cli import agents_app

from .agent_fixtures import FakeProvider, openai_calls

HERE = Path(__file__).parent
AWB = Path(sys.executable).parent / "awb"
runner = CliRunner()

SHOUTER = (
    "from pydantic import BaseModel\n"
    "from awb.agents import Agent\n\n"
    "class Text(BaseModel):\n    text: str\n\n"
    "class Shouter(Agent):\n    mode = 'shouter'\n    tools = ('tiny',)\n    Input = Text\n    Output = Text\n"
)
CRAFTER = (
    "from pydantic import BaseModel\n"
    "from awb.agents import Agent\n\n"
    "class Number(BaseModel):\n    n: int\n\n"
    "class Doubled(BaseModel):\n    result: int\n\n"
    "class Crafter(Agent):\n    mode = 'crafter'\n    tools = ('awb',)\n    Input = Number\n    Output = Doubled\n"
    "    system_prompt = 'Craft tools, then use them.'\n"
)


def tool(name: str, expression: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"{name} an integer",
        "code": f"def run(params):\n    return {expression}\n",
        "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        "examples": [],
    }


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AWB_MCP_SERVERS", "AWB_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def tiny_entry() -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(HERE / "tiny_mcp_server.py")]}


def run_shouter(provider: FakeProvider, agents: Path, *extra: str) -> Any:
    provider.reply(openai_calls(("tiny__shout", '{"text": "hi"}')))
    provider.reply(openai_calls(("done", '{"text": "HI"}')))
    arguments = ["run", "shouter", "hi", "--agents-dir", str(agents), "--model", "openai:m"]
    return runner.invoke(agents_app, [*arguments, "--base-url", provider.url, *extra])


def agents_dir(tmp_path: Path, source: str = SHOUTER) -> Path:
    directory = tmp_path / "agents"
    directory.mkdir()
    (directory / "agent.py").write_text(source)
    return directory


def test_servers_file_starts_the_servers_an_agent_may_use(fake_provider: FakeProvider, tmp_path: Path) -> None:
    servers = tmp_path / "servers.json"
    unused = {"command": "/nonexistent/server"}
    servers.write_text(json.dumps({"mcpServers": {"tiny": tiny_entry(), "unused": unused}}))
    outcome = run_shouter(fake_provider, agents_dir(tmp_path), "--servers", str(servers))
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.stdout)
    assert [(c["name"], c["ok"]) for c in result["tool_calls"]] == [("tiny.shout", True)]


def test_servers_come_from_awb_mcp_servers_as_a_path_or_as_json(
    fake_provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agents = agents_dir(tmp_path)
    monkeypatch.setenv("AWB_MCP_SERVERS", json.dumps({"mcpServers": {"tiny": tiny_entry()}}))
    assert run_shouter(fake_provider, agents).exit_code == 0
    (tmp_path / "servers.json").write_text(json.dumps({"tiny": tiny_entry()}))
    monkeypatch.setenv("AWB_MCP_SERVERS", "servers.json")
    outcome = run_shouter(fake_provider, agents)
    assert outcome.exit_code == 0, outcome.output


def test_servers_come_from_mcp_servers_in_the_config_file(fake_provider: FakeProvider, tmp_path: Path) -> None:
    (tmp_path / "awb.config.json").write_text(json.dumps({"mcp_servers": {"mcpServers": {"tiny": tiny_entry()}}}))
    outcome = run_shouter(fake_provider, agents_dir(tmp_path))
    assert outcome.exit_code == 0, outcome.output


def test_server_option_overrides_a_configured_server_of_the_same_name(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"tiny": {"command": "/nonexistent/server"}}}))
    command = f"{sys.executable} {HERE / 'tiny_mcp_server.py'}"
    outcome = run_shouter(fake_provider, agents_dir(tmp_path), "--servers", str(servers), "--server", f"tiny={command}")
    assert outcome.exit_code == 0, outcome.output


def test_a_configured_server_entry_without_command_or_url_is_a_config_error(tmp_path: Path) -> None:
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"tiny": {"args": ["x"]}}}))
    outcome = runner.invoke(
        agents_app,
        ["run", "shouter", "hi", "--agents-dir", str(agents_dir(tmp_path)), "--servers", str(servers), "--json"],
    )
    assert outcome.exit_code == 2
    error = json.loads(outcome.stderr)["error"]
    assert error["code"] == "config_invalid"
    assert "server 'tiny': Value error, give either `command` (stdio) or `url`" in error["message"]


def test_an_agent_whose_namespace_no_server_provides_fails_with_one_message(tmp_path: Path) -> None:
    outcome = runner.invoke(agents_app, ["run", "shouter", "hi", "--agents-dir", str(agents_dir(tmp_path))])
    assert outcome.exit_code == 2
    # The one CLI error format: a line, `error (<code>): <message>` (JSON only with --json).
    assert outcome.stderr.startswith("error (agent_invalid): ")
    assert "no server of that name is configured" in outcome.stderr
    assert len(outcome.stderr.strip().splitlines()) == 1


def test_verbose_writes_each_event_as_a_json_line_on_stderr(fake_provider: FakeProvider, tmp_path: Path) -> None:
    outcome = run_shouter(
        fake_provider,
        agents_dir(tmp_path),
        "--server",
        f"tiny={sys.executable} {HERE / 'tiny_mcp_server.py'}",
        "--verbose",
    )
    assert outcome.exit_code == 0, outcome.output
    events = [json.loads(line) for line in outcome.stderr.splitlines()]
    assert [e["type"] for e in events] == [
        "step_started",
        "model_reply",
        "tool_call",
        "tool_result",
        "step_started",
        "model_reply",
        "done",
    ]
    assert json.loads(outcome.stdout)["output"] == {"text": "HI"}


@pytest.fixture
def httpx_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger("httpx")
    level, handlers = logger.level, list(logger.handlers)
    try:
        yield logger
    finally:
        logger.setLevel(level)
        logger.handlers[:] = handlers


def test_provider_http_requests_are_not_logged_unless_asked(
    fake_provider: FakeProvider, tmp_path: Path, caplog: pytest.LogCaptureFixture, httpx_logger: logging.Logger
) -> None:
    caplog.set_level(logging.INFO)
    agents = agents_dir(tmp_path)
    server = f"tiny={sys.executable} {HERE / 'tiny_mcp_server.py'}"
    assert run_shouter(fake_provider, agents, "--server", server).exit_code == 0
    assert not [r for r in caplog.records if r.name == "httpx"]
    assert run_shouter(fake_provider, agents, "--server", server, "--log-http").exit_code == 0
    assert [r for r in caplog.records if r.name == "httpx"]


def test_the_awb_executable_runs_an_agent_on_a_workbench_started_over_stdio_from_a_servers_file(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    agents = agents_dir(tmp_path, CRAFTER)
    inventory = tmp_path / "inventory.db"
    workbench = {
        "command": sys.executable,
        "args": ["-m", "awb", "start", "--transport", "stdio"],
        "env": {"AWB_INVENTORY_PATH": str(inventory)},
        "cwd": str(tmp_path),
    }
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"awb": workbench, "unused": {"command": "/nonexistent"}}}))
    fake_provider.reply(openai_calls(("awb__awb_craft", json.dumps(tool("double", "params['n'] * 2")))))
    fake_provider.reply(openai_calls(("awb__awb_craft", json.dumps(tool("triple", "params['n'] * 3")))))
    fake_provider.reply(openai_calls(("awb__awb_call", json.dumps({"name": "double", "params": {"n": 21}}))))
    fake_provider.reply(openai_calls(("done", '{"result": 42}')))
    # AWB_MAX_TOOLS reaches the workbench only if the stdio server inherits this environment.
    environment = {**os.environ, "AWB_MAX_TOOLS": "1"}
    command = [str(AWB), "agents", "run", "crafter", '{"n": 21}', "--agents-dir", str(agents)]
    command += ["--servers", str(servers), "--model", "openai:gpt-4o-mini", "--base-url", fake_provider.url]
    completed = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=90, check=False)
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)  # piped: stdout is the JSON result and nothing else
    assert result["output"] == {"result": 42}
    calls = [(c["name"], c["ok"], (c["error"] or {}).get("code")) for c in result["tool_calls"]]
    assert calls == [
        ("awb.awb_craft", True, None),
        ("awb.awb_craft", False, "limit_exceeded"),
        ("awb.awb_call", True, None),
    ]
    assert result["tool_calls"][1]["error"]["message"].startswith("the inventory holds its maximum of 1 tools")
    assert inventory.exists()
    assert "42" in fake_provider.bodies()[3]["messages"][1]["content"]


def test_model_settings_options_reach_the_provider(fake_provider: FakeProvider, tmp_path: Path) -> None:
    server = f"tiny={sys.executable} {HERE / 'tiny_mcp_server.py'}"
    settings = ["--temperature", "0.3", "--max-tokens", "77", "--timeout", "20"]
    outcome = run_shouter(fake_provider, agents_dir(tmp_path), "--server", server, *settings)
    assert outcome.exit_code == 0, outcome.output
    first = fake_provider.bodies()[0]
    assert (first["temperature"], first["max_tokens"]) == (0.3, 77)
