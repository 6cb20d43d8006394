"""stdin/stdout for the MCP face, read and written on the event loop instead of through threads.

The SDK's `stdio_server` reaches stdin and stdout through `anyio.wrap_file`: every line read, every
write and every flush is a hand-off to a worker thread and back, three per request. Measured against
the SDK's own echo server on two cores, those hand-offs are ~0.4 ms of a ~1.4 ms round trip
(`benchmarks/ops.py`). When stdin and stdout are pipes or sockets, which is how MCP hosts start a
server, this module serves them with asyncio's pipe transports (non-blocking reads and writes on the
loop, no threads) and hands the lines to the SDK's own `stdio_server`, which still parses and frames
every message. Anything else (a terminal, a file, stdout and stderr on one pipe, Windows, a non-asyncio
loop) is served by the SDK's transport unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from typing import Any, cast

import anyio
from mcp.server.stdio import stdio_server

log = logging.getLogger("awb.server.stdio")

#: The longest message read from stdin. A longer line is dropped (with a warning) instead of held.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

Streams = tuple[Any, Any]


@asynccontextmanager
async def serve_stdio_streams(*, sdk_transport: bool = False) -> AsyncIterator[Streams]:
    """The (read, write) message streams of the SDK's `stdio_server` over this process's stdin/stdout,
    read and written on the event loop when they are pipes, unless `sdk_transport` asks otherwise."""
    if sdk_transport or not loop_pipes_usable():
        log.info("serving MCP on stdio through the SDK's transport")
        async with stdio_server() as streams:
            yield streams
        return
    log.info("serving MCP on stdio, pipes read and written on the event loop")
    async with AsyncExitStack() as stack:
        lines_in, lines_out = await stack.enter_async_context(_LoopPipes())
        # The SDK types these as anyio.AsyncFile[str]; it only iterates the one and writes and flushes
        # the other, which is all these provide.
        yield await stack.enter_async_context(
            stdio_server(stdin=cast(anyio.AsyncFile[str], lines_in), stdout=cast(anyio.AsyncFile[str], lines_out))
        )


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
    """stdin as an async iterator of text lines, each at most `MAX_MESSAGE_BYTES`."""

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
                    log.warning("dropped a message over %d bytes from stdin", MAX_MESSAGE_BYTES)
                self._skipping = True
                continue
            if self._skipping:
                self._skipping = False
                continue
            return line.decode("utf-8", errors="replace")


class LineSink:
    """stdout as the SDK's writer uses it: write a line, then flush (wait while the pipe is full)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


class _LoopPipes:
    """Claims fds 0 and 1 for the MCP wire, like the SDK's transport: while serving, fd 0 reads the null
    device and fd 1 writes to stderr, so tool workers and stray prints never touch the wire. Both are
    restored, blocking again, on exit."""

    async def __aenter__(self) -> tuple[LineSource, LineSink]:
        self._stack = AsyncExitStack()
        try:
            return await self._open()
        except BaseException:
            await self._stack.aclose()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stack.aclose()

    async def _open(self) -> tuple[LineSource, LineSink]:
        loop = asyncio.get_running_loop()
        stack = self._stack
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
        return LineSource(reader), LineSink(writer)


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
