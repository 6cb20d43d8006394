"""What `awb doctor` says about the sandbox's kernel protections: one row per protection class
(identity, IPC, system calls, memory, filesystem, network, processes) for each process-isolated
runtime, from the layers its workers actually reported."""

from __future__ import annotations

from typing import Any

from awb.sandbox.base import Runtime
from awb.sandbox.cpython.namespaces import SCRATCH_BYTES
from awb.sandbox.cpython.syscalls import KILLED, allowed
from awb.sandbox.identity import WorkerIdentity

#: (row, layers that must all be active, what the row means when they are)
_ROWS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (
        "identity",
        ("unprivileged_uid", "capabilities_dropped", "no_new_privs"),
        "workers never run as host root ({identity}); not dumpable (no ptrace, no core); no capabilities; no_new_privs",
    ),
    (
        "ipc",
        ("ipc_namespace", "syscall_allowlist"),
        "private IPC namespace; System V and POSIX IPC calls kill the worker",
    ),
    (
        "syscalls",
        ("seccomp", "syscall_allowlist"),
        f"seccomp allowlist of {len(allowed('tool'))} calls; {len(KILLED)} named hostile calls (processes, sockets, "
        "namespaces, IPC, memfd, inotify, bpf, keys...) and prlimit on other processes kill the worker; "
        "any other call fails with EPERM (chmod, chown, utime, xattr writes...)",
    ),
    (
        "memory",
        ("rlimits",),
        "per call: {cgroup}RLIMIT_AS and a watchdog on resident size + scratch files; scratch is a "
        f"{SCRATCH_BYTES // 2**20} MB tmpfs; memfd, shared memory and pipes refused",
    ),
    (
        "filesystem",
        ("mount_namespace", "landlock"),
        "minimal root (interpreter, system libraries, granted directories, scratch) in a mount namespace, "
        "read-only outside scratch; Landlock on top",
    ),
    ("network", ("network_namespace",), "empty network namespace; creating a socket kills the worker"),
    (
        "processes",
        ("pid_namespace", "separate_tool_process"),
        "tool code runs in a process of its own, alone in a PID namespace (it can name no other process), "
        "holding only /dev/null and two pipes to the worker's supervisor; the supervisor alone holds the "
        "server's channel, reads whatever the tool writes as its own output and host calls and holds the "
        "output and log caps, which the server checks again",
    ),
)
_JAVASCRIPT_ROWS = ("identity", "ipc", "syscalls", "network")


def protection_checks(runtimes: dict[str, Runtime]) -> list[dict[str, Any]]:
    """Doctor rows `sandbox:<runtime>:<class>`. A row fails only when a protection is missing and the
    runtime would still run code (degraded mode); a runtime that refuses to run is reported elsewhere."""
    checks: list[dict[str, Any]] = []
    for name, wanted in (("cpython", None), ("javascript", _JAVASCRIPT_ROWS)):
        runtime = runtimes.get(name)
        if runtime is None:
            continue
        layers = runtime.protections()
        refusal = getattr(runtime, "refusal", None)
        refuses = callable(refusal) and refusal() is not None
        for row, needed, meaning in _ROWS:
            if wanted is not None and row not in wanted:
                continue
            missing = [layer for layer in needed if not layers.get(layer)]
            if not missing:
                cgroup = "a memory cgroup per worker, " if layers.get("memory_cgroup") else "no memory cgroup here; "
                detail = meaning.replace("{cgroup}", cgroup).replace("{identity}", _identity(runtime))
                checks.append({"check": f"sandbox:{name}:{row}", "ok": True, "detail": detail})
                continue
            detail = f"missing: {', '.join(missing)}" + (" (the runtime refuses to run)" if refuses else "")
            checks.append({"check": f"sandbox:{name}:{row}", "ok": refuses, "detail": detail})
    return checks


def _identity(runtime: Runtime) -> str:
    identity = getattr(runtime, "identity", None)
    return identity.describe() if isinstance(identity, WorkerIdentity) else "an unprivileged uid"
