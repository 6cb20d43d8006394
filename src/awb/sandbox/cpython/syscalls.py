"""The worker's seccomp filter: an ALLOWLIST of the system calls pure-compute Python needs.

Three profiles share the tables: `worker` (a JavaScript worker: the allowlist as it stands), `tool`
(the cpython process that runs tool code: no socket calls, since it holds no socket) and `supervisor`
(the cpython worker's trusted half, which also waits for its tool process).

Three answers, checked in this order:
- named hostile classes (process creation, exec, sockets, signals to others, ptrace, namespaces and
  mounts, kernel keys, bpf, perf, userfaultfd, io_uring, System V and POSIX IPC, memfd, inotify and
  fanotify, prlimit on another process) kill the worker at once (SIGSYS, seen as `sandbox_violation`);
- the allowlist below passes;
- everything else fails with EPERM (a `PermissionError` in Python): file metadata changes (chmod,
  chown, utime, xattr writes), mknod, mlock, scheduling and memory-policy changes, personality, pipes
  (kernel buffers of up to 1 MB each that no memory limit counts, and with no second process to read
  them)...

Standard library only: loaded by path inside the zygote. x86_64 numbers.
"""

from __future__ import annotations

import errno
import struct

#: Calls a tool has no business making: the worker dies with SIGSYS.
KILLED = {
    # processes, exec, signals to others, tracing
    "fork": 57, "vfork": 58, "execve": 59, "execveat": 322,
    "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
    "pidfd_send_signal": 424, "pidfd_open": 434, "pidfd_getfd": 438,
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "process_madvise": 440,
    # network
    "socket": 41, "connect": 42, "accept": 43, "bind": 49, "listen": 50, "socketpair": 53, "accept4": 288,
    # namespaces, mounts, roots
    "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442,
    # kernel facilities
    "bpf": 321, "perf_event_open": 298, "keyctl": 250, "add_key": 248, "request_key": 249,
    "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
    "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163, "settimeofday": 164, "clock_settime": 227,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "quotactl": 179, "syslog": 103,
    # System V and POSIX IPC: shared state between calls and memory outside the worker's limit
    "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65, "semctl": 66,
    "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71,
    "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243, "mq_notify": 244,
    "mq_getsetattr": 245,
    # memory that RLIMIT_AS does not see, and watching files
    "memfd_create": 319, "memfd_secret": 447,
    "inotify_init": 253, "inotify_init1": 294, "inotify_add_watch": 254, "inotify_rm_watch": 255,
    "fanotify_init": 300, "fanotify_mark": 301,
}  # fmt: skip

