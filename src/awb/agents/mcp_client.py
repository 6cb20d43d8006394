"""Connect to the MCP servers a run names and put their tools into a `Toolbox`.

A server is named by a URL or an `HttpServer` (streamable HTTP, with headers), a command line or
`StdioServerParameters` (stdio), or an in-process SDK server (tests and embedding). A command line
inherits this process's environment, so `AWB_*` settings reach a workbench started that way.
"""

from __future__ import annotations

import logging
import math
import os
import shlex
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT, CallToolResult, TextContent, Tool

from awb.agents import mcp_http
from awb.agents.errors import ServerUnavailable
from awb.agents.mcp_http import mcp_http_client
from awb.agents.mcp_stdio import capped_stdio_client
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
#: How long a server may take to answer each request of its own (initialize, a tools/list page): a server
#: that started but never answers must not hang the run before it begins (tool calls are the run's to bound,
#: by its deadline). 30 s is the SDK's own HTTP default per operation.
CONNECT_TIMEOUT_SECONDS = 30.0
#: How long a call whose connection closed waits to learn why (a transport's failure, a reply over the limit).
_WHY_DOWN_SECONDS = 1.0
#: How long a 2026-07-28 server may take to acknowledge the `subscriptions/listen` stream.
_LISTEN_ACK_SECONDS = 5.0
_LIST_CHANGED = "notifications/tools/list_changed"


def _is_url(target: str) -> bool:
    return target.startswith(("http://", "https://"))


def client_target(target: ServerTarget) -> Server[Any] | MCPServer | StdioServerParameters | str:
    if isinstance(target, Server | MCPServer | StdioServerParameters):
        return target
    if isinstance(target, HttpServer):
        return target.url
    if isinstance(target, str) and _is_url(target):
        return target
    argv = shlex.split(target) if isinstance(target, str) else list(target)
    if not argv:
        raise ServerUnavailable("an MCP server needs a command or a URL")
    return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))


async def _open(stack: AsyncExitStack, target: ServerTarget, watch: ListWatch, timeout: float) -> Client:
    async def on_message(message: Any) -> None:
        # 2025-11-25 sessions hear of list changes as notifications (2026-07-28 ones on a listen stream).
        if getattr(message, "method", None) == _LIST_CHANGED:
            watch.stale = True

    http_target = HttpServer(target) if isinstance(target, str) and _is_url(target) else target
    if isinstance(http_target, HttpServer):
        # Through a client of ours, whose replies are capped (awb.agents.mcp_http).
        client = mcp_http_client(http_target.headers, public_only=http_target.public_only)
        http = await stack.enter_async_context(client)
        transport = streamable_http_client(http_target.url, http_client=http)
        return await stack.enter_async_context(
            Client(transport, message_handler=on_message, read_timeout_seconds=timeout)
        )
    named = client_target(target)
    if isinstance(named, StdioServerParameters):
        # Through a transport of ours, whose messages are capped (awb.agents.mcp_stdio).
        transport = capped_stdio_client(named)
        session = Client(transport, message_handler=on_message, read_timeout_seconds=timeout)
    else:
        session = Client(named, message_handler=on_message, read_timeout_seconds=timeout)
    return await stack.enter_async_context(session)


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


def _timed_out(error: BaseException) -> bool:
    """Whether a failure to connect is the server not answering in time (the SDK's request timeout),
    found inside the exception groups a transport's task groups wrap it in."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return isinstance(error, TimeoutError) or (isinstance(error, MCPError) and error.code == REQUEST_TIMEOUT)


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


@dataclass
class _Link:
    """One server's connection as its tools see it: the client, and why it went down once it has."""

    name: str
    client: Client
    down: str | None = None
    #: Set once the connection has ended and `down` says why.
    ended: anyio.Event = field(default_factory=anyio.Event)

    def gone(self) -> ServerUnavailable:
        return ServerUnavailable(f"MCP server {self.name!r} is no longer reachable: {self.down}", server=self.name)


def _handler(link: _Link, tool: str) -> Handler:
    async def call(arguments: dict[str, Any]) -> ToolOutcome:
        if link.down is not None:
            return ToolOutcome(ok=False, payload=link.gone().message, error_code=ServerUnavailable.code)
        try:
            # The client's own timeout is for the server's answers about itself; a call may take as long as
            # the run allows (its deadline cancels it).
            result = await link.client.call_tool(tool, arguments, read_timeout_seconds=math.inf)
        except Exception as err:  # boundary: any transport or protocol failure is an observation
            if isinstance(err, MCPError) and err.code == CONNECTION_CLOSED and link.down is None:
                # For good: the session does not reconnect. Its keeper says why, once the transport has ended.
                with anyio.move_on_after(_WHY_DOWN_SECONDS):
                    await link.ended.wait()
                link.down = link.down or "its connection closed"
            if link.down is not None:  # the connection went down while the call waited on it
                return ToolOutcome(ok=False, payload=link.gone().message, error_code=ServerUnavailable.code)
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


