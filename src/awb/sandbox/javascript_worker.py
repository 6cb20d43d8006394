"""A JavaScript worker process: QuickJS behind the same lockdown as CPython workers, one fresh
context per call. Run by path (`python -I javascript_worker.py <uid> <gid>`, the identity it leaves
root for, or without them to be sent `{"uid", "gid"}` as the first frame); standard library plus `quickjs`.

Frames (4-byte big-endian length + JSON) on stdin/stdout, as in `awb.sandbox.cpython.worker`:
server -> worker {"op": "job", "mode": "run"|"check", "code", "params", "limits"}; the worker may ask
{"op": "host", "fn", "args"} any number of times, then answers {"op": "result", ...}.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpython"))

import lockdown  # type: ignore[import-not-found,unused-ignore]
import namespaces  # type: ignore[import-not-found,unused-ignore]

try:
    # The engine itself: the package's __init__ adds a thread-pool `Function` this worker does not use,
    # importing concurrent.futures and logging for it (~10 ms of every worker's start).
    import _quickjs as quickjs  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # a quickjs release that moved it
    import quickjs
from worker import HEADER, MAX_JOB_BYTES, MAX_REPLY_BYTES  # type: ignore[import-not-found,unused-ignore]

#: Address space over the worker's own: a backstop under QuickJS's exact per-context memory limit.
ADDRESS_SPACE_HEADROOM = 1024 * 1024 * 1024
STACK_BYTES = 1024 * 1024
#: `awb.text.MAX_RESULT_DEPTH` (the worker imports nothing of awb): a result may nest this deep.
MAX_RESULT_DEPTH = 64

PRELUDE = r"""
"use strict";
globalThis.__awb_call = function (fn, args) {
  const reply = JSON.parse(__awb_host(fn, JSON.stringify(args)));
  if (!reply.ok) {
    const error = new Error(reply.error.message);
    error.awbCode = reply.error.code;
    throw error;
  }
  return reply.value;
};
globalThis.log = (message) => { __awb_call("log", [String(message)]); };
globalThis.readFile = globalThis.read_file = (path) => __awb_call("read_file", [String(path)]);
globalThis.writeFile = globalThis.write_file = (path, data) => __awb_call("write_file", [String(path), String(data)]);
// QuickJS's JSON.stringify recurses on the native stack, which a value nested some tens of thousands
// deep overflows: the worker dies. A result may nest __awb_max_depth levels anyway, so the result is
// serialised with a replacer that sees every value stringify is about to write (after toJSON, as each
// getter returned it) and stops past that depth, long before the stack is at risk. The stringify is the
// one this prelude found: tool code may replace JSON's.
const __awb_stringify = JSON.stringify;
const __awb_deep = new Error("too deep");
// The report of a run goes out as an object without a prototype, built with the functions this prelude
// found: tool code that sets Object.prototype.toJSON (or getters there) reshapes every object it serialises,
// and made the report something the worker could not read (the worker died).
const __awb_assign = Object.assign, __awb_bare = Object.create;
const __awb_report = (fields) => __awb_stringify(__awb_assign(__awb_bare(null), fields));
globalThis.__awb_serialise = (value) => {
  const depths = new WeakMap();
  return __awb_stringify(value, function (key, item) {
    if (item !== null && typeof item === "object") {
      const depth = (depths.get(this) || 0) + 1;
      if (depth > __awb_max_depth) throw __awb_deep;
      depths.set(item, depth);
    }
    return item;
  });
};
// Text crosses into Python as JSON: JSON.stringify escapes a lone surrogate, which the binding
// could not convert (and would leave the interpreter in an error state). A UTF-8 byte count is never
// below the UTF-16 length, so text past the cap in UTF-16 units is over it without leaving QuickJS.
// Past the cap console.log throws, as printing does in the other runtimes: a tool printing in a loop
// stops there (it ran on to its time limit, and the call ended in `timeout`). Caught or not, the call
// ends in `output_exceeded`.
let __awb_units = 0;
const __awb_over = () => { __awb_print_over(); throw new Error("printed output is over the " + __awb_log_cap + "-byte cap"); };
globalThis.console = { log: (...parts) => {
  const text = parts.map(String).join(" ");
  __awb_units += text.length + 1;
  if (__awb_units > __awb_log_cap || !__awb_print(__awb_stringify(text))) { __awb_over(); }
} };
"""

CALL = r"""
(function () {
  try {
    if (typeof run !== "function") {
      return __awb_report({ ok: false, code: "runtime_error", message: "the tool's code does not define function run(params)" });
    }
    if (__awb_mode === "check") { return __awb_report({ ok: true, value: null }); }
    const value = run(JSON.parse(__awb_params));
    let text;
    try {
      text = __awb_serialise(value === undefined ? null : value);
    } catch (e) {
      if (e === __awb_deep) { return __awb_report({ ok: false, tooDeep: true }); }
      throw e;
    }
    return __awb_report({ ok: true, text: text === undefined ? "null" : text });
  } catch (e) {
    return __awb_report({ ok: false, code: (e && e.awbCode) || null, message: String(e), stack: String((e && e.stack) || "") });
  }
})()
"""


def send(out: BinaryIO, message: dict[str, Any]) -> None:
    # ASCII JSON: a lone surrogate from JavaScript travels as an escape the server checks, instead
    # of failing to encode here and taking the worker down.
    data = json.dumps(message).encode("ascii")
    out.write(HEADER.pack(len(data)) + data)
    out.flush()


def recv(inp: BinaryIO, limit: int) -> dict[str, Any]:
    header = inp.read(HEADER.size)
    if len(header) < HEADER.size:
        raise EOFError
    (size,) = HEADER.unpack(header)
    if size > limit:
        raise EOFError
    data = inp.read(size)
    if len(data) < size:
        raise EOFError
    message = json.loads(data)
    if not isinstance(message, dict):
        raise EOFError
    return message


def _error(code: str, message: str, **details: Any) -> dict[str, Any]:
    return {"op": "result", "ok": False, "error": {"code": code, "message": message, "details": details}}


def run_job(inp: BinaryIO, out: BinaryIO, job: dict[str, Any]) -> dict[str, Any]:
    limits = job.get("limits") or {}
    memory = int(limits.get("memory_mb", 100)) * 1024 * 1024
    max_output = int(limits.get("max_output_bytes", 1 << 20))
    max_log = int(limits.get("max_log_bytes", 64 * 1024))
    printed: list[str] = []
    printed_size = [0, False]
    #: The host's refusals in this job, by code: a tool's error may carry a code only if the host made it.
    refused: dict[str, dict[str, Any]] = {}

    def host(fn: str, args_json: str) -> str:
        send(out, {"op": "host", "fn": fn, "args": json.loads(args_json)})
        reply = recv(inp, MAX_REPLY_BYTES)
        error = reply.get("error")
        if not reply.get("ok") and isinstance(error, dict):
            refused[str(error.get("code"))] = error
        return json.dumps(reply)

    def print_(encoded: str) -> bool:
        """Keep a printed line; False when it would pass the log cap."""
        text = json.loads(encoded).encode("utf-8", "replace").decode("utf-8")
        size = len(text.encode("utf-8")) + 1
        if printed_size[0] + size > max_log:
            printed_size[1] = True
            return False
        printed_size[0] += size
        printed.append(text + "\n")
        return True

    context = quickjs.Context()
    context.set_memory_limit(memory)
    context.set_max_stack_size(STACK_BYTES)
    context.add_callable("__awb_host", host)
    context.add_callable("__awb_print", print_)
    context.add_callable("__awb_print_over", lambda: printed_size.__setitem__(1, True))
    context.set("__awb_log_cap", max_log)
    context.set("__awb_max_depth", MAX_RESULT_DEPTH)
    try:
        context.eval(PRELUDE)
        context.set("__awb_params", json.dumps(job.get("params") or {}))
        context.set("__awb_mode", str(job.get("mode", "run")))
        context.eval(str(job.get("code", "")))
        report = context.eval(CALL)
        outcome = json.loads(report) if isinstance(report, str) else None
    except quickjs.StackOverflow as exc:
        return _error("runtime_error", f"stack overflow: {_first_line(exc)}", exception="StackOverflow")
    except quickjs.JSException as exc:
        return _classify(_first_line(exc), None, str(exc), refused)
    except MemoryError:
        return _error("memory_exceeded", f"the tool went over its {limits.get('memory_mb')} MB memory limit")
    except (SystemError, UnicodeError, ValueError) as exc:  # the binding could not convert a value
        return _error("runtime_error", f"the tool produced a value that cannot leave QuickJS: {_first_line(exc)}")
    if not isinstance(outcome, dict):  # whatever tool code did to the report, the worker reads no further
        return _error("runtime_error", "the tool's code changed how its result is reported")
    if printed_size[1]:
        return _error("output_exceeded", f"console output is over the {max_log}-byte cap")
    if outcome.get("tooDeep"):
        return _error("output_exceeded", f"the result nests deeper than {MAX_RESULT_DEPTH} levels", reason="depth")
    if not outcome.get("ok"):
        return _classify(str(outcome.get("message")), outcome.get("code"), str(outcome.get("stack", "")), refused)
    text = str(outcome.get("text", "null"))
    size = len(text.encode("utf-8"))
    if size > max_output:
        return _error("output_exceeded", f"tool output is {size} bytes, over the {max_output}-byte cap", size=size)
    return {"op": "result", "ok": True, "value": text, "logs": ["".join(printed)] if printed else []}


def _classify(message: str, code: Any, stack: str, refused: dict[str, dict[str, Any]]) -> dict[str, Any]:
    # `awbCode` is a property of a JS Error, which tool code can set on any error it throws: the
    # code stands only when the host refused a call with it in this job, and the call's error is
    # then the host's own (its message and the refused path), as the other runtimes report it.
    if isinstance(code, str) and code in refused:
        error = refused[code]
        details = error.get("details")
        return _error(code, str(error.get("message", message)), **(details if isinstance(details, dict) else {}))
    if "out of memory" in message:
        return _error("memory_exceeded", "the tool went over its memory limit")
    if "stack overflow" in message:
        return _error("runtime_error", "stack overflow", exception="InternalError")
    lines = [line.strip() for line in stack.splitlines() if line.strip()][:20]
    return _error("runtime_error", message, exception=message.split(":", 1)[0], traceback=lines)


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def heap_trimmer() -> Callable[[], None]:
    """glibc's `malloc_trim(0)`, or nothing where the C library has none.

    The server measures each call's peak as the worker's resident growth over its size when the job
    was sent (`awb.sandbox.resident`). Memory a call freed but the allocator kept resident would be
    reused unseen by the next call; handing it back to the kernel before each result is sent keeps
    every call's starting size at the worker's floor."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int

    def trim_heap() -> None:
        trim(0)

    return trim_heap