#: What a forked CPython running pure-compute code (threads included) makes. Most frequent first.
ALLOWED = {
    "read": 0, "write": 1, "futex": 202, "mmap": 9, "munmap": 11, "brk": 12, "mprotect": 10, "madvise": 28,
    "mremap": 25, "close": 3, "openat": 257, "open": 2, "newfstatat": 262, "fstat": 5, "stat": 4, "lstat": 6,
    "statx": 332, "lseek": 8, "getdents64": 217, "getdents": 78, "ioctl": 16,
    "pread64": 17, "pwrite64": 18, "readv": 19, "writev": 20, "preadv": 295, "pwritev": 296,
    "preadv2": 327, "pwritev2": 328, "access": 21, "faccessat": 269, "faccessat2": 439,
    "readlink": 89, "readlinkat": 267, "getcwd": 79, "chdir": 80, "fchdir": 81,
    "mkdir": 83, "mkdirat": 258, "rmdir": 84, "unlink": 87, "unlinkat": 263, "rename": 82, "renameat": 264,
    "renameat2": 316, "link": 86, "linkat": 265, "symlink": 88, "symlinkat": 266, "creat": 85,
    "truncate": 76, "ftruncate": 77, "fallocate": 285, "fsync": 74, "fdatasync": 75, "flock": 73,
    "fadvise64": 221, "readahead": 187, "sendfile": 40, "copy_file_range": 326, "statfs": 137, "fstatfs": 138,
    "getxattr": 191, "lgetxattr": 192, "fgetxattr": 193, "listxattr": 194, "llistxattr": 195,
    "flistxattr": 196, "umask": 95,
    "dup": 32, "dup2": 33, "dup3": 292, "close_range": 436,
    "poll": 7, "ppoll": 271, "select": 23, "pselect6": 270, "epoll_create": 213, "epoll_create1": 291,
    "epoll_ctl": 233, "epoll_wait": 232, "epoll_pwait": 281, "epoll_pwait2": 441,
    "eventfd": 284, "eventfd2": 290, "timerfd_create": 283, "timerfd_settime": 286, "timerfd_gettime": 287,
    # the worker's own, already connected socket to the server
    "sendto": 44, "recvfrom": 45, "sendmsg": 46, "recvmsg": 47, "shutdown": 48, "getsockname": 51,
    "getpeername": 52, "getsockopt": 55, "setsockopt": 54,
    "rt_sigaction": 13, "rt_sigprocmask": 14, "rt_sigreturn": 15, "rt_sigpending": 127,
    "rt_sigtimedwait": 128, "rt_sigsuspend": 130, "sigaltstack": 131, "pause": 34, "restart_syscall": 219,
    "nanosleep": 35, "clock_nanosleep": 230, "clock_gettime": 228, "clock_getres": 229, "gettimeofday": 96,
    "time": 201, "getitimer": 36, "setitimer": 38, "alarm": 37, "timer_create": 222, "timer_settime": 223,
    "timer_gettime": 224, "timer_getoverrun": 225, "timer_delete": 226, "times": 100,
    "getpid": 39, "getppid": 110, "gettid": 186, "getuid": 102, "geteuid": 107, "getgid": 104, "getegid": 108,
    "getresuid": 118, "getresgid": 120, "getgroups": 115, "getpgrp": 111, "getpgid": 121, "getsid": 124,
    "capget": 125, "uname": 63, "sysinfo": 99, "getrusage": 98, "getrlimit": 97, "setrlimit": 160,
    "getpriority": 140, "sched_yield": 24, "sched_getaffinity": 204, "sched_getparam": 143,
    "sched_getscheduler": 145, "sched_get_priority_max": 146, "sched_get_priority_min": 147, "getcpu": 309,
    "getrandom": 318, "msync": 26, "mincore": 27, "membarrier": 324,
    "set_robust_list": 273, "get_robust_list": 274, "set_tid_address": 218, "rseq": 334, "arch_prctl": 158,
    "futex_waitv": 449, "exit": 60, "exit_group": 231,
    # narrowing itself further stays possible (a second Landlock layer per call)
    "landlock_create_ruleset": 444, "landlock_add_rule": 445, "landlock_restrict_self": 446,
}  # fmt: skip

#: Calls on an already connected socket: the tool process has none, so these answer EPERM there.
SOCKET_IO = {
    name: ALLOWED[name]
    for name in (
        "sendto", "recvfrom", "sendmsg", "recvmsg", "shutdown", "getsockname", "getpeername", "getsockopt",
        "setsockopt",
    )
}  # fmt: skip
#: Only the supervisor reaps a child (its tool process, for the exit status and peak memory).
WAITING = {"wait4": 61, "waitid": 247}
PROFILES = ("worker", "tool", "supervisor")


def allowed(profile: str = "worker") -> dict[str, int]:
    """The calls that pass under `profile`."""
    if profile == "worker":
        return dict(ALLOWED)
    if profile == "tool":
        return {name: nr for name, nr in ALLOWED.items() if name not in SOCKET_IO}
    if profile == "supervisor":
        return {**ALLOWED, **WAITING}
    raise ValueError(f"unknown seccomp profile {profile!r}")


_CLONE, _CLONE3, _PRLIMIT64, _FCNTL = 56, 435, 302, 72
#: fcntl commands refused: directory change notification (dnotify) and leases (a way to learn when
#: someone else opens a file).
_F_SETLEASE, _F_NOTIFY = 1024, 1026
_CLONE_THREAD = 0x00010000
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000

