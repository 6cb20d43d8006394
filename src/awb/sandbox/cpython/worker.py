"""One single-use CPython worker, as two processes. The supervisor (this module), forked by the
zygote, holds the server's socket. After locking itself down it forks the tool process
(`tool_process`), alone in a new PID namespace with nothing but two pipes back to the supervisor, and
attaches its own seccomp filter. It then relays: the job to the tool, the tool's host calls to the
server (request and reply, with ids of its own), and the tool's result, checked against the caps, or
the tool process's exit status (from wait4) when it ends without one. Tool code never holds the
server's socket, so nothing it writes reaches the server but as its own output or host calls.

Standard library only (loaded by path inside the zygote). Frames on the worker socket (see `frames`):

worker -> server  {"op": "ready", "layers": {...}, "base_rss": bytes, "tool_pid": pid}
server -> worker  {"op": "job", "mode": "run"|"check", "code", "params", "limits", "read_dirs"}
worker -> server  {"op": "host", "id": n, "fn": name, "args": [...]}
server -> worker  {"id": n, "ok": true, "value": ...} | {"id": n, "ok": false, "error": {"code", "message"}}
worker -> server  {"op": "result", "ok": true, "value": "<JSON text>", "logs": [...]}
                | {"op": "result", "ok": false, "error": {"code", "message", "details"}}
                | {"op": "exited", "status": raw wait status}   (the tool process ended without a result)

After the result both processes stay until the server kills the worker (the tool process dies with
it): the server reads the tool process's peak memory from /proc first, so no call waits for an exit.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import struct
from typing import Any

import frames  # type: ignore[import-not-found,unused-ignore]
import lockdown  # type: ignore[import-not-found,unused-ignore]
import namespaces  # type: ignore[import-not-found,unused-ignore]
import tool_process  # type: ignore[import-not-found,unused-ignore]

#: The frame format and its sizes, which the JavaScript worker shares.
HEADER = frames.HEADER
MAX_JOB_BYTES = tool_process.MAX_JOB_BYTES
MAX_REPLY_BYTES = tool_process.MAX_REPLY_BYTES
MAX_READY_BYTES = 1 << 16
#: Address space the supervisor may use beyond its size at the fork, on top of 32 bytes per byte of
#: the largest frame the tool may send (decoded JSON objects take up to about that much).
SUPERVISOR_HEADROOM = 64 * 1024 * 1024
_DECODED_PER_BYTE = 32
_MAX_ID = 1 << 53
#: On the report pipe to the zygote: the tool process's pid once forked, then one byte once reaped.
_TOOL_PID = struct.Struct(">I")
_REAPED = b"r"
_DETAIL_CHARS = 4000


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


def read_tool_report(report: bytes) -> tuple[int, bool]:
    """(tool process pid or 0, whether the worker reaped it) from what a dead worker's report pipe held."""
    if len(report) < _TOOL_PID.size:
        return 0, False
    return _TOOL_PID.unpack_from(report)[0], report[_TOOL_PID.size :] == _REAPED


def close_all_but(*keep: int) -> None:
    """Close every descriptor from 3 up except `keep` (0-2 stay: /dev/null, from the zygote)."""
    low = 3
    for fd in sorted(k for k in keep if k >= low):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)


