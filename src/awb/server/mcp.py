"""The MCP face: meta-tools over the official SDK's low-level server, an adapter over `Workbench`.

Arguments are validated with jsonschema before anything runs (the SDK does not validate hand-written
schemas). Every `AwbError` becomes an `isError` result carrying `{code, message, details}`.
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
import pydantic_core
from mcp import MCPError
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions

from awb import __version__
from awb.calling import CallResult
from awb.errors import AwbError, InvalidParams, ToolNotFound
from awb.inventory.models import Tool
from awb.meta_tools import META_VERBS, MetaVerb, meta_tool_name, reserved_name, served_names, verb_of
from awb.safe_text import Verbatim, visible
from awb.sandbox.base import executing_for
from awb.schema_bounds import SchemaTooExpensive
from awb.schema_rules import MCP_INPUT_RULE, structured_result
from awb.server import guidance
from awb.server.clients import client_of
from awb.server.heap import WarmUp
from awb.server.listing import EquippedListing, tool_names_warning
from awb.server.notify import ListChangedNotifier
from awb.server.schemas import INPUT, OUTPUT
from awb.server.verbs import Handler, MetaVerbs
from awb.text import NOT_A_JSON_NUMBER, NOT_UNICODE, cap_text, unencodable_path
from awb.validation import ToolSchema
from awb.workbench import Workbench

log = logging.getLogger("awb.mcp")

#: awb_call's reply: a call's record and its result, in the order CallResult declares them.
_CALL_FIELDS = tuple(CallResult.model_fields)
#: Verbs whose result tells the caller the tool list changed.
_LIST_CHANGING = frozenset({"equip", "unequip"})
#: The meta-tools whose input schema declares a header a 2026-07-28 client mirrors (`x-mcp-header`): none
#: today. The SDK checks a call's `Mcp-Param-*` headers against the schema it is lent, walking it twice
#: on every call (~25 us for awb_call's, as much as every awb ASGI layer together); a schema that declares
#: none has nothing to check, so the others are not lent.
_HEADER_SCHEMAS = {verb: schema for verb, schema in INPUT.items() if "x-mcp-header" in json.dumps(schema)}


def json_text(value: Any) -> str:
    """The JSON text copy of a result (MCP asks for one next to `structuredContent`). pydantic-core
    encodes it in a quarter of the time `json.dumps` takes; anything it cannot encode becomes str()."""
    return pydantic_core.to_json(value, fallback=str).decode()


class EncodedResult(dict[str, Any]):
    """awb_call's reply whose `result` is JSON already (`CallResult.result_json`): its text reuses it."""

    def __init__(self, fields: dict[str, Any], result_json: str) -> None:
        super().__init__(fields)
        self.result_json = result_json


def reply_text(structured: dict[str, Any]) -> str:
    """The text copy of a reply. A large result the runtime encoded for the output cap goes in as that
    text, between the record's fields: encoding it again cost ~6 ms of the event loop for a 4 MB result.
    Encoding those fields on their own costs an extra call or two (microseconds)."""
    if not isinstance(structured, EncodedResult):
        return json_text(structured)
    keys = list(structured)
    at = keys.index("result")
    before = json_text({key: structured[key] for key in keys[:at]})[1:-1]
    after = json_text({key: structured[key] for key in keys[at + 1 :]})[1:-1]
    parts = (before, f'"result":{structured.result_json}', after)
    return "{" + ",".join(part for part in parts if part) + "}"


def to_mcp_error(error: AwbError) -> types.CallToolResult:
    """The one mapping from workbench errors to MCP tool results."""
    return types.CallToolResult.model_validate(_error_reply(error))


def _error_reply(error: AwbError) -> dict[str, Any]:
    payload = {"error": error.to_dict()}
    return _tool_reply(json_text(payload), payload, is_error=True)


def _tool_reply(text: str, structured: Any, *, is_error: bool = False, meta: Any = None) -> dict[str, Any]:
    """A tools/call result as the wire has it (what `CallToolResult.model_dump(by_alias=True, mode="json",
    exclude_none=True)` gives). The SDK validates a handler's result against the protocol's schema and
    dumps it either way: a model built, validated and dumped first cost ~6 us more on every call."""
    reply: dict[str, Any] = {"content": [{"type": "text", "text": text}], "structuredContent": structured}
    if meta is not None:
        reply["_meta"] = meta
    reply["isError"] = is_error
    reply["resultType"] = "complete"
    return reply


