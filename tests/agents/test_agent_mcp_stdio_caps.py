"""What an MCP server over stdio may make the workbench hold: each message at most the cap on an HTTP reply.

The SDK's stdio client gathered a line whole, however long (copying it once per 64 KB chunk as it grew): a
server a blueprint starts could fill the workbench's memory with one line. A reply over the cap fails its
call (`transport_error`) and the server stays in use, as over HTTP."""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCResponse
from pydantic import BaseModel

from awb.agents import Agent, mcp_http, run_agent
from awb.agents.errors import ServerUnavailable
from awb.agents.mcp_client import connect_servers
from awb.agents.mcp_stdio import message_kind, read_messages
from awb.agents.models import Prompt, ScriptedModel
from awb.agents.toolbox import Toolbox, ToolOutcome, ToolSpec

pytestmark = pytest.mark.anyio

HERE = Path(__file__).parent
LIMIT = 256 * 1024


@pytest.fixture(autouse=True)
def small_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_http, "MAX_REPLY_BYTES", LIMIT)


def hostile(size: int, *flags: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=[str(HERE / "hostile_stdio_server.py"), str(size), *flags]
    )


async def call(toolbox: Toolbox, name: str, arguments: dict[str, object] | None = None) -> ToolOutcome:
    spec = toolbox.resolve(f"far.{name}", "tool")
    assert spec is not None
    return await toolbox.call(spec, arguments or {})


async def test_a_reply_over_the_cap_fails_its_call_and_the_server_stays_in_use() -> None:
    with anyio.fail_after(30):
        async with connect_servers({"far": hostile(8 * LIMIT)}) as toolbox:
            flooded = await call(toolbox, "flood")
            echoed = await call(toolbox, "echo", {"text": "still here"})
    assert (flooded.ok, flooded.error_code) == (False, "transport_error")
    assert flooded.payload == f"MCPError: the MCP server's reply is over the {LIMIT}-byte limit"
    assert (echoed.ok, echoed.payload) == (True, "still here")


async def test_a_line_many_times_the_cap_is_read_through_without_being_held() -> None:
    """64 caps' worth streamed through: what the workbench allocates meanwhile stays within a few caps."""
    with anyio.fail_after(30):
        async with connect_servers({"far": hostile(64 * LIMIT)}) as toolbox:
            tracemalloc.start()
            try:
                flooded = await call(toolbox, "flood")
                echoed = await call(toolbox, "echo", {"text": "after"})
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
    assert (flooded.error_code, echoed.payload) == ("transport_error", "after")
    assert peak < 4 * LIMIT


async def test_a_notification_over_the_cap_is_dropped_and_the_call_goes_on() -> None:
    with anyio.fail_after(30):
        async with connect_servers({"far": hostile(4 * LIMIT)}) as toolbox:
            noticed = await call(toolbox, "notice")
    assert (noticed.ok, noticed.payload) == (True, "noticed")


async def test_a_reply_that_cannot_be_told_apart_ends_the_server_not_the_run() -> None:
    with anyio.fail_after(30):
        async with connect_servers({"far": hostile(4 * LIMIT)}) as toolbox:
            late = await call(toolbox, "late_id")
            after = await call(toolbox, "echo", {"text": "x"})
    assert (late.ok, late.error_code) == (False, "server_unavailable")
    assert f"MessageTooLarge: the MCP server sent a message over the {LIMIT}-byte limit" in str(late.payload)
    assert after.error_code == "server_unavailable"


async def test_an_initialize_reply_over_the_cap_makes_the_server_unavailable() -> None:
    with anyio.fail_after(30), pytest.raises(ServerUnavailable, match=f"over the {LIMIT}-byte limit") as caught:
        async with connect_servers({"far": hostile(4 * LIMIT, "--flood-initialize")}):
            pass
    assert caught.value.details["server"] == "far"


class Text(BaseModel):
    text: str


