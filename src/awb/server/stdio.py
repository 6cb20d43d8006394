"""stdin/stdout for the MCP face, read and written on the event loop instead of through threads.

The SDK's `stdio_server` reaches stdin and stdout through `anyio.wrap_file`: every line read, every
write and every flush is a hand-off to a worker thread and back, three per request. Measured against
the SDK's own echo server on two cores, those hand-offs are ~0.4 ms of a ~1.4 ms round trip
(`benchmarks/ops.py`). When stdin and stdout are pipes or sockets, which is how MCP hosts start a
server, this module serves them with asyncio's pipe transports (non-blocking reads and writes on the
loop, no threads), parsing and framing messages exactly as the SDK's transport does. Anything else (a
terminal, a file, stdout and stderr on one pipe, Windows, a non-asyncio loop) is served by the SDK's
transport unchanged.

One difference is deliberate. The SDK's session cancels the requests in flight when its input ends. On
pipes, the end of stdin is held back until the requests already read have been answered (bounded by
`drain_seconds`), so `cat requests.jsonl | awb start` answers every request it was sent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from typing import Any

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from awb.log_limit import PER_REQUEST
from awb.server.request_ids import INVALID_REQUEST, bad_id_message

log = logging.getLogger("awb.server.stdio")

#: The longest message read from stdin. A longer line is dropped (with a warning) instead of held.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

Streams = tuple[Any, Any]


@asynccontextmanager
async def serve_stdio_streams(*, sdk_transport: bool = False, drain_seconds: float = 10.0) -> AsyncIterator[Streams]:
    """(read, write) MCP message streams over this process's stdin/stdout: on the event loop when they
    are pipes, unless `sdk_transport` asks for the SDK's `stdio_server`."""
    if sdk_transport or not loop_pipes_usable():
        log.info("serving MCP on stdio through the SDK's transport")
        async with stdio_server() as streams:
            if sdk_transport:  # the escape hatch: the SDK's transport exactly as it is
                yield streams
                return
            # A file or a terminal on stdin: the SDK reads it, but the end of input is held back as on
            # pipes, so `awb start < requests.jsonl` answers every request it holds.
            async with answered_before_end(streams, drain_seconds) as held:
                yield held
        return
    log.info("serving MCP on stdio, pipes read and written on the event loop")
    async with AsyncExitStack() as stack:
        lines_in, lines_out = await stack.enter_async_context(_loop_pipes())
        yield await stack.enter_async_context(message_streams(lines_in, lines_out, drain_seconds))


@asynccontextmanager
async def message_streams(lines_in: LineSource, lines_out: LineSink, drain_seconds: float) -> AsyncIterator[Streams]:
    """MCP messages over lines, framed as the SDK's `stdio_server` frames them: one JSON message per
    line. A line that is not a JSON-RPC message is answered here with a JSON-RPC error (-32700 for text
    that is not JSON, -32600 for JSON that is not a message), as JSON-RPC asks, instead of reaching
    the session, which would only log it and leave the client waiting. At the end of input, the
    session is told only once every request read has been answered or cancelled, or `drain_seconds`
    have passed."""
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    outstanding = _Outstanding()
    errors_out = write_stream.clone()

    async def read_lines() -> None:
        async with read_writer, errors_out:
            async for line in lines_in:
                if not line.strip():
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError as exc:
                    await errors_out.send(SessionMessage(_unreadable(line, exc)))
                    continue
                if isinstance(message, types.JSONRPCNotification) and _has_id(line):
                    # An id MCP does not take (1.5, true, null, {...}): the SDK reads the request as a
                    # notification and never answers it, and the client waits for an answer.
                    await errors_out.send(SessionMessage(_bad_id(message.method)))
                    continue
                outstanding.read(message)
                await read_writer.send(SessionMessage(message))
            with anyio.move_on_after(drain_seconds):
                await outstanding.settled()

    async def write_lines() -> None:
        async with write_reader:
            async for session_message in write_reader:
                message = session_message.message
                await lines_out.send(message.model_dump_json(by_alias=True, exclude_unset=True) + "\n")
                outstanding.written(message)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_lines)
        tasks.start_soon(write_lines)
        yield read_stream, write_stream
        # The session is over; what it wrote gets `drain_seconds` to reach a client that stopped reading
        # stdout (a host that closed our stdin but holds stdout unread), instead of keeping the process,
        # and the pid file that refuses a second server, alive for ever.
        tasks.cancel_scope.deadline = anyio.current_time() + drain_seconds


