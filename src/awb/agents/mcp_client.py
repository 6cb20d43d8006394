"""Connect to the MCP servers a run names and put their tools into a `Toolbox`.

A server is named by a URL or an `HttpServer` (streamable HTTP, with headers), a command line or
`StdioServerParameters` (stdio), or an in-process SDK server (tests and embedding). A command line
inherits this process's environment, so `AWB_*` settings reach a workbench started that way.
"""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent, Tool

from awb.agents import mcp_http
from awb.agents.errors import ServerUnavailable
from awb.agents.mcp_http import mcp_http_client
from awb.agents.toolbox import Handler, Lister, ListWatch, Toolbox, ToolOutcome, ToolSpec
from awb.errors import underlying

log = logging.getLogger("awb.agents.mcp")


@dataclass(frozen=True)
class HttpServer:
    """A streamable HTTP server that needs headers (an API key, a tenant)."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    #: Connect only to public addresses (`awb.agents.public_reach`): the URL came from someone who may
    #: not reach this machine's own network.
    public_only: bool = False

    def __repr__(self) -> str:  # headers often hold credentials
        return f"HttpServer(url={self.url!r}, headers=[{', '.join(self.headers)}])"


ServerTarget = str | Sequence[str] | StdioServerParameters | HttpServer | Server[Any] | MCPServer

#: A server that pages its tool list forever must not hang the run.
_MAX_PAGES = 50
#: How long a 2026-07-28 server may take to acknowledge the `subscriptions/listen` stream.
_LISTEN_ACK_SECONDS = 5.0
_LIST_CHANGED = "notifications/tools/list_changed"


def client_target(target: ServerTarget) -> Server[Any] | MCPServer | StdioServerParameters | str:
    if isinstance(target, Server | MCPServer | StdioServerParameters):
        return target
    if isinstance(target, HttpServer):
        return target.url
    if isinstance(target, str) and target.startswith(("http://", "https://")):
        return target
    argv = shlex.split(target) if isinstance(target, str) else list(target)
    if not argv:
        raise ServerUnavailable("an MCP server needs a command or a URL")
    return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))


async def _open(stack: AsyncExitStack, target: ServerTarget, watch: ListWatch) -> Client:
    async def on_message(message: Any) -> None:
        # 2025-11-25 sessions hear of list changes as notifications (2026-07-28 ones on a listen stream).
        if getattr(message, "method", None) == _LIST_CHANGED:
            watch.stale = True

    opened = client_target(target)
    if isinstance(opened, str):  # a URL: through a client of ours, whose replies are capped (awb.agents.mcp_http)
        headers = target.headers if isinstance(target, HttpServer) else {}
        public_only = isinstance(target, HttpServer) and target.public_only
        http = await stack.enter_async_context(mcp_http_client(headers, public_only=public_only))
        transport = streamable_http_client(opened, http_client=http)
        return await stack.enter_async_context(Client(transport, message_handler=on_message))
    return await stack.enter_async_context(Client(opened, message_handler=on_message))


async def _follow(stack: AsyncExitStack, name: str, client: Client, watch: ListWatch) -> None:
    """Follow the server's tool-list changes when it offers them, so the toolbox re-reads its tools only
    after a change. Without the offer (or when the stream drops) the toolbox re-reads at every refresh."""
    tools = client.server_capabilities.tools
    if tools is None or not tools.list_changed:
        return
    ready = anyio.Event()

    async def listen() -> None:
        try:
            async with client.listen(tools_list_changed=True) as stream:
                watch.following = bool(stream.honored.tools_list_changed)
                ready.set()
                async for _ in stream:
                    watch.stale = True
        except ListenNotSupportedError:
            watch.following = True  # a 2025-11-25 session: the notifications reach `on_message`
        except Exception:  # boundary: a dropped stream only means re-reading the list every time
            log.info("the tool-list stream of MCP server %r ended; re-listing its tools at each refresh", name)
        finally:
            if not ready.is_set():
                ready.set()
            elif watch.following:
                watch.following, watch.stale = False, True

    tasks = await stack.enter_async_context(anyio.create_task_group())
    stack.callback(tasks.cancel_scope.cancel)  # unwound before the client closes
    tasks.start_soon(listen)
    with anyio.move_on_after(_LISTEN_ACK_SECONDS):
        await ready.wait()


def error_code(result: CallToolResult) -> str | None:
    """The error code an MCP tool result carries: awb's `{"error": {"code": ...}}`, or a top-level `code`."""
    content = result.structured_content
    if not isinstance(content, dict):
        return None
    error = content.get("error")
    code = error.get("code") if isinstance(error, dict) else content.get("code")
    return code if isinstance(code, str) else None


