"""The process that runs tool code: forked by the worker's supervisor after the lockdown, alone in a
PID namespace, holding nothing but /dev/null on 0-2 and two pipes to the supervisor. It runs one
tool's `run(params)` and writes one result frame; whatever it writes is only ever read by the
supervisor as this tool's own output and host calls.

Standard library only (loaded by path inside the zygote). Frames on the pipes (see `frames`):

supervisor -> tool  {"op": "job", "mode": "run"|"check", "code", "params", "limits", "read_dirs"}
tool -> supervisor  {"op": "ready", "layers": {...}}                        (before the job)
tool -> supervisor  {"op": "host", "id": n, "fn": name, "args": [...]}
supervisor -> tool  {"id": n, "ok": true, "value": ...} | {"id": n, "ok": false, "error": {"code", "message"}}
tool -> supervisor  {"op": "result", "ok": true, "value": "<JSON text>", "logs": [...]}
                  | {"op": "result", "ok": false, "error": {"code", "message", "details"}}
"""

from __future__ import annotations

import builtins
import errno
import io
import itertools
import json
import linecache
import os
import resource
import sys
import threading
import traceback
from typing import Any, NoReturn

import frames  # type: ignore[import-not-found,unused-ignore]
import lockdown  # type: ignore[import-not-found,unused-ignore]

MAX_JOB_BYTES = 16 * 1024 * 1024
MAX_REPLY_BYTES = 8 * 1024 * 1024
#: Address space allowed on top of the worker's own at the fork and the tool's memory limit: room for
#: thread stacks and allocator slack; the server's RSS watchdog enforces the limit itself.
ADDRESS_SPACE_HEADROOM = 64 * 1024 * 1024
SCRIPT_NAME = "tool.py"
#: Trees that exist in the worker's root (the interpreter, system libraries, grants, scratch): a
#: missing file elsewhere is missing because the sandbox hides it.
_VISIBLE: list[str] = []


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


class _Channel:
    """The tool's end of the pipes. Threads share it: one host call in flight at a time."""

    def __init__(self, inbox: int, outbox: int) -> None:
        self.inbox = inbox
        self.outbox = outbox
        self.lock = threading.Lock()
        self.ids = itertools.count(1)

    def call(self, fn: str, args: list[Any]) -> Any:
        with self.lock:
            call_id = next(self.ids)
            frames.write_frame(self.outbox, {"op": "host", "id": call_id, "fn": fn, "args": args})
            reply = frames.read_frame(self.inbox, MAX_REPLY_BYTES)
        if reply.get("id") != call_id:
            raise HostError("runtime_error", "a host reply did not answer its request")
        if reply.get("ok"):
            return reply.get("value")
        error = reply.get("error") or {}
        raise HostError(str(error.get("code", "runtime_error")), str(error.get("message", "host function failed")))


class _Null:
    def call(self, fn: str, args: list[Any]) -> Any:
        return None


def tool_main(
    inbox: int,
    outbox: int,
    scratch: str,
    read_paths: list[str],
    grants: list[str],
    available: dict[str, bool],
    layers: dict[str, bool],
    base_vsz: int,
) -> NoReturn:
    """Entry point in the freshly forked tool process, its descriptors already closed; `layers` are
    the ones inherited from the supervisor (all but seccomp). Never returns."""
    code = 70
    try:
        lockdown.die_with_parent()
        if available.get("seccomp"):
            lockdown.install_seccomp("tool")
            layers = {**layers, "seccomp": True, "syscall_allowlist": True}
        _VISIBLE[:] = [*read_paths, *grants, scratch, "/dev/null"]
        warm_up()  # copies the shared pages the job path writes to now, not while the caller waits
        frames.write_frame(outbox, {"op": "ready", "layers": layers})
        job = frames.read_frame(inbox, MAX_JOB_BYTES)
        _narrow(job, read_paths, grants, scratch, base_vsz, layers)
        frames.write_frame(outbox, run_job(_Channel(inbox, outbox), job))
        # Stay until the supervisor goes (the server kills it after the result): the server reads
        # this process's peak memory from the kernel meanwhile, and waits for no exit.
        os.read(inbox, 1)
        code = 0
    except BaseException:  # the supervisor reads the missing result as a crash
        code = 71
    finally:
        os._exit(code)


def warm_up() -> None:
    """Run the job path once on a trivial tool, so the code and objects it touches are loaded."""
    job = {"mode": "run", "code": "def run(params):\n    return {'ok': [1, 2.5, 'x']}\n", "params": {"a": 1}}
    run_job(_Null(), job)  # type: ignore[arg-type]
    linecache.cache.pop(SCRIPT_NAME, None)


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


def run_job(channel: _Channel, job: dict[str, Any]) -> dict[str, Any]:
    limits = job.get("limits") or {}
    max_output = int(limits.get("max_output_bytes", 1 << 20))
    capture = _CappedText(int(limits.get("max_log_bytes", 64 * 1024)))

    def log(message: Any) -> None:
        channel.call("log", [str(message)])

    def read_file(path: Any) -> str:
        return str(channel.call("read_file", [str(path)]))

    def write_file(path: Any, data: Any) -> dict[str, Any]:
        return dict(channel.call("write_file", [str(path), str(data)]))

    def call_tool(server: Any, tool: Any, payload: Any) -> Any:
        # Plans only (the host refuses it for crafted tools): a tool of a connected MCP server.
        return channel.call("call_tool", [str(server), str(tool), json.dumps(payload)])

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
            # Compact: the form the server measures against the cap (encode_output) and sends on.
            text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
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
        frames_ = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == SCRIPT_NAME]
        lines = [f"line {f.lineno}, in {f.name}: {(f.line or '').strip()}" for f in frames_]
        lines.append(f"{type(exc).__name__}: {exc}")
        return lines
    except BaseException:
        return []
