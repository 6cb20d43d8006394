"""The server's side of the worker wire (length-prefixed JSON frames) and of host-function calls
coming from a worker. Nothing a worker sends is trusted: sizes are capped, shapes checked."""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

from awb.errors import (
    AwbError,
    ExecutionError,
    InvalidOutput,
    MemoryExceeded,
    OutputExceeded,
    SandboxViolation,
    ToolRuntimeError,
    ToolTimeout,
)
from awb.sandbox.base import Execution, HostFunctions, Limits, checked_logs, clean_text, encode_result
from awb.sandbox.host import MAX_WRITE_BYTES, count_refused_call

HEADER = struct.Struct(">I")
#: Frame budget on top of the output and log caps: JSON quoting of the value text and envelope.
FRAME_SLACK = 64 * 1024


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes is over {limit}")
        self.size = size
        self.limit = limit


class BadFrame(Exception):
    pass


async def read_frame(reader: asyncio.StreamReader, limit: int) -> dict[str, Any]:
    """One frame; `asyncio.IncompleteReadError` when the worker is gone."""
    (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    if size > limit:
        raise FrameTooLarge(size, limit)
    data = await reader.readexactly(size)
    try:
        message = json.loads(data)
    except (ValueError, RecursionError) as exc:
        # ValueError covers bad UTF-8 and JSON, and an integer past Python's 4300-digit conversion
        # limit, which is no JSONDecodeError: any of them escaping here ended the call unrecorded.
        raise BadFrame(f"worker sent a frame that is not JSON: {str(exc)[:200]}") from None
    if not isinstance(message, dict):
        raise BadFrame("worker sent a frame that is not a JSON object")
    return message


def encode_frame(message: dict[str, Any]) -> bytes:
    data = json.dumps(message, ensure_ascii=False).encode("utf-8")
    return HEADER.pack(len(data)) + data


#: What a worker reads of one host call's reply (`tool_process.MAX_REPLY_BYTES`, shared by the JavaScript
#: worker): a longer reply ended the worker.
WORKER_REPLY_BYTES = 8 * 1024 * 1024


def reply_frame(reply: dict[str, Any], message: dict[str, Any]) -> bytes:
    """The frame answering the host call `message` (under its id, when it has one). A reply the worker
    could not read is a refusal instead: a file's text under read_file's cap can pass it once quoted
    as JSON (a NUL or another control character takes six bytes), and the worker died of it."""
    if "id" in message:
        reply = {**reply, "id": message.get("id")}
    frame = encode_frame(reply)
    size = len(frame) - HEADER.size
    if size <= WORKER_REPLY_BYTES:
        return frame
    refusal = _refusal(
        OutputExceeded(
            f"the answer to {str(message.get('fn'))[:64]} is {size} bytes as JSON, over the {WORKER_REPLY_BYTES} "
            "bytes a sandbox worker reads (control characters take six bytes each)",
            size=size,
            limit=WORKER_REPLY_BYTES,
        )
    )
    if "id" in message:
        refusal["id"] = message.get("id")
    return encode_frame(refusal)


def frame_limit(max_output_bytes: int, max_log_bytes: int) -> int:
    """The largest frame a worker may send in a call: its result, or a host call staging a write.

    A result carries the value as JSON text inside JSON: quoting can at most double it. A `write_file`
    call carries up to `MAX_WRITE_BYTES` of content as a JSON string, doubled the same way (text of
    control characters, escaped six-fold, can pass the frame before the write's own cap)."""
    return max(2 * (max_output_bytes + max_log_bytes), 2 * MAX_WRITE_BYTES) + FRAME_SLACK


_ARITY = {"log": 1, "read_file": 1, "write_file": 2}


def _counted_refusal(host: HostFunctions, refused: AwbError) -> dict[str, Any]:
    """The reply to a host call refused before any host function runs, counted against the call's host
    calls as a function's own call is (past the budget, the budget's refusal instead)."""
    try:
        count_refused_call(host)
    except AwbError as exc:
        return _refusal(exc)
    return _refusal(refused)


def host_call(host: HostFunctions, message: dict[str, Any]) -> dict[str, Any]:
    """Run one host function a worker asked for; the reply the worker gets."""
    fn = message.get("fn")
    args: Any = message.get("args")
    malformed = _malformed(fn, args)
    if malformed is not None:
        # No host function runs to count it: counted here, or a tool could send such calls until its
        # time limit, each a round trip answered on the event loop (55% of a server CPU for one call).
        return _counted_refusal(host, malformed)
    try:
        if fn == "log":
            host.log(clean_text(args[0]))
            value: Any = None
        elif fn == "read_file":
            value = host.read_file(args[0])
        else:
            value = host.write_file(args[0], args[1])
    except AwbError as exc:
        return _refusal(exc)
    except Exception as exc:  # a host function must never take the server down
        return _refusal(ToolRuntimeError(f"{fn} failed: {exc}", fn=fn))
    return {"ok": True, "value": value}


def _malformed(fn: Any, args: Any) -> AwbError | None:
    """Why a host call cannot reach a host function (no such function, arguments of the wrong kind), or None."""
    if not isinstance(fn, str) or fn not in _ARITY or not isinstance(args, list) or len(args) != _ARITY[fn]:
        return SandboxViolation(f"unknown host function call {str(fn)[:64]!r}", fn=str(fn)[:64])
    if not all(isinstance(a, str) for a in args):
        return SandboxViolation(f"{fn} takes string arguments", fn=fn)
    if fn != "log" and any(clean_text(a) is not a for a in args):
        return ToolRuntimeError(f"{fn} got text that is not valid Unicode (a lone surrogate)", fn=fn)
    return None


#: Host functions that touch the disk or the store: `read_file` reads a file, `write_file` resolves its
#: path on the disk and stages the write in a store transaction (a network round trip on PostgreSQL).
#: Answered on the event loop, a tool staging writes in a loop held every other request up for as long
#: as each one took.
BLOCKING_HOST_FNS = frozenset({"read_file", "write_file"})


async def answer_host_call(host: HostFunctions, message: dict[str, Any]) -> dict[str, Any]:
    """`host_call`, on a thread for the host functions that block (`BLOCKING_HOST_FNS`); a log is
    answered at once."""
    if message.get("fn") in BLOCKING_HOST_FNS:
        return await asyncio.to_thread(host_call, host, message)
    return host_call(host, message)


#: A bridged tool result a worker may receive (its reply frame is capped at 8 MB, JSON quoting included).
MAX_TOOL_REPLY_BYTES = 4 * 1024 * 1024


async def tool_call(host: HostFunctions, message: dict[str, Any]) -> dict[str, Any]:
    """A plan's `call_tool(server, tool, payload)`: the one host function that waits on another server,
    so it is awaited on the loop. Only plan hosts offer it; for a crafted tool it is a refusal. A call
    refused here is counted as `host_call` counts its own (the plan's bridge counts the others)."""
    call = getattr(host, "call_tool", None)
    args = message.get("args")
    payload: Any = None
    refused: AwbError | None = None
    if call is None:
        refused = SandboxViolation("call_tool is only available to plans of the code-mode planner")
    elif not isinstance(args, list) or len(args) != 3 or not all(isinstance(a, str) for a in args):
        refused = SandboxViolation("call_tool takes (server, tool, payload)")
    elif any(clean_text(a) is not a for a in args):
        refused = ToolRuntimeError("call_tool got text that is not valid Unicode (a lone surrogate)")
    else:
        try:
            payload = json.loads(args[2])
        except (ValueError, RecursionError):
            refused = ToolRuntimeError("call_tool's payload is not JSON")
        else:
            if not isinstance(payload, dict):
                refused = ToolRuntimeError("call_tool's payload must be an object")
    if refused is not None:
        return _counted_refusal(host, refused)
    assert call is not None and isinstance(args, list)
    try:
        value = await call(args[0], args[1], payload)
    except AwbError as exc:
        return _refusal(exc)
    except Exception as exc:  # a bridged call must never take the server down
        return _refusal(ToolRuntimeError(f"call_tool failed: {exc}"))
    reply = {"ok": True, "value": value}
    try:
        size = len(json.dumps(reply, ensure_ascii=False).encode("utf-8"))
    except (TypeError, ValueError, RecursionError) as exc:
        # Encoded again for the frame, these escaped the runtime and ended the plan's run with an exception.
        return _refusal(
            ToolRuntimeError(f"{args[0]}.{args[1]} returned a result a plan cannot be sent: {str(exc)[:200]}")
        )
    if size > MAX_TOOL_REPLY_BYTES:
        return _refusal(
            OutputExceeded(f"{args[0]}.{args[1]} returned more than {MAX_TOOL_REPLY_BYTES} bytes for a plan")
        )
    return reply


def _refusal(exc: AwbError) -> dict[str, Any]:
    code = exc.code if isinstance(exc, ExecutionError) else "sandbox_violation"
    error: dict[str, Any] = {"code": code, "message": exc.message}
    path = exc.details.get("path")
    if isinstance(path, str):  # which path was refused, for the call's error as in-process runtimes give it
        error["details"] = {"path": path}
    return {"ok": False, "error": error}


_ERRORS: dict[str, type[ExecutionError]] = {
    cls.code: cls
    for cls in (ToolRuntimeError, ToolTimeout, MemoryExceeded, OutputExceeded, SandboxViolation, InvalidOutput)
}
_MAX_DETAIL_CHARS = 4000


def error_from_worker(error: Any) -> ExecutionError:
    """The structured error a worker reported, rebuilt from untrusted data (known codes, bounded text)."""
    if not isinstance(error, dict):
        return ToolRuntimeError("the sandbox worker sent a malformed error")
    cls = _ERRORS.get(str(error.get("code")), ToolRuntimeError)
    message = clean_text(str(error.get("message", "the tool failed"))[:_MAX_DETAIL_CHARS])
    raw_details = error.get("details")
    raw: dict[str, Any] = raw_details if isinstance(raw_details, dict) else {}
    details: dict[str, Any] = {}
    if isinstance(raw.get("traceback"), list):
        details["traceback"] = [clean_text(str(line)[:500]) for line in raw["traceback"][-30:]]
    if isinstance(raw.get("exception"), str):
        details["exception"] = clean_text(raw["exception"][:200])
    if isinstance(raw.get("size"), int):
        details["size"] = raw["size"]
    if isinstance(raw.get("path"), str):
        details["path"] = clean_text(raw["path"][:_MAX_DETAIL_CHARS])
    return cls(message, **details)


def result_from_worker(message: dict[str, Any], limits: Limits) -> Execution:
    """A worker's result frame, checked here whatever the worker claims: the output and log caps,
    JSON, and valid Unicode. Tool code can write frames of its own; this is where they stop mattering."""
    if not message.get("ok"):
        raise error_from_worker(message.get("error"))
    text = message.get("value", "null")
    if not isinstance(text, str):
        raise ToolRuntimeError("the worker sent a malformed result")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.max_output_bytes:
        raise OutputExceeded(
            f"tool output is {size} bytes, over the {limits.max_output_bytes}-byte cap",
            size=size,
            limit=limits.max_output_bytes,
        )
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise ToolRuntimeError("the worker sent a result that is not JSON") from None
    except RecursionError:
        raise InvalidOutput("the tool returned a value nested too deeply to read") from None
    except ValueError as exc:  # an integer past Python's digit limit (a forged result: json.dumps refuses it)
        raise InvalidOutput(f"the tool returned a value the server cannot read: {str(exc)[:200]}") from None
    encoded = encode_result(value, limits.max_output_bytes)
    raw_logs = message.get("logs")
    if raw_logs is not None and not isinstance(raw_logs, list):
        raise ToolRuntimeError("the worker sent malformed logs")
    logs = checked_logs([str(line) for line in raw_logs or []], limits.max_log_bytes)
    return Execution(value=value, logs=logs, value_json=encoded.text, depth=encoded.depth)
