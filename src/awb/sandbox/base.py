"""The runtime protocol every sandbox engine implements, and the values that cross it."""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

from awb.errors import Busy, InvalidOutput, OutputExceeded
from awb.shares import Shares
from awb.text import MAX_RESULT_DEPTH, MAX_RESULT_VALUES, nesting_depth


@dataclass(frozen=True)
class Limits:
    timeout_ms: int = 5000
    memory_mb: int = 100
    max_output_bytes: int = 1024 * 1024
    max_log_bytes: int = 64 * 1024


@runtime_checkable
class HostFunctions(Protocol):
    """The only bridge from tool code to the outside (see `awb.sandbox.host`)."""

    def log(self, message: str) -> None: ...

    def read_file(self, path: str) -> str: ...

    def write_file(self, path: str, data: str) -> dict[str, Any]: ...


@dataclass
class Execution:
    """What a successful run gives back."""

    value: Any
    logs: list[str] = field(default_factory=list)
    duration_ms: float = 0.0
    #: The most memory the run held, where the runtime can measure it; None where it cannot.
    peak_memory_bytes: int | None = None
    #: `value` as JSON, where the runtime encoded it (`encode_output`): the faces send this text rather
    #: than encode a result of up to `max_output_bytes` again.
    value_json: str | None = None
    #: How deeply `value` nests, where the runtime counted it (`encode_result`); None: not counted.
    depth: int | None = None


class Runtime(Protocol):
    """A sandbox engine. Implementations raise `awb.errors.ExecutionError` subclasses on failure."""

    name: str
    language: str

    async def start(self) -> None:
        """Warm the engine (worker pools, zygotes); idempotent. Calls that arrive together start it once
        (the first starts it under a lock, the others wait for it); a start refused or failed leaves it
        unstarted, and the next call tries again."""

    async def close(self) -> None:
        """End what the runtime started: its processes and threads, and its hold on the worker identity.
        It takes the start's lock, so a close that arrives while a start is under way waits for that start
        and then ends what it made: nothing a start launches outlives a close. A call under way at the close
        finishes or fails with a structured error (`Unavailable`: closed). A closed runtime is an unstarted
        one: a later call starts it again, and it is closed again by the next close."""

    async def execute(self, code: str, params: dict[str, Any], limits: Limits, host: HostFunctions) -> Execution:
        """Run the tool's entry point with `params` and return its JSON-serialisable value."""
        ...

    async def check(self, code: str, limits: Limits) -> None:
        """Smoke check: the code loads and defines the entry point. Raises on failure."""

    def protections(self) -> dict[str, bool]:
        """Which isolation layers are active, for `awb doctor` and `awb_inspect`."""
        ...


#: Whom the running task executes for: an opaque key a face sets for each request (an MCP session, a
#: client's address and name), or None where there is no one else to share with (stdio, a library user).
executing_for: ContextVar[Hashable | None] = ContextVar("awb_executing_for", default=None)


class ExecutionSlots:
    """A cap on executions at once. Past it a call fails fast with `busy` rather than queueing,
    so a burst of slow tools cannot pile up work the server would finish long after anyone waits.

    With `per_client` below `limit`, one client (`executing_for`) holds at most `per_client` of them, so
    a client that fires many calls at once leaves room for the others instead of making them all busy.
    Slots are never taken back from a running call, so that room has to be kept free beforehand."""

    def __init__(self, limit: int, what: str, per_client: int | None = None) -> None:
        self.limit = limit
        self.what = what
        self.per_client = per_client if per_client is not None and per_client < limit else None
        # The bookkeeping every per-client share of the server uses (`awb.shares`).
        self._slots = Shares(limit, share=self.per_client or limit)

    @property
    def active(self) -> int:
        return self._slots.open

    @contextmanager
    def take(self) -> Iterator[None]:
        client = None if self.per_client is None else executing_for.get()
        refused = self._slots.take(client)
        if refused == "server":
            raise Busy(
                f"{self.active} {self.what} executions are running, the maximum; try again shortly",
                limit=self.limit,
                scope="server",
            )
        if refused == "client":
            raise Busy(
                f"this client has {self._slots.held_by(client)} {self.what} executions running, its share of the "
                f"{self.limit} this server runs at once (sandbox.max_concurrent_per_client); try again when one ends",
                limit=self.limit,
                per_client=self.per_client,
                scope="client",
            )
        try:
            yield
        finally:
            self._slots.give_back(client)


class Encoded(NamedTuple):
    """A result as it goes on the wire, and how deeply it nests (None where it holds a tuple, which
    `nesting_depth` does not descend into: the caller counts it then)."""

    text: str
    depth: int | None


def encode_output(value: Any, max_output_bytes: int) -> str:
    """Serialise a tool's result to compact JSON (the form it takes on the wire) under the output cap,
    or raise a structured error."""
    return encode_result(value, max_output_bytes).text


