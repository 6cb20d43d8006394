"""Each server's sandbox workers run as a uid of their own, not the host's shared `nobody`: another
server's workers, or any `nobody` process, share neither their task count nor the right to signal or
trace them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import ValidationError

from awb.config import Config, SandboxConfig
from awb.errors import Unavailable
from awb.sandbox import identity as identity_module
from awb.sandbox.cpython import CPythonRuntime
from awb.sandbox.identity import AUTO_FIRST, WorkerIdentity
from awb.sandbox.javascript import JavaScriptRuntime
from awb.sandbox.registry import build_runtimes, describe_protections
from awb.sandbox.wasm import WasmRuntime
from sandbox_support import LIMITS

pytestmark = pytest.mark.anyio
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="workers leave root only when the server is root")

NOBODY = 65534
WHO = "import os\ndef run(params):\n    return {'uid': os.getresuid(), 'gid': os.getresgid()}\n"
JS_WHO = "function run(params) { return 1; }"

KILL = shutil.which("kill") or "/bin/kill"
CAT = shutil.which("cat") or "/bin/cat"


def signalled_by(uid: int, gid: int, pid: int) -> bool:
    """Whether a process of `uid`/`gid` may signal `pid` (signal 0: the check alone). A program of the
    system's runs as that user: the test's interpreter may lie where no other user can reach."""
    done = subprocess.run(
        [KILL, "-0", str(pid)], user=uid, group=gid, extra_groups=[], env={}, capture_output=True, text=True, timeout=10
    )
    if done.returncode == 0:
        return True
    assert "not permitted" in done.stderr.lower(), done.stderr  # refused, not gone
    return False


def owner(pid: int) -> tuple[int, int]:
    """(real uid of `pid`, owner of its /proc files): root owns a non-dumpable process's (all but the
    directory itself, which keeps the process's uid)."""
    status = Path(f"/proc/{pid}/status")
    uid = int(status.read_text().split("\nUid:")[1].split()[0])
    return uid, status.stat().st_uid


@as_root
async def test_two_servers_workers_run_as_uids_of_their_own_never_nobody(host_factory: Any) -> None:
    configs = [Config(), Config()]
    servers = [build_runtimes(config) for config in configs]
    try:
        seen = []
        for runtimes in servers:
            cpython, javascript = runtimes["cpython"], runtimes["javascript"]
            assert isinstance(cpython, CPythonRuntime) and isinstance(javascript, JavaScriptRuntime)
            value = (await cpython.execute(WHO, {}, LIMITS, host_factory())).value
            await javascript.execute(JS_WHO, {}, LIMITS, host_factory())
            # One identity per server, shared by its runtimes.
            assert cpython.identity is javascript.identity and cpython.identity.ids is not None
            uid, gid = cpython.identity.ids
            assert value == {"uid": [uid] * 3, "gid": [gid] * 3}
            assert owner(javascript._idle[0].process.pid)[0] == uid
            wasm = runtimes.get("wasm")
            if isinstance(wasm, WasmRuntime):  # its compile processes too
                await wasm.start()
                assert wasm.identity is cpython.identity and wasm._compilers._spare is not None
                assert owner((await wasm._compilers._spare).pid)[0] == uid
            seen.append(uid)
        # Apart, so RLIMIT_NPROC, which the kernel counts per uid, counts each server's tasks alone:
        # one server's thread bomb cannot use up the other's (or any `nobody` daemon's) task budget.
        assert seen[0] != seen[1] and NOBODY not in seen and all(uid >= AUTO_FIRST for uid in seen)
    finally:
        for runtimes in servers:
            for runtime in runtimes.values():
                await runtime.close()


@as_root
async def test_a_configured_worker_uid_is_the_one_workers_run_as(tmp_path: Path, host_factory: Any) -> None:
    wanted = AUTO_FIRST + 60_000
    identity = WorkerIdentity(wanted, claim_dirs=(tmp_path / "claims",))
    runtime = CPythonRuntime(pool_size=1, identity=identity)
    try:
        value = (await runtime.execute(WHO, {}, LIMITS, host_factory())).value
    finally:
        await runtime.close()
    assert value == {"uid": [wanted] * 3, "gid": [wanted] * 3}
    assert identity.ids is None  # given back when the runtime closed


