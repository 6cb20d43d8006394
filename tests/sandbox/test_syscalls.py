"""The worker's seccomp program, run through a small classic-BPF interpreter: every call number gets
the answer the tables give, and the argument checks (clone, prlimit64) hold."""

from __future__ import annotations

import errno
import struct

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


PROGRAM = syscalls.program()
EPERM = syscalls.RET_ERRNO | errno.EPERM


def test_tables_do_not_overlap_and_the_program_fits_the_kernel_limit() -> None:
    syscalls.self_check()
    assert len(PROGRAM) // 8 < 4096


def expected(nr: int) -> int:
    """The answer for `nr` with all arguments 0."""
    if nr in syscalls.ALLOWED.values() or nr in (302, 72):  # prlimit64(0, ...) on itself; fcntl(0, F_DUPFD)
        return syscalls.RET_ALLOW
    if nr in syscalls.KILLED.values() or nr == 56:  # clone without CLONE_THREAD
        return syscalls.RET_KILL_PROCESS
    if nr == 435:  # clone3
        return syscalls.RET_ERRNO | errno.ENOSYS
    return EPERM


def test_every_call_number_gets_its_tables_answer() -> None:
    wrong = {nr: evaluate(PROGRAM, nr) for nr in range(600) if evaluate(PROGRAM, nr) != expected(nr)}
    assert wrong == {}


def test_argument_checks_and_foreign_architectures() -> None:
    assert evaluate(PROGRAM, 56, args=(0x00010000 | 0x100,) + (0,) * 5) == syscalls.RET_ALLOW
    for pid in (1, 12345, 1 << 32):
        assert evaluate(PROGRAM, 302, args=(pid,) + (0,) * 5) == syscalls.RET_KILL_PROCESS
    for cmd, answer in ((1026, EPERM), (1024, EPERM), (1, syscalls.RET_ALLOW), (4, syscalls.RET_ALLOW)):
        assert evaluate(PROGRAM, 72, args=(3, cmd, 0, 0, 0, 0)) == answer  # fcntl: no dnotify, no leases
    assert evaluate(PROGRAM, 0, arch=0x40000003) == syscalls.RET_KILL_PROCESS  # i386
    assert evaluate(PROGRAM, 0x40000000 | 0) == syscalls.RET_KILL_PROCESS  # x32
