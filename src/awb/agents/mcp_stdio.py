"""The stdio transport the workbench runs MCP servers with: the SDK's, with a cap on each message.

The SDK's stdio client gathers each line of the server's stdout whole before it parses it, joining every
chunk to what it holds (a copy of the line so far per 64 KB chunk): a server that writes one long line fills
the workbench's memory and holds its event loop. Here a line is gathered up to `mcp_http.MAX_REPLY_BYTES`,
the cap on an HTTP reply (the message's bytes: its `\n` or `\r\n` is not counted), and the rest of a
longer one is read and dropped, so the next line is read as the next message. What the dropped line was decides what fails (`message_kind` reads its head):
- a reply whose `id` comes before its body: that request fails with a JSON-RPC error, as an HTTP reply
  over the cap does (its tool call is a `transport_error`); the server stays in use;
- a request or notification of the server's: dropped, with a warning;
- anything else (a reply that puts its id after its body, a line that is not JSON-RPC): the connection
  ends with `MessageTooLarge`, and the server's calls are `server_unavailable`.
The process is started and stopped exactly as the SDK does, by its own helpers (private names of the SDK's
stdio module, whose major version awb pins): a new session, stdin closed, then the whole process tree
killed, every wait bounded.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal, TextIO

import anyio
import anyio.lowlevel
from anyio.abc import ByteReceiveStream
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client._transport import TransportStreams
from mcp.client.stdio import (
    StdioServerParameters,
    _create_platform_compatible_process,
    _drain_stdout,
    _get_executable_command,
    _stop_server_process,
    get_default_environment,
)
from mcp.shared.message import SessionMessage
from mcp_types import INTERNAL_ERROR, ErrorData, JSONRPCError, RequestId, jsonrpc_message_adapter

from awb.agents import mcp_http

log = logging.getLogger("awb.agents.mcp")

#: How much of a line over the cap is kept to learn what it was (its `jsonrpc`, `id` and `method` come first
#: as the SDKs write them).
_HEAD_BYTES = 4096
#: How long the writer may take to flush what it accepted before the server's stdin closes (the SDK's figure).
_WRITER_FLUSH_SECONDS = 0.5
_SPACE = re.compile(r"\s*")


class MessageTooLarge(Exception):
    """A message of the server's over the cap that cannot be told to be a request's reply: the connection ends."""


Kind = tuple[Literal["reply"], RequestId] | tuple[Literal["own", "unknown"], None]


def message_kind(head: bytes) -> Kind:
    """What the first bytes of a JSON-RPC message say it is: `("reply", id)` when its `id` comes before its
    `result` or `error`, `("own", None)` for a request or notification of the server's (its `method` before
    its `params`), `("unknown", None)` when the head cannot tell (a key's value runs past it, or it is not an
    object)."""
    text = head.decode("utf-8", "replace")
    decoder = json.JSONDecoder()
    at = _after_space(text, 0)
    if not text.startswith("{", at):
        return ("unknown", None)
    at += 1
    found: RequestId | None = None
    while True:
        try:
            key, at = decoder.raw_decode(text, _after_space(text, at))
        except ValueError:
            return ("unknown", None)
        at = _after_space(text, at)
        if not isinstance(key, str) or not text.startswith(":", at):
            return ("unknown", None)
        if key == "method":
            return ("own", None)
        if key in ("result", "error"):
            return ("reply", found) if found is not None else ("unknown", None)
        try:
            value, at = decoder.raw_decode(text, _after_space(text, at + 1))
        except ValueError:
            return ("unknown", None)
        if key == "id" and isinstance(value, int | str) and not isinstance(value, bool):
            found = value
        at = _after_space(text, at)
        if not text.startswith(",", at):
            return ("unknown", None)
        at += 1


def _after_space(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    return match.end() if match else at


def _over_limit(head: bytes, limit: int) -> SessionMessage | None:
    """What to deliver for a line over the cap that begins with `head` (None: nothing), or `MessageTooLarge`."""
    kind, request_id = message_kind(head)
    if kind == "reply" and request_id is not None:
        error = ErrorData(code=INTERNAL_ERROR, message=f"the MCP server's reply is over the {limit}-byte limit")
        return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
    if kind == "own":
        log.warning("dropped a message of an MCP server over the %d-byte limit", limit)
        return None
    raise MessageTooLarge(f"the MCP server sent a message over the {limit}-byte limit")


def _parsed(line: bytearray, server: StdioServerParameters) -> SessionMessage | Exception:
    """One line as the SDK parses it: a message, or the error as a value for the session to log."""
    try:
        return SessionMessage(
            jsonrpc_message_adapter.validate_json(
                line.decode(server.encoding, server.encoding_error_handler), by_name=False
            )
        )
    except ValueError as err:  # UnicodeDecodeError and pydantic's ValidationError are ValueErrors
        log.warning("an MCP server wrote a line that is not a JSON-RPC message: %s", type(err).__name__)
        return err


async def read_messages(
    stdout: ByteReceiveStream,
    sink: MemoryObjectSendStream[SessionMessage | Exception],
    server: StdioServerParameters,
    limit: int,
) -> None:
    """Send each line of `stdout` to `sink` as a message, each at most `limit` bytes (see the module)."""
    line = bytearray()
    dropping = False
    async for chunk in stdout:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = memoryview(chunk)[start : len(chunk) if end < 0 else end]
            if not dropping and _message_bytes(line, piece) > limit:
                head = bytes(line[:_HEAD_BYTES]) + bytes(piece[: max(0, _HEAD_BYTES - len(line))])
                line.clear()
                dropping = True
                message = _over_limit(head, limit)
                if message is not None:
                    await sink.send(message)
            elif not dropping:
                line += piece
            if end < 0:
                break
            if not dropping:
                await sink.send(_parsed(line, server))
            line.clear()
            dropping = False
            start = end + 1


def _message_bytes(line: bytearray, piece: memoryview) -> int:
    """How long the message is once `piece` joins `line`: a `\r` at its end is left out, as the end of a CRLF
    line terminator (when the next byte is not `\n` after all, it is counted with the next piece)."""
    last = piece[-1] if len(piece) else line[-1] if line else None
    return len(line) + len(piece) - (last == ord("\r"))


@asynccontextmanager
async def capped_stdio_client(
    server: StdioServerParameters, errlog: TextIO = sys.stderr, *, limit: int | None = None
) -> AsyncIterator[TransportStreams]:
    """Start `server` and talk to it over its stdin and stdout, as the SDK's `stdio_client`, each message it
    sends at most `limit` bytes (`mcp_http.MAX_REPLY_BYTES` unless given)."""
    cap = mcp_http.MAX_REPLY_BYTES if limit is None else limit
    command = await _get_executable_command(server.command)
    process = await _create_platform_compatible_process(
        command=command,
        args=server.args,
        env=get_default_environment() | (server.env or {}),
        errlog=errlog,
        cwd=server.cwd,
    )
    # No awaits from the spawn until the task group is entered, or a cancellation there would leak the process.
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()

    async def stdout_reader() -> None:
        assert process.stdout is not None
        try:
            async with read_writer:
                try:
                    await read_messages(process.stdout, read_writer, server, cap)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    pass  # the session is gone
                except MessageTooLarge:
                    # Raised to the task group, which stops the server; drained meanwhile, in a task of its own
                    # (shielded), so that a server still writing its line reaches its stdin's end and exits.
                    tasks.start_soon(_drain_stdout, process)
                    raise
                # What the server still writes is read and dropped, so that one flushing its output can exit.
                await _drain_stdout(process)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, ConnectionError):
            pass  # our own shutdown closed the pipe under the read: the session sees the stream end

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((text + "\n").encode(server.encoding, server.encoding_error_handler))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the session sees the connection end rather than wait on a reply
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(_WRITER_FLUSH_SECONDS):
            await writer_done.wait()
        await _stop_server_process(process)
        for stream in (read_stream, write_stream, read_writer, write_reader):
            await stream.aclose()
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(stdout_reader)
        tasks.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            # Shielded: the server's process must be stopped even when the caller is cancelled.
            with anyio.CancelScope(shield=True):
                await shutdown()
            tasks.cancel_scope.cancel()