@as_root
async def test_a_nobody_process_can_neither_signal_nor_trace_a_worker(
    cpython: CPythonRuntime, javascript: JavaScriptRuntime
) -> None:
    with anyio.fail_after(10):
        worker = await cpython._new_worker()
    try:
        pids = [worker.pid, worker.tool_pid, javascript._idle[0].process.pid]
        for pid in pids:
            # The shared `nobody` is a stranger now: the kernel refuses its signals, which reached
            # workers from outside their PID namespace while they ran as `nobody` too.
            assert not signalled_by(NOBODY, NOBODY, pid)
            uid, proc_owner = owner(pid)
            assert signalled_by(uid, uid, pid)  # the probe itself works: their own uid may
            # Not dumpable (the kernel then gives their /proc entries to root): no process but one with
            # CAP_SYS_PTRACE may trace them or read their memory, not even one of their own uid.
            assert proc_owner == 0
    finally:
        worker.close()


async def test_each_identity_claims_a_uid_no_other_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Only the claims decide here: other tests' sandbox workers (claimed elsewhere, in the machine's
    # claim directory) start and stop meanwhile, and which uids they run as is not this test's to know.
    monkeypatch.setattr(identity_module, "_ids_in_use", set)
    claims = (tmp_path / "claims",)
    first, second = WorkerIdentity(claim_dirs=claims), WorkerIdentity(claim_dirs=claims)
    if os.geteuid() != 0:
        assert first.acquire() == (os.geteuid(), os.getegid())  # nothing else to be without root
        return
    a, b = first.acquire(), second.acquire()
    assert a != b and a[0] == a[1] and b[0] == b[1]
    assert first.acquire() == a  # a second user of the same server shares it
    first.release()
    third = WorkerIdentity(claim_dirs=claims)
    assert third.acquire() != a  # still held by its other user
    for identity in (first, second, third):
        identity.release()
    assert WorkerIdentity(claim_dirs=claims).acquire() == a  # all given back: the first free one again
    assert (tmp_path / "claims" / str(a[0])).read_text().strip() == str(os.getpid())


@as_root
async def test_auto_skips_a_uid_a_process_runs_as(tmp_path: Path) -> None:
    claims = (tmp_path / "claims",)
    first = WorkerIdentity(claim_dirs=claims).acquire()[0]  # the first free one, given back at once
    holder = subprocess.Popen([CAT], user=first, group=first, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        identity = WorkerIdentity(claim_dirs=claims)
        assert identity.acquire()[0] != first
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=10)


@as_root
def test_a_configured_uid_another_server_holds_is_refused_with_the_holder(tmp_path: Path) -> None:
    claims = (tmp_path / "claims",)
    uid = AUTO_FIRST + 60_001
    holder = WorkerIdentity(uid, claim_dirs=claims)
    assert holder.acquire() == (uid, uid)
    try:
        with pytest.raises(Unavailable) as raised:
            WorkerIdentity(uid, claim_dirs=claims).acquire()
    finally:
        holder.release()
    assert f"sandbox.worker_uid {uid} is already the worker uid of another awb server" in raised.value.message
    assert f"pid {os.getpid()}" in raised.value.message


@as_root
async def test_without_an_identity_both_runtimes_refuse_calls_and_say_why(tmp_path: Path, host_factory: Any) -> None:
    claims = (tmp_path / "claims",)
    uid = AUTO_FIRST + 60_002
    holder = WorkerIdentity(uid, claim_dirs=claims)  # another server's
    holder.acquire()
    identity = WorkerIdentity(uid, claim_dirs=claims)
    runtimes: dict[str, Any] = {
        "cpython": CPythonRuntime(pool_size=1, identity=identity),
        "javascript": JavaScriptRuntime(pool_size=1, identity=identity),
    }
    try:
        for name, code in (("cpython", WHO), ("javascript", JS_WHO)):
            await runtimes[name].start()  # a server's warm start goes on without it
            with pytest.raises(Unavailable) as raised:
                await runtimes[name].execute(code, {}, LIMITS, host_factory())
            assert f"the {name} runtime refuses to run: sandbox.worker_uid {uid} is already" in raised.value.message
        report = describe_protections(runtimes)
        assert all(
            not report[name]["available"] and "another awb server" in report[name]["reason"] for name in runtimes
        )
        holder.release()  # the other server went: the next call gets the uid
        value = (await runtimes["cpython"].execute(WHO, {}, LIMITS, host_factory())).value
        assert value["uid"] == [uid] * 3
    finally:
        for runtime in runtimes.values():
            await runtime.close()
        holder.release()


