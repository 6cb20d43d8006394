"""A blueprint's arms (and its knowledge) as Agno tools, for the Agno target (extra `[agno]`).

MCP servers and this workbench are Agno's own `MCPTools`, so the compiled agent is an ordinary Agno agent:
a command line runs the server over stdio, a URL reaches it over streamable HTTP, both through awb's
transports, which cap what a server sends as in the awb runtime and, where the runtime allows public addresses
only, dial public ones only, as it does (`awb.blueprints.compile.mcp_arm_target`). Tavily and knowledge search
are async functions over awb's own clients, so `allowed_domains` and the knowledge limits hold exactly as in
the awb runtime. One tool hook counts, times and logs every call in the run's journal, so
`max_tool_calls` spans a whole team or workflow, as it does there.

Importing this module imports Agno: `awb.blueprints.agno_target` does so only once Agno is known to be there.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
from agno.db.base import AsyncBaseDb
from agno.tools.function import ToolResult
from agno.tools.mcp import MCPTools
from agno.tools.mcp.params import StreamableHTTPClientParams
from fastmcp import Client
from mcp.server import Server
from mcp.server.mcpserver import MCPServer

from awb.agents.errors import ServerUnavailable
from awb.agents.mcp_client import HttpServer, ServerTarget, client_target
from awb.blueprints.agno_transports import capped_transport
from awb.blueprints.compile import WORKBENCH_NAMESPACE, RuntimeOptions, mcp_arm_target
from awb.blueprints.journal import LIMIT_REACHED, RunJournal
from awb.blueprints.knowledge import DEFAULT_RESULTS, TOOL_NAME, KnowledgeLibrary, tool_description
from awb.blueprints.schema import Blueprint, McpArm, TavilySearchArm, WorkbenchArm
from awb.blueprints.tavily import tavily_handler
from awb.errors import AwbError, Unavailable, underlying
from awb.meta_tools import served_names

#: How Agno's MCP entrypoint (a tool's error result; a request that failed, such as one whose reply was over the
#: cap) and our own functions begin the text of a failed call.
_FAILED = re.compile(r"Error from MCP tool|MCP tool '[^']*' failed: |Error: ")


class ArmTools(MCPTools):
    """Agno's `MCPTools` for one arm: its functions named `<arm>_<tool>`, narrowed to the arm's allowlist.

    The allowlist is applied after listing, so names the server does not have are ignored (as in the awb
    runtime) and a workbench's meta-tools match whether it names them `awb_craft` or `awb.craft`. Tools are
    listed again at the start of every agent run (`refresh_connection`), so a tool a workbench equipped in
    one workflow step is offered to the next.
    """

    def __init__(
        self, arm: str, allowed: Collection[str] | None, *, public_only: bool = False, **connection: Any
    ) -> None:
        # No `header_provider`, ever: with one, Agno opens per-run sessions through fastmcp's own transports,
        # past `_connect` and so past the cap and the public-only dialling.
        super().__init__(name=arm, tool_name_prefix=arm, refresh_connection=True, **connection)
        self.arm = arm
        self.allowed = None if allowed is None else frozenset(allowed)
        #: Dial public addresses only (`awb.agents.public_reach`), as the awb runtime does for this arm.
        self.public_only = public_only

    async def _connect(self) -> None:
        """Agno's own connect (`MCPTools._connect`), through awb's capped transports instead of fastmcp's
        (`awb.blueprints.agno_transports`). A session a run left open is reused, as Agno does."""
        if self._initialized:
            return
        if self.session is None:
            transport = capped_transport(self.server_params, public_only=self.public_only)
            client: Any = Client(transport, timeout=float(self.timeout_seconds), mode=self.protocol_mode)
            # Where Agno keeps its client, to close it with the toolkit.
            self._session_context = client
            self.session = await client.__aenter__()
            self._active_contexts.append(client)
        await self.initialize()

    async def build_tools(self) -> None:
        await super().build_tools()
        if self.allowed is not None:
            for name in list(self.functions):
                if name.removeprefix(f"{self.arm}_") not in self.allowed:
                    del self.functions[name]


def _connection(arm: str, target: ServerTarget, timeout_seconds: int) -> dict[str, Any]:
    """`MCPTools` keyword arguments that reach `target`: streamable HTTP for a URL, stdio for a command."""
    if isinstance(target, Server | MCPServer):
        raise Unavailable(f"the agno target reaches MCP server {arm!r} by URL or command, not in-process", arm=arm)
    if isinstance(target, str) and target.startswith(("http://", "https://")):
        target = HttpServer(target)
    if isinstance(target, HttpServer):
        params = StreamableHTTPClientParams(url=target.url, headers=dict(target.headers), timeout=timeout_seconds)
        return {
            "transport": "streamable-http",
            "server_params": params,
            "timeout_seconds": timeout_seconds,
            "public_only": target.public_only,
        }
    # A command line inherits this process's environment, as in the awb runtime.
    return {"transport": "stdio", "server_params": client_target(target), "timeout_seconds": timeout_seconds}


def mcp_toolkits(blueprint: Blueprint, options: RuntimeOptions) -> list[ArmTools]:
    """One unconnected `MCPTools` per `mcp` or `workbench` arm (connect them with `connected`)."""
    timeout = blueprint.spine.timeout_seconds
    toolkits: list[ArmTools] = []
    for arm in blueprint.arms:
        if isinstance(arm, McpArm):
            target = mcp_arm_target(arm, options)
            toolkits.append(ArmTools(arm.name, arm.tools, **_connection(arm.name, target, timeout)))
        elif isinstance(arm, WorkbenchArm) and options.workbench_target is not None:
            allowed = None if arm.tools is None else [n for name in arm.tools for n in served_names(name)]
            connection = _connection(WORKBENCH_NAMESPACE, options.workbench_target, timeout)
            toolkits.append(ArmTools(WORKBENCH_NAMESPACE, allowed, **connection))
    return toolkits


def tavily_function(
    blueprint: Blueprint, arm: TavilySearchArm, options: RuntimeOptions, journal: RunJournal
) -> Callable[[str], Awaitable[str]]:
    handler = tavily_handler(
        arm,
        api_key=options.environ.get("TAVILY_API_KEY"),
        base_url=options.tavily_base_url,
        allowed_domains=blueprint.spine.allowed_domains,
        journal=journal,
    )

    async def tavily_search(query: str) -> str:
        """Search the web for current information; returns results with title, url and content."""
        outcome = await handler({"query": query})
        return str(outcome.payload) if outcome.ok else f"Error: {outcome.payload}"

    return tavily_search


def knowledge_function(library: KnowledgeLibrary, name: str) -> Callable[[str, int], Awaitable[str]]:
    async def search_knowledge(query: str, max_results: int = DEFAULT_RESULTS) -> str:
        try:
            return str(await library.search(name, query, max_results))
        except AwbError as err:
            return f"Error: {err.message}"

    search_knowledge.__name__ = TOOL_NAME
    search_knowledge.__doc__ = tool_description(name)
    return search_knowledge


def _failed(result: Any) -> bool:
    text = result.content if isinstance(result, ToolResult) else result
    return isinstance(text, str) and _FAILED.match(text) is not None


def journal_hook(journal: RunJournal) -> Callable[..., Awaitable[Any]]:
    """An Agno tool hook: every call counted against `max_tool_calls`, timed and logged."""

    async def hook(function_name: str, function_call: Callable[..., Any], arguments: dict[str, Any]) -> Any:
        if not journal.admit(function_name):
            return LIMIT_REACHED
        started = anyio.current_time()
        success, result = False, None
        try:
            result = function_call(**arguments)
            if isinstance(result, Awaitable):
                result = await result
            success = not _failed(result)
            return result
        finally:
            output = result.content if isinstance(result, ToolResult) else result
            await journal.record(function_name, arguments, started, success=success, output=output)

    return hook


def _parts(target: Any) -> list[Any]:
    """An Agno agent, team or workflow and everything inside it: members, and the agents of its steps."""
    parts: list[Any] = []
    pending = [target]
    while pending:
        item = pending.pop()
        parts.append(item)
        pending.extend(getattr(item, "members", None) or [])
        for step in getattr(item, "steps", None) or []:
            pending.extend(part for part in (getattr(step, "agent", None), getattr(step, "team", None)) if part)
    return parts


def toolkits_of(target: Any) -> list[MCPTools]:
    """Every `MCPTools` an Agno agent, team or workflow holds (members and steps included), each once."""
    found: dict[int, MCPTools] = {}
    for part in _parts(target):
        for tool in getattr(part, "tools", None) or []:
            if isinstance(tool, MCPTools):
                found.setdefault(id(tool), tool)
    return list(found.values())


async def close_dbs(target: Any) -> None:
    """Release the connections of every Agno db in `target` (an async SQLite db pools them until closed);
    the db opens new ones if the target runs again."""
    seen: set[int] = set()
    for part in _parts(target):
        db = getattr(part, "db", None)
        if isinstance(db, AsyncBaseDb) and id(db) not in seen:
            seen.add(id(db))
            await db.close()


@asynccontextmanager
async def connected(toolkits: Collection[MCPTools]) -> AsyncIterator[None]:
    """Connect every toolkit for one run and close each on the way out.

    Agno would connect them itself, but a server it cannot reach only costs the agent that server's tools,
    with a warning in the log; here it ends the run with `server_unavailable` naming the arm. Toolkits
    connected here are left alone by Agno's run, which closes only those it opened.
    """
    async with AsyncExitStack() as stack:
        for toolkit in toolkits:
            try:
                await stack.enter_async_context(toolkit)
            except Exception as err:  # boundary: whatever the transport raised, say which server it was
                raise ServerUnavailable(
                    f"cannot reach MCP server {toolkit.name!r}: {underlying(err)}", server=toolkit.name
                ) from err
            if not toolkit.initialized:
                raise ServerUnavailable(f"MCP server {toolkit.name!r} did not list its tools", server=toolkit.name)
        yield
