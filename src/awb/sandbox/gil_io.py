"""`write` and `read` on a nonblocking pipe without letting the GIL go, for wake-ups between threads.

`os.write` and `os.read` let the GIL go around their system call. When several threads are busy in
the server, another one takes it, and the caller waits to get it back: a context switch for a
system call of a microsecond or two that never blocks (a read of a nonblocking pipe, a write to one
that is never full). Calling libc through `ctypes.PyDLL` keeps the GIL, as `awb.sandbox.resident`
does for its procfs reads. A read that may block (a thread waiting for work) must let the GIL go:
it uses `os.read`.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any


def _libc_calls() -> tuple[Any, Any] | None:
    """libc's write and read called through `ctypes.PyDLL` (which keeps the GIL); None where there
    is no such C library (the `os` functions are used then)."""
    try:
        libc = ctypes.PyDLL(None, use_errno=True)
        write, read = libc.write, libc.read
    except (OSError, AttributeError):
        return None
    for call in (write, read):
        call.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
        call.restype = ctypes.c_ssize_t
    return write, read


_LIBC = _libc_calls()


def write(fd: int, data: bytes) -> int:
    """`os.write`, holding the GIL."""
    if _LIBC is None:
        return os.write(fd, data)
    return _checked(_LIBC[0](fd, data, len(data)))


def read(fd: int, size: int) -> bytes:
    """`os.read` of up to `size` bytes, holding the GIL: only for a descriptor that does not block."""
    if _LIBC is None:
        return os.read(fd, size)
    buffer = ctypes.create_string_buffer(size)
    got = _checked(_LIBC[1](fd, buffer, size))
    return buffer.raw[:got]


def _checked(result: int) -> int:
    """A libc call's result, or the `OSError` its errno names (what the `os` functions raise:
    `BlockingIOError` for EAGAIN)."""
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


__all__ = ["read", "write"]
