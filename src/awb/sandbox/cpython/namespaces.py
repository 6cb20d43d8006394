"""Namespaces for a sandbox process tree: an empty network, a private IPC space, and a minimal
filesystem root that holds only the interpreter, the system libraries, the granted directories and
the per-worker scratch mounts. Files outside it do not exist for tool code: `stat`, `readlink`,
`listdir` and path guessing reveal nothing, whatever Landlock leaves unhandled.

Standard library only (loaded by path inside the zygote). x86_64 Linux; needs root or unprivileged
user namespaces. Call from a single-threaded process.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterable

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
_SYS_PIVOT_ROOT = 155
#: Each worker's scratch directory is its own tmpfs of this size: files a tool writes are memory,
#: so they are capped here (and vanish with the worker) instead of filling the host's disk.
SCRATCH_BYTES = 16 * 1024 * 1024
SCRATCH_INODES = 4096
SCRATCH_ROOT = "/scratch"
SANDBOX_HOSTNAME = "sandbox"

_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def _check(result: int) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    assert _libc is not None
    _check(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        )
    )


def umount(target: str) -> None:
    assert _libc is not None
    _check(_libc.umount2(target.encode(), MNT_DETACH))


def unshare(
    *, network: bool, ipc: bool, mounts: bool, host_uid: int | None = None, host_gid: int | None = None
) -> dict[str, bool]:
    """Enter fresh namespaces; as non-root, inside a user namespace mapping only our own ids. Says
    which ones took (all or none: unshare is atomic). With IPC goes a UTS namespace, so the host's
    name is not the tool's to read either."""
    flags = (CLONE_NEWNET if network else 0) | (CLONE_NEWIPC | CLONE_NEWUTS if ipc else 0)
    flags |= CLONE_NEWNS if mounts else 0
    result = {"network_namespace": False, "ipc_namespace": False, "mount_namespace": False}
    if _libc is None or not flags:
        return result
    uid = os.geteuid() if host_uid is None else host_uid
    gid = os.getegid() if host_gid is None else host_gid
    if uid != 0:
        flags |= CLONE_NEWUSER
    if _libc.unshare(ctypes.c_int(flags)) != 0:
        return result
    if uid != 0:
        try:
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
                with open(f"/proc/self/{name}", "w", encoding="ascii") as handle:
                    handle.write(text)
        except OSError:
            return result
    if ipc:
        hostname = SANDBOX_HOSTNAME.encode()
        _libc.sethostname(hostname, ctypes.c_size_t(len(hostname)))
    return {"network_namespace": network, "ipc_namespace": ipc, "mount_namespace": mounts}


def unshare_pid() -> bool:
    """The next child of the caller starts a fresh PID namespace, as its process 1: it sees no other
    process (not even its parent) and its pid means nothing outside. Needs CAP_SYS_ADMIN (root, or
    a user namespace of our own); True when it took."""
    return _libc is not None and _libc.unshare(ctypes.c_int(CLONE_NEWPID)) == 0


def pid_namespace_possible() -> bool:
    """Whether `unshare_pid` works here, tried in a throwaway child (a process may enter a new PID
    namespace for its children only once)."""
    if _libc is None:
        return False
    pid = os.fork()
    if pid == 0:
        os._exit(0 if unshare_pid() else 1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _outermost(paths: Iterable[str]) -> list[str]:
    """Sorted, without any path that lies under another one of the list."""
    kept: list[str] = []
    for path in sorted({os.path.normpath(p) for p in paths}):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def _bind(source: str, root: str, *, writable: bool) -> None:
    target = root + source
    if os.path.isdir(source):
        os.makedirs(target, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        if not os.path.exists(target):
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
    mount(source, target, None, MS_BIND | MS_REC)
    if not writable:
        try:
            mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)
        except OSError:
            # In a user namespace a bind of a locked mount may refuse to change flags; Landlock
            # still refuses writes there.
            pass


def enter_minimal_root(mountpoint: str, read_paths: Iterable[str], write_paths: Iterable[str]) -> None:
    """Replace this mount namespace's root by a tmpfs holding only the given paths, at the same
    absolute paths (read-only, or writable for `write_paths`), plus an empty `/scratch`.

    `mountpoint` is an empty host directory the new root is mounted on (only inside this namespace)."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("awb-root", mountpoint, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=0755")
    sources = [p for p in read_paths if os.path.exists(p)]
    writes = [p for p in write_paths if os.path.exists(p)]
    for path in _outermost(sources):
        if not any(path == w or path.startswith(w.rstrip("/") + "/") for w in writes):
            _bind(path, mountpoint, writable=False)
    for path in _outermost(writes):
        _bind(path, mountpoint, writable=True)
    scratch = mountpoint + SCRATCH_ROOT
    os.makedirs(scratch, mode=0o711, exist_ok=True)
    mount("awb-scratch", scratch, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,nr_inodes=65536,mode=0711")
    mount(None, mountpoint, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir(mountpoint)
    assert _libc is not None
    # pivot_root(".", "."): the old root ends up stacked on the new one, then is detached.
    _check(int(_libc.syscall(ctypes.c_long(_SYS_PIVOT_ROOT), b".", b".")))
    umount(".")
    os.chdir("/")


def mount_scratch(path: str, *, uid: int, gid: int) -> None:
    """A fresh, size-capped tmpfs owned by the worker's identity on `path` (an empty directory)."""
    options = f"size={SCRATCH_BYTES},nr_inodes={SCRATCH_INODES},mode=0700,uid={uid},gid={gid}"
    mount("awb-scratch", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options)
