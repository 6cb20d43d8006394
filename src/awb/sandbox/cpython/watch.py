"""The server's watch over a running cpython worker: which process runs the tool, its memory (resident
size plus scratch files, polled) and threads, the memory cgroup's limit, and the peak a call reports."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path

from awb.sandbox.base import Limits

log = logging.getLogger("awb.sandbox.cpython")

RSS_POLL_S = 0.01
#: The memory cgroup is the kernel's hard backstop above the watchdog's precise limit: room for pages
#: the worker copies from the zygote, its scratch files and allocator slack (as RLIMIT_AS has).
CGROUP_HEADROOM_BYTES = 32 * 1024 * 1024


def is_child_of(pid: int, parent: int) -> bool:
    """Whether `pid` is a live child of `parent` (the tool process a worker names must be its own)."""
    if pid <= 0:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        return int(stat.rsplit(")", 1)[1].split()[1]) == parent
    except (OSError, IndexError, ValueError):
        return False


def peak_above(pid: int, base_rss: int) -> int | None:
    """The peak resident size of the live process `pid` (the kernel's high-water mark), above the
    worker's size at the fork, which is what the memory limit counts; None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return max(0, int(line.split()[1]) * 1024 - base_rss)
    except (OSError, IndexError, ValueError):
        return None
    return None  # a process that has already exited has no memory figures


def set_cgroup_limit(limit_path: str, limits: Limits) -> None:
    if limit_path:
        try:
            with open(limit_path, "w", encoding="ascii") as handle:
                handle.write(str(limits.memory_mb * 1024 * 1024 + CGROUP_HEADROOM_BYTES))
        except OSError as exc:  # the cgroup keeps its start limit
            log.warning("could not set a worker's memory cgroup limit: %s", exc)


#: Threads a tool process may run at once. Each costs the kernel a task (a pid, a kernel stack) that no
#: memory limit sees and a raw `clone` costs no address space either; `lockdown.MAX_SANDBOX_TASKS`
#: bounds all workers together, this bounds one call, so one tool cannot take every worker's share.
MAX_TOOL_THREADS = 256


class Watch:
    """What the watchdog found, once it killed the worker: the resident limit or the thread cap."""

    def __init__(self) -> None:
        self.memory = False
        self.threads = 0

    @property
    def hit(self) -> bool:
        return self.memory or self.threads > 0


def tool_figures(pid: int) -> tuple[int, int]:
    """(resident bytes, threads) of process `pid`, from one read of /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3 of proc(5)): num_threads is field 20, rss (pages) field 24.
    return int(fields[21]) * os.sysconf("SC_PAGE_SIZE"), int(fields[17])


def over_thread_cap(pid: int, watch: Watch) -> bool:
    """Whether `pid` runs more than `MAX_TOOL_THREADS` threads now (noted in `watch`): a result can
    arrive between two of the watchdog's polls, with the threads still running."""
    try:
        threads = tool_figures(pid)[1]
    except (OSError, IndexError, ValueError):
        return False
    if threads > MAX_TOOL_THREADS:
        watch.threads = threads
    return watch.threads > 0


async def watch_rss(pid: int, kill: Callable[[], None], limit_bytes: int, watch: Watch, scratch: str | None) -> None:
    """Kill the worker when its tool process's resident memory plus the files in its scratch tmpfs
    (memory too) pass the limit, or when it runs more than `MAX_TOOL_THREADS` threads."""
    while True:
        try:
            rss, threads = tool_figures(pid)
        except (OSError, IndexError, ValueError):
            return
        if threads > MAX_TOOL_THREADS:
            watch.threads = threads
            kill()
            return
        if scratch is not None:
            try:
                fs = os.statvfs(scratch)
                rss += (fs.f_blocks - fs.f_bfree) * fs.f_frsize
            except OSError:
                scratch = None  # not reachable from here: resident size alone still counts
        if rss > limit_bytes:
            watch.memory = True
            kill()
            return
        await asyncio.sleep(RSS_POLL_S)