@as_root
def test_a_claim_directory_others_may_write_to_is_not_used(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(Unavailable) as raised:
        WorkerIdentity(claim_dirs=(shared,)).acquire()
    assert "not root's alone to write" in raised.value.message and "set sandbox.worker_uid" in raised.value.message


def test_worker_uid_is_auto_or_a_uid_that_is_not_root() -> None:
    assert SandboxConfig().worker_uid == "auto"
    assert SandboxConfig(worker_uid=AUTO_FIRST).worker_uid == AUTO_FIRST
    assert SandboxConfig(worker_uid=str(AUTO_FIRST)).worker_uid == AUTO_FIRST  # as the environment gives it
    for bad in (0, -1, 1 << 32, "nobody", True, "0"):
        with pytest.raises(ValidationError, match="must be `auto` or a uid from 1 to 4294967294"):
            SandboxConfig(worker_uid=bad)


@as_root
def test_without_a_list_of_processes_auto_refuses_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No /proc mounted (or not readable): `auto` cannot tell which uids are in use; it says so, as an
    # `Unavailable` its runtimes report, not an OSError out of their start. A configured uid is taken.
    monkeypatch.setattr(identity_module, "PROC", str(tmp_path / "no-proc"))
    claims = (tmp_path / "claims",)
    with pytest.raises(Unavailable) as raised:
        WorkerIdentity(claim_dirs=claims).acquire()
    assert "cannot tell which uids processes run as" in raised.value.message
    assert "set sandbox.worker_uid" in raised.value.message
    configured = WorkerIdentity(AUTO_FIRST + 60_003, claim_dirs=claims)
    try:
        assert configured.acquire() == (AUTO_FIRST + 60_003, AUTO_FIRST + 60_003)
    finally:
        configured.release()


def _looked_up(monkeypatch: pytest.MonkeyPatch, *, named: bool) -> list[int]:
    """Every uid `auto` looks a name up for from now on (each `named` or not); no process's uid is busy."""
    looked: list[int] = []

    def lookup(uid: int) -> bool:
        looked.append(uid)
        return named

    monkeypatch.setattr(identity_module, "_named", lookup)
    monkeypatch.setattr(identity_module, "_ids_in_use", set)
    return looked


@as_root
def test_auto_looks_up_a_bounded_number_of_uids_then_says_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every uid of the range named by some user: the whole range took ~20 s to walk; a server waits for
    # its first call meanwhile. A bounded search gives up soon and says what to configure instead.
    looked = _looked_up(monkeypatch, named=True)
    with pytest.raises(Unavailable) as raised:
        WorkerIdentity(claim_dirs=(tmp_path / "claims",)).acquire()
    assert len(looked) <= 256
    message = raised.value.message
    assert f"among the {len(looked)} looked up" in message and f"{len(looked)} named by a user or group" in message
    assert message.endswith("set sandbox.worker_uid to a uid and gid no one else uses")


@as_root
def test_auto_passes_over_a_subordinate_range_without_looking_up_its_uids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    subuid = tmp_path / "subuid"
    subuid.write_text(f"builder:{AUTO_FIRST - 10}:60010\n")
    monkeypatch.setattr(identity_module, "SUBORDINATE_FILES", (str(subuid), str(tmp_path / "no-subgid")))
    looked = _looked_up(monkeypatch, named=False)
    identity = WorkerIdentity(claim_dirs=(tmp_path / "claims",))
    try:
        assert identity.acquire() == (AUTO_FIRST + 60_000, AUTO_FIRST + 60_000)
    finally:
        identity.release()
    assert looked == [AUTO_FIRST + 60_000]  # the 60,000 uids the range holds cost no look-up
    subuid.write_text(f"builder:{AUTO_FIRST}:65536\n")  # the whole range: refused at once, with the reason
    with pytest.raises(Unavailable) as raised:
        WorkerIdentity(claim_dirs=(tmp_path / "claims",)).acquire()
    assert looked == [AUTO_FIRST + 60_000]
    assert "lies in a subordinate-id range" in raised.value.message
    assert "set sandbox.worker_uid" in raised.value.message
