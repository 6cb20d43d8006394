"""A memory cgroup per worker, when the machine lets us make one (root, a writable memory controller,
cgroup v1 or v2): the kernel then counts everything the worker makes (heap, shared mappings, its
scratch tmpfs pages, kernel memory where the kernel accounts it) and kills it past the limit.

The zygote makes `awb-<pid>/` under its own memory cgroup and one child cgroup per worker; the worker
moves itself in before it leaves root; the server writes the call's limit before sending the job; the
zygote reads whether the kernel's OOM killer fired, then removes the cgroup, when it reaps the worker.

Standard library only (loaded by path inside the zygote). Directory descriptors are kept so that all
this keeps working after the zygote's root has been replaced.
"""

from __future__ import annotations

import contextlib
import os

_ROOT = "/sys/fs/cgroup"
#: Before the server sets a call's limit, a worker's cgroup allows this much.
INITIAL_LIMIT_BYTES = 256 * 1024 * 1024


class MemoryCgroups:
    def __init__(self, host_dir: str, version: int) -> None:
        self.version = version
        self.name = f"awb-{os.getpid()}"
        self.host_dir = os.path.join(host_dir, self.name)
        self._parent_fd = os.open(host_dir, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        self._fd = -1
        try:
            os.mkdir(self.name, dir_fd=self._parent_fd)
            self._fd = os.open(self.name, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=self._parent_fd)
            if version == 2:
                # Refused where the memory controller is not delegated to our group: nothing is left.
                _write(self._fd, "cgroup.subtree_control", "+memory")
        except OSError:
            self.close()
            raise

    @property
    def limit_file(self) -> str:
        return "memory.limit_in_bytes" if self.version == 1 else "memory.max"

    def create(self, name: str) -> str:
        """A worker's cgroup; its path as the host sees it (the server writes the limit there)."""
        os.mkdir(name, dir_fd=self._fd)
        _write(self._fd, f"{name}/{self.limit_file}", str(INITIAL_LIMIT_BYTES))
        if self.version == 2:
            with contextlib.suppress(OSError):
                _write(self._fd, f"{name}/memory.swap.max", "0")
        return os.path.join(self.host_dir, name)

    def join(self, name: str) -> None:
        """Move the calling process into `name` (before it allocates anything of its own)."""
        _write(self._fd, f"{name}/cgroup.procs", str(os.getpid()))

    def oom_killed(self, name: str) -> bool:
        try:
            fd = os.open(f"{name}/{events_file(self.version)}", os.O_RDONLY | os.O_CLOEXEC, dir_fd=self._fd)
        except OSError:
            return False
        try:
            return oom_kills(os.read(fd, 4096).decode("ascii", "replace")) > 0
        finally:
            os.close(fd)

    def remove(self, name: str) -> bool:
        """Remove a worker's cgroup; False while a process is still in it (the kernel refuses)."""
        try:
            os.rmdir(name, dir_fd=self._fd)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.rmdir(self.name, dir_fd=self._parent_fd)
        for fd in (self._fd, self._parent_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)


def events_file(version: int) -> str:
    """The file of a memory cgroup that counts its OOM kills."""
    return "memory.oom_control" if version == 1 else "memory.events"


def oom_kills(text: str) -> int:
    """The `oom_kill` counter in the text of an events file (0 when the kernel does not keep it)."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return 0


def oom_killed_at(limit_path: str) -> bool:
    """Whether the kernel's OOM killer has fired in the cgroup whose limit file is `limit_path` (the
    server's view: it learns of a tool process's death from the worker, not from the zygote)."""
    version = 2 if os.path.basename(limit_path) == "memory.max" else 1
    try:
        with open(os.path.join(os.path.dirname(limit_path), events_file(version)), encoding="ascii") as handle:
            return oom_kills(handle.read(4096)) > 0
    except (OSError, UnicodeDecodeError):
        return False


def _write(dir_fd: int, path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.write(fd, text.encode("ascii"))
    finally:
        os.close(fd)


def own_memory_cgroup(root: str = _ROOT, self_cgroup: str = "/proc/self/cgroup") -> tuple[str, int] | None:
    """(directory, version) of this process's memory cgroup when it is writable, else None. `root` is
    where the cgroup filesystems are mounted; `self_cgroup` lists this process's cgroups."""
    try:
        with open(self_cgroup, encoding="ascii") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            directory, version = os.path.join(root, "memory") + path, 1
            break
    else:
        unified = [line.split(":", 2)[2] for line in lines if line.startswith("0::")]
        if not unified or not os.path.exists(os.path.join(root, "cgroup.controllers")):
            return None
        directory, version = root + unified[0], 2
    directory = os.path.normpath(directory)
    if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
        return None
    return directory, version


def open_memory_cgroups(root: str = _ROOT, self_cgroup: str = "/proc/self/cgroup") -> MemoryCgroups | None:
    """Per-worker memory cgroups under our own, or None when this machine does not allow them."""
    found = own_memory_cgroup(root, self_cgroup)
    if found is None:
        return None
    try:
        cgroups = MemoryCgroups(*found)
    except OSError:
        return None
    try:  # prove it works end to end: a child cgroup with a limit
        cgroups.create("probe")
        cgroups.remove("probe")
    except OSError:
        cgroups.close()
        return None
    return cgroups
