"""The cpython worker against the kernel surface: identity, file metadata, IPC, other processes'
limits, memory outside RLIMIT_AS, what paths reveal, and calls the syscall allowlist refuses. Each
hostile tool must end in a structured error AND leave everything outside the sandbox unchanged."""

from __future__ import annotations

import ctypes
import math
import os
import resource
from pathlib import Path
from typing import Any

import anyio
import pytest

from awb.sandbox.base import Limits
from awb.sandbox.cpython import CPythonRuntime
from awb.sandbox.cpython.cgroups import own_memory_cgroup
from sandbox_support import LIMITS, failure

pytestmark = pytest.mark.anyio

ADD = "def run(params):\n    return params['a'] + params['b']\n"


async def still_serves(runtime: CPythonRuntime, host_factory: Any) -> None:
    with anyio.fail_after(10):
        assert (await runtime.execute(ADD, {"a": 2, "b": 3}, LIMITS, host_factory())).value == 5


def snapshot(path: Path) -> tuple[Any, ...]:
    """Everything about a file a metadata attack could change (ctime moves on any of them)."""
    st = os.stat(path)
    xattrs = {name: os.getxattr(path, name) for name in os.listxattr(path)}
    return (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_ctime_ns, xattrs)


@pytest.fixture
def inventory(dirs: dict[str, Path]) -> Path:
    """A file the server owns outside every sandbox tree, like the inventory database."""
    path = dirs["outside"] / "inventory.db"
    path.write_bytes(b"SQLite format 3\x00")
    path.chmod(0o600)
    os.setxattr(path, "user.awb", b"1")
    return path


@pytest.fixture
def granted_file(dirs: dict[str, Path]) -> Path:
    """A file the tool may read (so it can name and open it), which it must still not alter."""
    path = dirs["granted"] / "data.txt"
    os.setxattr(path, "user.awb", b"1")
    return path


# --- identity -------------------------------------------------------------------------------------

IDENTITY = """
import ctypes, os, struct
def run(params):
    header = ctypes.create_string_buffer(struct.pack('=Ii', 0x20080522, 0), 8)
    data = ctypes.create_string_buffer(24)
    assert ctypes.CDLL(None).capget(header, data) == 0
    return {'uid': os.getresuid(), 'gid': os.getresgid(), 'groups': os.getgroups(),
            'caps': list(struct.unpack('=6I', data.raw))}
"""


async def test_worker_runs_unprivileged_without_capabilities(cpython: CPythonRuntime, host_factory: Any) -> None:
    value = (await cpython.execute(IDENTITY, {}, LIMITS, host_factory())).value
    assert value["caps"] == [0] * 6
    assert 0 not in value["uid"] and 0 not in value["gid"] and value["groups"] == []
    if os.geteuid() == 0:  # the identity this runtime claimed for its workers, never `nobody`
        assert cpython.identity.ids is not None
        uid, gid = cpython.identity.ids
        assert value["uid"] == [uid] * 3 and value["gid"] == [gid] * 3 and uid != 65534


# --- file metadata --------------------------------------------------------------------------------

METADATA = {
    "chmod": "os.chmod(p, 0o777)",
    "chown": "os.chown(p, 0, 0)",
    "lchown": "os.lchown(p, 65534, 65534)",
    "utime": "os.utime(p, (0, 0))",
    "utime_now": "os.utime(p)",
    "setxattr": "os.setxattr(p, 'user.pwned', b'1')",
    "removexattr": "os.removexattr(p, 'user.awb')",
    "fchmod": "os.fchmod(os.open(p, os.O_RDONLY), 0o777)",
    "fchown": "os.fchown(os.open(p, os.O_RDONLY), 0, 0)",
    "futimens": "os.utime(os.open(p, os.O_RDONLY), (0, 0))",
    "fsetxattr": "os.setxattr(os.open(p, os.O_RDONLY), 'user.pwned', b'1')",
    "truncate": "os.truncate(p, 0)",
    "rename": "os.rename(p, p + '.moved')",
    "unlink": "os.unlink(p)",
}