def main() -> None:
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write frames
    trim_heap = heap_trimmer()
    available = lockdown.probe()
    available.update(namespaces.unshare(network=True, ipc=True, mounts=False))
    with open("/proc/self/statm", encoding="ascii") as handle:
        base_vsz = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    run_job(inp, out, {"mode": "check", "code": "function run(p) { return p; }", "params": {}})  # warm-up
    # The uid and gid to leave root for: the server's workers' own, never host root. On the command line
    # (argv[1:3]), or, for a worker started before the server had claimed them, the first frame it sends.
    if len(sys.argv) > 2:
        worker_ids = (int(sys.argv[1]), int(sys.argv[2]))
    else:
        ids = recv(inp, 1 << 10)
        worker_ids = (int(ids["uid"]), int(ids["gid"]))
    if os.geteuid() == 0 and min(worker_ids) <= 0:  # (a non-root server's own ids are kept, gid 0 or not)
        raise SystemExit("refusing to leave root for root")
    layers = lockdown.lock_down(available=available, read_paths=[], write_paths=[], worker_ids=worker_ids)
    resource.setrlimit(resource.RLIMIT_AS, (base_vsz + ADDRESS_SPACE_HEADROOM,) * 2)
    send(out, {"op": "ready", "layers": layers})
    while True:
        try:
            job = recv(inp, MAX_JOB_BYTES)
        except (EOFError, ValueError):
            return
        result = run_job(inp, out, job)  # the job's QuickJS context is gone once it returns
        trim_heap()
        send(out, result)


if __name__ == "__main__":
    main()
