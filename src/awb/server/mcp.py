"""The MCP face: meta-tools over the official SDK's low-level server, an adapter over `Workbench`.

Arguments are validated with jsonschema before anything runs (the SDK does not validate hand-written
schemas). Every `AwbError` becomes an `isError` result carrying `{code, message, details}`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from jsonschema import Draft202012Validator
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions

from awb import __version__
from awb.errors import AwbError, InvalidParams, ToolNotFound
from awb.server.schemas import DESCRIPTIONS, INPUT, META_TOOLS, OUTPUT
from awb.workbench import Workbench, schema_errors

log = logging.getLogger("awb.mcp")

INSTRUCTIONS = (
    "Agent Workbench is a crafting table for tools. Search (awb_search) before you craft; craft (awb_craft) a "
    "tool when none fits, with examples; call it with awb_call; inspect or delete it when it misbehaves."
)

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def to_mcp_error(error: AwbError) -> types.CallToolResult:
    """The one mapping from workbench errors to MCP tool results."""
    payload = {"error": error.to_dict()}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(payload, default=str))],
        structured_content=payload,
        is_error=True,
    )


def _ref(arguments: dict[str, Any]) -> str:
    return str(arguments.get("tool_id") or arguments.get("name"))


class McpFace:
    """Turns MCP requests into `Workbench` calls."""

    def __init__(self, workbench: Workbench) -> None:
        self.workbench = workbench
        self.separator = "_" if workbench.config.tool_names == "underscore" else "."
        self._validators = {name: Draft202012Validator(schema) for name, schema in INPUT.items()}
        self._handlers: dict[str, Handler] = {
            "craft": self._craft,
            "call": self._call,
            "list": self._list,
            "search": self._search,
            "delete": self._delete,
            "inspect": self._inspect,
        }
        self.server: Server[Any] = Server(
            "agent-workbench",
            version=__version__,
            instructions=INSTRUCTIONS,
            on_list_tools=self._on_list_tools,
            on_call_tool=self._on_call_tool,
        )

    def meta_name(self, verb: str) -> str:
        return f"awb{self.separator}{verb}"

    def initialization_options(self) -> InitializationOptions:
        return self.server.create_initialization_options(NotificationOptions(tools_changed=True))

    # --- protocol handlers --------------------------------------------------------------------

    def list_tools(self) -> list[types.Tool]:
        return [
            types.Tool(
                name=self.meta_name(verb),
                description=DESCRIPTIONS[verb],
                input_schema=INPUT[verb],
                output_schema=OUTPUT[verb],
            )
            for verb in META_TOOLS
        ]

    async def _on_list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.list_tools())

    async def _on_call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await self.call(params.name, params.arguments)

    async def call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        """Run one tool call; never raises for anything an agent can send."""
        started = time.perf_counter()
        arguments = {} if arguments is None else arguments
        prefix = self.meta_name("")
        verb = name[len(prefix) :] if name.startswith(prefix) else ""
        try:
            handler = self._handlers.get(verb)
            if handler is None:
                raise ToolNotFound(f"no MCP tool named {name!r}", name=name)
            problems = schema_errors(self._validators[verb], arguments)
            if problems:
                raise InvalidParams(f"invalid arguments for {name}", errors=problems)
            structured = await handler(arguments)
        except AwbError as error:
            log.info("mcp %s -> %s (%.1f ms)", name, error.code, (time.perf_counter() - started) * 1000)
            return to_mcp_error(error)
        except Exception as error:  # the server must survive anything a tool or agent does
            log.exception("mcp %s failed unexpectedly", name)
            return to_mcp_error(AwbError(f"internal error: {type(error).__name__}: {error}"))
        log.info("mcp %s ok (%.1f ms)", name, (time.perf_counter() - started) * 1000)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(structured, default=str))],
            structured_content=structured,
        )

    # --- meta-tools ---------------------------------------------------------------------------

    async def _craft(self, arguments: dict[str, Any]) -> dict[str, Any]:
        tool = await self.workbench.craft(arguments)
        return {
            "tool_id": tool.tool_id,
            "name": tool.name,
            "version": tool.version,
            "runtime": tool.runtime,
            "memory_level": tool.memory_level,
        }

    async def _call(self, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.workbench.call(_ref(arguments), arguments.get("params") or {})
        return result.model_dump(mode="json")

    async def _list(self, arguments: dict[str, Any]) -> dict[str, Any]:
        tools = self.workbench.list_tools(
            memory_level=arguments.get("memory_level"),
            tag=arguments.get("tag"),
            query=arguments.get("query"),
            limit=arguments.get("limit", 50),
        )
        return {"tools": [t.model_dump(mode="json") for t in tools], "count": len(tools)}

    async def _search(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.workbench.search(arguments["query"], limit=arguments.get("limit", 10)).model_dump(mode="json")

    async def _delete(self, arguments: dict[str, Any]) -> dict[str, Any]:
        tool = self.workbench.delete(_ref(arguments))
        return {"tool_id": tool.tool_id, "name": tool.name, "status": "deleted"}

    async def _inspect(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.workbench.inspect(_ref(arguments)).model_dump(mode="json")


def build_server(workbench: Workbench) -> McpFace:
    return McpFace(workbench)