def child_main(
    sock: socket.socket,
    report: int,
    scratch: str,
    read_paths: list[str],
    grants: list[str],
    available: dict[str, bool],
    memory: tuple[int, int],
    worker_ids: tuple[int, int],
) -> None:
    """Entry point in the freshly forked worker, `report` the write end of its pipe to the zygote,
    `worker_ids` the uid and gid it leaves root for; never returns."""
    code = 70
    try:
        os.chdir(scratch)
        os.environ.clear()
        os.environ.update({"TMPDIR": scratch, "HOME": scratch, "LANG": "C.UTF-8"})
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over RLIMIT_FSIZE: EFBIG, not death
        base_vsz, base_rss = memory
        # While still privileged: the tool process, the next child, starts a PID namespace of its own.
        pid_namespace = bool(available.get("pid_namespace")) and namespaces.unshare_pid()
        # The task ceiling counts the tasks of the worker's user: the uid this server's workers alone
        # run as when root, or the server's user inside the zygote's own user namespace. Outside both it
        # would count all of the server user's processes, so it is left off (that degraded mode lacks the
        # namespaces anyway).
        own_count = os.geteuid() == 0 or bool(available.get("mount_namespace"))
        layers = lockdown.lock_down(
            available=available,
            read_paths=read_paths + grants,
            write_paths=[scratch, "/dev/null"],
            seccomp=None,
            max_tasks=lockdown.MAX_SANDBOX_TASKS if own_count else None,
            worker_ids=worker_ids,
        )
        pid, inbox, outbox = _fork_tool(sock, report, scratch, read_paths, grants, available, layers, base_vsz)
        if available.get("seccomp"):
            lockdown.install_seccomp("supervisor")
            layers.update(seccomp=True, syscall_allowlist=True)
        layers["pid_namespace"] = pid_namespace
        Supervisor(sock.fileno(), report, pid, inbox, outbox, base_vsz).serve(layers, base_rss)
        code = 0
    except BaseException:  # the worker dies either way; the server reads the missing result as a crash
        code = 71
    finally:
        os._exit(code)


def _fork_tool(
    sock: socket.socket,
    report: int,
    scratch: str,
    read_paths: list[str],
    grants: list[str],
    available: dict[str, bool],
    layers: dict[str, bool],
    base_vsz: int,
) -> tuple[int, int, int]:
    """Fork the tool process; (its pid, the pipe end its frames arrive on, the end to write to it)."""
    to_tool = os.pipe2(os.O_CLOEXEC)
    from_tool = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        try:
            sock.close()  # the server's channel leaves this process before anything else happens
            close_all_but(to_tool[0], from_tool[1])
            tool_process.tool_main(to_tool[0], from_tool[1], scratch, read_paths, grants, available, layers, base_vsz)
        finally:
            os._exit(72)
    os.write(report, _TOOL_PID.pack(pid))
    os.close(to_tool[0])
    os.close(from_tool[1])
    return pid, from_tool[0], to_tool[1]