def _not_json(name: str, arguments: dict[str, Any]) -> InvalidParams | None:
    """The error for a name or arguments holding a lone surrogate or a number that is not finite, or None.

    JSON's `\\ud800` escape carries a lone surrogate, and the 2026-07-28 HTTP path parses bodies with
    `json.loads`, which accepts it; past this point it fails wherever the text meets UTF-8 (SQLite, a
    tool's worker, the response's encoder). Every transport's parser reads `NaN`, `Infinity` and `1e309`
    as floats that are not finite: a tool handed one failed (`invalid_output` from Python, a JavaScript
    `SyntaxError`) and the failure was counted against the tool; a schema holding one was stored with
    `null` in its place."""
    rule = f"{NOT_UNICODE}: send UTF-8 text"
    if unencodable_path(name) is not None:
        return InvalidParams(f"the tool name '{visible(name)}' is {rule}", name=visible(name))
    path = unencodable_path(arguments, numbers=True)
    if path is None:
        return None
    found: Any = arguments
    for step in path:
        found = found[step]
    # The path ends at the value found, or at a key that is the text found (whose value may be anything).
    if isinstance(found, float) and not (path and unencodable_path(path[-1]) is not None):
        rule = f"{NOT_A_JSON_NUMBER}: send a finite number"
    pointer = "/" + "/".join(visible(str(step)) for step in path)
    return _invalid_arguments(visible(name), [{"path": pointer, "message": rule}])


def _invalid_arguments(name: str, problems: list[dict[str, str]]) -> InvalidParams:
    first = problems[0]
    message = f"invalid arguments for {name}: {first['path']}: {first['message']}"
    if first["path"] == "/input_schema":
        message += f" ({MCP_INPUT_RULE})"
    return InvalidParams(message, errors=problems)


class _Server(Server[Any]):
    """The SDK server, advertising `tools.listChanged` on every transport.

    The streamable HTTP manager and the in-memory transport build initialization options without
    notification options, which would advertise `listChanged: false`.
    """

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True), experimental_capabilities, extensions
        )


