"""How a cpython call ended: the structured error for a call that ended without a result, from a raw wait
status (the tool process's, which the worker's supervisor reaps and reports, or the worker's own, which
the zygote reaps and reports), and which error codes a result frame may claim at all."""

from __future__ import annotations

import os
import signal
from typing import Any

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


#: Codes only the server can establish for a cpython call (it kills the worker at the deadline): a
#: result frame claiming one was written by the tool, which may not pass its failure off as ours.
_SERVER_ONLY_CODES = frozenset({"timeout"})


def own_claims_only(message: dict[str, Any]) -> dict[str, Any]:
    error = message.get("error")
    if message.get("ok") or not isinstance(error, dict) or error.get("code") not in _SERVER_ONLY_CODES:
        return message
    claimed = str(error.get("code"))
    return {
        **message,
        "error": {
            "code": "runtime_error",
            "message": f"the tool ended with an error of its own claiming {claimed!r}: {str(error.get('message', ''))[:500]}",
        },
    }
