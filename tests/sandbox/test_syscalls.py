"""The seccomp programs, run through a small classic-BPF interpreter: every call number gets the answer
the tables give in each profile (worker, tool process, supervisor), and the argument checks (clone,
prlimit64, fcntl) hold."""

from __future__ import annotations

import errno
import struct

import pytest

from awb.sandbox.cpython import syscalls

X86_64 = 0xC000003E


def evaluate(program: bytes, nr: int, arch: int = X86_64, args: tuple[int, ...] = (0,) * 6) -> int:
    data = struct.pack("=iIQ6Q", nr, arch, 0, *args)
    code = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    for _ in range(len(code)):
        op, jt, jf, k = code[pc]
        if op == 0x20:  # ld [k]
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif op == 0x06:  # ret
            return k
        elif op == 0x05:  # ja
            pc += 1 + k
        elif op in (0x15, 0x35, 0x45):  # jeq, jge, jset
            taken = acc == k if op == 0x15 else acc >= k if op == 0x35 else bool(acc & k)
            pc += 1 + (jt if taken else jf)
        else:
            raise AssertionError(f"unexpected instruction {op:#x}")
    raise AssertionError("the program did not return")


EPERM = syscalls.RET_ERRNO | errno.EPERM


def test_tables_do_not_overlap_and_the_programs_fit_the_kernel_limit() -> None:
    syscalls.self_check()
    assert all(len(syscalls.program(p)) // 8 < 4096 for p in syscalls.PROFILES)


def expected(nr: int, profile: str = "worker") -> int:
    """The answer for `nr` with all arguments 0."""
    if nr in syscalls.allowed(profile).values() or nr in (302, 72):  # prlimit64(0, ...) on itself; fcntl(0, F_DUPFD)
        return syscalls.RET_ALLOW
    if nr in syscalls.KILLED.values() or nr == 56:  # clone without CLONE_THREAD
        return syscalls.RET_KILL_PROCESS
    if nr == 435:  # clone3
        return syscalls.RET_ERRNO | errno.ENOSYS
    return EPERM


@pytest.mark.parametrize("profile", syscalls.PROFILES)
def test_every_call_number_gets_its_tables_answer(profile: str) -> None:
    program = syscalls.program(profile)
    wrong = {nr: evaluate(program, nr) for nr in range(600) if evaluate(program, nr) != expected(nr, profile)}
    assert wrong == {}


def test_the_tool_process_has_no_socket_calls_and_only_the_supervisor_reaps() -> None:
    tool, worker, supervisor = (syscalls.program(p) for p in ("tool", "worker", "supervisor"))
    for nr in syscalls.SOCKET_IO.values():  # sendmsg, recvmsg, getsockopt...
        assert evaluate(tool, nr) == EPERM and evaluate(worker, nr) == evaluate(supervisor, nr) == syscalls.RET_ALLOW
    for nr in syscalls.WAITING.values():  # wait4, waitid
        assert evaluate(supervisor, nr) == syscalls.RET_ALLOW and evaluate(tool, nr) == evaluate(worker, nr) == EPERM
    for name in ("ptrace", "pidfd_getfd", "pidfd_open", "process_vm_readv", "process_vm_writev", "kcmp", "kill"):
        nr = syscalls.KILLED[name]  # reaching into the supervisor kills whoever tries, in every profile
        assert evaluate(tool, nr) == evaluate(supervisor, nr) == syscalls.RET_KILL_PROCESS
    assert evaluate(supervisor, 56) == evaluate(tool, 56) == syscalls.RET_KILL_PROCESS  # no fork after the fork


@pytest.mark.parametrize("profile", syscalls.PROFILES)
def test_argument_checks_and_foreign_architectures(profile: str) -> None:
    program = syscalls.program(profile)
    assert evaluate(program, 56, args=(0x00010000 | 0x100,) + (0,) * 5) == syscalls.RET_ALLOW
    for pid in (1, 12345, 1 << 32):
        assert evaluate(program, 302, args=(pid,) + (0,) * 5) == syscalls.RET_KILL_PROCESS
    for cmd, answer in ((1026, EPERM), (1024, EPERM), (1, syscalls.RET_ALLOW), (4, syscalls.RET_ALLOW)):
        assert evaluate(program, 72, args=(3, cmd, 0, 0, 0, 0)) == answer  # fcntl: no dnotify, no leases
    assert evaluate(program, 0, arch=0x40000003) == syscalls.RET_KILL_PROCESS  # i386
    assert evaluate(program, 0x40000000 | 0) == syscalls.RET_KILL_PROCESS  # x32