_LD, _JEQ, _JSET, _JGE, _JA, _RET = 0x20, 0x15, 0x45, 0x35, 0x05, 0x06
# struct seccomp_data: nr @0, arch @4, instruction_pointer @8, args[6] @16 (u64 each, little-endian)
_NR, _ARCH, _ARG0_LO, _ARG0_HI, _ARG1_LO = 0, 4, 16, 20, 24
#: Past every number in the tables: the rest of the range shares the default answer.
_NR_END = 512


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _answers(profile: str) -> list[tuple[int, str]]:
    """(first number, answer) for each run of consecutive numbers with the same answer."""
    answer = dict.fromkeys(range(_NR_END), "deny")
    answer.update(dict.fromkeys(allowed(profile).values(), "allow"))
    answer.update(dict.fromkeys(KILLED.values(), "kill"))
    answer.update({_CLONE: "clone", _CLONE3: "clone3", _PRLIMIT64: "prlimit", _FCNTL: "fcntl"})
    runs: list[tuple[int, str]] = []
    for number in range(_NR_END):
        if not runs or runs[-1][1] != answer[number]:
            runs.append((number, answer[number]))
    if runs[-1][1] != "deny":
        runs.append((_NR_END, "deny"))
    return runs


def _leaf(answer: str) -> list[bytes]:
    kill, allow = _ins(_RET, 0, 0, RET_KILL_PROCESS), _ins(_RET, 0, 0, RET_ALLOW)
    if answer == "allow":
        return [allow]
    if answer == "kill":
        return [kill]
    if answer == "deny":
        return [_ins(_RET, 0, 0, RET_ERRNO | errno.EPERM)]
    if answer == "clone3":  # ENOSYS: the C library falls back to clone, which is checked
        return [_ins(_RET, 0, 0, RET_ERRNO | errno.ENOSYS)]
    if answer == "fcntl":  # everything but dnotify and leases (the command is the second argument)
        eperm = _ins(_RET, 0, 0, RET_ERRNO | errno.EPERM)
        return [_ins(_LD, 0, 0, _ARG1_LO), _ins(_JEQ, 1, 0, _F_NOTIFY), _ins(_JEQ, 0, 1, _F_SETLEASE), eperm, allow]
    if answer == "clone":  # threads only
        return [_ins(_LD, 0, 0, _ARG0_LO), _ins(_JSET, 1, 0, _CLONE_THREAD), kill, allow]
    # prlimit64(pid, ...): pid must be 0 (this process); any other pid is an attack on a neighbour
    return [
        _ins(_LD, 0, 0, _ARG0_LO),
        _ins(_JEQ, 0, 3, 0),
        _ins(_LD, 0, 0, _ARG0_HI),
        _ins(_JEQ, 0, 1, 0),
        allow,
        kill,
    ]


def _tree(runs: list[tuple[int, str]]) -> list[bytes]:
    """A binary search over the runs: about log2(runs) comparisons per call, so the filter costs little
    to attach (the kernel evaluates it for every number to cache constant answers) and to run."""
    if len(runs) == 1:
        return _leaf(runs[0][1])
    middle = len(runs) // 2
    left, right = _tree(runs[:middle]), _tree(runs[middle:])
    boundary = runs[middle][0]
    if len(left) <= 255:
        return [_ins(_JGE, len(left), 0, boundary), *left, *right]
    return [_ins(_JGE, 0, 1, boundary), _ins(_JA, 0, 0, len(left)), *left, *right]


_PROGRAMS: dict[str, bytes] = {}


def program(profile: str = "worker") -> bytes:
    """Classic BPF for `profile`: other architectures and x32 die, then a search over the call number.
    Built once per process (the zygote builds them before forking)."""
    if profile not in _PROGRAMS:
        kill = _ins(_RET, 0, 0, RET_KILL_PROCESS)
        prog = [
            _ins(_LD, 0, 0, _ARCH),
            _ins(_JEQ, 1, 0, _AUDIT_ARCH_X86_64),
            kill,
            _ins(_LD, 0, 0, _NR),
            _ins(_JGE, 0, 1, _X32_SYSCALL_BIT),
            kill,
            *_tree(_answers(profile)),
        ]
        _PROGRAMS[profile] = b"".join(prog)
    return _PROGRAMS[profile]


def self_check() -> None:
    """The two tables must not overlap (an allowed call that is also 'killed' would be ambiguous)."""
    special = {_CLONE, _CLONE3, _PRLIMIT64, _FCNTL}
    overlap = set().union(*(allowed(p).values() for p in PROFILES)) & (set(KILLED.values()) | special)
    if overlap:
        raise AssertionError(f"syscalls both allowed and refused: {sorted(overlap)}")