def describe_result(result: CallToolResult) -> Any:
    if result.structured_content is not None and not result.is_error:
        return result.structured_content
    texts = [b.text if isinstance(b, TextContent) else f"[{b.type} content]" for b in result.content]
    return "\n".join(texts)


def _handler(client: Client, tool: str) -> Handler:
    async def call(arguments: dict[str, Any]) -> ToolOutcome:
        try:
            result = await client.call_tool(tool, arguments)
        except Exception as err:  # boundary: any transport or protocol failure is an observation
            return ToolOutcome(ok=False, payload=f"{type(err).__name__}: {err}", error_code="transport_error")
        if result.is_error:
            return ToolOutcome(ok=False, payload=describe_result(result), error_code=error_code(result) or "tool_error")
        return ToolOutcome(ok=True, payload=describe_result(result))

    return call


async def _list_tools(client: Client) -> list[Tool]:
    """Every page of the server's tool list, at most `_MAX_PAGES` of them and one reply's worth of bytes."""
    tools: list[Tool] = []
    cursor: str | None = None
    listed = 0
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        # Each page is one reply, capped; pages on pages must not pile up more than one reply's worth.
        listed += sum(len(tool.model_dump_json()) for tool in page.tools)
        if listed > mcp_http.MAX_REPLY_BYTES:
            raise ServerUnavailable(f"the server's tool list is over {mcp_http.MAX_REPLY_BYTES} bytes")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


@asynccontextmanager
async def connect_servers(servers: Mapping[str, ServerTarget]) -> AsyncIterator[Toolbox]:
    """Open every server, list its tools into one toolbox, and close them all on exit.

    Raises `ServerUnavailable` naming the server that failed, and passes on what the body raises, each as
    itself: an exception leaving an open SDK client comes out of its task groups wrapped in exception
    groups, and a server that failed its tool list (or a body's own `AwbError`) reached the caller as an
    `ExceptionGroup`, which the REST face answered with a 500 instead of a 502."""
    toolbox = Toolbox()
    failure: ServerUnavailable | None = None
    try:
        async with AsyncExitStack() as stack:
            try:
                await _connect_all(stack, servers, toolbox)
            except ServerUnavailable as err:
                failure = err  # raised once the clients opened so far are closed, outside their task groups
            else:
                yield toolbox
    except BaseExceptionGroup as group:
        sole = _sole(group)
        if failure is not None:
            raise failure from sole
        if sole is group:
            raise
        raise sole from None
    if failure is not None:
        raise failure


async def _connect_all(stack: AsyncExitStack, servers: Mapping[str, ServerTarget], toolbox: Toolbox) -> None:
    for name, target in servers.items():
        if "." in name:
            raise ServerUnavailable(f"server name {name!r} must not contain '.'", server=name)
        watch = ListWatch()
        try:
            client = await _open(stack, target, watch)
            await _follow(stack, name, client, watch)
            tools = await _list_tools(client)
        except ServerUnavailable:
            raise
        except Exception as err:  # boundary: report which server failed, whatever the cause
            raise ServerUnavailable(f"cannot reach MCP server {name!r}: {underlying(err)}", server=name) from err
        for spec, handler in _entries(name, client, tools):
            toolbox.add(spec, handler)
        toolbox.relists(name, _lister(name, client), watch)


def _sole(group: BaseExceptionGroup[Any]) -> BaseException:
    """The one exception inside `group` and the groups nested in it, or `group` when it holds several."""
    found: BaseException = group
    while isinstance(found, BaseExceptionGroup) and len(found.exceptions) == 1:
        found = found.exceptions[0]
    return group if isinstance(found, BaseExceptionGroup) else found


def _entries(name: str, client: Client, tools: list[Tool]) -> list[tuple[ToolSpec, Handler]]:
    return [
        (
            ToolSpec(
                name=f"{name}.{tool.name}",
                description=tool.description or "",
                input_schema=tool.input_schema,
                namespace=name,
            ),
            _handler(client, tool.name),
        )
        for tool in tools
    ]


def _lister(name: str, client: Client) -> Lister:
    async def relist() -> list[tuple[ToolSpec, Handler]]:
        return _entries(name, client, await _list_tools(client))

    return relist
