"""What craft and update share: the checks on a tool's fields and schemas, and the admission test.

Everything here is bounded: text fields have limits, schemas are checked by `awb.validation`, and the
admission test (load check + every example) runs inside one time budget, not one per example.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import replace
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator
from pydantic_core import PydanticCustomError

from awb.craft_shape import craft_fields, looks_like_javascript
from awb.errors import AdmissionFailed, ExecutionError, InvalidParams, LimitExceeded, OutputExceeded
from awb.inventory.models import (
    Capabilities,
    Example,
    Language,
    RuntimeName,
    Tool,
    ToolMetadata,
    check_shown,
    check_tags,
    normal_tags,
)
from awb.meta_tools import RESERVED_NAME_RULE, ToolNames, meta_tool_name, reserved_name
from awb.sandbox.base import Limits, Runtime, nests_too_deep
from awb.sandbox.host import HostBridge
from awb.schema_bounds import SchemaTooExpensive, json_equal
from awb.schema_rules import normalise_schemas
from awb.text import MAX_RESULT_DEPTH
from awb.validation import ToolSchema, check_tool_schema

#: Tool names: what the spec allows (`^[A-Za-z0-9_-]{1,64}$`, matched whole: no trailing newline),
#: and never a leading '-' (it reads as an option on every command line).
NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}")
MAX_DESCRIPTION_CHARS = 16_000
MAX_PROBLEM_CHARS = 8000
MAX_AGENT_CHARS = 200
MAX_TAGS = 32
MAX_TAG_CHARS = 64
MAX_EXAMPLES = 32
MAX_EXAMPLE_BYTES = 64 * 1024
MAX_EXAMPLES_BYTES = 256 * 1024
#: The least time an admission step is worth starting with.
_MIN_STEP_MS = 10


DEFAULT_INPUT_SCHEMA: dict[str, Any] = {"type": "object"}


class CraftRequest(BaseModel):
    """What an agent sends to craft a tool: the spec's shape (`metadata: {tags, problem,
    created_by_agent}`) or ours (those fields flat). Without a description, the first line of the
    code's docstring or leading comment is taken."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _one_shape(cls, data: Any) -> Any:
        return normalise_schemas(craft_fields(data))

    name: str
    description: str = Field(min_length=1, max_length=MAX_DESCRIPTION_CHARS)
    code: str = Field(min_length=1)
    input_schema: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_INPUT_SCHEMA))
    output_schema: dict[str, Any] | None = None
    examples: list[Example] = Field(default_factory=list, max_length=MAX_EXAMPLES)
    language: Language = "python"
    runtime: RuntimeName | None = None
    tags: list[Annotated[str, StringConstraints(min_length=1, max_length=MAX_TAG_CHARS)]] = Field(
        default_factory=list, max_length=MAX_TAGS
    )
    problem: str = Field("", max_length=MAX_PROBLEM_CHARS)
    created_by_agent: str = Field("", max_length=MAX_AGENT_CHARS)

    @field_validator("tags", mode="before")
    @classmethod
    def _normal_tags(cls, tags: Any) -> Any:
        # Before the limits: " db " is the tag "db", and ["db", "db"] one tag, not two of the 32.
        if isinstance(tags, list) and all(isinstance(tag, str) for tag in tags):
            return normal_tags(tags)
        return tags  # anything else is refused by the field's own type, with its path

    @field_validator("description")
    @classmethod
    def _not_blank(cls, description: str) -> str:
        # Whitespace says no more than "" (refused by min_length), and a search finds nothing by it.
        if not description.strip():
            raise PydanticCustomError("string_blank", "String should hold more than whitespace")
        return description


#: The ids the workbench mints (`tool_` and 16 hex digits).
TOOL_ID_SHAPE = re.compile(r"tool_[0-9a-f]{16}")


def valid_name(name: object) -> bool:
    return isinstance(name, str) and NAME_RE.fullmatch(name) is not None


def check_new_name(name: str, tool_names: ToolNames = "underscore") -> None:
    """The rules a new tool's name meets beyond `validate_request`'s (which updates of older records with
    such names must still pass): it is not a meta-tool's name in any case, nor shaped like a tool id."""
    if TOOL_ID_SHAPE.fullmatch(name):
        # A reference is a tool_id or a name: a name shaped like the ids the workbench mints would make
        # `awb_delete {"name": ...}` reach another tool (its id) and the other's id reach this one.
        raise InvalidParams(
            "a tool name may not look like a tool id (tool_ and 16 hex digits)", field="name", name=name
        )
    verb = reserved_name(name)
    if verb is not None:
        raise InvalidParams(
            f"the name {name!r} is the meta-tool {meta_tool_name(verb, tool_names)}'s: {RESERVED_NAME_RULE}",
            field="name",
            name=name,
            rule="reserved_name",
        )


def validate_request(request: CraftRequest, max_code_bytes: int) -> None:
    """Refuse a craft or update request the workbench will not store; raises `invalid_params` or
    `limit_exceeded` naming the field."""
    if not valid_name(request.name):
        raise InvalidParams(
            "tool names are 1-64 characters of letters, digits, '_' and '-', not starting with '-'",
            field="name",
            name=request.name,
        )
    check_tags(request.tags)
    if request.created_by_agent:
        check_shown(request.created_by_agent, "created_by_agent", "agent name")
    size = len(request.code.encode("utf-8", errors="surrogatepass"))
    if size > max_code_bytes:
        raise LimitExceeded(
            f"code is {size} bytes, over the {max_code_bytes}-byte limit", limit="max_code_bytes", size=size
        )
    check_tool_schema(request.input_schema, "input_schema")
    if request.input_schema.get("type", "object") != "object":
        raise InvalidParams("input_schema must describe an object (type: object)", field="input_schema")
    if request.output_schema is not None:
        check_tool_schema(request.output_schema, "output_schema")
    total = 0
    for index, example in enumerate(request.examples):
        try:
            size = len(json.dumps(example.model_dump(mode="json")))
        except (RecursionError, ValueError, TypeError):
            raise InvalidParams(f"example {index} is not JSON or nests too deeply", field="examples") from None
        total += size
        if size > MAX_EXAMPLE_BYTES or total > MAX_EXAMPLES_BYTES:
            raise InvalidParams(
                f"example {index} is too large (examples may take {MAX_EXAMPLE_BYTES} bytes each, "
                f"{MAX_EXAMPLES_BYTES} in all)",
                field="examples",
                example=index,
            )


async def check_examples(request: CraftRequest) -> None:
    """Every example's params match the input schema: checked off the event loop, in one time budget."""
    if not request.examples:
        return
    schema = ToolSchema.compile(request.input_schema)
    try:
        failed = await schema.first_problems_off_loop([example.params for example in request.examples])
    except SchemaTooExpensive as exc:
        raise InvalidParams(f"the examples cannot be checked against input_schema: {exc}", field="examples") from None
    if failed is not None:
        index, problems = failed
        raise InvalidParams(f"example {index} does not match input_schema", example=index, errors=problems)


def too_deep(name: str | None = None) -> OutputExceeded:
    """The error of a result nested past MAX_RESULT_DEPTH (the wire encoders recurse)."""
    whose = "the result" if name is None else f"the result of {name!r}"
    return OutputExceeded(
        f"{whose} nests deeper than {MAX_RESULT_DEPTH} levels", limit=MAX_RESULT_DEPTH, reason="depth"
    )


class AdmissionBudget:
    """The time one admission may take in all; each step gets what is left (at most the tool's own limit)."""

    def __init__(self, limits: Limits, total_ms: int) -> None:
        self.base = limits
        self.total_ms = total_ms
        self._deadline = time.monotonic() + total_ms / 1000

    def remaining_ms(self) -> int:
        return int((self._deadline - time.monotonic()) * 1000)

    def validation_deadline(self) -> float:
        """The admission's end (`time.monotonic()`): a schema check inside it stops there, if its own
        CPU-time budget (`awb.validation.VALIDATION_SECONDS`) has not stopped it before."""
        return self._deadline

    def limits(self, share: int = 1) -> Limits:
        """Limits for the next step (or for `share` steps together), or `admission_failed` when the
        budget is spent."""
        left = self.remaining_ms() // max(1, share)
        if left < _MIN_STEP_MS:
            raise AdmissionFailed(
                f"the admission test ran out of its {self.total_ms} ms budget; the tool was not admitted",
                check="time",
                limit="sandbox.admission_timeout_ms",
            )
        return replace(self.base, timeout_ms=min(self.base.timeout_ms, left))


async def admit(
    runtime: Runtime,
    code: str,
    examples: list[Example],
    output_schema: dict[str, Any] | None,
    budget: AdmissionBudget,
) -> None:
    """The admission test: the code loads and defines its entry point, and every example passes."""
    try:
        await runtime.check(code, budget.limits())
    except ExecutionError as exc:
        hint = ""
        if runtime.language == "python" and looks_like_javascript(code):
            hint = '; the code looks like JavaScript: craft it with language "javascript"'
        raise AdmissionFailed(
            f"the tool does not load: {exc.message}{hint}", check="load", error=exc.to_dict()
        ) from None
    report = []
    out_schema = ToolSchema.compile(output_schema) if output_schema else None
    for index, example in enumerate(examples):
        limits = budget.limits()
        host = HostBridge(read_dirs=[], stage=None, max_log_bytes=limits.max_log_bytes)
        entry: dict[str, Any] = {"example": index, "params": example.params}
        try:
            execution = await runtime.execute(code, example.params, limits, host)
            got = execution.value
            if nests_too_deep(execution):
                raise too_deep()
        except RecursionError:
            entry.update(got=None, error=too_deep().to_dict())
            entry["ok"] = example.expected_error == OutputExceeded.code
        except ExecutionError as exc:
            entry.update(got=None, error=exc.to_dict())
            entry["ok"] = example.expected_error == exc.code
        else:
            entry["got"] = got
            entry["ok"] = example.expected_error is None and json_equal(got, example.expected)
            if entry["ok"] and out_schema is not None:
                try:
                    problems = await out_schema.problems_off_loop(got, budget.validation_deadline())
                except SchemaTooExpensive as exc:
                    problems = [{"path": "/", "message": str(exc)}]
                if problems:
                    entry.update(ok=False, error={"code": "invalid_output", "errors": problems})
        entry["expected"] = example.expected if example.expected_error is None else None
        entry["expected_error"] = example.expected_error
        report.append(entry)
    failed = [e for e in report if not e["ok"]]
    if failed:
        raise AdmissionFailed(
            f"{len(failed)} of {len(report)} examples failed; the tool was not admitted", examples=report
        )


def new_tool(request: CraftRequest, runtime: str, *, read_dirs: list[str], now: datetime) -> Tool:
    """The record of a tool crafted from `request` and admitted on `runtime`, with a fresh tool id."""
    return Tool(
        tool_id="tool_" + uuid.uuid4().hex[:16],
        name=request.name,
        description=request.description,
        language=request.language,
        runtime=runtime,
        code=request.code,
        input_schema=request.input_schema,
        output_schema=request.output_schema,
        examples=request.examples,
        metadata=ToolMetadata(tags=request.tags, problem=request.problem, created_by_agent=request.created_by_agent),
        capabilities=Capabilities(read_dirs=read_dirs),
        created_at=now,
        updated_at=now,
    )