@pytest.mark.parametrize("target", ["granted", "outside"])
@pytest.mark.parametrize("op", sorted(METADATA))
async def test_metadata_change_is_refused_and_the_file_is_unchanged(
    cpython: CPythonRuntime, host_factory: Any, inventory: Path, granted_file: Path, op: str, target: str
) -> None:
    path = granted_file if target == "granted" else inventory
    before = snapshot(path)
    code = f"import os\ndef run(params):\n    p = params['path']\n    {METADATA[op]}\n    return 'changed'\n"
    error = await failure(cpython, code, {"path": str(path)}, host_factory())
    assert error.code == "sandbox_violation", error
    assert snapshot(path) == before
    assert not Path(f"{path}.moved").exists()


RAW_CHMOD = """
import ctypes
def run(params):
    libc = ctypes.CDLL(None, use_errno=True)
    return [libc.syscall(90, params['path'].encode(), 0o777), ctypes.get_errno()]
"""


async def test_raw_chmod_syscall_fails_with_eperm_and_changes_nothing(
    cpython: CPythonRuntime, host_factory: Any, granted_file: Path
) -> None:
    before = snapshot(granted_file)
    value = (await cpython.execute(RAW_CHMOD, {"path": str(granted_file)}, LIMITS, host_factory())).value
    assert value == [-1, 1]  # EPERM from the allowlist's default answer
    assert snapshot(granted_file) == before


# --- other processes' limits ----------------------------------------------------------------------

PRLIMIT = {
    "zygote": "resource.prlimit(params['zygote'], resource.RLIMIT_NOFILE, (1, 1))",
    "server": "resource.prlimit(params['pid'], resource.RLIMIT_AS, (1 << 20, 1 << 20))",
    "init": "resource.prlimit(1, resource.RLIMIT_NOFILE, (1, 1))",
    "server_read": "return resource.prlimit(params['pid'], resource.RLIMIT_NOFILE)",
    "raw_server": "ctypes.CDLL(None).syscall(302, params['pid'], 7, ctypes.c_void_p(0), None)",
}


def limits_of(pid: int) -> str:
    return Path(f"/proc/{pid}/limits").read_text()


@pytest.mark.parametrize("victim", sorted(PRLIMIT))
async def test_prlimit_on_another_process_kills_the_tool_and_changes_no_limit(
    cpython: CPythonRuntime, host_factory: Any, victim: str
) -> None:
    assert cpython._zygote is not None
    zygote_pid = cpython._zygote.process.pid
    before = (limits_of(os.getpid()), limits_of(zygote_pid), limits_of(1))
    server_nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    code = f"import ctypes, os, resource\ndef run(params):\n    {PRLIMIT[victim]}\n"
    error = await failure(cpython, code, {"pid": os.getpid(), "zygote": zygote_pid}, host_factory())
    assert error.code == "sandbox_violation", error
    assert error.details.get("signal") == "SIGSYS"
    assert (limits_of(os.getpid()), limits_of(zygote_pid), limits_of(1)) == before
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == server_nofile
    await still_serves(cpython, host_factory)


async def test_a_tool_may_still_lower_its_own_limits(cpython: CPythonRuntime, host_factory: Any) -> None:
    code = (
        "import resource\ndef run(params):\n"
        "    resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))\n"
        "    return resource.getrlimit(resource.RLIMIT_NOFILE)\n"
    )
    assert (await cpython.execute(code, {}, LIMITS, host_factory())).value == [16, 16]


# --- IPC ------------------------------------------------------------------------------------------

IPC = {
    "sysv_shm": "libc.syscall(29, 0x1234, 4096, 0o1600)",
    "sysv_shm_host_key": "libc.syscall(29, params['host_key'], 0, 0)",
    "sysv_msg": "libc.syscall(68, 0x1234, 0o1600)",
    "sysv_sem": "libc.syscall(64, 0x1234, 1, 0o1600)",
    "posix_mq": "libc.syscall(240, b'/awb', 0o100 | 2, 0o600, None)",
    "posix_shm": "from multiprocessing import shared_memory\n    shared_memory.SharedMemory(create=True, size=4096)",
    "dev_shm": "open('/dev/shm/awb-leak', 'w').write('x')",
}


