"""One single-use CPython worker: forked by the zygote, locked down, then it reads one job, runs the
tool's `run(params)` and answers with one result frame before exiting.

Standard library only (loaded by path inside the zygote). Wire format on the worker socket: frames of
a 4-byte big-endian length and a UTF-8 JSON object.

worker -> server  {"op": "ready", "layers": {...}, "base_rss": bytes}
server -> worker  {"op": "job", "mode": "run"|"check", "code", "params", "limits", "read_dirs"}
worker -> server  {"op": "host", "fn": "log"|"read_file"|"write_file", "args": [...]}
server -> worker  {"ok": true, "value": ...} | {"ok": false, "error": {"code", "message"}}
worker -> server  {"op": "result", "ok": true, "value": "<JSON text>", "logs": [...]}
                | {"op": "result", "ok": false, "error": {"code", "message", "details"}}
"""

from __future__ import annotations

import builtins
import errno
import io
import json
import linecache
import os
import resource
import signal
import socket
import struct
import sys
import traceback
from typing import Any

import lockdown  # type: ignore[import-not-found,unused-ignore]

HEADER = struct.Struct(">I")
MAX_JOB_BYTES = 16 * 1024 * 1024
MAX_REPLY_BYTES = 8 * 1024 * 1024
#: Address space allowed on top of the worker's own at the fork and the tool's memory limit: room for
#: thread stacks and allocator slack; the server's RSS watchdog enforces the limit itself.
ADDRESS_SPACE_HEADROOM = 64 * 1024 * 1024
SCRIPT_NAME = "tool.py"
#: Trees that exist in the worker's root (the interpreter, system libraries, grants, scratch): a
#: missing file elsewhere is missing because the sandbox hides it.
_VISIBLE: list[str] = []


def send_frame(sock: socket.socket, message: dict[str, Any]) -> None:
    # ASCII JSON: a lone surrogate in tool text travels as an escape the server checks, instead of
    # failing to encode here and losing the whole result.
    data = json.dumps(message).encode("ascii")
    sock.sendall(HEADER.pack(len(data)) + data)


def recv_frame(sock: socket.socket, limit: int) -> dict[str, Any]:
    (size,) = HEADER.unpack(_recv_exact(sock, HEADER.size))
    if size > limit:
        raise OSError(f"frame of {size} bytes is over {limit}")
    message = json.loads(_recv_exact(sock, size))
    if not isinstance(message, dict):
        raise OSError("frame is not a JSON object")
    return message


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise EOFError("the server closed the worker socket")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


