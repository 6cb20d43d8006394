"""The structured error for a cpython call that ended without a result, from a raw wait status: the
tool process's (which the worker's supervisor reaps and reports) or the worker's own (which the zygote
reaps and reports)."""

from __future__ import annotations

import os
import signal

from awb.errors import ExecutionError, MemoryExceeded, SandboxViolation, ToolRuntimeError, ToolTimeout
from awb.sandbox.base import Limits


def error_for_status(status: int, oom_killed: bool, limits: Limits, what: str = "sandbox worker") -> ExecutionError:
    if oom_killed:
        return MemoryExceeded(
            f"the tool went over its {limits.memory_mb} MB memory limit (memory cgroup)", limit_mb=limits.memory_mb
        )
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number == signal.SIGSYS:
            return SandboxViolation(
                "the tool made a system call the sandbox forbids (process creation, exec, sockets, "
                "signals, ptrace, namespaces, IPC, memfd, file watching, limits of other processes) "
                "and was stopped",
                signal="SIGSYS",
            )
        if number in (signal.SIGXCPU, signal.SIGKILL):
            return ToolTimeout(f"the tool used up its CPU time ({limits.timeout_ms} ms)", limit_ms=limits.timeout_ms)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        return ToolRuntimeError(f"the {what} crashed ({name})", signal=name)
    if os.WIFEXITED(status):
        return ToolRuntimeError(f"the {what} exited with status {os.WEXITSTATUS(status)} without a result")
    return ToolRuntimeError(f"the {what} ended without a result")