#: Columns of /proc/sysvipc/* that other processes move by merely using an object (times, last pids, and
#: a PostgreSQL segment's resident pages): left out, so a database on the machine cannot fail the check.
_SYSV_VOLATILE = {"cpid", "lpid", "lspid", "lrpid", "atime", "dtime", "ctime", "stime", "rtime", "otime", "rss", "swap"}


async def worker_uid(cpython: CPythonRuntime, host_factory: Any) -> int:
    """The user the sandbox's workers run as (`nobody` under a root zygote, else the zygote's own)."""
    code = "import os\ndef run(params):\n    return os.getuid()\n"
    uid: int = (await cpython.execute(code, {}, LIMITS, host_factory())).value
    return uid


def host_ipc(uid: int) -> tuple[list[dict[str, str]], list[str]]:
    """Every System V object and /dev/shm entry made by `uid`, the sandbox workers' user (identity, size,
    attachments, queued bytes), so a tool's leftover shows as a difference. Other users' objects are left
    out: PostgreSQL's, and under a root zygote the host segment of a run of this test elsewhere."""
    objects: list[dict[str, str]] = []
    for kind in ("shm", "msg", "sem"):
        header, *rows = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        names = header.split()
        for row in rows:
            fields = dict(zip(names, row.split(), strict=True))
            if int(fields["cuid"]) == uid:
                objects.append({"kind": kind} | {k: v for k, v in fields.items() if k not in _SYSV_VOLATILE})
    shm = Path("/dev/shm")
    entries = sorted(e.name for e in shm.iterdir() if e.lstat().st_uid == uid) if shm.is_dir() else []
    return sorted(objects, key=lambda o: sorted(o.items())), entries


def host_shm(key: int) -> dict[str, str]:
    """The host's own segment under `key`: still there, unattached, its size and rights unchanged."""
    header, *rows = Path("/proc/sysvipc/shm").read_text().splitlines()
    (fields,) = (
        f for f in (dict(zip(header.split(), row.split(), strict=True)) for row in rows) if f["key"] == str(key)
    )
    return {k: v for k, v in fields.items() if k not in _SYSV_VOLATILE}


@pytest.fixture
def host_segment() -> Any:
    """The key of a System V segment the host owns, a key a tool could guess. Made here (IPC_EXCL) under a
    key no other process holds: a fixed key would be shared with, and removed by, a run elsewhere."""
    libc = ctypes.CDLL(None, use_errno=True)
    for key in range(0x0A3B0000 + os.getpid() % 0x8000, 0x0A3C0000):
        shmid = libc.shmget(key, 4096, 0o3600)  # IPC_CREAT | IPC_EXCL | 0600
        if shmid >= 0:
            break
    assert shmid >= 0
    try:
        yield key
    finally:
        libc.shmctl(shmid, 0, None)  # IPC_RMID


@pytest.mark.parametrize("mechanism", sorted(IPC))
@pytest.mark.xdist_group("dev_shm")  # never beside Chromium (tests/web/test_browser.py)
async def test_ipc_is_unusable_and_leaves_nothing_on_the_host(
    cpython: CPythonRuntime, host_factory: Any, host_segment: int, mechanism: str
) -> None:
    uid = await worker_uid(cpython, host_factory)
    before = host_ipc(uid), host_shm(host_segment)
    code = f"import ctypes\nlibc = ctypes.CDLL(None)\ndef run(params):\n    {IPC[mechanism]}\n    return 'made'\n"
    error = await failure(cpython, code, {"host_key": host_segment}, host_factory())
    assert error.code == "sandbox_violation", error
    assert (host_ipc(uid), host_shm(host_segment)) == before
    await still_serves(cpython, host_factory)


# --- memory the address-space limit does not see --------------------------------------------------

MEMORY = {
    "memfd": "fd = os.memfd_create('x')\n    os.ftruncate(fd, 1 << 30)\n    m = mmap.mmap(fd, 1 << 30)",
    "shared_anonymous_10x": "m = mmap.mmap(-1, 10 * params['limit'], flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)",
    "shared_anonymous_touched": (
        "m = mmap.mmap(-1, params['limit'] * 3 // 2, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)\n"
        "    for i in range(0, len(m), 4096):\n        m[i] = 1"
    ),
    "private_anonymous_touched": (
        "m = mmap.mmap(-1, params['limit'] * 3 // 2)\n    for i in range(0, len(m), 4096):\n        m[i] = 1"
    ),
    "sysv_shm": "ctypes.CDLL(None).syscall(29, 0, 1 << 30, 0o1600)",
    "scratch_files": (
        "for i in range(64):\n        with open(f'f{i}', 'wb') as f:\n            f.write(bytes(1 << 20))"
    ),
}


