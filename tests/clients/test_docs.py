"""docs/clients.md: every snippet is an example file run by these tests, and its `mcpServers` config starts a server."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from client_support import EXAMPLES
from support import REPO

DOC = REPO / "docs" / "clients.md"
SNIPPET = re.compile(r"<!-- (\w+): (\S+) -->\n```\w*\n(.*?)```", re.DOTALL)
AWB = Path(sys.executable).parent / "awb"


def snippets(kind: str) -> dict[str, str]:
    return {name: body for found, name, body in SNIPPET.findall(DOC.read_text(encoding="utf-8")) if found == kind}


def test_readme_links_the_client_guide() -> None:
    assert "(docs/clients.md)" in (REPO / "README.md").read_text(encoding="utf-8")


def test_every_client_example_is_in_the_guide_as_written() -> None:
    shown = snippets("example")
    assert sorted(shown) == sorted(f"examples/clients/{path.name}" for path in EXAMPLES.iterdir() if path.is_file())
    for path, body in shown.items():
        assert body == (REPO / path).read_text(encoding="utf-8"), f"{path} differs from its copy in docs/clients.md"


def configured_server(tmp_path: Path) -> dict[str, Any]:
    """The guide's `mcpServers` entry with its placeholder paths filled in for this machine."""
    text = snippets("config")["mcpServers"]
    text = text.replace("/path/to/agent-workbench/.venv/bin/awb", str(AWB))
    text = text.replace("/path/to/awb.config.json", str(tmp_path / "awb.config.json"))
    server: dict[str, Any] = json.loads(text)["mcpServers"]["workbench"]
    return server


@pytest.mark.anyio
async def test_the_guides_mcp_servers_config_starts_a_server_on_the_configured_inventory(tmp_path: Path) -> None:
    subprocess.run([str(AWB), "init", str(tmp_path)], check=True, capture_output=True, timeout=60)
    server = configured_server(tmp_path)
    assert server["command"] == str(AWB) and server["args"][:3] == ["start", "--transport", "stdio"]
    params = StdioServerParameters(command=server["command"], args=server["args"], cwd=tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    with anyio.fail_after(60):
        async with Client(params) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"awb_craft", "awb_call", "awb_search", "awb_equip"} <= names
            listed = await client.call_tool("awb_list", {})
            assert not listed.is_error and listed.structured_content is not None
            assert listed.structured_content["count"] == 0
    config = json.loads((tmp_path / "awb.config.json").read_text(encoding="utf-8"))
    assert (tmp_path / config["inventory_path"]).exists()


def test_the_claude_code_command_starts_what_the_mcp_servers_entry_names(tmp_path: Path) -> None:
    words = shlex.split(snippets("command")["claude"])
    assert words[:4] == ["claude", "mcp", "add", "workbench"] and words[4] == "--"
    entry = json.loads(snippets("config")["mcpServers"])["mcpServers"]["workbench"]
    assert words[5:] == [entry["command"], *entry["args"]]


#: The guide's client rows, by the distribution each one's version is of (the MCP Inspector and
#: LangChain's adapters run from npm and a venv of their own: their tests pin them).
CLIENT_DISTRIBUTIONS = {
    "official MCP SDK (`mcp.Client`)": "mcp",
    "PydanticAI (`MCPToolset`)": "pydantic-ai-slim",
    "OpenAI Agents SDK (`MCPServerStdio`)": "openai-agents",
    "Agno (`MCPTools`)": "agno",
    "fastmcp (`Client`)": "fastmcp-slim",
}


def test_the_guide_names_the_client_versions_installed_here() -> None:
    rows = dict(re.findall(r"^\| ([^|]+?) \| ([0-9][^ |]*)", DOC.read_text(encoding="utf-8"), re.MULTILINE))
    assert set(CLIENT_DISTRIBUTIONS) <= set(rows)
    wrong = {}
    for client, distribution in CLIENT_DISTRIBUTIONS.items():
        try:
            installed = metadata.version(distribution)
        except metadata.PackageNotFoundError:  # the clients extra is not installed: its test skips too
            continue
        if rows[client] != installed:
            wrong[client] = f"the guide says {rows[client]}, {installed} is installed"
    assert wrong == {}