class Supervisor:
    """The trusted half of a worker: everything the tool process writes is read here, as its own."""

    def __init__(self, server: int, report: int, tool_pid: int, inbox: int, outbox: int, base_vsz: int) -> None:
        self.server = server
        self.report = report
        self.tool_pid = tool_pid
        self.inbox = inbox
        self.outbox = outbox
        self.base_vsz = base_vsz
        self.next_id = 0
        self.max_output = 1 << 20
        self.max_log = 64 * 1024
        self.max_frame = 4 << 20

    def serve(self, layers: dict[str, bool], base_rss: int) -> None:
        # The tool process writes its ready frame before it has run any tool code: it is trusted.
        ready = frames.read_frame(self.inbox, MAX_READY_BYTES)
        tool_layers = ready.get("layers") if isinstance(ready.get("layers"), dict) else {}
        combined = {name: bool(on) and bool(tool_layers.get(name, on)) for name, on in layers.items()}
        frames.write_frame(
            self.server, {"op": "ready", "layers": combined, "base_rss": base_rss, "tool_pid": self.tool_pid}
        )
        job = frames.read_frame(self.server, MAX_JOB_BYTES)
        limits = job.get("limits") or {}
        self.max_output = int(limits.get("max_output_bytes", self.max_output))
        self.max_log = int(limits.get("max_log_bytes", self.max_log))
        self.max_frame = int(limits.get("max_frame_bytes", self.max_frame))
        budget = self.base_vsz + SUPERVISOR_HEADROOM + _DECODED_PER_BYTE * self.max_frame
        resource.setrlimit(resource.RLIMIT_AS, (budget, budget))
        try:
            frames.write_frame(self.outbox, job)
        except BrokenPipeError:
            frames.write_frame(self.server, self._exited())
            return
        frames.write_frame(self.server, self._relay())
        os.read(self.server, 1)  # until the server kills this worker or closes the socket

    def _relay(self) -> dict[str, Any]:
        """Read the tool's frames until its result or its end; the frame that goes to the server."""
        while True:
            try:
                message = frames.read_frame(self.inbox, self.max_frame)
            except EOFError:
                return self._exited()
            except frames.FrameTooLarge as exc:
                return _error("output_exceeded", f"the tool sent {exc.size} bytes, over the output cap", size=exc.size)
            except frames.BadFrame as exc:
                return _error("runtime_error", f"the tool process sent {exc}")
            except MemoryError:
                return _error("output_exceeded", "the tool sent a message too large to read")
            op = message.get("op")
            if op == "host":
                try:
                    self._host(message)
                except BrokenPipeError:
                    return self._exited()
            elif op == "result":
                return checked_result(message, self.max_output, self.max_log)
            else:
                return _error("sandbox_violation", f"the tool process sent an unexpected {str(op)[:40]!r} frame")

    def _host(self, message: dict[str, Any]) -> None:
        """One host call: to the server under an id of ours, the answer back under the tool's."""
        tool_id, fn, args = message.get("id"), message.get("fn"), message.get("args")
        if type(tool_id) is not int or not 0 <= tool_id < _MAX_ID:
            tool_id = None
        if tool_id is None or not isinstance(fn, str) or len(fn) > 64 or not isinstance(args, list):
            reply: dict[str, Any] = {
                "ok": False,
                "error": {"code": "sandbox_violation", "message": "a malformed host call"},
            }
        else:
            self.next_id += 1
            frames.write_frame(self.server, {"op": "host", "id": self.next_id, "fn": fn, "args": args})
            answer = frames.read_frame(self.server, MAX_REPLY_BYTES)
            if answer.get("id") != self.next_id:
                raise RuntimeError("the server answered another host call")
            reply = {"ok": True, "value": answer.get("value")} if answer.get("ok") is True else {"ok": False}
            if not reply["ok"]:
                reply["error"] = answer.get("error")
        reply["id"] = tool_id
        frames.write_frame(self.outbox, reply)

    def _exited(self) -> dict[str, Any]:
        """The tool process ended without a result: reap it for its wait status."""
        _, status = os.waitpid(self.tool_pid, 0)
        os.write(self.report, _REAPED)
        return {"op": "exited", "status": status}


def checked_result(message: dict[str, Any], max_output: int, max_log: int) -> dict[str, Any]:
    """The tool's result frame rebuilt from what it may carry, with the output and log caps held (the
    server checks again)."""
    if message.get("ok") is True:
        value, logs = message.get("value"), message.get("logs", [])
        if not isinstance(value, str) or not isinstance(logs, list) or not all(isinstance(x, str) for x in logs):
            return _error("runtime_error", "the tool process sent a malformed result")
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > max_output:
            return _error("output_exceeded", f"tool output is {size} bytes, over the {max_output}-byte cap", size=size)
        logged = sum(len(x.encode("utf-8", "surrogatepass")) for x in logs)
        if logged > max_log:
            return _error("output_exceeded", f"printed output is {logged} bytes, over the {max_log}-byte cap")
        return {"op": "result", "ok": True, "value": value, "logs": logs}
    error = message.get("error")
    if not isinstance(error, dict):
        return _error("runtime_error", "the tool process sent a malformed error")
    raw = error.get("details")
    details = (
        {key: raw[key] for key in ("traceback", "exception", "size") if key in raw} if isinstance(raw, dict) else {}
    )
    return _error(str(error.get("code"))[:64], str(error.get("message"))[:_DETAIL_CHARS], **details)


def _error(code: str, message: str, **details: Any) -> dict[str, Any]:
    return {"op": "result", "ok": False, "error": {"code": code, "message": message, "details": details}}