@pytest.mark.parametrize("trick", sorted(MEMORY))
@pytest.mark.xdist_group("dev_shm")  # never beside Chromium (tests/web/test_browser.py)
async def test_memory_tricks_stay_within_the_limit(cpython: CPythonRuntime, host_factory: Any, trick: str) -> None:
    uid = await worker_uid(cpython, host_factory)
    before = host_ipc(uid)
    code = f"import ctypes, mmap, os\ndef run(params):\n    {MEMORY[trick]}\n    return 'allocated'\n"
    params = {"limit": LIMITS.memory_mb * 1024 * 1024}
    with anyio.fail_after(20):
        error = await failure(cpython, code, params, host_factory())
    assert error.code in {"memory_exceeded", "sandbox_violation"}, error
    assert host_ipc(uid) == before
    await still_serves(cpython, host_factory)


# --- what paths reveal ----------------------------------------------------------------------------

PEEK = {
    "stat": "return os.stat(p).st_size",
    "lstat": "return os.lstat(p).st_mtime",
    "getsize": "return os.path.getsize(p)",
    "listdir_parent": "return os.listdir(os.path.dirname(p))",
    "scandir_parent": "return [e.name for e in os.scandir(os.path.dirname(p))]",
    "readlink_proc": "return os.readlink('/proc/self/exe')",
    "listdir_proc": "return os.listdir('/proc')",
    "stat_etc_passwd": "return os.stat('/etc/passwd').st_size",
    "inotify": "return ctypes.CDLL(None).inotify_init1(0)",
    "dnotify": "import fcntl\n    return fcntl.fcntl(os.open(params['granted'], os.O_RDONLY), fcntl.F_NOTIFY, 0x80000003)",
    "lease": "import fcntl\n    return fcntl.fcntl(os.open(params['granted'] + '/data.txt', os.O_RDONLY), fcntl.F_SETLEASE, 0)",
    "fanotify": "return ctypes.CDLL(None).syscall(300, 0, 0)",
}


@pytest.mark.parametrize("peek", sorted(PEEK))
async def test_paths_outside_the_sandbox_reveal_nothing(
    cpython: CPythonRuntime, host_factory: Any, inventory: Path, peek: str
) -> None:
    code = f"import ctypes, os\ndef run(params):\n    p = params['path']\n    {PEEK[peek]}\n"
    params = {"path": str(inventory), "granted": str(inventory.parent.parent / "granted")}
    error = await failure(cpython, code, params, host_factory())
    assert error.code == "sandbox_violation", error
    assert "inventory.db" not in repr(error.to_dict()).replace(str(inventory), "")


async def test_the_host_name_is_not_the_tools_to_read(cpython: CPythonRuntime, host_factory: Any) -> None:
    code = "import os, socket\ndef run(params):\n    return [socket.gethostname(), os.uname().nodename]\n"
    value = (await cpython.execute(code, {}, LIMITS, host_factory())).value
    assert value == ["sandbox", "sandbox"] != [os.uname().nodename] * 2


async def test_host_paths_do_not_exist_for_the_tool(
    cpython: CPythonRuntime, host_factory: Any, dirs: dict[str, Path], inventory: Path
) -> None:
    # The repository's pyproject.toml sits beside `src`, which the interpreter may read.
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    host_paths = ["/proc/self", "/sys/kernel", "/etc/passwd", str(pyproject), str(inventory), str(dirs["outside"])]
    assert all(os.path.exists(p) for p in host_paths)
    code = "import os\ndef run(params):\n    return [os.path.exists(p) for p in params['paths']]\n"
    params = {"paths": [*host_paths, str(dirs["granted"])]}
    value = (await cpython.execute(code, params, LIMITS, host_factory())).value
    assert value == [False] * len(host_paths) + [True]


