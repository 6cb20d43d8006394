"""A wasm compile process: compiles one module with the settings the server runs modules with and
answers with the compiled artifact, which the server loads (`wasmtime.Module.deserialize`).

Compiling is the one step of a wasm call that cannot be interrupted and whose cost a module's author
chooses: 62 KB of functions declaring 50,000 locals each took 24 s of the server's CPU, on after the
call had given up on it. Here it runs in a process the server ends at the
call's deadline, on one core, within an address-space limit, locked down as a JavaScript worker is (no
files, no network, a seccomp allowlist) before it reads the module.

Run by path (`python -I -B wasm_compiler.py <uid> <gid>`, the identity it leaves root for, or without
them, then sent as its first frame); standard library plus `wasmtime`. Frames (4-byte big-endian length
+ body) on stdin/stdout:

server -> worker  {"uid": ..., "gid": ...}                                  (JSON; only without the ids in argv)
worker -> server  {"op": "ready", "layers": {...}}                          (JSON)
server -> worker  memory budget in MB (4-byte big-endian) + the module's source in UTF-8
worker -> server  b"\\x00" + compiled artifact | b"\\x01" + UTF-8 error message
"""

from __future__ import annotations

import base64
import binascii
import os
import resource
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "cpython"))
sys.path.insert(0, HERE)

import frames  # type: ignore[import-not-found,unused-ignore]  # noqa: E402
import lockdown  # type: ignore[import-not-found,unused-ignore]  # noqa: E402
import namespaces  # type: ignore[import-not-found,unused-ignore]  # noqa: E402
import wasm_engine  # type: ignore[import-not-found,unused-ignore]  # noqa: E402
import wasmtime  # noqa: E402

BUDGET = struct.Struct(">I")
#: The largest job: `awb.sandbox.wasm.MAX_MODULE_CHARS` characters of up to 4 UTF-8 bytes each.
MAX_JOB_BYTES = 4 * 8 * 1024 * 1024 + BUDGET.size
OK, FAILED = b"\x00", b"\x01"
WARM_UP = '(module (memory (export "memory") 1) (func (export "run") (result i32) (i32.const 1)))'


def compile_module(engine: wasmtime.Engine, text: str) -> bytes:
    """The compiled artifact of `text` (WAT, or base64 of a binary); ValueError says why not."""
    text = text.strip()
    source: str | bytes
    if text.startswith("("):
        source = text
    else:
        try:
            source = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("wasm code must be WAT text or base64 of a WebAssembly binary") from None
    try:
        return bytes(wasmtime.Module(engine, source).serialize())
    except wasmtime.WasmtimeError as exc:
        first = (str(exc).strip().splitlines() or ["WasmtimeError"])[0]
        raise ValueError(f"the module does not compile: {first}") from None


def main() -> None:
    inp, out = sys.stdin.fileno(), sys.stdout.fileno()
    sys.stdout = sys.stderr  # nothing else may write frames
    # Everything compiling needs from the filesystem (the engine's library) is loaded before the lockdown.
    engine = wasmtime.Engine(wasm_engine.engine_config(parallel=False))
    compile_module(engine, WARM_UP)
    base = _address_space()
    available = lockdown.probe()
    available.update(namespaces.unshare(network=True, ipc=True, mounts=False))
    # The server's workers' own ids, never host root: on the command line, or, for a process started before
    # they were claimed (`awb doctor` starts one ahead), the first frame it is sent.
    if len(sys.argv) > 2:
        worker_ids = (int(sys.argv[1]), int(sys.argv[2]))
    else:
        try:
            ids = frames.read_frame(inp, 1 << 10)
        except (EOFError, frames.FrameTooLarge, frames.BadFrame):
            return
        worker_ids = (int(ids["uid"]), int(ids["gid"]))
    if os.geteuid() == 0 and min(worker_ids) <= 0:  # (a non-root server's own ids are kept, gid 0 or not)
        raise SystemExit("refusing to leave root for root")
    layers = lockdown.lock_down(available=available, read_paths=[], write_paths=[], worker_ids=worker_ids)
    frames.write_frame(out, {"op": "ready", "layers": layers})
    try:
        job = frames.read_bytes(inp, MAX_JOB_BYTES)
    except (EOFError, frames.FrameTooLarge):
        return
    (budget_mb,) = BUDGET.unpack_from(job)
    # The job and its decoded text are held while compiling: room for them on top of the budget.
    resource.setrlimit(resource.RLIMIT_AS, (base + 3 * len(job) + (budget_mb << 20),) * 2)
    try:
        artifact = compile_module(engine, job[BUDGET.size :].decode("utf-8"))
    except ValueError as exc:
        frames.write_bytes(out, FAILED + str(exc).encode("utf-8", "replace"))
    except MemoryError:
        frames.write_bytes(out, FAILED + b"memory: compiling the module needs more memory than it may use")
    else:
        frames.write_bytes(out, OK + artifact)


def _address_space() -> int:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


if __name__ == "__main__":
    main()
