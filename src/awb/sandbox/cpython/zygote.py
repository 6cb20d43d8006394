"""The CPython zygote: started once by the server (`python -I`, empty environment), it preloads the
interpreter, enters fresh network, IPC and mount namespaces (the mount namespace's root holds only the
interpreter, system libraries and granted directories) and forks single-use workers on request; each
worker gets its own size-capped tmpfs scratch directory and leaves root for an unprivileged uid, and
runs tool code in a process of its own (see `worker`).

Standard library only; run by path. Control channel: a SOCK_SEQPACKET socket whose number is argv[1],
one JSON object per message.

server -> zygote  {"op": "config", "grants": [dirs], "network_namespace": bool, "worker_ids": [uid, gid],
                  "preload": bool}  (first message; `worker_ids` is what workers of a root zygote leave
                  root for; `preload`: import `PRELOAD` for the workers, true unless said otherwise)
zygote -> server  {"op": "ready", "pid", "available": {layer: bool}, "landlock_abi", "mountpoint"}
server -> zygote  {"op": "spawn", "id": n}
zygote -> server  {"op": "spawned", "id": n, "pid", "scratch", "cgroup", "limit_file"} + fds [worker socket, pidfd]
zygote -> server  {"op": "exited", "pid", "status", "oom_killed"}  (raw wait status, when a worker is reaped)
zygote -> server  {"op": "error", "id": n, "message"}
The zygote exits when the control socket closes, killing its workers.

A worker's tool process outlives it by a moment when the server kills the worker: the zygote is a
child subreaper, so the tool process is then its own to reap, and the worker's scratch directory and
memory cgroup are only reused or removed once both processes are gone. Each worker reports its tool
process on a pipe (see `worker.report_tool`) for this.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import selectors
import shutil
import signal
import socket
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cgroups  # type: ignore[import-not-found,unused-ignore]
import lockdown  # type: ignore[import-not-found,unused-ignore]
import namespaces  # type: ignore[import-not-found,unused-ignore]
import tool_process  # type: ignore[import-not-found,unused-ignore]
import worker  # type: ignore[import-not-found,unused-ignore]

#: Modules tools commonly need, imported once here so a worker does not pay for them.
PRELOAD = (
    "base64 bisect calendar collections csv dataclasses datetime decimal difflib enum fractions functools "
    "hashlib heapq html itertools math operator random re statistics string textwrap threading typing "
    "unicodedata urllib.parse uuid zlib"
).split()
_M_ARENA_MAX = -8
#: Emptied scratch mounts kept for reuse.
SPARE_SCRATCH = 8


def _emptied(directory: str) -> bool:
    """Remove everything inside `directory`; True when it is empty afterwards.

    The tree is the tool's: anything that makes emptying it fail (a chain of directories deeper than
    Python's recursion limit made `shutil.rmtree` raise RecursionError, which ended the zygote and every
    call in flight) only means the scratch is not reused; unmounting it drops whatever it holds."""
    try:
        for entry in os.scandir(directory):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        return not os.listdir(directory)
    except Exception:
        return False


def _remove_tree(path: str) -> None:
    """`shutil.rmtree` for a tree a tool made: `ignore_errors` does not cover its RecursionError."""
    with contextlib.suppress(Exception):
        shutil.rmtree(path, ignore_errors=True)


def interpreter_paths() -> list[str]:
    paths = {os.path.realpath(p) for p in sys.path if p and os.path.exists(p)}
    for path in (sys.prefix, sys.base_prefix, sys.exec_prefix):
        lib = os.path.join(path, "lib")
        if os.path.isdir(lib):
            paths.add(os.path.realpath(lib))
    paths.update(os.path.realpath(p) for p in lockdown.SYSTEM_READ_PATHS if os.path.exists(p))
    return sorted(paths)


@dataclass
class _Child:
    scratch: str
    group: str
    #: Read end of the pipe the worker reports its tool process on (-1 once read).
    report: int = -1
    #: The worker's "exited" message, held back until its tool process is gone too.
    exited: dict[str, Any] | None = None


class Zygote:
    def __init__(self, control: socket.socket) -> None:
        self.control = control
        #: worker pid -> what it holds
        self.children: dict[int, _Child] = {}
        #: tool process pid -> what its dead worker held, freed when the tool process is reaped too
        self.orphans: dict[int, _Child] = {}
        #: Worker cgroups the kernel would not remove yet: a tool process whose pid its worker died
        #: before reporting was still in it. Tried again after every reap.
        self.busy_groups: set[str] = set()
        self.cgroups: Any = None
        self.base = ""
        self.read_paths: list[str] = []
        self.grants: list[str] = []
        self.available: dict[str, bool] = {}
        self.mountpoint = ""
        self.proc_fd = -1
        self.next_scratch = 0
        self.spare_scratch: list[str] = []
        self.worker_ids = (os.geteuid(), os.getegid())

    def setup(self, config: dict[str, Any]) -> None:
        self.grants = sorted({os.path.realpath(g) for g in config.get("grants", []) if isinstance(g, str)})
        self.available = lockdown.probe()
        lockdown.become_subreaper()
        if os.geteuid() == 0:
            uid, gid = config["worker_ids"]  # the server's own: never root, never `nobody` shared with the host
            if type(uid) is not int or type(gid) is not int or uid <= 0 or gid <= 0:
                raise ValueError(f"the server sent worker ids {uid!r}, {gid!r}; refusing to fork workers as them")
            self.worker_ids = (uid, gid)
        with contextlib.suppress(OSError, AttributeError):
            # One malloc arena: per-thread arenas reserve 64 MB of address space each.
            ctypes.CDLL(None).mallopt(_M_ARENA_MAX, 1)
        # Skipped for a zygote started to run one probe (`awb doctor`): its one worker imports nothing.
        for name in PRELOAD if config.get("preload", True) else ():
            with contextlib.suppress(ImportError):
                __import__(name)
        tool_process.warm_up()
        lockdown.prepare()
        self.read_paths = interpreter_paths()
        if os.geteuid() == 0:  # before the new root hides /sys and /proc
            self.cgroups = cgroups.open_memory_cgroups()
        self.available["memory_cgroup"] = self.cgroups is not None
        # Workers read their own memory use through this descriptor: /proc is not in the new root.
        self.proc_fd = os.open("/proc", os.O_PATH | os.O_DIRECTORY)
        self.available.update(
            namespaces.unshare(network=bool(config.get("network_namespace", True)), ipc=True, mounts=True)
        )
        self.available["pid_namespace"] = namespaces.pid_namespace_possible()
        if self.available["mount_namespace"]:
            self.mountpoint = tempfile.mkdtemp(prefix="awb-root-")
            try:
                namespaces.enter_minimal_root(self.mountpoint, self.read_paths + self.grants, [os.devnull])
                self.base = namespaces.SCRATCH_ROOT
            except OSError:
                self.available["mount_namespace"] = False
        if not self.available["mount_namespace"]:
            self.base = tempfile.mkdtemp(prefix="awb-cpython-")
            os.chmod(self.base, 0o711)  # workers leave root: they must reach their own scratch inside
        # Objects alive now are never collected in a worker: keeping the collector off them keeps
        # their pages shared with the zygote instead of copied on the first collection.
        gc.collect()
        gc.freeze()

    def _new_scratch(self) -> str:
        self.next_scratch += 1
        uid, gid = self.worker_ids
        if not self.available["mount_namespace"]:
            scratch = tempfile.mkdtemp(dir=self.base)
            os.chown(scratch, uid, gid)
            return scratch
        if self.spare_scratch:
            return self.spare_scratch.pop()
        scratch = os.path.join(self.base, str(self.next_scratch))
        os.mkdir(scratch, 0o700)
        try:
            namespaces.mount_scratch(scratch, uid=uid, gid=gid)
        except OSError:
            os.rmdir(scratch)
            raise
        return scratch

    def _remove_scratch(self, scratch: str) -> None:
        if self.available["mount_namespace"]:
            # Unmounting costs an RCU grace period on every CPU: an emptied tmpfs is kept for the
            # next worker instead (same owner and mode, which the worker could not change).
            if len(self.spare_scratch) < SPARE_SCRATCH and _emptied(scratch):
                self.spare_scratch.append(scratch)
                return
            with contextlib.suppress(OSError):
                namespaces.umount(scratch)
            with contextlib.suppress(OSError):
                os.rmdir(scratch)
        else:
            _remove_tree(scratch)

    def spawn(self, request_id: int) -> None:
        scratch = self._new_scratch()
        group, group_path = f"w{self.next_scratch}", ""
        try:
            if self.cgroups is not None:
                group_path = self.cgroups.create(group)
            parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            report_r, report_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            self._remove_scratch(scratch)
            if self.cgroups is not None:
                self.cgroups.remove(group)
            raise
        try:
            pid = os.fork()
        except OSError:
            for fd in (report_r, report_w):
                os.close(fd)
            parent_end.close()
            child_end.close()
            self._free(_Child(scratch, group))
            raise
        if pid == 0:  # the worker
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                lockdown.die_with_parent()
                if self.cgroups is not None:
                    self.cgroups.join(group)
                memory = worker.memory_use(self.proc_fd)
                # Socket objects of the zygote's own descriptors must not close whatever reuses their
                # numbers in the worker: detached here, their descriptors closed below.
                self.control.detach()
                parent_end.detach()
                # The control socket, /proc and every other zygote descriptor go.
                worker.close_all_but(child_end.fileno(), report_w)
                worker.child_main(
                    child_end, report_w, scratch, self.read_paths, self.grants, self.available, memory, self.worker_ids
                )
            finally:
                os._exit(72)
        child_end.close()
        os.close(report_w)
        self.children[pid] = _Child(scratch, group, report_r)
        try:
            pidfd = os.pidfd_open(pid)
        except OSError as exc:
            os.kill(pid, signal.SIGKILL)
            parent_end.close()
            self._send({"op": "error", "id": request_id, "message": f"pidfd_open failed: {exc}"})
            return
        try:
            message = {
                "op": "spawned",
                "id": request_id,
                "pid": pid,
                "scratch": scratch,
                "cgroup": group_path,
                "limit_file": self.cgroups.limit_file if self.cgroups is not None else "",
            }
            socket.send_fds(self.control, [json.dumps(message).encode()], [parent_end.fileno(), pidfd])
        finally:
            os.close(pidfd)
            parent_end.close()

    def reap(self, block: bool = False) -> None:
        """Reap every child that has ended (with `block`, wait until none is left)."""
        while True:
            try:
                pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            self._reaped(pid, status)
        if self.cgroups is not None:
            self.busy_groups = {group for group in self.busy_groups if not self.cgroups.remove(group)}

    def _reaped(self, pid: int, status: int) -> None:
        orphan = self.orphans.pop(pid, None)
        if orphan is not None:
            self._free(orphan)
            if orphan.exited is not None:
                self._send(orphan.exited)
            return
        child = self.children.pop(pid, None)
        exited = {"op": "exited", "pid": pid, "status": status, "oom_killed": False}
        if child is not None:
            if self.cgroups is not None:
                exited["oom_killed"] = self.cgroups.oom_killed(child.group)
            tool_pid = self._unreaped_tool(child)
            if tool_pid and self._still_ours(tool_pid):
                child.exited = exited  # the tool process was reparented to us: all goes once it is reaped
                self.orphans[tool_pid] = child
                return
            self._free(child)
        self._send(exited)

    @staticmethod
    def _unreaped_tool(child: _Child) -> int:
        """The pid of the dead worker's tool process if the worker did not reap it, else 0. A worker
        killed between its fork and its report leaves a tool process we cannot name: that one has run
        no tool code yet (the job comes after the report), and its cgroup waits in `busy_groups`."""
        try:
            report = os.read(child.report, 64)
        except OSError:
            report = b""
        finally:
            os.close(child.report)
            child.report = -1
        tool_pid, reaped = worker.read_tool_report(report)
        return 0 if reaped else tool_pid

    def _still_ours(self, tool_pid: int) -> bool:
        """Whether an unreaped tool process is now our child and alive (reaping it here if it is
        already dead). A pid that is one of our workers is a reused number, not the tool process."""
        if tool_pid in self.children:
            return False
        try:
            return os.waitpid(tool_pid, os.WNOHANG)[0] == 0
        except ChildProcessError:
            return False

    def _free(self, child: _Child) -> None:
        if child.report >= 0:
            os.close(child.report)
        self._remove_scratch(child.scratch)
        if self.cgroups is not None and not self.cgroups.remove(child.group):
            self.busy_groups.add(child.group)

    def _send(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            self.control.send(json.dumps(message).encode())

    def shutdown(self) -> None:
        for pid in list(self.children):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        self.spare_scratch.clear()  # the mount namespace goes with the zygote
        for pid in list(self.children):
            with contextlib.suppress(OSError):
                self._reaped(pid, os.waitpid(pid, 0)[1])
        self.reap(block=True)  # tool processes die with their workers and are ours to reap
        for child in [*self.children.values(), *self.orphans.values()]:
            self._free(child)
        self.reap()
        if self.cgroups is not None:
            self.cgroups.close()
        if self.base and not self.available.get("mount_namespace"):
            _remove_tree(self.base)

    def serve(self) -> None:
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        selector = selectors.DefaultSelector()
        selector.register(self.control, selectors.EVENT_READ, "control")
        selector.register(wake_r, selectors.EVENT_READ, "child")
        while True:
            for key, _ in selector.select():
                if key.data == "child":
                    with contextlib.suppress(BlockingIOError):
                        while os.read(wake_r, 512):
                            pass
                    self.reap()
                    continue
                try:
                    data = self.control.recv(1 << 16)
                except ConnectionError:  # the server went with messages unread
                    return
                if not data:
                    return
                message = json.loads(data)
                if message.get("op") == "spawn":
                    try:
                        self.spawn(int(message.get("id", 0)))
                    except OSError as exc:
                        self._send({"op": "error", "id": message.get("id"), "message": str(exc)})


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    zygote = Zygote(control)
    try:
        zygote.setup(json.loads(control.recv(1 << 20)))
        ready = {
            "op": "ready",
            "pid": os.getpid(),
            "available": zygote.available,
            "landlock_abi": lockdown.landlock_abi(),
            "mountpoint": zygote.mountpoint,
        }
        control.send(json.dumps(ready).encode())
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 2)  # from here on nothing may block on a pipe the server stopped reading
        os.close(devnull)
        zygote.serve()
    finally:
        zygote.shutdown()


if __name__ == "__main__":
    main()