# --- kernel facilities the allowlist kills or refuses ---------------------------------------------

KILLED = {
    "keyctl": "libc.syscall(250, 0, 0)",
    "add_key": "libc.syscall(248, b'user', b'k', b'v', 1, -2)",
    "bpf": "libc.syscall(321, 0, None, 0)",
    "userfaultfd": "libc.syscall(323, 0)",
    "perf_event_open": "libc.syscall(298, None, 0, -1, -1, 0)",
    "process_vm_readv": "libc.syscall(310, os.getppid(), None, 0, None, 0, 0)",
    "unshare": "libc.unshare(0x40000000)",
    "setns": "libc.syscall(308, 0, 0)",
    "mount": "libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)",
    "io_uring": "libc.syscall(425, 8, None)",
    "ptrace": "libc.ptrace(16, os.getppid(), None, None)",
    "pidfd_open": "libc.syscall(434, os.getppid(), 0)",
    "pidfd_getfd": "libc.syscall(438, 3, 3, 0)",
    "process_vm_writev": "libc.syscall(311, 1, None, 0, None, 0, 0)",
    "kcmp": "libc.syscall(312, 1, 1, 0, 0, 0)",
    "kill_self": "libc.kill(1, 9)",
}
REFUSED = {
    "sched_setaffinity": "os.sched_setaffinity(0, {0})",
    "setpriority": "os.setpriority(os.PRIO_PROCESS, 0, 5)",
    "mknod": "os.mknod('fifo', 0o600 | 0o010000)",
    "setuid_root": "os.setuid(0)",
}


@pytest.mark.parametrize("call", sorted(KILLED))
async def test_kernel_facilities_kill_the_tool(cpython: CPythonRuntime, host_factory: Any, call: str) -> None:
    code = f"import ctypes, os\nlibc = ctypes.CDLL(None)\ndef run(params):\n    return {KILLED[call]}\n"
    error = await failure(cpython, code, {}, host_factory())
    assert error.code == "sandbox_violation" and error.details.get("signal") == "SIGSYS", error
    await still_serves(cpython, host_factory)


@pytest.mark.parametrize("call", sorted(REFUSED))
async def test_calls_off_the_allowlist_are_refused(cpython: CPythonRuntime, host_factory: Any, call: str) -> None:
    code = f"import os\ndef run(params):\n    {REFUSED[call]}\n    return 'done'\n"
    error = await failure(cpython, code, {}, host_factory())
    assert error.code == "sandbox_violation", error


ORDINARY = """
import bz2, datetime, decimal, hashlib, json, lzma, math, os, random, re, sqlite3, ssl, tempfile, threading
import time, zlib, zoneinfo
def run(params):
    out = {}
    db = sqlite3.connect(':memory:')
    db.execute('create table t(x)')
    db.execute('insert into t values (41)')
    out['sqlite'] = db.execute('select x + 1 from t').fetchone()[0]
    out['paris'] = datetime.datetime(2024, 1, 1, tzinfo=zoneinfo.ZoneInfo('Europe/Paris')).utcoffset().seconds
    out['packed'] = len(lzma.compress(b'a' * 100)) > 0 and len(bz2.compress(b'a' * 100)) > 0
    def work():
        out['thread'] = sum(math.isqrt(i) for i in range(1000))
    t = threading.Thread(target=work)
    t.start(); t.join()
    with tempfile.NamedTemporaryFile('w', dir='.', delete=False) as f:
        f.write('x' * 1000)
    os.rename(f.name, 'kept.txt')
    out['files'] = sorted(os.listdir('.'))
    out['re'] = re.findall(r'\\d+', 'a1b22')
    out['date'] = datetime.date(2024, 2, 29).isoformat()
    out['dec'] = str(decimal.Decimal('1.1') * 3)
    out['hash'] = hashlib.sha256(b'x').hexdigest()[:8]
    out['zlib'] = len(zlib.compress(b'a' * 1000))
    out['rand'] = 0 <= random.random() < 1
    out['json'] = json.loads(json.dumps({'k': [1, 2]}))
    out['slept'] = time.sleep(0.001) is None
    out['cwd_ok'] = os.getcwd() == os.environ['HOME']
    return out
"""