@asynccontextmanager
async def answered_before_end(streams: Streams, drain_seconds: float) -> AsyncIterator[Streams]:
    """The SDK transport's (read, write) streams, with its end of input held back until every request
    read has been answered or cancelled (or `drain_seconds` have passed), and a line it could not parse
    answered with a JSON-RPC parse error instead of reaching the session, which would only log it."""
    sdk_read, sdk_write = streams
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    outstanding = _Outstanding()
    errors_out = sdk_write.clone()

    async def pass_in() -> None:
        async with read_writer, errors_out:
            async for item in sdk_read:
                if isinstance(item, Exception):
                    log.warning(
                        "answered a line the SDK could not parse with a parse error: %s",
                        type(item).__name__,
                        extra=PER_REQUEST,
                    )
                    error = types.ErrorData(code=types.PARSE_ERROR, message="Parse error: not a JSON-RPC message")
                    await errors_out.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=None, error=error)))
                    continue
                outstanding.read(item.message)
                await read_writer.send(item)
            with anyio.move_on_after(drain_seconds):
                await outstanding.settled()

    async def pass_out() -> None:
        async with write_reader, sdk_write:
            async for item in write_reader:
                await sdk_write.send(item)
                outstanding.written(item.message)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(pass_in)
        tasks.start_soon(pass_out)
        yield read_stream, write_stream


def _unreadable(line: str, error: ValueError) -> types.JSONRPCError:
    """The JSON-RPC answer to a line that is not a message: -32700 (not JSON) or -32600 (not a message)."""
    try:
        data = json.loads(line)
    except ValueError:
        log.warning("answered a line that is not JSON with a parse error (%d bytes)", len(line), extra=PER_REQUEST)
        return types.JSONRPCError(
            jsonrpc="2.0", id=None, error=types.ErrorData(code=types.PARSE_ERROR, message="Parse error: not JSON")
        )
    except RecursionError:
        # JSON nested past the decoder's stack (the SDK's parser gives up far sooner): it raised out of the
        # line reader and ended the server.
        log.warning("answered a line of JSON nested too deeply to read (%d bytes)", len(line), extra=PER_REQUEST)
        message = "Invalid Request: not a JSON-RPC message (nested too deeply)"
        return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=INVALID_REQUEST, message=message))
    request_id = data.get("id") if isinstance(data, dict) else None
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        request_id = None
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    return types.JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=types.ErrorData(code=INVALID_REQUEST, message=f"Invalid Request: not a JSON-RPC message ({first})"),
    )


def _has_id(line: str) -> bool:
    if '"id"' not in line:
        return False
    try:
        data = json.loads(line)
    except ValueError:
        return False
    return isinstance(data, dict) and "id" in data


def _bad_id(method: str) -> types.JSONRPCError:
    message = bad_id_message(method)  # in the words the HTTP face answers such a request with
    log.warning("answered a request whose id is neither a string nor an integer (%s)", method, extra=PER_REQUEST)
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=INVALID_REQUEST, message=message))