class Flooded(Agent):
    mode = "flooded"
    tools = ("far",)
    system_prompt = "Call the flood, then echo."
    Input = Text
    Output = Text


async def test_a_run_whose_server_floods_a_reply_sees_the_error_and_goes_on() -> None:
    def script(prompt: Prompt, tools: Sequence[ToolSpec]) -> dict[str, object]:
        if "still here" in prompt.body:
            return {"action": "done", "output": {"text": "done"}}
        if f"over the {LIMIT}-byte limit" in prompt.body:
            return {"action": "call_tool", "tool": "far.echo", "arguments": {"text": "still here"}}
        return {"action": "call_tool", "tool": "far.flood", "arguments": {}}

    with anyio.fail_after(30):
        result = await run_agent(Flooded, "x", model=ScriptedModel(script), servers={"far": hostile(8 * LIMIT)})
    assert (result.termination_reason, result.output) == ("done", {"text": "done"})
    assert [(c.ok, c.error.code if c.error else None) for c in result.tool_calls] == [
        (False, "transport_error"),
        (True, None),
    ]


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b'{"jsonrpc": "2.0", "id": 7, "result": {"content": [{"text": "xx', ("reply", 7)),
        (b'{"jsonrpc":"2.0","id":"a-1","error":{"code":1,"message":"xx', ("reply", "a-1")),
        (b'{"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "xx', ("own", None)),
        (b'{"jsonrpc": "2.0", "id": 3, "method": "sampling/createMessage", "params": {"x": "xx', ("own", None)),
        (b'{"jsonrpc": "2.0", "result": {"content": "xx', ("unknown", None)),
        (b'{"jsonrpc": "2.0", "id": true, "result": {"content": "xx', ("unknown", None)),
        (b'[{"jsonrpc": "2.0", "id": 1, "result": {', ("unknown", None)),
        (b"xxxxxxxx", ("unknown", None)),
    ],
)
def test_the_head_of_a_message_says_what_it_was_only_when_it_can(head: bytes, kind: tuple[str, object]) -> None:
    assert message_kind(head) == kind


class Chunks:
    """What a server's stdout yields: the given chunks, as the pipe hands them over."""

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self.chunks = list(chunks)

    def __aiter__(self) -> Chunks:
        return self

    async def __anext__(self) -> bytes:
        if not self.chunks:
            raise StopAsyncIteration
        return self.chunks.pop(0)


def reply_of_size(size: int) -> bytes:
    """A JSON-RPC reply of exactly `size` bytes, its line terminator not counted."""
    head, tail = b'{"jsonrpc": "2.0", "id": 1, "result": {"junk": "', b'"}}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


async def read_all(chunks: Sequence[bytes], limit: int) -> list[SessionMessage | Exception]:
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](10)
    with anyio.fail_after(5):
        async with receive:
            async with send:
                await read_messages(Chunks(chunks), send, StdioServerParameters(command="x"), limit)  # type: ignore[arg-type]
            return [message async for message in receive]


@pytest.mark.parametrize("terminator", [b"\n", b"\r\n"])
@pytest.mark.parametrize("split", [None, -1, -2], ids=["whole", "before-newline", "before-return"])
async def test_a_message_exactly_at_the_cap_is_read_whatever_its_line_ends_with(
    terminator: bytes, split: int | None
) -> None:
    """The cap counts the message: a CRLF line at the cap is read, one byte longer is over it."""
    line = reply_of_size(1000) + terminator + reply_of_size(1001) + terminator
    first_end = 1000 + len(terminator)
    cut = first_end if split is None else first_end + split
    messages = await read_all([line[:cut], line[cut:]], 1000)
    assert len(messages) == 2
    first, second = messages
    assert isinstance(first, SessionMessage) and isinstance(first.message, JSONRPCResponse)
    assert isinstance(second, SessionMessage) and isinstance(second.message, JSONRPCError)
    assert "over the 1000-byte limit" in second.message.error.message