async def test_ordinary_python_still_works_under_the_allowlist(cpython: CPythonRuntime, host_factory: Any) -> None:
    value = (await cpython.execute(ORDINARY, {}, LIMITS, host_factory())).value
    assert value["thread"] == sum(math.isqrt(i) for i in range(1000))
    assert value["files"] == ["kept.txt"]
    assert value["re"] == ["1", "22"] and value["date"] == "2024-02-29" and value["dec"] == "3.3"
    assert value["hash"] == "2d711642" and value["rand"] is True and value["json"] == {"k": [1, 2]}
    assert value["slept"] is True and value["cwd_ok"] is True
    assert value["sqlite"] == 42 and value["paris"] == 3600 and value["packed"] is True


def seen_from_the_host(pid: int) -> dict[str, Any]:
    status = dict(
        line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line
    )
    namespaces = {kind: os.readlink(f"/proc/{pid}/ns/{kind}") for kind in ("ipc", "mnt", "net")}
    return {
        "uid": status["Uid"].split(),
        "cap_eff": int(status["CapEff"], 16),
        "cap_bnd": int(status["CapBnd"], 16),
        "no_new_privs": status["NoNewPrivs"].strip(),
        "seccomp": status["Seccomp"].strip(),
        "namespaces": namespaces,
    }


def assert_locked(view: dict[str, Any]) -> None:
    assert "0" not in view["uid"]
    assert view["cap_eff"] == 0 and view["cap_bnd"] == 0
    assert view["no_new_privs"] == "1" and view["seccomp"] == "2"


async def test_pre_forked_cpython_workers_are_locked_down_as_the_host_sees_them(cpython: CPythonRuntime) -> None:
    with anyio.fail_after(10):
        worker = await cpython._new_worker()  # reports ready only once locked down
    try:
        view = seen_from_the_host(worker.pid)
    finally:
        worker.close()
    assert_locked(view)
    mine = seen_from_the_host(os.getpid())["namespaces"]
    assert all(view["namespaces"][kind] != mine[kind] for kind in mine)


async def test_javascript_workers_are_locked_down_as_the_host_sees_them(javascript: Any) -> None:
    worker = javascript._idle[0]
    view = seen_from_the_host(worker.process.pid)
    assert_locked(view)
    mine = seen_from_the_host(os.getpid())["namespaces"]
    assert view["namespaces"]["ipc"] != mine["ipc"] and view["namespaces"]["net"] != mine["net"]


async def test_scratch_files_count_against_the_memory_limit(cpython: CPythonRuntime, host_factory: Any) -> None:
    # 12 MB of files plus 12 MB of heap: each under the 20 MB limit, together over it. Without the
    # files counted, the tool would spin until its time limit instead.
    code = (
        "def run(params):\n"
        "    for i in range(12):\n"
        "        with open(f'f{i}', 'wb') as f:\n"
        "            f.write(b'x' * (1 << 20))\n"
        "    heap = bytearray(b'y' * (12 << 20))\n"
        "    while True:\n"
        "        pass\n"
    )
    limits = Limits(timeout_ms=5000, memory_mb=20)
    with anyio.fail_after(20):
        error = await failure(cpython, code, {}, host_factory(), limits)
    assert error.code == "memory_exceeded", error


async def test_pipes_are_refused(cpython: CPythonRuntime, host_factory: Any) -> None:
    error = await failure(cpython, "import os\ndef run(params):\n    return os.pipe()\n", {}, host_factory())
    assert error.code == "sandbox_violation", error


async def test_numpy_with_its_blas_threads_works_under_the_allowlist(
    cpython: CPythonRuntime, host_factory: Any
) -> None:
    code = (
        "import numpy as np\n"
        "def run(params):\n"
        "    a = np.arange(250_000, dtype=float).reshape(500, 500)\n"
        "    return [float((a @ a.T).trace()), np.linalg.inv(np.eye(3) * 2).tolist()[0][0]]\n"
    )
    limits = Limits(timeout_ms=20_000, memory_mb=300)
    with anyio.fail_after(30):
        value = (await cpython.execute(code, {}, limits, host_factory())).value
    a = [float(i) for i in range(250_000)]
    assert value == [sum(x * x for x in a), 0.5]


