"""System calls that never block, made without letting the GIL go: a wake-up pipe's `write` and `read`
(`awb.sandbox.loop_inbox`), procfs's `pread` and `pwrite` (`awb.sandbox.resident`).

`os.write`, `os.read`, `os.pread` and `os.pwrite` let the GIL go around their system call. When several
threads are busy in the server, another one takes it, and the caller waits to get it back: a context
switch for a system call of a microsecond or two that never blocks (a nonblocking pipe, a procfs file,
which the kernel answers at once). Calling libc through `ctypes.PyDLL` keeps the GIL. A call that may
block (a thread waiting for work) must let the GIL go: it uses the `os` function.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

_INT, _BUFFER, _SIZE, _OFFSET = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long


def _libc_calls() -> dict[str, Any] | None:
    """libc's write, read, pread and pwrite called through `ctypes.PyDLL` (which keeps the GIL); None
    where there is no such C library (the `os` functions are used then)."""
    try:
        libc = ctypes.PyDLL(None, use_errno=True)
        calls = {name: getattr(libc, name) for name in ("write", "read", "pread", "pwrite")}
    except (OSError, AttributeError):
        return None
    for name, call in calls.items():
        call.argtypes = [_INT, _BUFFER, _SIZE] + ([_OFFSET] if name.startswith("p") else [])
        call.restype = ctypes.c_ssize_t
    return calls


_LIBC = _libc_calls()


def write(fd: int, data: bytes) -> int:
    """`os.write`, holding the GIL: only for a descriptor that does not block."""
    if _LIBC is None:
        return os.write(fd, data)
    return _checked(_LIBC["write"](fd, data, len(data)))


def read(fd: int, size: int) -> bytes:
    """`os.read` of up to `size` bytes, holding the GIL: only for a descriptor that does not block."""
    if _LIBC is None:
        return os.read(fd, size)
    buffer = ctypes.create_string_buffer(size)
    got = _checked(_LIBC["read"](fd, buffer, size))  # before `buffer.raw` is read
    return buffer.raw[:got]


def pread(fd: int, size: int) -> bytes:
    """Up to `size` bytes from offset 0 of `fd` (procfs answers afresh), holding the GIL."""
    if _LIBC is None:
        return os.pread(fd, size, 0)
    buffer = ctypes.create_string_buffer(size)
    got = _checked(_LIBC["pread"](fd, buffer, size, 0))
    return buffer.raw[:got]


def pwrite(fd: int, data: bytes) -> None:
    """Write `data` at offset 0 of `fd`, holding the GIL."""
    if _LIBC is None:
        os.pwrite(fd, data, 0)
        return
    _checked(_LIBC["pwrite"](fd, data, len(data), 0))


def _checked(result: int) -> int:
    """A libc call's result, or the `OSError` its errno names (what the `os` functions raise:
    `BlockingIOError` for EAGAIN)."""
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


__all__ = ["pread", "pwrite", "read", "write"]
