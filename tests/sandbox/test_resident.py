"""Peak resident memory of a worker process, read by the server from the kernel."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from awb.sandbox import gil_io
from awb.sandbox import resident as resident_module
from awb.sandbox.resident import RETIRE_GROWTH_BYTES, ResidentPeak, WorkerFloors, _marks

MiB = 1024 * 1024

#: A child that, for each line it reads, allocates that many MiB, touches them, frees them and says so.
CHILD = """
import sys
for line in sys.stdin:
    block = b"\\x01" * (int(line) * 1024 * 1024)
    del block
    print("done", flush=True)
"""


@pytest.fixture
def child() -> Iterator[subprocess.Popen[str]]:
    with subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={}
    ) as process:
        try:
            yield process
        finally:
            process.kill()
            process.wait(timeout=10)


def allocate(process: subprocess.Popen[str], mb: int) -> None:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(f"{mb}\n")
    process.stdin.flush()
    assert process.stdout.readline().strip() == "done"


@pytest.fixture(params=["libc", "os"])
def io_calls(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The procfs reads and writes through libc holding the GIL (where there is a libc), or through `os`."""
    if request.param == "os":
        monkeypatch.setattr(gil_io, "_LIBC", None)
    else:
        assert gil_io._LIBC is not None  # Linux has a C library to call
    return str(request.param)


def test_the_peak_is_the_highest_growth_even_after_the_memory_was_freed(
    child: subprocess.Popen[str], io_calls: str
) -> None:
    allocate(child, 1)  # the interpreter settles in
    resident = ResidentPeak.start(child.pid)
    assert resident is not None
    allocate(child, 48)
    peak = resident.peak()
    assert peak is not None and 44 * MiB <= peak < 64 * MiB, peak
    # Freed at once, so the child's resident size is back near where it started.
    assert resident.resident_after is not None and resident.resident_after < resident.baseline + 8 * MiB


def test_each_run_is_measured_from_its_own_start(child: subprocess.Popen[str], io_calls: str) -> None:
    allocate(child, 48)
    resident = ResidentPeak.start(child.pid)
    assert resident is not None
    allocate(child, 1)
    peak = resident.peak()
    assert peak is not None and peak < 8 * MiB, peak  # the earlier 48 MiB is not this run's


def test_no_figure_for_a_process_that_is_not_there() -> None:
    assert ResidentPeak.start(None) is None
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert ResidentPeak.start(pid_max) is None  # pids are below pid_max


def test_no_figure_once_the_worker_is_gone(child: subprocess.Popen[str], io_calls: str) -> None:
    resident = ResidentPeak.start(child.pid)
    assert resident is not None
    child.kill()
    child.wait(timeout=10)
    assert resident.peak() is None


def test_runs_on_one_worker_read_its_files_afresh_each_time(child: subprocess.Popen[str]) -> None:
    # The worker's procfs files stay open between runs; every run still reads what is true now.
    peaks = []
    for mb in (40, 1, 24):
        resident = ResidentPeak.start(child.pid)
        assert resident is not None
        allocate(child, mb)
        peaks.append(resident.peak())
    assert peaks[0] is not None and 36 * MiB <= peaks[0] < 56 * MiB, peaks
    assert peaks[1] is not None and peaks[1] < 8 * MiB, peaks
    assert peaks[2] is not None and 20 * MiB <= peaks[2] < 40 * MiB, peaks


def test_the_files_of_a_worker_that_is_gone_are_closed_and_dropped(child: subprocess.Popen[str]) -> None:
    assert ResidentPeak.start(child.pid) is not None
    files = resident_module._FILES.of(child.pid)
    child.kill()
    child.wait(timeout=10)
    assert ResidentPeak.start(child.pid) is None  # its files name the dead process, not a newcomer
    assert not _opens(files.status, f"/proc/{child.pid}/status")


def test_only_the_latest_workers_keep_their_files_open() -> None:
    cache = resident_module._OpenFiles(remembered=2)
    children = [subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, env={}) for _ in range(3)]
    try:
        first = cache.of(children[0].pid)
        second = cache.of(children[1].pid)
        assert cache.of(children[0].pid) is first  # used again: now the most recent
        cache.of(children[2].pid)
        assert _opens(first.status, f"/proc/{children[0].pid}/status")
        assert not _opens(second.status, f"/proc/{children[1].pid}/status")
        cache.forget(children[0].pid)
        assert not _opens(first.clear_refs, f"/proc/{children[0].pid}/clear_refs")
    finally:
        for process in children:
            process.kill()
            process.wait(timeout=10)
            assert process.stdin is not None
            process.stdin.close()


def _opens(fd: int, path: str) -> bool:
    """Whether descriptor `fd` is open on `path` (a closed number may since name another file)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == path
    except OSError:
        return False


def measured(pid: int, baseline_mb: int, after_mb: int) -> ResidentPeak:
    resident = ResidentPeak(pid, baseline_mb * MiB)
    resident.resident_after = after_mb * MiB
    return resident


def test_a_worker_holding_much_more_than_its_floor_is_bloated() -> None:
    floors = WorkerFloors()
    allowed = RETIRE_GROWTH_BYTES // MiB
    assert not floors.bloated(measured(7, 20, 20 + allowed))
    assert floors.seen(7)
    assert not floors.bloated(measured(7, 16, 16 + allowed))  # the floor is now 16 MB
    # Over the floor by more than allowed, though this run itself added only 2 MB.
    assert floors.bloated(measured(7, 16 + allowed - 1, 16 + allowed + 1))
    assert not floors.seen(7)  # retired: forgotten
    assert not floors.bloated(measured(8, 40, 40 + allowed))  # a new worker's floor is its first start


def test_floors_of_workers_that_went_away_are_dropped() -> None:
    floors = WorkerFloors(remembered=3)
    for pid in range(10):
        floors.bloated(measured(pid, 10, 10))
    assert [pid for pid in range(10) if floors.seen(pid)] == [7, 8, 9]


def test_the_status_marks_are_read_whatever_surrounds_them() -> None:
    text = Path(f"/proc/{os.getpid()}/status").read_bytes()
    high_water, resident = _marks(text)  # type: ignore[misc]
    assert 0 < resident <= high_water
    assert _marks(b"Name:\tx\nVmHWM:\t  100 kB\nVmRSS:\t 50 kB") == (100 * 1024, 50 * 1024)  # no final newline
    assert _marks(b"Name:\tx\nVmHWM:\t  100 kB\n") is None  # a kernel thread, say: no VmRSS
    assert _marks(b"Name:\tx\nVmHWM:\t kB\nVmRSS:\t 50 kB\n") is None


def test_procfs_io_reads_what_os_reads_and_fails_as_os_does(io_calls: str) -> None:
    statm = os.open(f"/proc/{os.getpid()}/statm", os.O_RDONLY)
    try:
        # The first field (program size) does not move between two reads.
        assert gil_io.pread(statm, 256).split()[0] == os.pread(statm, 256, 0).split()[0]
    finally:
        os.close(statm)
    with pytest.raises(OSError) as raised:
        gil_io.pread(statm, 256)  # closed
    assert raised.value.errno == errno.EBADF
    with pytest.raises(OSError):
        gil_io.pwrite(statm, b"5")
