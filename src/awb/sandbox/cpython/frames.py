"""Length-prefixed JSON frames on a file descriptor: the wire between the server and a worker's
supervisor (a socket), and between the supervisor and its tool process (two pipes). A frame is a
4-byte big-endian length and a JSON object in UTF-8.

Standard library only (loaded by path inside the zygote).
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

HEADER = struct.Struct(">I")
_CHUNK = 1 << 20


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes is over {limit}")
        self.size = size
        self.limit = limit


class BadFrame(Exception):
    """A frame that is not a JSON object."""


def encode(message: dict[str, Any]) -> bytes:
    try:  # UTF-8: text outside ASCII travels at its own size, not as six-byte escapes
        data = json.dumps(message, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate in tool text travels as an escape the reader checks, instead of failing to
        # encode here and losing the whole message.
        data = json.dumps(message).encode("ascii")
    return HEADER.pack(len(data)) + data


def write_frame(fd: int, message: dict[str, Any]) -> None:
    _write_all(fd, encode(message))


def write_bytes(fd: int, body: bytes) -> None:
    """A frame whose body is `body` as it is (the wasm compile process's artifact)."""
    _write_all(fd, HEADER.pack(len(body)) + body)


def read_bytes(fd: int, limit: int) -> bytes:
    """One frame's body; `EOFError` when the other end is gone, `FrameTooLarge` before reading a body
    over `limit`."""
    (size,) = HEADER.unpack(_read_exact(fd, HEADER.size))
    if size > limit:
        raise FrameTooLarge(size, limit)
    return _read_exact(fd, size)


def read_frame(fd: int, limit: int) -> dict[str, Any]:
    """One frame; `EOFError` when the other end is gone, `FrameTooLarge` before reading a body over
    `limit`, `BadFrame` for anything but a JSON object."""
    data = read_bytes(fd, limit)
    try:
        message = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise BadFrame(f"a frame that is not JSON: {str(exc)[:200]}") from None
    if not isinstance(message, dict):
        raise BadFrame("a frame that is not a JSON object")
    return message


def _write_all(fd: int, frame: bytes) -> None:
    data = memoryview(frame)
    while data:
        data = data[os.write(fd, data[:_CHUNK]) :]


def _read_exact(fd: int, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining:
        chunk = os.read(fd, min(remaining, _CHUNK))
        if not chunk:
            raise EOFError("the other end closed the channel")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
