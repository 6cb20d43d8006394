"""The `cpython` runtime's handles on its processes: the zygote (started once, forks every worker on
request over a control socket) and each worker it hands back (the supervisor's pid, pidfd and socket).

`runtime.py` drives calls through these; everything here runs on the runtime's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from awb.errors import Unavailable

log = logging.getLogger("awb.sandbox.cpython")

ZYGOTE_PATH = Path(__file__).with_name("zygote.py")
START_TIMEOUT_S = 15.0
SPAWN_TIMEOUT_S = 5.0


@dataclass
class Worker:
    """One single-use worker the zygote forked: killed and closed after its one call."""

    #: The supervisor's pid (the zygote's child, which holds the socket).
    pid: int
    pidfd: int
    sock: socket.socket
    scratch: str
    #: (raw wait status, whether the kernel's OOM killer ended it in its memory cgroup)
    exited: asyncio.Future[tuple[int, bool]]
    #: The worker's memory cgroup file the call's limit goes to ("" without cgroups).
    limit_path: str = ""
    killed: bool = False
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    #: The worker's "ready" frame: the layers it applied and its resident size before any code.
    ready: dict[str, Any] = field(default_factory=dict)
    #: The process that runs the tool's code (the supervisor's child; it dies with it).
    tool_pid: int = 0

    def kill(self) -> None:
        if not self.killed:
            self.killed = True
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def close(self) -> None:
        self.kill()
        with contextlib.suppress(OSError):
            os.close(self.pidfd)
        if self.writer is not None:
            self.writer.close()
        else:
            self.sock.close()


#: The exit status a worker is given when its zygote died (workers die with it, unreported).
ZYGOTE_GONE = -1


@dataclass
class Zygote:
    """The zygote process and its control socket; `on_readable` (an event-loop reader) settles the
    futures of spawns, exits and the ready message as its messages arrive."""

    process: subprocess.Popen[bytes]
    control: socket.socket
    loop: asyncio.AbstractEventLoop
    available: dict[str, bool] = field(default_factory=dict)
    landlock_abi: int = 0
    spawns: dict[int, asyncio.Future[Worker]] = field(default_factory=dict)
    exits: dict[int, asyncio.Future[tuple[int, bool]]] = field(default_factory=dict)
    ready: asyncio.Future[dict[str, Any]] | None = None
    next_id: int = 0
    dead: bool = False

    def on_readable(self) -> None:
        while True:
            try:
                data, fds, _flags, _addr = socket.recv_fds(self.control, 1 << 16, 4)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data, fds = b"", []
            if not data:
                for fd in fds:
                    os.close(fd)
                self._died()
                return
            try:
                self._dispatch(json.loads(data), fds)
            except Exception:  # a malformed message must not kill the reader
                log.exception("bad message from the cpython zygote")
                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)

    def _dispatch(self, message: dict[str, Any], fds: list[int]) -> None:
        op = message.get("op")
        if op == "ready" and self.ready is not None and not self.ready.done():
            self.ready.set_result(message)
        elif op == "spawned":
            worker_fd, pidfd = fds
            pid = int(message["pid"])
            exited = self.exits.setdefault(pid, self.loop.create_future())
            sock = socket.socket(fileno=worker_fd)
            sock.setblocking(False)
            worker = Worker(pid=pid, pidfd=pidfd, sock=sock, scratch=str(message["scratch"]), exited=exited)
            if message.get("cgroup") and message.get("limit_file"):
                worker.limit_path = os.path.join(str(message["cgroup"]), str(message["limit_file"]))
            future = self.spawns.pop(int(message["id"]), None)
            if future is None or future.done():
                worker.close()
            else:
                future.set_result(worker)
        elif op == "exited":
            exit_future = self.exits.pop(int(message["pid"]), None)
            if exit_future is not None and not exit_future.done():
                exit_future.set_result((int(message["status"]), bool(message.get("oom_killed"))))
        elif op == "error":
            pending = self.spawns.pop(int(message.get("id") or 0), None)
            if pending is not None and not pending.done():
                pending.set_exception(Unavailable(f"the cpython zygote could not fork: {message.get('message')}"))

    def _died(self) -> None:
        if self.dead:
            return
        self.dead = True
        with contextlib.suppress(ValueError, OSError):
            self.loop.remove_reader(self.control.fileno())
        error = Unavailable("the cpython zygote exited")
        if self.ready is not None and not self.ready.done():
            self.ready.set_exception(error)
        for future in self.spawns.values():
            if not future.done():
                future.set_exception(error)
        self.spawns.clear()
        # Its workers die with it and no one is left to report how: each is told at once, so a call
        # on one fails now rather than after EXIT_STATUS_WAIT_S, and the pool skips the others.
        for exited in self.exits.values():
            if not exited.done():
                exited.set_result((ZYGOTE_GONE, False))
        self.exits.clear()

    async def spawn(self) -> Worker:
        if self.dead:
            raise Unavailable("the cpython zygote is not running")
        self.next_id += 1
        future: asyncio.Future[Worker] = self.loop.create_future()
        self.spawns[self.next_id] = future
        self.control.send(json.dumps({"op": "spawn", "id": self.next_id}).encode())
        return await asyncio.wait_for(future, SPAWN_TIMEOUT_S)

    def close(self) -> None:
        self._died()
        self.control.close()
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """End the zygote at once (and with it every worker it forked, in its pid namespace)."""
        self._died()
        self.control.close()
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait(timeout=2)


@dataclass
class LaunchedZygote:
    """A zygote process started ahead of its configuration: its interpreter starts and imports (most of
    a zygote's start) while the server is still loading its own config; `start_zygote` configures it."""

    process: subprocess.Popen[bytes]
    control: socket.socket

    def discard(self) -> None:
        """End it unconfigured (it has forked nothing yet)."""
        self.control.close()
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait(timeout=2)
        if self.process.stderr is not None:
            self.process.stderr.close()


def launch_zygote(python: str) -> LaunchedZygote:
    """Start a zygote process, to be configured by `start_zygote`; it waits for its config message."""
    server_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        process = subprocess.Popen(
            [python, "-I", "-B", str(ZYGOTE_PATH), str(zygote_end.fileno())],
            env={},
            pass_fds=(zygote_end.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd="/",
            start_new_session=True,
        )
    except OSError as exc:
        server_end.close()
        raise Unavailable(f"cannot start the cpython zygote: {exc}") from None
    finally:
        zygote_end.close()
    return LaunchedZygote(process, server_end)


async def start_zygote(
    python: str,
    grants: list[str],
    network_namespace: bool,
    worker_ids: tuple[int, int],
    *,
    preload: bool = True,
    launched: LaunchedZygote | None = None,
) -> Zygote:
    """Start the zygote process (or configure `launched`, one started ahead) and wait for its "ready"
    message (the protections it found); `worker_ids` are the uid and gid its workers leave root for;
    `preload`: it imports the modules tools commonly need, once for all its workers."""
    loop = asyncio.get_running_loop()
    launched = launched or launch_zygote(python)
    process, server_end = launched.process, launched.control
    server_end.setblocking(False)
    zygote = Zygote(process=process, control=server_end, loop=loop, ready=loop.create_future())
    loop.add_reader(server_end.fileno(), zygote.on_readable)
    config = {
        "op": "config",
        "grants": grants,
        "network_namespace": network_namespace,
        "worker_ids": list(worker_ids),
        "preload": preload,
    }
    try:
        server_end.send(json.dumps(config).encode())  # a zygote launched ahead may have died meanwhile
        assert zygote.ready is not None
        ready = await asyncio.wait_for(zygote.ready, START_TIMEOUT_S)
    except (Unavailable, TimeoutError, OSError):
        zygote.close()
        detail = _drain(process)
        raise Unavailable(f"the cpython zygote did not start: {detail or 'no output'}") from None
    except BaseException:  # cancelled (the server stopped while it warmed up): the zygote goes too
        zygote.kill()
        raise
    finally:
        if process.stderr is not None:
            process.stderr.close()
    zygote.available = {k: bool(v) for k, v in dict(ready.get("available") or {}).items()}
    zygote.landlock_abi = int(ready.get("landlock_abi") or 0)
    mountpoint = str(ready.get("mountpoint") or "")
    if mountpoint.startswith(tempfile.gettempdir() + "/awb-root-"):
        # The zygote has pivoted onto the tmpfs mounted there: the host's empty directory is no
        # longer anyone's mount point and goes now, whatever happens to the zygote later.
        with contextlib.suppress(OSError):
            os.rmdir(mountpoint)
    log.info("cpython zygote %s up; protections %s", ready.get("pid"), zygote.available)
    return zygote


def _drain(process: subprocess.Popen[bytes]) -> str:
    if process.stderr is None:
        return ""
    with contextlib.suppress(OSError, ValueError):
        os.set_blocking(process.stderr.fileno(), False)
        data = process.stderr.read(8192) or b""
        return data.decode("utf-8", "replace").strip().splitlines()[-1] if data.strip() else ""
    return ""
