"""The peak memory of one call in a worker process, as the kernel counted it.

Before the run the server resets the worker's resident high-water mark (writing `5` to
`/proc/<pid>/clear_refs` sets `VmHWM` to the current resident size) and reads that size; after the
run, `VmHWM` minus it is the most memory the run added to the worker at any moment: its peak.

The server takes both readings itself, from outside the worker, so the figure is the kernel's, not
the worker's: tool code has no filesystem to reach `/proc` with, so it cannot reset its own mark. (A
JavaScript worker is also denied `/proc` by Landlock; a Monty worker is not kernel-confined, so code
that broke out of the Monty interpreter could reset it, and would hold the server's uid anyway.)
What it measures is resident memory, page by page: memory the run reserved but never touched is not
in it, and memory the worker's allocator kept from an earlier call and the run reused is not new.
That last part would let figures drift low on a reused worker, so `WorkerFloors` retires a worker
that holds more than `RETIRE_GROWTH_BYTES` over the smallest size it started a run with: the
memory a run can reuse unseen stays under that bound.

Both are reads and writes of procfs files (no disk), done while the worker is idle (on the event loop,
or on the thread that runs a Monty call), as it is before a job is sent and after its result came back.
The files of recent workers stay open (`_OpenFiles`): a run costs three system calls, about 12
microseconds, most of it generating `/proc/<pid>/status`. They are made holding the GIL (`awb.sandbox.gil_io`'s
`pread` and `pwrite`): `os.pread` lets the GIL go around its system call, and on a busy server another thread
takes it, so each of these few-microsecond calls would cost the calling thread a wait and a wake-up
to get it back (measured on Monty calls at 8 at once: ~7 of ~33 context switches a call).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

from awb.sandbox import gil_io

log = logging.getLogger("awb.sandbox.resident")

_RESET_HIGH_WATER_MARK = b"5"
#: Room for /proc/<pid>/status (about 1.5 KB on Linux 6).
_STATUS_BYTES = 1 << 14
_PAGE = os.sysconf("SC_PAGE_SIZE")
#: Resident memory a worker may keep over its floor after a run and still serve the next one.
RETIRE_GROWTH_BYTES = 8 * 1024 * 1024


class ResidentPeak:
    """One run's peak resident growth of the worker `pid`: `start` before the run, `peak` after."""

    def __init__(self, pid: int, baseline: int) -> None:
        self.pid = pid
        self.baseline = baseline
        self.resident_after: int | None = None

    @classmethod
    def start(cls, pid: int | None) -> ResidentPeak | None:
        """Reset the worker's high-water mark and note its resident size; None where the kernel
        cannot do this here (no procfs, a kernel before 4.0, no permission): the peak stays unknown
        rather than a process-lifetime mark passed off as the run's."""
        if pid is None:
            return None
        try:
            files = _FILES.of(pid)
            gil_io.pwrite(files.clear_refs, _RESET_HIGH_WATER_MARK)
            baseline = int(gil_io.pread(files.statm, 256).split()[1]) * _PAGE
        except (OSError, ValueError, IndexError) as exc:
            _FILES.forget(pid)
            log.debug("cannot measure the memory of worker %s: %s", pid, exc)
            return None
        return cls(pid, baseline)

    def peak(self) -> int | None:
        """Bytes the run added to the worker's resident size at its highest; None if unreadable.
        Also notes the worker's resident size now (`resident_after`)."""
        try:
            marks = _marks(gil_io.pread(_FILES.of(self.pid).status, _STATUS_BYTES))
        except OSError:
            _FILES.forget(self.pid)
            return None
        if marks is None:
            return None
        high_water, self.resident_after = marks
        return max(high_water - self.baseline, 0)


@dataclass(frozen=True)
class _Files:
    clear_refs: int
    statm: int
    status: int

    def close(self) -> None:
        for fd in (self.clear_refs, self.statm, self.status):
            os.close(fd)


class _OpenFiles:
    """The procfs files of the workers measured last, kept open: a run then costs three system calls
    (a write and two reads at offset 0, which procfs answers afresh), not nine, and every one of them
    on a Monty turn thread is a moment the GIL changes hands.

    A descriptor names the process it was opened for, never a later one with the same pid: once that
    process is gone, reads fail (ESRCH) and the caller forgets the entry, so the next run opens anew."""

    def __init__(self, remembered: int = 32) -> None:
        self._files: OrderedDict[int, _Files] = OrderedDict()
        self._remembered = remembered
        self._lock = threading.Lock()

    def of(self, pid: int) -> _Files:
        with self._lock:
            files = self._files.get(pid)
            if files is not None:
                self._files.move_to_end(pid)
                return files
        opened = _open_files(pid)
        with self._lock:
            files = self._files.setdefault(pid, opened)
            while len(self._files) > self._remembered:
                self._files.popitem(last=False)[1].close()
        if files is not opened:  # another thread opened them meanwhile: keep one set, not both
            opened.close()
        return files

    def forget(self, pid: int) -> None:
        with self._lock:
            files = self._files.pop(pid, None)
        if files is not None:
            files.close()


def _open_files(pid: int) -> _Files:
    opened: list[int] = []
    try:
        for name, mode in (("clear_refs", os.O_WRONLY), ("statm", os.O_RDONLY), ("status", os.O_RDONLY)):
            opened.append(os.open(f"/proc/{pid}/{name}", mode | os.O_CLOEXEC))
    except OSError:
        for fd in opened:
            os.close(fd)
        raise
    return _Files(*opened)


_FILES = _OpenFiles()


class WorkerFloors:
    """The smallest resident size each worker started a run with, to tell when one has grown."""

    def __init__(self, remembered: int = 64) -> None:
        self._floors: dict[int, int] = {}
        self._settled: dict[int, None] = {}
        self._remembered = remembered
        # Monty's runs end on threads of their own, side by side.
        self._lock = threading.Lock()

    def seen(self, pid: int) -> bool:
        """Whether the worker has been fed before (settled in, or measured)."""
        return pid in self._settled or pid in self._floors

    def settled(self, pid: int) -> None:
        """The worker has had its first feed; remembered apart from the floors, which only measured
        runs set (a check is not measured, and would otherwise settle its worker in again each time)."""
        with self._lock:
            self._settled[pid] = None
            while len(self._settled) > self._remembered:
                del self._settled[next(iter(self._settled))]

    def bloated(self, resident: ResidentPeak) -> bool:
        """Whether the worker now holds more than `RETIRE_GROWTH_BYTES` over its floor: memory its
        allocator kept that the next run could reuse unseen. The caller retires such a worker."""
        with self._lock:
            floor = min(self._floors.pop(resident.pid, resident.baseline), resident.baseline)
            if resident.resident_after is not None and resident.resident_after - floor > RETIRE_GROWTH_BYTES:
                return True
            self._floors[resident.pid] = floor
            while len(self._floors) > self._remembered:  # workers that went away (crashed, timed out)
                del self._floors[next(iter(self._floors))]
            return False


def _marks(text: bytes) -> tuple[int, int] | None:
    """(VmHWM, VmRSS) in bytes, from the text of /proc/<pid>/status (kB there). Two searches rather
    than a pass over its ~55 lines: this runs after every call."""
    found: list[int] = []
    for key in (b"\nVmHWM:", b"\nVmRSS:"):
        at = text.find(key)
        if at < 0:
            return None
        end = text.find(b"\n", at + 1)
        fields = text[at + len(key) : end if end >= 0 else len(text)].split()
        if not fields or not fields[0].isdigit():
            return None
        found.append(int(fields[0]) * 1024)
    return found[0], found[1]
