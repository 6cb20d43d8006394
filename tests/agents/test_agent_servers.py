"""`mcpServers` configuration: entries, environment inheritance, headers, and clear errors."""

from __future__ import annotations

import json
import socket
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest
import uvicorn
from mcp.client.stdio import StdioServerParameters
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

from awb.agents import Agent, run_agent
from awb.agents.mcp_client import HttpServer, client_target
from awb.agents.models import Prompt, ScriptedModel
from awb.agents.servers import configured_servers, load_servers_file, parse_servers
from awb.agents.toolbox import ToolSpec
from awb.errors import ConfigError


def test_stdio_entries_inherit_the_environment_plus_their_own_env(tmp_path: Path) -> None:
    data = {"mcpServers": {"awb": {"command": "awb", "args": ["start"], "env": {"AWB_MAX_TOOLS": "3"}, "cwd": "work"}}}
    [target] = parse_servers(data, source="test", base=tmp_path, environ={"AWB_PORT": "1", "PATH": "/bin"}).values()
    assert isinstance(target, StdioServerParameters)
    assert (target.command, target.args) == ("awb", ["start"])
    assert target.env == {"AWB_PORT": "1", "PATH": "/bin", "AWB_MAX_TOOLS": "3"}
    assert target.cwd == str(tmp_path / "work")


def test_a_servers_file_of_more_servers_than_a_run_may_start_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {f"s{n}": {"command": "true"} for n in range(101)}}))
    with pytest.raises(ConfigError, match="101 servers, more than the 100 a run may start"):
        load_servers_file(path)


def test_url_entries_keep_their_headers_and_disabled_entries_are_left_out() -> None:
    data = {
        "docs": {"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer s3cret"}, "type": "http"},
        "off": {"command": "x", "disabled": True},
    }
    servers = parse_servers(data, source="test")
    assert servers == {"docs": HttpServer("http://127.0.0.1:1/mcp", {"Authorization": "Bearer s3cret"})}
    assert "s3cret" not in repr(servers["docs"])


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({}, "give either `command` (stdio) or `url`"),
        ({"command": "a", "url": "http://x"}, "give either `command` (stdio) or `url`"),
        ({"url": "ftp://x"}, "`url` must be an http:// or https:// URL"),
        ({"command": "a", "args": "not-a-list"}, "Input should be a valid list"),
    ],
)
def test_an_invalid_entry_is_a_config_error_naming_the_server(entry: object, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_servers({"mcpServers": {"bad": entry}}, source="servers.json")
    assert caught.value.message.startswith("servers.json: server 'bad': ")
    assert message in caught.value.message


def test_a_missing_or_broken_servers_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="MCP servers file not found"):
        load_servers_file(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match="is not valid JSON"):
        load_servers_file(tmp_path / "bad.json")
    deep = '{"mcpServers": ' + "[" * 100_000 + "]" * 100_000 + "}"
    (tmp_path / "deep.json").write_text(deep)
    with pytest.raises(ConfigError, match="nested too deeply"):  # was RecursionError: internal_error
        load_servers_file(tmp_path / "deep.json")
    with pytest.raises(ConfigError, match="nested too deeply"):
        configured_servers(deep, base=tmp_path)


def test_the_config_value_may_be_inline_json_a_path_or_a_map(tmp_path: Path) -> None:
    entry = {"command": "tiny"}
    (tmp_path / "s.json").write_text(json.dumps({"mcpServers": {"a": entry}}))
    assert set(configured_servers("s.json", base=tmp_path)) == {"a"}
    assert set(configured_servers('{"b": {"command": "tiny"}}', base=tmp_path)) == {"b"}
    assert set(configured_servers({"mcpServers": {"c": entry}}, base=tmp_path)) == {"c"}
    assert configured_servers(None, base=tmp_path) == {}


def test_a_command_line_server_inherits_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWB_TOOLS_DIR", "/somewhere")
    target = client_target("awb start --transport stdio")
    assert isinstance(target, StdioServerParameters)
    assert target.env is not None
    assert target.env["AWB_TOOLS_DIR"] == "/somewhere"


class Empty(BaseModel):
    pass


class Said(BaseModel):
    text: str


class Whoami(Agent):
    tools = ("auth",)
    Input = Empty
    Output = Said


@pytest.mark.anyio
async def test_an_http_server_receives_the_configured_headers() -> None:
    server = MCPServer("auth")

    @server.tool()
    def whoami(ctx: Context) -> str:
        """Echo the Authorization header."""
        request = ctx.request_context.request
        return str(request.headers.get("authorization") if request is not None else None)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    http = uvicorn.Server(uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on"))

    def script(prompt: Prompt, tools: Sequence[ToolSpec]) -> dict[str, object]:
        if "tool_result" not in prompt.body:
            return {"action": "call_tool", "tool": "auth.whoami"}
        return {"action": "done", "output": {"text": prompt.body.rsplit("tool_result (auth.whoami): ", 1)[1]}}

    servers = parse_servers(
        {"auth": {"url": f"http://127.0.0.1:{port}/mcp", "headers": {"Authorization": "Bearer t"}}}, source="t"
    )
    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(http.serve, [sock])
            try:
                result = await run_agent(Whoami, {}, model=ScriptedModel(script), servers=servers)
            finally:
                http.should_exit = True
    sock.close()
    assert result.output == {"text": json.dumps({"result": "Bearer t"})}