class McpFace:
    """Turns MCP requests into `Workbench` calls."""

    def __init__(self, workbench: Workbench, *, warm_up: WarmUp | None = None) -> None:
        self.workbench = workbench
        #: A server's (not a library user's): freezes the heap after the first calls (awb.server.heap).
        self._warm_up = warm_up
        self.tool_names = workbench.config.tool_names
        self._descriptions = guidance.descriptions(self.tool_names)
        # Compiled on first use: jsonschema is not imported before the server serves (see `_validator`).
        self._validators: dict[str, ToolSchema] = {}
        # awb_call's answer is the face's own (the hot path, beside the validation); the other verbs' are
        # `awb.server.verbs`.
        verbs = MetaVerbs(workbench, self.tool_names, self._ref_checked)
        self._handlers: dict[MetaVerb, Handler] = {"call": self._call, **verbs.handlers()}
        self.notifier = ListChangedNotifier(workbench)
        self.equipped_listing = EquippedListing(workbench)
        warning = tool_names_warning(workbench.config)
        if warning:
            log.warning("%s", warning)
        self.server: Server[Any] = _Server(
            "agent-workbench",
            version=__version__,
            instructions=guidance.instructions(self.tool_names),
            lifespan=self._lifespan,
            get_tool_input_schema=self._tool_input_schema,
            on_list_tools=self._on_list_tools,
            on_call_tool=self._on_call_tool,
            on_subscriptions_listen=self.notifier.listen_handler,
        )
        self.server.middleware.append(self.notifier.middleware)

    def _validator(self, verb: MetaVerb) -> ToolSchema:
        validator = self._validators.get(verb)
        if validator is None:
            validator = self._validators[verb] = ToolSchema.compile(INPUT[verb], trusted=True)
        return validator

    def meta_name(self, verb: MetaVerb) -> str:
        return meta_tool_name(verb, self.tool_names)

    def initialization_options(self) -> InitializationOptions:
        return self.server.create_initialization_options(NotificationOptions(tools_changed=True))

    @asynccontextmanager
    async def _lifespan(self, server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        # Entered once per stdio process and once by the HTTP session manager: the notifier runs alongside.
        async with self.notifier.running():
            yield {}

    def _tool_input_schema(self, name: str) -> Mapping[str, Any] | None:
        verb = verb_of(name, self.tool_names)
        if verb is not None:
            return _HEADER_SCHEMAS.get(verb)
        if self.workbench.lane.remote:
            # The SDK asks on the event loop, before it dispatches the call (to check Mcp-Param headers): a
            # shared inventory that may not answer is not read here. The schema this server last listed
            # for the name stands in; None skips that check, and the call checks its params as ever.
            return self.equipped_listing.listed_schema(name)
        tool = self._equipped(name)
        return None if tool is None else tool.input_schema

    def _equipped(self, name: str) -> Tool | None:
        tool = self.workbench.store.get_by_name(name)
        if tool is None or not tool.equipped or tool.status != "active":
            return None
        # Never listed (see `served_tool`), so never a tool of its own: `AWB_CALL` is not awb_call's double.
        return None if reserved_name(tool.name) else tool

    # --- protocol handlers --------------------------------------------------------------------

    def list_tools(self) -> list[types.Tool]:
        """The meta-tools, then every equipped tool as a tool of its own."""
        meta = [
            types.Tool(
                name=self.meta_name(verb),
                description=self._descriptions[verb],
                input_schema=INPUT[verb],
                output_schema=OUTPUT[verb],
            )
            for verb in META_VERBS
        ]
        return meta + self.equipped_listing.tools()

    async def _on_list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        # Off the event loop: the equipped set is read from the store, and a shared inventory may make
        # that read wait (up to `inventory_pool_wait_seconds` for a connection while its database is
        # down), which on the loop would hold up every other client's request for as long.
        try:
            tools = await self.workbench.lane.work(self.list_tools)
        except AwbError as error:
            # A protocol request has no isError result: the JSON-RPC error says why, with the same
            # structured error a tool call would carry (not the SDK's bare "Internal server error").
            raise MCPError(types.INTERNAL_ERROR, error.message, {"error": error.to_dict()}) from None
        return types.ListToolsResult(tools=tools)

    async def _on_call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        # Whatever the call runs (a tool, a craft's examples) counts against this client's share of slots. In
        # process (a blueprint's `workbench` arm, run for a REST request), the client that face says it runs for.
        caller = client_of(ctx)
        client = executing_for.set(caller if caller is not None else executing_for.get())
        try:
            reply = await self._reply(params.name, params.arguments, lambda: self.notifier.can_notify(ctx))
        finally:
            executing_for.reset(client)
        # The SDK takes a result as a model or as its wire form (a dict), which it validates all the same.
        return reply  # type: ignore[return-value]

    async def call(
        self, name: str, arguments: dict[str, Any] | None, *, notified: Callable[[], bool] | None = None
    ) -> types.CallToolResult:
        """Run one tool call; never raises for anything an agent can send.

        `notified` says whether the caller hears about tool-list changes; when it does not, results of
        equip and unequip carry a `hint` to list tools again."""
        return types.CallToolResult.model_validate(await self._reply(name, arguments, notified))

    async def _reply(
        self, name: str, arguments: dict[str, Any] | None, notified: Callable[[], bool] | None
    ) -> dict[str, Any]:
        """`call`'s result in its wire form (`_tool_reply`)."""
        started = time.perf_counter()
        if self._warm_up is not None:
            self._warm_up.counted()
        arguments = {} if arguments is None else arguments
        verb = verb_of(name, self.tool_names)
        try:
            not_json = _not_json(name, arguments)
            if not_json is not None:
                raise not_json
            if verb is None:
                return await self._call_equipped(name, arguments, started)
            handler = self._handlers[verb]
            try:
                problems = await self._validator(verb).problems_off_loop(arguments)
            except SchemaTooExpensive as exc:
                raise InvalidParams(f"arguments for {name} cannot be checked: {exc}") from None
            if problems:
                raise _invalid_arguments(name, problems)
            structured = await handler(arguments)
            if verb in _LIST_CHANGING and notified is not None and not notified():
                structured["hint"] = guidance.list_changed_hint(self.tool_names)
            text = reply_text(structured)  # in the try: whatever cannot be encoded is an error, not a crash
        except AwbError as error:
            log.info("mcp %s -> %s (%.1f ms)", name, error.code, (time.perf_counter() - started) * 1000)
            return _error_reply(error)
        except Exception as error:  # the server must survive anything a tool or agent does
            # The frames, and the message capped: an exception can carry megabytes of tool output.
            frames = "".join(traceback.format_tb(error.__traceback__))
            log.error("mcp %s failed unexpectedly: %s\n%s", name, cap_text(repr(error), 2000), Verbatim(frames))
            return _error_reply(AwbError(f"internal error: {type(error).__name__}: {error}"))
        log.debug("mcp %s ok (%.1f ms)", name, (time.perf_counter() - started) * 1000)
        return _tool_reply(text, structured)

    async def _call_equipped(self, name: str, arguments: dict[str, Any], started: float) -> dict[str, Any]:
        """An equipped tool called by its own name: the same path as the `call` meta-tool, as informative.

        structuredContent is the result (wrapped as {"result": ...} unless the tool's output schema
        describes an object, matching the listed outputSchema); the call's record is in `_meta`."""
        tool = await self.workbench.lane.call(self._equipped, name)
        if tool is None:
            raise self._not_served(name)
        result = await self.workbench.call(tool.tool_id, arguments)
        log.debug("mcp %s ok (%.1f ms)", name, (time.perf_counter() - started) * 1000)
        record = result.model_dump(mode="json", exclude={"result"})
        text = result.result_json or json_text(result.result)
        return _tool_reply(text, structured_result(tool.output_schema, result.result), meta=record)

    def _not_served(self, name: str) -> ToolNotFound:
        """The error for a name this server does not serve, pointing at the name it serves instead."""
        # The other style's name of a meta-tool (`awb_craft` on a dotted server): a client configured
        # for another server, told the name that works here.
        verb = next((v for v in META_VERBS if name in served_names(v)), None)
        if verb is not None:
            served = self.meta_name(verb)
            return ToolNotFound(
                f"no MCP tool named {name!r}; this server serves that meta-tool as {served} "
                f'(tool_names: "{self.tool_names}")',
                name=name,
                served_as=served,
            )
        return ToolNotFound(
            f"no MCP tool named {name!r}; crafted tools that are not equipped are called with {self.meta_name('call')}",
            name=name,
        )

    # --- naming a tool, and awb_call ----------------------------------------------------------

    def _ref(self, arguments: dict[str, Any]) -> str:
        """The one rule behind "tool_id or name": at least one; when both, the same tool."""
        tool_id, name = arguments.get("tool_id"), arguments.get("name")
        if tool_id is None and name is None:
            raise InvalidParams("give tool_id or name", fields=["tool_id", "name"])
        if tool_id is not None and name is not None:
            tool = self.workbench.resolve(tool_id, allow_deleted=True)
            if tool.name != name:
                raise InvalidParams(
                    f"tool_id {tool_id!r} is the tool named {tool.name!r}, not {name!r}; give one of them",
                    tool_id=tool_id,
                    name=name,
                )
        return str(tool_id if tool_id is not None else name)

    async def _ref_checked(self, arguments: dict[str, Any]) -> str:
        """`_ref`, whose check of an id and a name given together reads the store: on the store's lane."""
        if arguments.get("tool_id") is not None and arguments.get("name") is not None:
            return await self.workbench.lane.call(self._ref, arguments)
        return self._ref(arguments)

    async def _call(self, arguments: dict[str, Any]) -> dict[str, Any]:
        ref = await self._ref_checked(arguments) if self.workbench.lane.remote else self._ref(arguments)
        result = await self.workbench.call(ref, arguments.get("params") or {})
        # The tool's result goes out as it came: its runtime's output is JSON already (encode_output), and
        # a mode="json" dump walked every value again on the event loop (170 ms for 99,000 empty lists,
        # more than the encoders after it together).
        # Its other fields are JSON already (text, numbers, a list of text), so they are taken as they are:
        # a `model_dump(mode="json")` of them cost three times as much, on every call.
        held = result.__dict__
        fields = {field: held[field] for field in _CALL_FIELDS}
        fields["logs"] = list(fields["logs"])
        encoded = result.result_json
        return fields if encoded is None else EncodedResult(fields, encoded)


def build_server(workbench: Workbench) -> McpFace:
    return McpFace(workbench)
