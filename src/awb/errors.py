"""One error hierarchy for the whole workbench.

Every error carries a stable `code`, a human `message` and a `details` dict. Each face
(MCP, HTTP, CLI) maps these to its own protocol in exactly one function.
"""

from __future__ import annotations

from typing import Any, ClassVar

from awb.text import MAX_MESSAGE_CHARS, NOT_UNICODE, bounded, cap_text, unencodable_path, without_surrogates


class AwbError(Exception):
    """Base of every error the workbench reports on purpose."""

    code: ClassVar[str] = "internal_error"
    #: HTTP status the REST face uses; kept here so every face agrees on severity.
    http_status: ClassVar[int] = 500
    #: Process exit code the CLI uses.
    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, **details: Any) -> None:
        # Messages quote what tools, agents and providers sent; capped here, once, for every face and log
        # line, and made text every face can encode (a lone surrogate in a provider's message was a 500).
        message = without_surrogates(cap_text(str(message), MAX_MESSAGE_CHARS))
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details

    def to_dict(self) -> dict[str, Any]:
        """The error as every face sends it, details capped (long strings, lists and nesting)."""
        return {"code": self.code, "message": self.message, "details": bounded(self.details)}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, details={self.details!r})"


class ToolNotFound(AwbError):
    code = "tool_not_found"
    http_status = 404


class ToolDeleted(AwbError):
    code = "tool_deleted"
    http_status = 410


class InvalidParams(AwbError):
    code = "invalid_params"
    http_status = 422
    exit_code = 2

    @classmethod
    def of_model(cls, message: str, exc: Any) -> InvalidParams:
        """`invalid_params` for a pydantic `ValidationError`: each problem's JSON-pointer-like path and
        message (the first 20)."""
        return cls(
            message,
            errors=[{"path": "/" + "/".join(str(p) for p in e["loc"]), "message": e["msg"]} for e in exc.errors()[:20]],
        )


def check_unicode(value: Any, field: str) -> None:
    """`InvalidParams` when `value` (text, or a JSON-like value) holds text that is not valid Unicode: a
    lone surrogate, which a `\\ud800` escape in JSON decodes to, and Python makes of each byte of a
    command-line argument that is not UTF-8. Checked where input starts a run: past that point it failed
    wherever it met UTF-8 (a model request: `model_error`; the printed result: `internal_error`)."""
    path = unencodable_path(value)
    if path is not None:
        where = "/".join([field, *(str(step) for step in path)])
        raise InvalidParams(f"{where} holds {NOT_UNICODE}: give UTF-8 text", field=where)


class NameConflict(AwbError):
    code = "name_conflict"
    http_status = 409


class VersionConflict(AwbError):
    """An update tested against one version while another update made a newer one current."""

    code = "version_conflict"
    http_status = 409


class LimitExceeded(AwbError):
    code = "limit_exceeded"
    http_status = 413


class ConfigError(AwbError):
    code = "config_invalid"
    http_status = 500
    exit_code = 2


class AdmissionFailed(AwbError):
    """A crafted tool or new version whose examples (or smoke check) failed."""

    code = "admission_failed"
    http_status = 422


class DuplicateTool(AwbError):
    code = "duplicate_tool"
    http_status = 409


class NotEquippable(AwbError):
    code = "not_equippable"
    http_status = 409


class Busy(AwbError):
    code = "busy"
    http_status = 503


class Unavailable(AwbError):
    """A runtime or optional part that is not installed or not allowed on this machine."""

    code = "unavailable"
    http_status = 501


class InventoryUnavailable(Unavailable):
    """The shared inventory's database cannot be reached just now (down, restarting, unreachable): the
    request may be sent again once it is back."""

    http_status = 503


class InventoryBusy(Busy):
    """Every pooled connection to the shared inventory is lent to other requests and none came free in
    time: the database answers, this server has more requests for it than connections."""


# --- what a tool's execution can end in -------------------------------------------------------


class ExecutionError(AwbError):
    """Base of the errors a tool run produces; recorded on the call record by code."""

    code = "runtime_error"
    http_status = 422
    #: The most memory the failed run held, where the runtime measured it (for the call record only).
    peak_memory_bytes: int | None = None


class ToolRuntimeError(ExecutionError):
    code = "runtime_error"


class ToolTimeout(ExecutionError):
    code = "timeout"
    http_status = 504

    @classmethod
    def past(cls, limit_ms: int) -> ToolTimeout:
        """The plain timeout every runtime reports: the tool ran past its limit."""
        return cls(f"the tool ran past {limit_ms} ms", limit_ms=limit_ms)


class MemoryExceeded(ExecutionError):
    code = "memory_exceeded"


class OutputExceeded(ExecutionError):
    code = "output_exceeded"


class SandboxViolation(ExecutionError):
    code = "sandbox_violation"


class InvalidOutput(ExecutionError):
    """The tool returned something that is not JSON or does not match its output schema."""

    code = "invalid_output"


# --- what the command line and start-up report ------------------------------------------------


class UsageError(AwbError):
    """A command line the CLI cannot run: unknown option, missing argument, bad value."""

    code = "usage_error"
    exit_code = 2


class StartupFailed(AwbError):
    """The server cannot start: the address is in use or invalid."""

    code = "startup_failed"


class AlreadyRunning(StartupFailed):
    """Another `awb start` serves this workspace (its pid file is locked)."""

    code = "already_running"


class OutputFailed(AwbError):
    """What a command prints or writes could not be written: a full disk, a device that fails."""

    code = "output_failed"


class InventoryUnreadable(AwbError):
    """The inventory file exists but is not a SQLite inventory we can open."""

    code = "inventory_unreadable"


class StopFailed(AwbError):
    """`awb stop` found a server it cannot stop: its pid file's record is unreadable, or it did not exit."""

    code = "stop_failed"


class NotAnAwbServer(AwbError):
    """`awb stop` found a pid file whose process is not an awb server: it signals nothing."""

    code = "not_an_awb_server"


#: The most of an underlying error's text a message carries.
UNDERLYING_CHARS = 200


def underlying(error: BaseException) -> str:
    """What went wrong, for a message: the first error inside an exception group (anyio's task groups
    wrap a transport's failure as "unhandled errors in a TaskGroup (1 sub-exception)", which says
    nothing), with its type; its first line only, capped. The lines after the first can quote what the
    other end sent (pydantic's `input_value=b'...'` for a body that is not JSON-RPC), and a URL a blueprint
    names may be any address: its answer must not come back to whoever named it."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = str(error).strip().split("\n", 1)[0].strip()
    if len(text) > UNDERLYING_CHARS:
        text = text[: UNDERLYING_CHARS - 1] + "…"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