#: Whether this machine lets a root server make memory cgroups (it does where CI runs: root, cgroup v1).
CGROUPS = os.geteuid() == 0 and own_memory_cgroup() is not None
needs_cgroups = pytest.mark.skipif(not CGROUPS, reason="no writable memory cgroup on this machine")


async def test_the_runtime_uses_memory_cgroups_exactly_when_the_machine_offers_them(cpython: CPythonRuntime) -> None:
    assert cpython.protections()["memory_cgroup"] is CGROUPS


@needs_cgroups
async def test_workers_each_get_a_memory_cgroup_that_is_removed_after_them(cpython: CPythonRuntime) -> None:
    with anyio.fail_after(10):
        worker = await cpython._new_worker()
    try:
        line = next(x for x in Path(f"/proc/{worker.pid}/cgroup").read_text().splitlines() if "memory" in x)
        group = Path(worker.limit_path).parent
        assert line.endswith(f"/awb-{cpython._zygote.process.pid}/{group.name}")  # type: ignore[union-attr]
        assert group.is_dir()
    finally:
        worker.close()
    with anyio.fail_after(10):
        await worker.exited
    assert not group.exists()


@needs_cgroups
async def test_the_memory_cgroup_alone_stops_what_the_watchdog_misses(
    monkeypatch: pytest.MonkeyPatch, host_factory: Any
) -> None:
    from awb.sandbox.cpython import runtime as runtime_module

    async def blind_watchdog(*args: Any) -> None:
        return None

    monkeypatch.setattr(runtime_module, "watch_rss", blind_watchdog)
    cpython = CPythonRuntime(pool_size=1)
    try:
        # 70 MB of heap fits RLIMIT_AS (start size + 20 MB + 64 MB) but not the cgroup (20 MB + 32 MB).
        code = "def run(params):\n    data = b'x' * (70 << 20)\n    return len(data)\n"
        with anyio.fail_after(20):
            error = await failure(cpython, code, {}, host_factory(), Limits(timeout_ms=5000, memory_mb=20))
        assert error.code == "memory_exceeded" and "cgroup" in error.message, error
        with anyio.fail_after(10):
            assert (await cpython.execute(ADD, {"a": 1, "b": 1}, LIMITS, host_factory())).value == 2
    finally:
        await cpython.close()


async def test_files_one_call_leaves_in_scratch_are_never_seen_by_the_next(
    cpython: CPythonRuntime, host_factory: Any
) -> None:
    leave = (
        "import os\ndef run(params):\n"
        "    os.makedirs('d/e', mode=0)\n"
        "    open('left.txt', 'w').write('secret')\n"
        "    return [os.getcwd(), sorted(os.listdir('.'))]\n"
    )
    look = "import os\ndef run(params):\n    return [os.getcwd(), sorted(os.listdir('.'))]\n"
    seen: set[str] = set()
    for _ in range(6):  # enough calls for scratch directories to be reused
        with anyio.fail_after(10):
            left_in, left = (await cpython.execute(leave, {}, LIMITS, host_factory())).value
            cwd, listing = (await cpython.execute(look, {}, LIMITS, host_factory())).value
        assert left == ["d", "left.txt"] and listing == []
        seen.update((left_in, cwd))
    assert len(seen) < 12  # scratch mounts were reused (12 calls), and came back empty


@needs_cgroups
async def test_closing_the_runtime_leaves_no_cgroup_behind(host_factory: Any) -> None:
    # The close kills pool workers wherever they are in their start-up, even between forking their
    # tool process and reporting it: the zygote removes each group only once it is empty.
    found = own_memory_cgroup()
    assert found is not None
    for _ in range(5):
        runtime = CPythonRuntime(pool_size=2)
        try:
            with anyio.fail_after(20):
                assert (await runtime.execute(ADD, {"a": 1, "b": 2}, LIMITS, host_factory())).value == 3
            assert runtime._zygote is not None
            group = Path(found[0]) / f"awb-{runtime._zygote.process.pid}"
            assert group.is_dir()
        finally:
            await runtime.close()
        assert not group.exists(), sorted(p.name for p in group.iterdir())