#: What `json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))` would build on
#: every call (an encoder keeps no state between encodings): made once, ~1.3 us less a tool call.
_RESULT_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def encode_result(value: Any, max_output_bytes: int) -> Encoded:
    """`encode_output`, with the result's nesting depth counted in the walk that bounds its size, so the
    call path does not walk it again to refuse one nested past MAX_RESULT_DEPTH."""
    at_least, values, depth = _surely_over(value, max_output_bytes)
    if at_least is not None:
        raise OutputExceeded(
            f"tool output is at least {at_least} bytes, over the {max_output_bytes}-byte cap",
            at_least=at_least,
            limit=max_output_bytes,
        )
    if values > MAX_RESULT_VALUES:
        raise OutputExceeded(
            f"tool output holds more than {MAX_RESULT_VALUES} values; return fewer, or fewer and larger ones",
            reason="values",
            limit_values=MAX_RESULT_VALUES,
        )
    try:
        text = _RESULT_ENCODER.encode(value)
    except RecursionError:
        raise OutputExceeded("tool output nests too deeply to encode", reason="depth") from None
    except (TypeError, ValueError) as exc:
        raise InvalidOutput(
            f"the tool returned a value that is not JSON-serialisable: {exc}", type=type(value).__name__
        ) from exc
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidOutput("the tool returned text that is not valid Unicode (a lone surrogate)") from None
    if size > max_output_bytes:
        raise OutputExceeded(
            f"tool output is {size} bytes, over the {max_output_bytes}-byte cap",
            size=size,
            limit=max_output_bytes,
        )
    return Encoded(text, depth)


def nests_too_deep(execution: Execution) -> bool:
    """Whether a run's result nests past MAX_RESULT_DEPTH (the wire encoders recurse): from the depth its
    runtime counted while encoding it, else counted here."""
    depth = execution.depth
    if depth is None:
        depth = nesting_depth(execution.value, MAX_RESULT_DEPTH)
    return depth > MAX_RESULT_DEPTH


def clean_text(text: str) -> str:
    """`text` as valid Unicode: a lone surrogate (which no UTF-8 wire can carry) becomes '?'."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def checked_logs(logs: list[str], max_log_bytes: int) -> list[str]:
    """A runtime's printed output as it may reach the wire: valid text, under the log cap (enforced
    here on whatever a worker sent, not only inside the worker)."""
    cleaned = [clean_text(str(line)) for line in logs]
    size = sum(len(line.encode("utf-8")) for line in cleaned)
    if size > max_log_bytes:
        raise OutputExceeded(
            f"printed output is {size} bytes, over the {max_log_bytes}-byte cap", size=size, limit=max_log_bytes
        )
    return cleaned


class _Close:
    """Pushed under a container's entries: popped once they are all walked, it closes the container's level."""


_CLOSE = _Close()
#: The types of most of a large result's values, tested first by identity (no subclass is one of them
#: but bool, listed too): each is one byte at least, and none holds others.
_LEAVES = frozenset({int, float, bool, type(None)})


def _surely_over(value: Any, cap: int) -> tuple[int | None, int, int | None]:
    """(a lower bound of `value`'s JSON size once it passes `cap`, else None; how many values it holds,
    counted until they pass `MAX_RESULT_VALUES`; how deeply it nests, as `nesting_depth` counts it, when
    the walk went to the end and met no tuple, else None). Counted without encoding, from lengths alone,
    and it stops as soon as either passes: what the server does for an oversized result is bounded by
    the caps, not by the result (encoding a 50 MB string took ~0.1 s of the event loop)."""
    total = values = level = deepest = 0
    tupled = False
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in _LEAVES:
            values += 1
            total += 1
        elif kind is _Close:
            level -= 1
            continue
        elif isinstance(item, str):
            values += 1
            total += len(item) + 2  # every character is at least one byte, and the quotes
        elif isinstance(item, dict):
            values += 1 + len(item)  # the object and its keys
            total += 2 + 3 * len(item) + max(len(item) - 1, 0)  # braces; keys' quotes and colons; commas
            if total > cap or values > MAX_RESULT_VALUES:
                return (total if total > cap else None), values, None
            if level >= deepest:
                deepest = level + 1
            if item:
                stack.append(_CLOSE)
                level += 1
            for key in item:
                total += len(key) if isinstance(key, str) else 1
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            values += 1
            total += 2 + max(len(item) - 1, 0)  # brackets and commas
            if total > cap or values + len(item) > MAX_RESULT_VALUES:
                return (total if total > cap else None), values + len(item), None
            if isinstance(item, tuple):
                tupled = True  # `nesting_depth` does not count tuples: the caller counts the depth then
            elif level >= deepest:
                deepest = level + 1
            if item:
                stack.append(_CLOSE)
                level += 1
                stack.extend(item)
        else:
            values += 1
            total += 1
        if total > cap or values > MAX_RESULT_VALUES:
            return (total if total > cap else None), values, None
    return None, values, None if tupled else deepest
