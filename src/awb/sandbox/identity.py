"""The uid/gid a server's sandbox workers take when the server runs as root: one of this server's own.

Sharing `nobody` (65534) with the rest of the machine shared what the kernel keys on a uid: the
RLIMIT_NPROC count (a tool's threads starved every other `nobody` process of tasks, and theirs ours),
the right to signal a worker, and every file `nobody` owns. With `sandbox.worker_uid: auto` each server
claims a number from `AUTO_FIRST` up that no user or group is named by, no subordinate-id range holds
and no process runs as, and holds it (a lock file in the first of `CLAIM_DIRS`) until its runtimes close, so two
servers on the machine never share it. gid = uid. A non-root server's workers keep its own uid (an
unprivileged user namespace can map nothing else).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import grp
import logging
import os
import pwd
import stat
import tempfile
import threading
from pathlib import Path
from typing import Literal

from awb.errors import Unavailable

log = logging.getLogger("awb.sandbox")


async def launch_worker_script(
    python: str, script: Path, worker_ids: tuple[int, int] | None, *, keep_stderr: bool
) -> asyncio.subprocess.Process:
    """One of the sandbox's own scripts (the JavaScript worker, the wasm compile process) in a process of
    its own: isolated interpreter, empty environment, `/` for its folder, its own session (so a kill of
    its group reaches what it starts), pipes for its frames. With `worker_ids` it leaves root for them at
    once; without (one started ahead, while the server or `awb doctor` still loads its config) it waits
    for them as its first frame, its interpreter and imports loaded meanwhile."""
    ids = [str(worker_ids[0]), str(worker_ids[1])] if worker_ids is not None else []
    return await asyncio.create_subprocess_exec(
        python,
        "-I",
        "-B",
        str(script),
        *ids,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE if keep_stderr else asyncio.subprocess.DEVNULL,
        env={},
        cwd="/",
        start_new_session=True,
    )


#: Where `auto` starts looking, and how far: above systemd's container range (524288-1879048191) and
#: below its foreign range (2147352576 up) and 2^31, which some tools mishandle as negative.
AUTO_FIRST = 2_000_000_000
AUTO_COUNT = 65_536
#: How many uids of the range `auto` looks up (user and group names, a lock file each) before it gives up
#: and asks for `sandbox.worker_uid`: uids processes run as and subordinate-id ranges are passed over
#: without a look-up. Walking all 65,536 took 12 s of CPU (~20 s wall) when a subuid range held them all.
AUTO_TRIES = 256
#: Where subordinate-id ranges are listed (`user:start:count` a line).
SUBORDINATE_FILES = ("/etc/subuid", "/etc/subgid")
#: One lock file per claimed uid; a server holds its lock for as long as its workers may run. The first
#: directory that can be had is used: a read-only /run (some containers) falls back to the temp folder.
CLAIM_DIRS = (Path("/run/awb/worker-ids"), Path(tempfile.gettempdir()) / "awb-worker-ids")
#: Where the machine's processes are listed, to tell which ids they run as.
PROC = "/proc"

WorkerUid = int | Literal["auto"]


class WorkerIdentity:
    """One server's worker identity, shared by its runtimes: claimed on the first `acquire`, given
    back when the last user releases it."""

    def __init__(self, setting: WorkerUid = "auto", *, claim_dirs: tuple[Path, ...] = CLAIM_DIRS) -> None:
        self.setting = setting
        self.claim_dirs = claim_dirs
        self.claim_dir = claim_dirs[0]
        self._lock = threading.Lock()
        self._users = 0
        self._claim: int | None = None  # the lock file's descriptor
        self.ids: tuple[int, int] | None = None

    def acquire(self) -> tuple[int, int]:
        """(uid, gid) the workers take; claims them on first use. Raises `Unavailable` with the reason
        when no identity can be had. Blocking (reads /proc): call off the event loop."""
        with self._lock:
            if self.ids is None:
                self.ids = self._claim_ids()
            self._users += 1
            return self.ids

    async def claim_for(self, runtime: str) -> tuple[tuple[int, int] | None, str | None]:
        """`acquire` off the event loop, for `runtime`: (the ids, None), or (None, the refusal the runtime
        answers calls with until it tries again, at its next call)."""
        try:
            return await asyncio.to_thread(self.acquire), None
        except Unavailable as exc:
            refusal = f"the {runtime} runtime refuses to run: {exc.message}"
            log.warning(refusal)
            return None, refusal

    def release(self) -> None:
        with self._lock:
            self._users = max(0, self._users - 1)
            if self._users == 0 and self._claim is not None:
                os.close(self._claim)  # the lock goes with the descriptor
                self._claim, self.ids = None, None

    def describe(self) -> str:
        """What `awb doctor` says of the identity."""
        if os.geteuid() != 0:
            return "the server's own non-root uid, mapped in a user namespace"
        if self.ids is not None:
            return f"uid/gid {self.ids[0]}, this server's own"
        if self.setting == "auto":
            return f"a uid/gid of this server's own, unused on the machine, from {AUTO_FIRST} up"
        return f"uid/gid {self.setting} (sandbox.worker_uid)"

    def _claim_ids(self) -> tuple[int, int]:
        if os.geteuid() != 0:
            if self.setting != "auto":
                raise Unavailable(
                    f"sandbox.worker_uid is {self.setting}, but the server does not run as root: its sandbox "
                    "workers can only keep the server's own uid (leave sandbox.worker_uid at auto)"
                )
            return os.geteuid(), os.getegid()
        try:
            directory = self._claim_directory()
        except Unavailable as exc:
            if self.setting == "auto":
                raise
            log.warning("sandbox.worker_uid %d is taken without a claim: %s", self.setting, exc.message)
            return self.setting, self.setting
        try:
            return self._claim_in(directory)
        finally:
            os.close(directory)

    def _claim_in(self, directory: int) -> tuple[int, int]:
        if self.setting != "auto":
            uid = self.setting
            holder = self._try_claim(directory, uid)
            if holder is not None:
                raise Unavailable(
                    f"sandbox.worker_uid {uid} is already the worker uid of another awb server on this machine "
                    f"(pid {holder}); give each server a uid of its own, or leave it at auto"
                )
            try:
                if uid in _ids_in_use():
                    log.warning(
                        "sandbox.worker_uid %d is also used by processes that are not this server's workers", uid
                    )
            except OSError:
                pass  # only a warning: the uid was configured
            return uid, uid
        try:
            busy = _ids_in_use()
        except OSError as exc:
            # No list of processes (no /proc mounted, or not ours to read): a uid some process runs as cannot be
            # told apart, and a plain OSError here crashed the runtime's start instead of refusing its calls.
            raise Unavailable(
                f"cannot tell which uids processes run as ({PROC}: {exc.strerror}): set sandbox.worker_uid to a "
                "uid and gid no one else uses"
            ) from None
        return self._first_free(directory, busy)

    def _first_free(self, directory: int, busy: set[int]) -> tuple[int, int]:
        """The first uid of the auto range that is free, claimed; at most `AUTO_TRIES` are looked up."""
        ranges = _subordinate_ranges()
        last = AUTO_FIRST + AUTO_COUNT
        uid, tried, named, claimed, passed = AUTO_FIRST, 0, 0, 0, 0
        while uid < last and tried < AUTO_TRIES:
            end = next((stop for start, stop in ranges if start <= uid < stop), None)
            if end is not None:  # the whole range at once, not a uid at a time
                passed += min(end, last) - uid
                uid = end
                continue
            if uid in busy:
                passed += 1
            else:
                tried += 1
                if _named(uid):
                    named += 1
                elif self._try_claim(directory, uid) is None:
                    return uid, uid
                else:
                    claimed += 1
            uid += 1
        where = f"from {AUTO_FIRST} to {last - 1}"
        if tried == 0:
            seen = f"every uid {where} is run by a process or lies in a subordinate-id range ({', '.join(SUBORDINATE_FILES)})"
        else:
            seen = (
                f"no free worker uid among the {tried} looked up {where} ({named} named by a user or group, "
                f"{claimed} claimed by other awb servers; {passed} run by processes or in subordinate-id ranges "
                "passed over)"
            )
        raise Unavailable(f"{seen}: set sandbox.worker_uid to a uid and gid no one else uses")

    def _claim_directory(self) -> int:
        """A descriptor of the first of `claim_dirs` that can be made or opened and that root alone may
        write to (another user's directory could hand us their lock files)."""
        problems: list[str] = []
        for directory in self.claim_dirs:
            try:
                # Level by level: `parents=True` would make the levels above with the umask's mode.
                for level in (directory.parent, directory):
                    level.mkdir(mode=0o755, exist_ok=True)
                fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError as exc:
                problems.append(f"{directory}: {exc.strerror}")
                continue
            info = os.fstat(fd)
            if info.st_uid == 0 and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                self.claim_dir = directory
                return fd
            os.close(fd)
            problems.append(f"{directory}: not root's alone to write")
        raise Unavailable(
            f"cannot claim a sandbox worker uid ({'; '.join(problems)}): set sandbox.worker_uid to a uid and gid "
            "no one else uses"
        )

    def _try_claim(self, directory: int, uid: int) -> int | None:
        """Take the lock of `uid`: None when taken (held from now on), else the holder's pid (0 when
        unknown)."""
        try:
            fd = os.open(str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=directory)
        except OSError as exc:
            raise Unavailable(
                f"cannot claim sandbox worker uid {uid}: {self.claim_dir}/{uid}: {exc.strerror}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            text = b""
            with contextlib.suppress(OSError):
                text = os.pread(fd, 32, 0)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise Unavailable(f"cannot claim sandbox worker uid {uid}: {exc.strerror}") from None
            return int(text) if text.strip().isdigit() else 0
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._claim = fd
        return None


def _ids_in_use() -> set[int]:
    """Every uid and gid (real, effective, saved, filesystem) of the processes this server can see."""
    used: set[int] = set()
    for entry in os.scandir(PROC):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"{PROC}/{entry.name}/status", encoding="ascii", errors="replace") as handle:
                for line in handle:
                    if line.startswith(("Uid:", "Gid:")):
                        used.update(int(field) for field in line.split()[1:])
        except (OSError, ValueError):
            continue  # gone meanwhile
    return used


def _named(uid: int) -> bool:
    """Whether a user or a group has this number (ours is used as both)."""
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
        except (KeyError, OverflowError):
            continue
        return True
    return False


def _subordinate_ranges() -> list[tuple[int, int]]:
    """The subordinate-id ranges (rootless containers' files and processes), as [start, stop) pairs, read
    once per claim."""
    ranges: list[tuple[int, int]] = []
    for path in SUBORDINATE_FILES:
        try:
            lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            parts = line.split(":")
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                start, count = int(parts[1]), int(parts[2])
                if count:
                    ranges.append((start, start + count))
    return ranges