class _Outstanding:
    """Requests read from the client and not yet answered (nor cancelled by it)."""

    def __init__(self) -> None:
        self._ids: set[types.RequestId] = set()
        self._waiter: anyio.Event | None = None

    def read(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCRequest):
            self._ids.add(message.id)
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            # The SDK never answers a request its client cancelled. Any JSON can stand where the id should:
            # a list or an object (unhashable) raised out of the reader and ended the server.
            cancelled = (message.params or {}).get("requestId")
            if isinstance(cancelled, str | int):
                self._ids.discard(cancelled)

    def written(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and message.id is not None:
            self._ids.discard(message.id)
            if not self._ids and self._waiter is not None:
                self._waiter.set()

    async def settled(self) -> None:
        while self._ids:
            self._waiter = anyio.Event()
            await self._waiter.wait()


def loop_pipes_usable() -> bool:
    """Whether stdin/stdout can be served on the event loop (see the module docstring)."""
    if sys.platform == "win32":
        return False
    try:
        asyncio.get_running_loop()  # RuntimeError under another event loop (trio)
        wire_in, wire_out, errors = os.fstat(0), os.fstat(1), os.fstat(2)
    except (RuntimeError, OSError):
        return False
    # O_NONBLOCK belongs to the open file, which stderr would share if it were the same pipe.
    shares_stderr = (wire_out.st_dev, wire_out.st_ino) == (errors.st_dev, errors.st_ino)
    return _is_pipe(wire_in.st_mode) and _is_pipe(wire_out.st_mode) and not shares_stderr


def _is_pipe(mode: int) -> bool:
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class LineSource:
    """stdin as an async iterator of text lines, each at most the reader's limit."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._skipping = False

    def __aiter__(self) -> LineSource:
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as end:  # EOF: the last line may lack its newline
                if not end.partial or self._skipping:
                    raise StopAsyncIteration from None
                line = end.partial
            except asyncio.LimitOverrunError as over:
                # Drop what is buffered of the overlong line, then the rest of it up to its newline.
                await self._reader.readexactly(over.consumed)
                if not self._skipping:
                    log.warning("dropped a message over %d bytes from stdin", MAX_MESSAGE_BYTES, extra=PER_REQUEST)
                self._skipping = True
                continue
            if self._skipping:
                self._skipping = False
                continue
            return line.decode("utf-8", errors="replace")


class LineSink:
    """stdout as lines: send one, waiting while the pipe is full."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def send(self, line: str) -> None:
        self._writer.write(line.encode("utf-8"))
        await self._writer.drain()


@asynccontextmanager
async def _loop_pipes() -> AsyncIterator[tuple[LineSource, LineSink]]:
    """Claims fds 0 and 1 for the MCP wire, like the SDK's transport: while serving, fd 0 reads the null
    device and fd 1 writes to stderr, so tool workers and stray prints never touch the wire. Both are
    restored, blocking again, on exit."""
    loop = asyncio.get_running_loop()
    async with AsyncExitStack() as stack:
        # Copies kept to restore fds 0 and 1; the transports get copies of their own, which they close.
        for fd in (0, 1):
            saved = _dup(fd)
            stack.callback(os.close, saved)
            stack.callback(_restore, fd, saved)
        reader = asyncio.StreamReader(limit=MAX_MESSAGE_BYTES, loop=loop)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(_dup(0), "rb", buffering=0)
        )
        stack.callback(read_transport.close)
        write_transport, write_protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop), os.fdopen(_dup(1), "wb", buffering=0)
        )
        stack.callback(write_transport.close)
        _divert(0, os.open(os.devnull, os.O_RDONLY))
        _divert(1, _dup(2))
        writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
        yield LineSource(reader), LineSink(writer)


def _dup(fd: int) -> int:
    """A close-on-exec copy of `fd` above the standard range."""
    import fcntl  # POSIX only, like this path

    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


def _divert(fd: int, replacement: int) -> None:
    os.dup2(replacement, fd)
    os.close(replacement)


def _restore(fd: int, saved: int) -> None:
    # The transports made the shared open file non-blocking; whoever gets fd 0/1 back expects blocking.
    with suppress(OSError):
        os.set_blocking(saved, True)
        os.dup2(saved, fd)
