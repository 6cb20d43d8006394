"""How the failures of MCP servers reach the workbench: a server that fails once connected is
`ServerUnavailable`, and what a run raises among open servers leaves them as itself, not as an exception
group."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.lowlevel import Server

from awb.agents.errors import ServerUnavailable
from awb.agents.mcp_client import connect_servers

pytestmark = pytest.mark.anyio


async def connect(target: Any) -> None:
    with anyio.fail_after(30):
        async with connect_servers({"far": target}):
            pass


async def test_a_server_that_fails_its_tool_list_is_server_unavailable_not_an_exception_group() -> None:
    """Raised inside the open clients' task groups, it came out as an ExceptionGroup: a 500 from the REST face."""

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        raise RuntimeError("no list today")

    with pytest.raises(ServerUnavailable, match="cannot reach MCP server 'far'"):
        await connect(Server("failing", on_list_tools=list_tools))


async def test_what_the_body_raises_leaves_the_servers_as_itself() -> None:
    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[])

    with anyio.fail_after(30), pytest.raises(ServerUnavailable, match="raised in the body"):
        async with connect_servers({"far": Server("fine", on_list_tools=list_tools)}):
            raise ServerUnavailable("raised in the body")
