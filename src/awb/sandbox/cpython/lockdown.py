"""Kernel lockdown of a sandbox worker: rlimits, no_new_privs, Landlock, capability drop, seccomp.

Standard library only: the zygote loads this file by path under `python -I`, where the `awb` package
may not be importable. x86_64 Linux only; elsewhere every layer reports itself unavailable.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import struct
import sys
from collections.abc import Iterable

try:  # imported as part of the awb package (server side) or by path (inside the zygote)
    from . import syscalls
except ImportError:
    import syscalls  # type: ignore[no-redef,import-not-found,unused-ignore]

_IS_X86_64_LINUX = sys.platform == "linux" and platform.machine() in ("x86_64", "AMD64")
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None
if _libc is not None:
    _libc.syscall.restype = ctypes.c_long
    _libc.prctl.restype = ctypes.c_int
    _libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)

_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_SYS_CAPSET = 126

_PR_SET_PDEATHSIG = 1
_PR_GET_PDEATHSIG = 2
_PR_GET_DUMPABLE = 3
_PR_SET_DUMPABLE = 4
_PR_SET_SECCOMP = 22
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_CHILD_SUBREAPER = 36
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_SECCOMP_MODE_FILTER = 2

# --- Landlock ---------------------------------------------------------------------------------------
_LL_EXECUTE, _LL_WRITE_FILE, _LL_READ_FILE, _LL_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_LL_ALL_V1 = (1 << 13) - 1
_LL_REFER, _LL_TRUNCATE, _LL_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_LL_FILE_RIGHTS = _LL_EXECUTE | _LL_WRITE_FILE | _LL_READ_FILE | _LL_TRUNCATE | _LL_IOCTL_DEV
_LL_NET_BIND_TCP, _LL_NET_CONNECT_TCP = 1, 2
_LL_SCOPE_ABSTRACT_UNIX_SOCKET, _LL_SCOPE_SIGNAL = 1, 2
_LL_CREATE_RULESET_VERSION = 1
_LL_RULE_PATH_BENEATH = 1

#: Files and trees outside the interpreter's own that a forked CPython may still need to read
#: (shared libraries of extension modules, the dynamic loader's cache, time zones).
SYSTEM_READ_PATHS = (
    "/usr/lib",
    "/usr/lib64",
    "/usr/local/lib",
    "/usr/share/zoneinfo",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/dev/urandom",
)
#: Every layer, in the order `lock_down` reports them. The namespaces are entered once by the zygote
#: (or the JavaScript worker) and inherited; the rest is applied by each worker to itself.
LAYERS = (
    "rlimits",
    "no_new_privs",
    "landlock",
    "capabilities_dropped",
    "unprivileged_uid",
    "seccomp",
    "syscall_allowlist",
    "network_namespace",
    "ipc_namespace",
    "mount_namespace",
)
NAMESPACE_LAYERS = ("network_namespace", "ipc_namespace", "mount_namespace")


def _syscall(number: int, *args: object) -> int:
    assert _libc is not None
    result = int(_libc.syscall(number, *args))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def _prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    assert _libc is not None
    result = int(_libc.prctl(option, arg2, arg3, arg4, arg5))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def _task_ceiling() -> int:
    """How many tasks (processes and threads) all sandbox workers together may hold: a quarter of the
    machine's pid and thread space, at most 8192. Read at import, while /proc is still visible."""
    ceiling = 8192
    for name in ("pid_max", "threads-max"):
        try:
            with open(f"/proc/sys/kernel/{name}", encoding="ascii") as handle:
                ceiling = min(ceiling, int(handle.read()) // 4)
        except (OSError, ValueError):
            pass
    return max(ceiling, 256)


#: RLIMIT_NPROC of a cpython worker. The kernel counts it per user (per user namespace for a user
#: namespace of the sandbox's own), threads included, so it caps every worker together: without it a
#: tool's threads (raw `clone` calls cost no address space) took pids until the host could fork nothing.
MAX_SANDBOX_TASKS = _task_ceiling()


def _cap_last() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return 63


_CAP_LAST = _cap_last()


# --- probes -----------------------------------------------------------------------------------------


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is missing or disabled."""
    if not _IS_X86_64_LINUX:
        return 0
    try:
        return _syscall(
            _SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_LL_CREATE_RULESET_VERSION)
        )
    except OSError:
        return 0


def seccomp_available() -> bool:
    if not _IS_X86_64_LINUX:
        return False
    try:
        with open("/proc/sys/kernel/seccomp/actions_avail", encoding="ascii") as handle:
            return "kill_process" in handle.read()
    except OSError:
        return False


def probe() -> dict[str, bool]:
    """Which layers this machine can provide (the namespaces are probed by entering them)."""
    linux = _IS_X86_64_LINUX
    seccomp = seccomp_available()
    return {
        "rlimits": linux,
        "no_new_privs": linux,
        "landlock": landlock_abi() >= 1,
        "capabilities_dropped": linux,
        "unprivileged_uid": linux,
        "seccomp": seccomp,
        "syscall_allowlist": seccomp,
    }


# --- layers ---------------------------------------------------------------------------------------


def die_with_parent() -> None:
    _prctl(_PR_SET_PDEATHSIG, 9)


def become_subreaper() -> None:
    """Orphaned descendants are reparented to this process (and reaped by it), not to the host's init."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def set_rlimits(
    *,
    nofile: int,
    fsize_bytes: int,
    address_space_bytes: int | None,
    cpu_seconds: int | None,
    max_tasks: int | None = None,
) -> None:
    """Lower the process limits (soft = hard, so tool code cannot raise them back)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if max_tasks is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (max_tasks, max_tasks))
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_bytes, fsize_bytes))
    if address_space_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space_bytes, address_space_bytes))
    if cpu_seconds is not None:
        # The soft limit sends SIGXCPU (fatal by default); the hard one SIGKILL a second later.
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))


def set_no_new_privs() -> None:
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)


def landlock_restrict(read_paths: Iterable[str], write_paths: Iterable[str], *, abi: int) -> None:
    """Allow reading `read_paths` and everything on `write_paths`; deny every other file access,
    TCP bind/connect (ABI 4+), and signals or abstract sockets out of the domain (ABI 6+)."""
    handled = _LL_ALL_V1
    if abi >= 2:
        handled |= _LL_REFER
    if abi >= 3:
        handled |= _LL_TRUNCATE
    if abi >= 5:
        handled |= _LL_IOCTL_DEV
    handled_net = (_LL_NET_BIND_TCP | _LL_NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_LL_SCOPE_ABSTRACT_UNIX_SOCKET | _LL_SCOPE_SIGNAL) if abi >= 6 else 0
    if abi >= 6:
        attr = struct.pack("=QQQ", handled, handled_net, scoped)
    elif abi >= 4:
        attr = struct.pack("=QQ", handled, handled_net)
    else:
        attr = struct.pack("=Q", handled)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _syscall(_SYS_LANDLOCK_CREATE_RULESET, buffer, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    try:
        read_rights = _LL_READ_FILE | _LL_READ_DIR
        for paths, rights in ((read_paths, read_rights), (write_paths, handled)):
            for path in paths:
                _add_path_rule(ruleset, path, rights & handled)
        _syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _add_path_rule(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
            return
        raise
    try:
        if not os.path.isdir(path):
            rights &= _LL_FILE_RIGHTS
        rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)
        _syscall(
            _SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_LL_RULE_PATH_BENEATH), rule, ctypes.c_uint32(0)
        )
    finally:
        os.close(fd)


def drop_bounding_capabilities() -> None:
    """Empty the bounding set (needs CAP_SETPCAP, so before leaving root) and the ambient set."""
    for cap in range(_CAP_LAST + 1):
        try:
            _prctl(_PR_CAPBSET_DROP, cap)
        except OSError as exc:
            if exc.errno == errno.EINVAL:  # past the last capability this kernel knows
                break
            if exc.errno != errno.EPERM:  # EPERM: we never held CAP_SETPCAP, nothing to drop
                raise
            break
    _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)


def clear_capability_sets() -> None:
    """Empty the effective, permitted and inheritable sets (already empty after leaving root)."""
    header = ctypes.create_string_buffer(struct.pack("=Ii", 0x20080522, 0), 8)
    data = ctypes.create_string_buffer(bytes(24), 24)
    _syscall(_SYS_CAPSET, header, data)


def drop_to_unprivileged_uid(uid: int, gid: int) -> bool:
    """As root: leave host root for good for `uid`/`gid` (no groups, real = effective = saved ids) and
    become non-dumpable. Changing ids clears the parent-death signal, so it is armed again. When not
    root there is nothing to leave: the process already runs as the server's non-root user (in a user
    namespace, mapped only to it)."""
    if os.geteuid() != 0:
        return True
    deathsig = ctypes.c_int(0)
    _prctl(_PR_GET_PDEATHSIG, ctypes.addressof(deathsig))
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    # The kernel makes a process that changed ids dumpable as `fs.suid_dumpable` says; at 1 ("debug") any
    # process of the workers' uid could ptrace one and read or write its memory (the supervisor's
    # socket to the server among it). Non-dumpable, only CAP_SYS_PTRACE can; forks inherit it.
    _prctl(_PR_SET_DUMPABLE, 0)
    if deathsig.value:
        _prctl(_PR_SET_PDEATHSIG, deathsig.value)
    return os.getresuid() == (uid, uid, uid) and os.getgroups() == [] and _prctl(_PR_GET_DUMPABLE) == 0


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


#: profile -> (program buffer, sock_fprog pointing at it); kept alive for as long as the process runs.
_FILTERS: dict[str, tuple[ctypes.Array[ctypes.c_char], _SockFprog]] = {}


def prepare() -> None:
    """Build every seccomp program once, before forking: workers only attach them."""
    for profile in syscalls.PROFILES:
        if profile not in _FILTERS:
            program = syscalls.program(profile)
            buffer = ctypes.create_string_buffer(program, len(program))
            _FILTERS[profile] = (buffer, _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p)))


def install_seccomp(profile: str = "worker") -> None:
    """Attach the allowlist of `profile`; filters stack, so a process can only ever narrow its own."""
    prepare()
    _prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(_FILTERS[profile][1]))


def lock_down(
    *,
    available: dict[str, bool],
    read_paths: Iterable[str],
    write_paths: Iterable[str],
    nofile: int = 64,
    fsize_bytes: int = 16 * 1024 * 1024,
    seccomp: str | None = "worker",
    max_tasks: int | None = None,
    worker_ids: tuple[int, int],
) -> dict[str, bool]:
    """Apply every available layer to the calling process, in the order the kernel needs, and say
    which ones took. A layer the machine offers but that fails to apply raises. With `seccomp=None`
    the caller attaches its filter itself (after a fork that the filter would forbid). `max_tasks`
    caps the tasks of the user the process runs as (RLIMIT_NPROC); `worker_ids` are the uid and gid a
    root process leaves root for."""
    applied = dict.fromkeys(LAYERS, False)
    for layer in NAMESPACE_LAYERS:
        applied[layer] = bool(available.get(layer, False))
    if not _IS_X86_64_LINUX:
        return applied
    set_rlimits(nofile=nofile, fsize_bytes=fsize_bytes, address_space_bytes=None, cpu_seconds=None, max_tasks=max_tasks)
    applied["rlimits"] = True
    drop_bounding_capabilities()
    applied["unprivileged_uid"] = drop_to_unprivileged_uid(*worker_ids)
    set_no_new_privs()
    applied["no_new_privs"] = True
    abi = landlock_abi()
    if available.get("landlock") and abi:
        landlock_restrict(read_paths, write_paths, abi=abi)
        applied["landlock"] = True
    clear_capability_sets()
    applied["capabilities_dropped"] = True
    if available.get("seccomp") and seccomp is not None:
        install_seccomp(seccomp)
        applied["seccomp"] = applied["syscall_allowlist"] = True
    return applied