def _unavailable(name: str, error: BaseException, timeout: float) -> ServerUnavailable:
    """Why server `name` could not start, whatever the transport raised (inside its exception groups)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, ServerUnavailable):
        return error
    if _timed_out(error):
        message = f"MCP server {name!r} did not answer within {timeout:g} s ({underlying(error)})"
        return ServerUnavailable(message, server=name, seconds=timeout)
    return ServerUnavailable(f"cannot reach MCP server {name!r}: {underlying(error)}", server=name)


async def _keep(
    name: str,
    target: ServerTarget,
    watch: ListWatch,
    timeout: float,
    closing: anyio.Event,
    *,
    task_status: anyio.abc.TaskStatus[tuple[_Link, list[Tool]]],
) -> None:
    """Open server `name`, hand its link and tools to the caller, and hold the connection until `closing`.

    The connection lives in this task of its own because a transport runs its work in task groups: one that
    fails mid-run (an HTTP server that went away) fails the task it was opened in, which would otherwise be
    the run's own. Here it only ends this task: the link says the server is down, and its calls fail as
    observations. A failure before the start is `ServerUnavailable`, raised to the caller."""
    link: _Link | None = None
    try:
        async with AsyncExitStack() as stack:
            client = await _open(stack, target, watch, timeout)
            await _follow(stack, name, client, watch)
            tools = await _list_tools(client)
            link = _Link(name, client)
            task_status.started((link, tools))
            await closing.wait()
    except Exception as err:  # boundary: whatever the transport raised
        if link is None:
            raise _unavailable(name, err, timeout) from err
        link.down = underlying(err)
        log.warning("MCP server %r went down mid-run: %s", name, link.down)
    finally:
        if link is not None:
            if link.down is None and not closing.is_set():
                link.down = "its connection ended"
            link.ended.set()


@asynccontextmanager
async def connect_servers(
    servers: Mapping[str, ServerTarget], *, timeout: float = CONNECT_TIMEOUT_SECONDS, within: float = math.inf
) -> AsyncIterator[Toolbox]:
    """Open every server, list its tools into one toolbox, and close them all on exit.

    A server that does not answer a request of its start (initialize, a page of its tools) within `timeout`
    seconds is `ServerUnavailable`; one that takes that long to list its tools again later keeps those it had.
    The servers start together, and all of them within `within` seconds (a run's time budget): silent ones
    cannot add their waits up. A server that goes down mid-run fails its tools' calls (`server_unavailable`),
    never the run."""
    for name in servers:
        if "." in name:
            raise ServerUnavailable(f"server name {name!r} must not contain '.'", server=name)
    toolbox = Toolbox()
    closing = anyio.Event()
    try:
        async with anyio.create_task_group() as keepers:
            try:
                watches = {name: ListWatch() for name in servers}
                started = await _start_all(keepers, servers, watches, timeout, within, closing)
                for name, (link, tools) in started.items():
                    for spec, handler in _entries(link, tools):
                        toolbox.add(spec, handler)
                    toolbox.relists(name, _lister(link), watches[name])
                yield toolbox
            finally:
                closing.set()
    except BaseExceptionGroup as group:
        # Keepers raise nothing once started, so a group holds what this body raised (a server that could not
        # start, or the caller's own error): raised as itself, as callers expect, not wrapped.
        if len(group.exceptions) == 1 and isinstance(group.exceptions[0], Exception):
            raise group.exceptions[0] from None
        raise


async def _start_all(
    keepers: anyio.abc.TaskGroup,
    servers: Mapping[str, ServerTarget],
    watches: Mapping[str, ListWatch],
    timeout: float,
    within: float,
    closing: anyio.Event,
) -> dict[str, tuple[_Link, list[Tool]]]:
    """Start a keeper for each server, all at once, in `keepers`; their links and tools in the servers' order.

    The first server that cannot start stops the others' starts (a keeper cancelled before it started closes
    what it opened), and is raised; so is the first one still starting when `within` seconds have passed."""
    started: dict[str, tuple[_Link, list[Tool]]] = {}
    failed: dict[str, ServerUnavailable] = {}

    async def start(name: str, target: ServerTarget) -> None:
        try:
            started[name] = await keepers.start(_keep, name, target, watches[name], timeout, closing)
        except ServerUnavailable as err:
            failed[name] = err
            starting.cancel_scope.cancel()

    with anyio.move_on_after(within):
        async with anyio.create_task_group() as starting:
            for name, target in servers.items():
                starting.start_soon(start, name, target)
    # A failure cancels the other starts: those are not late, the failure is what to report.
    for name in servers:
        if name in failed:
            raise failed[name]
    for name in servers:
        if name not in started:
            message = f"MCP server {name!r} did not answer within {within:g} s (its start outlasted the run's time)"
            raise ServerUnavailable(message, server=name, seconds=within)
    return {name: started[name] for name in servers}


def _entries(link: _Link, tools: list[Tool]) -> list[tuple[ToolSpec, Handler]]:
    return [
        (
            ToolSpec(
                name=f"{link.name}.{tool.name}",
                description=tool.description or "",
                input_schema=tool.input_schema,
                namespace=link.name,
            ),
            _handler(link, tool.name),
        )
        for tool in tools
    ]


def _lister(link: _Link) -> Lister:
    async def relist() -> list[tuple[ToolSpec, Handler]]:
        if link.down is not None:
            raise link.gone()
        return _entries(link, await _list_tools(link.client))

    return relist