class HostError(Exception):
    """A host function refused: carries the server's error code (e.g. `sandbox_violation`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class OutputLimit(Exception):
    """Printed output went over the log cap."""


class _CappedText(io.TextIOBase):
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.size = 0
        self.over = False
        self.parts: list[str] = []

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        size = len(str(text).encode("utf-8", "replace"))
        if self.size + size > self.cap:
            self.over = True
            raise OutputLimit(f"printed output is over the {self.cap}-byte cap")
        self.size += size
        self.parts.append(str(text))
        return len(text)


def memory_use(proc_fd: int) -> tuple[int, int]:
    """(virtual size, resident size) of this process in bytes, read through a descriptor of /proc
    (the worker's root has no /proc)."""
    fd = os.open("self/statm", os.O_RDONLY | os.O_CLOEXEC, dir_fd=proc_fd)
    try:
        fields = os.read(fd, 256).split()
    finally:
        os.close(fd)
    page = os.sysconf("SC_PAGE_SIZE")
    return int(fields[0]) * page, int(fields[1]) * page


def warm_up() -> None:
    """Run the job path once on a trivial tool, so the code and objects it touches are loaded."""

    class _Null:
        def sendall(self, data: bytes) -> None:
            pass

    job = {"mode": "run", "code": "def run(params):\n    return {'ok': [1, 2.5, 'x']}\n", "params": {"a": 1}}
    _run_job(_Null(), job)  # type: ignore[arg-type]
    linecache.cache.pop(SCRIPT_NAME, None)


def child_main(
    sock: socket.socket,
    scratch: str,
    read_paths: list[str],
    grants: list[str],
    available: dict[str, bool],
    memory: tuple[int, int],
) -> None:
    """Entry point in the freshly forked child; never returns."""
    code = 70
    try:
        os.chdir(scratch)
        os.environ.clear()
        os.environ.update({"TMPDIR": scratch, "HOME": scratch, "LANG": "C.UTF-8"})
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over RLIMIT_FSIZE: EFBIG, not death
        base_vsz, base_rss = memory
        _VISIBLE[:] = [*read_paths, *grants, scratch, "/dev/null"]
        layers = lockdown.lock_down(
            available=available, read_paths=read_paths + grants, write_paths=[scratch, "/dev/null"]
        )
        warm_up()  # copies the shared pages the job path writes to now, not while the caller waits
        send_frame(sock, {"op": "ready", "layers": layers, "base_rss": base_rss})
        job = recv_frame(sock, MAX_JOB_BYTES)
        _narrow(job, read_paths, grants, scratch, base_vsz, layers)
        send_frame(sock, _run_job(sock, job))
        code = 0
    except BaseException:  # the worker dies either way; the server reads the missing result as a crash
        code = 71
    finally:
        os._exit(code)


def _narrow(
    job: dict[str, Any], read_paths: list[str], grants: list[str], scratch: str, base_vsz: int, layers: dict[str, bool]
) -> None:
    """Per-call limits, applied before the tool's code is even compiled."""
    limits = job.get("limits") or {}
    memory = int(limits.get("memory_mb", 100)) * 1024 * 1024
    timeout_s = max(1, -(-int(limits.get("timeout_ms", 5000)) // 1000))
    resource.setrlimit(resource.RLIMIT_AS, (base_vsz + memory + ADDRESS_SPACE_HEADROOM,) * 2)
    resource.setrlimit(resource.RLIMIT_CPU, (timeout_s + 1, timeout_s + 2))
    wanted = [d for d in job.get("read_dirs") or [] if isinstance(d, str)]
    if layers.get("landlock") and sorted(set(wanted)) != sorted(set(grants)):
        # A second Landlock layer narrows the zygote-wide grants to this tool's own.
        lockdown.landlock_restrict(read_paths + wanted, [scratch, "/dev/null"], abi=lockdown.landlock_abi())


def _run_job(sock: socket.socket, job: dict[str, Any]) -> dict[str, Any]:
    limits = job.get("limits") or {}
    max_output = int(limits.get("max_output_bytes", 1 << 20))
    capture = _CappedText(int(limits.get("max_log_bytes", 64 * 1024)))

    def host(fn: str, *args: Any) -> Any:
        send_frame(sock, {"op": "host", "fn": fn, "args": list(args)})
        reply = recv_frame(sock, MAX_REPLY_BYTES)
        if reply.get("ok"):
            return reply.get("value")
        error = reply.get("error") or {}
        raise HostError(str(error.get("code", "runtime_error")), str(error.get("message", "host function failed")))

    def log(message: Any) -> None:
        host("log", str(message))

    def read_file(path: Any) -> str:
        return str(host("read_file", str(path)))

    def write_file(path: Any, data: Any) -> dict[str, Any]:
        return dict(host("write_file", str(path), str(data)))

    def call_tool(server: Any, tool: Any, payload: Any) -> Any:
        # Plans only (the host refuses it for crafted tools): a tool of a connected MCP server.
        return host("call_tool", str(server), str(tool), json.dumps(payload))

    source = str(job.get("code", ""))
    linecache.cache[SCRIPT_NAME] = (len(source), None, source.splitlines(True), SCRIPT_NAME)
    namespace: dict[str, Any] = {
        "__name__": "__tool__",
        "__builtins__": builtins,
        "log": log,
        "read_file": read_file,
        "write_file": write_file,
        "call_tool": call_tool,
    }
    sys.stdout = sys.stderr = capture
    try:
        compiled = compile(source, SCRIPT_NAME, "exec")
        exec(compiled, namespace)
        entry = namespace.get("run")
        if not callable(entry):
            return _error("runtime_error", "the tool's code does not define run(params)")
        if job.get("mode") == "check":
            return {"op": "result", "ok": True, "value": "null", "logs": []}
        value = entry(job.get("params") or {})
        if capture.over:
            return _error("output_exceeded", f"printed output is over the {capture.cap}-byte cap")
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            return _error("invalid_output", f"the tool returned a value that is not JSON-serialisable: {exc}")
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            return _error("invalid_output", "the tool returned text that is not valid Unicode (a lone surrogate)")
        if size > max_output:
            return _error("output_exceeded", f"tool output is {size} bytes, over the {max_output}-byte cap", size=size)
        logs = ["".join(capture.parts)] if capture.parts else []
        return {"op": "result", "ok": True, "value": text, "logs": logs}
    except HostError as exc:
        return _error(exc.code, str(exc), traceback=_tool_traceback(exc))
    except OutputLimit as exc:
        return _error("output_exceeded", str(exc))
    except MemoryError:
        return _error("memory_exceeded", f"the tool went over its {limits.get('memory_mb')} MB memory limit")
    except PermissionError as exc:
        return _error("sandbox_violation", f"the sandbox refused an operation: {exc}", traceback=_tool_traceback(exc))
    except OSError as exc:
        if exc.errno == errno.ENOMEM:  # a mapping past the address-space limit
            return _error("memory_exceeded", f"the tool went over its {limits.get('memory_mb')} MB memory limit")
        if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):  # the scratch tmpfs is memory too
            return _error("memory_exceeded", f"the tool filled its scratch space: {exc}")
        if exc.errno == errno.EROFS:  # everything outside scratch is mounted read-only
            return _error("sandbox_violation", f"the sandbox refused a write: {exc}", traceback=_tool_traceback(exc))
        if exc.errno == errno.ENOENT and _hidden(exc.filename):
            message = f"the sandbox has no such path: {exc.filename} is outside what the tool may see"
            return _error("sandbox_violation", message, traceback=_tool_traceback(exc))
        kind = type(exc).__name__
        return _error("runtime_error", f"{kind}: {exc}", exception=kind, traceback=_tool_traceback(exc))
    except SyntaxError as exc:
        return _error("runtime_error", f"the tool's code does not parse: {exc}", exception="SyntaxError")
    except BaseException as exc:
        if capture.over:
            return _error("output_exceeded", f"printed output is over the {capture.cap}-byte cap")
        kind = type(exc).__name__
        return _error("runtime_error", f"{kind}: {exc}", exception=kind, traceback=_tool_traceback(exc))
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__


def _hidden(filename: Any) -> bool:
    """True when `filename` (followed through symlinks) lies outside every visible tree."""
    if not isinstance(filename, (str, bytes)) or not _VISIBLE:
        return False
    path = os.path.realpath(os.fsdecode(filename))
    return not any(path == root or path.startswith(root.rstrip("/") + "/") for root in _VISIBLE)


def _error(code: str, message: str, **details: Any) -> dict[str, Any]:
    return {"op": "result", "ok": False, "error": {"code": code, "message": message, "details": details}}


def _tool_traceback(exc: BaseException) -> list[str]:
    try:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == SCRIPT_NAME]
        lines = [f"line {f.lineno}, in {f.name}: {(f.line or '').strip()}" for f in frames]
        lines.append(f"{type(exc).__name__}: {exc}")
        return lines
    except BaseException:
        return []
