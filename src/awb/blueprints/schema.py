"""The blueprint: an agent described by its parts (head, arms, legs, heart, spine), as pydantic models.

`validate_blueprint` turns raw data into a normalized `Blueprint` or raises `BlueprintInvalid` whose
`details.errors` are field-level: path, message and, where there is a choice, the allowed values or range.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from awb.blueprints import catalog
from awb.blueprints.errors import BlueprintInvalid
from awb.meta_tools import META_VERBS

#: Names of the workbench's meta-tools a `workbench` arm may narrow itself to.
WORKBENCH_TOOLS: tuple[str, ...] = META_VERBS
_NAME = r"^[A-Za-z][A-Za-z0-9_-]{0,39}$"
#: Every list and text in a blueprint is bounded, so a valid one stays small (well under 1 MB): each
#: saved file is read back by listings and lookups.
MAX_ARM_TOOLS = 200
MAX_TOOL_NAME_CHARS = 128
MAX_COMMAND_WORDS = 100
_DOMAIN = re.compile(r"^(?=.{1,253}$)(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))+$")


def _unsupported(kind: str, value: object, allowed: list[str]) -> PydanticCustomError:
    return PydanticCustomError(
        f"unsupported_{kind.split()[-1]}",
        "unsupported {kind} {value}; supported: {supported}",
        {"kind": kind, "value": repr(value), "supported": ", ".join(allowed), "allowed": allowed},
    )


_ALL_MODELS: list[JsonValue] = [*sorted({m for models in catalog.MODELS.values() for m in models})]


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Head(_Part):
    """The brain: which model, how it is told to behave, and how it samples."""

    # Which models go with which provider, said in the schema too, for forms and generated requests.
    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {"properties": {"provider": {"const": provider}, "model": {"enum": list(models)}}}
                for provider, models in catalog.MODELS.items()
            ]
        }
    )

    provider: str = Field(
        max_length=100, description="Model provider.", json_schema_extra={"enum": list(catalog.PROVIDERS)}
    )
    model: str = Field(
        max_length=100,
        description="Model name; the provider's own list is in /api/components/schemas.",
        json_schema_extra={"enum": list(_ALL_MODELS)},
    )
    system_prompt: str = Field("", max_length=catalog.SYSTEM_PROMPT_MAX_CHARS, description="Instructions, multi-line.")
    temperature: float | None = Field(None, ge=catalog.TEMPERATURE_RANGE[0], le=catalog.TEMPERATURE_RANGE[1])
    max_tokens: int | None = Field(None, gt=0, description="Output token limit, at most the model's own.")

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        if value not in catalog.MODELS:
            raise _unsupported("provider", value, list(catalog.PROVIDERS))
        return value

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str, info: ValidationInfo) -> str:
        provider = info.data.get("provider")
        if provider in catalog.MODELS and value not in catalog.MODELS[provider]:
            raise _unsupported(f"{provider} model", value, list(catalog.MODELS[provider]))
        return value

    @field_validator("max_tokens")
    @classmethod
    def _within_model_limit(cls, value: int | None, info: ValidationInfo) -> int | None:
        limit = catalog.MODELS.get(info.data.get("provider", ""), {}).get(info.data.get("model", ""))
        if value is not None and limit is not None and value > limit:
            raise PydanticCustomError(
                "max_tokens_over_limit",
                "max_tokens {value} exceeds the model's limit of {limit}",
                {"value": value, "limit": limit, "allowed": {"minimum": 1, "maximum": limit}},
            )
        return value


class TavilySearchArm(_Part):
    """Web search through Tavily; needs TAVILY_API_KEY on the server."""

    type: Literal["tavily_search"]
    max_results: int = Field(5, ge=catalog.TAVILY_MAX_RESULTS_RANGE[0], le=catalog.TAVILY_MAX_RESULTS_RANGE[1])
    search_depth: Literal["basic", "advanced"] = "basic"


class McpArm(_Part):
    """Any MCP server, by URL (streamable HTTP) or by command (stdio)."""

    type: Literal["mcp"]
    name: str = Field(pattern=_NAME, description="Namespace of the server's tools: `<name>.<tool>`.")
    url: str | None = Field(None, pattern=r"^https?://[^\s]+$", max_length=2000)
    command: list[Annotated[str, Field(min_length=1, max_length=4096)]] | None = Field(
        None, min_length=1, max_length=MAX_COMMAND_WORDS
    )
    #: Only these tools of the server are offered to the agent (all when absent).
    tools: list[Annotated[str, Field(min_length=1, max_length=MAX_TOOL_NAME_CHARS)]] | None = Field(
        None, max_length=MAX_ARM_TOOLS
    )

    @field_validator("command", mode="before")
    @classmethod
    def _words(cls, value: object) -> object:
        if isinstance(value, str):
            # `--server NAME=COMMAND` takes one string, so this slip is easy; "a valid list" would not say
            # of what. The words shown are the string's first few, split at spaces.
            raise PydanticCustomError(
                "command_words",
                "command is a list of words, as a program's argv: {words}, not one string",
                {"words": repr(value[:500].split()[:8])},
            )
        return value

    @model_validator(mode="after")
    def _one_target(self) -> McpArm:
        if (self.url is None) == (self.command is None):
            raise PydanticCustomError("mcp_target", "an mcp arm needs exactly one of url or command")
        return self


class WorkbenchArm(_Part):
    """This workbench's own meta-tools, so the agent can craft, find and reuse tools."""

    type: Literal["workbench"]
    tools: list[Annotated[str, Field(max_length=MAX_TOOL_NAME_CHARS)]] | None = Field(
        None, max_length=MAX_ARM_TOOLS, json_schema_extra={"items": {"enum": list(WORKBENCH_TOOLS)}}
    )

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str] | None) -> list[str] | None:
        for name in value or []:
            if name not in WORKBENCH_TOOLS:
                raise _unsupported("workbench tool", name, list(WORKBENCH_TOOLS))
        return value


Arm = Annotated[TavilySearchArm | McpArm | WorkbenchArm, Field(discriminator="type")]


class Step(_Part):
    name: str = Field(pattern=_NAME)
    instructions: str = Field(min_length=1, max_length=catalog.SYSTEM_PROMPT_MAX_CHARS)


class Member(_Part):
    name: str = Field(pattern=_NAME)
    role: str = Field("", max_length=500)
    instructions: str = Field(min_length=1, max_length=catalog.SYSTEM_PROMPT_MAX_CHARS)


class Legs(_Part):
    """How the agent moves: alone, as a sequence of steps, or as a coordinated team."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {"properties": {"mode": {"const": "single_agent"}}},
                {"properties": {"mode": {"const": "workflow"}, "steps": {"minItems": 1}}, "required": ["steps"]},
                {"properties": {"mode": {"const": "team"}, "members": {"minItems": 1}}, "required": ["members"]},
            ]
        }
    )

    mode: Literal["single_agent", "workflow", "team"]
    #: workflow: run in order, each step's output the next step's input.
    steps: list[Step] = Field(default_factory=list, max_length=20, validate_default=True)
    #: team: a coordinator that delegates to these members.
    members: list[Member] = Field(default_factory=list, max_length=20, validate_default=True)

    @field_validator("steps")
    @classmethod
    def _steps_for_workflow(cls, value: list[Step], info: ValidationInfo) -> list[Step]:
        _require(info.data.get("mode"), "workflow", "steps", value)
        return value

    @field_validator("members")
    @classmethod
    def _members_for_team(cls, value: list[Member], info: ValidationInfo) -> list[Member]:
        _require(info.data.get("mode"), "team", "members", value)
        return value


def _require(mode: object, wanted: str, field: str, value: list[Step] | list[Member]) -> None:
    if mode == wanted and not value:
        raise PydanticCustomError(
            "mode_requires", "mode {mode} requires at least one of {field}", {"mode": mode, "field": field}
        )
    names = [item.name for item in value]
    if len(set(names)) != len(names):
        raise PydanticCustomError("duplicate_names", "{field} names must be unique", {"field": field})


class Memory(_Part):
    enabled: bool = False
    history_length: int = Field(10, ge=catalog.HISTORY_LENGTH_RANGE[0], le=catalog.HISTORY_LENGTH_RANGE[1])


def knowledge_base_error(configured: Iterable[str]) -> PydanticCustomError:
    names = sorted(configured)
    return PydanticCustomError(
        "knowledge_base",
        "knowledge needs a configured knowledge base; configured: {configured}",
        {"configured": ", ".join(names) or "(none)", "allowed": names},
    )


class Knowledge(_Part):
    enabled: bool = False
    #: Any name not configured gets the same error, listing the configured ones (no pattern error first).
    knowledge_base: str | None = Field(None, max_length=100, validate_default=True)

    @field_validator("knowledge_base")
    @classmethod
    def _configured(cls, value: str | None, info: ValidationInfo) -> str | None:
        # Without a context (a blueprint inside a request body) only the shape is checked here;
        # compiling checks the name against the bases the runtime really has.
        if not info.data.get("enabled") or info.context is None:
            return value
        configured = info.context.get("knowledge_bases", ())
        if value is None or value not in configured:
            raise knowledge_base_error(configured)
        return value


class Heart(_Part):
    memory: Memory = Field(default_factory=Memory)
    knowledge: Knowledge = Field(default_factory=Knowledge)


def _domain(value: str) -> str:
    candidate = value.strip().lower().rstrip(".")
    if not _DOMAIN.match(candidate):
        raise PydanticCustomError("domain", "{domain} is not a valid domain name", {"domain": repr(value)})
    return candidate


class Spine(_Part):
    """Guardrails; the defaults apply when a blueprint names none."""

    max_tool_calls: int = Field(10, ge=catalog.MAX_TOOL_CALLS_RANGE[0], le=catalog.MAX_TOOL_CALLS_RANGE[1])
    timeout_seconds: int = Field(60, ge=catalog.TIMEOUT_SECONDS_RANGE[0], le=catalog.TIMEOUT_SECONDS_RANGE[1])
    #: Web tools may only search and return these domains (and their subdomains); empty = any.
    allowed_domains: list[Annotated[str, Field(max_length=300), AfterValidator(_domain)]] = Field(
        default_factory=list, max_length=100
    )

    @field_validator("allowed_domains")
    @classmethod
    def _distinct_domains(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))


class Blueprint(_Part):
    name: str = Field("agent", pattern=r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}$")
    description: str = Field("", max_length=2000)
    head: Head
    arms: list[Arm] = Field(default_factory=list, max_length=20)
    legs: Legs
    heart: Heart = Field(default_factory=Heart)
    spine: Spine = Field(default_factory=Spine)

    @field_validator("arms")
    @classmethod
    def _distinct_arms(cls, value: list[Arm]) -> list[Arm]:
        keys = [arm.name if isinstance(arm, McpArm) else arm.type for arm in value]
        if len(set(keys)) != len(keys):
            raise PydanticCustomError("duplicate_arms", "each tool type (and each mcp name) may appear once")
        return value

    def blueprint_id(self) -> str:
        """Content address: the same normalized blueprint always gets the same id."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return "bp_" + hashlib.sha256(canonical.encode()).hexdigest()[:20]


def part_schemas() -> dict[str, Any]:
    """JSON Schema of the whole blueprint and of each part, for the builder's forms."""
    whole = Blueprint.model_json_schema()
    arms = whole["properties"]["arms"] | {"$defs": whole["$defs"]}
    return {
        "blueprint": whole,
        "head": Head.model_json_schema(),
        "arms": arms,
        "legs": Legs.model_json_schema(),
        "heart": Heart.model_json_schema(),
        "spine": Spine.model_json_schema(),
    }


def _path(loc: tuple[int | str, ...]) -> tuple[str, str]:
    """`arms.0.tavily_search.max_results` -> (`arms[0].max_results`, `arms[].max_results`)."""
    parts: list[str] = []
    generic: list[str] = []
    for index, item in enumerate(loc):
        if isinstance(item, int):
            parts.append(f"[{item}]")
            generic.append("[]")
        elif index > 1 and isinstance(loc[index - 1], int) and loc[index - 2] == "arms" and item in catalog.TOOL_TYPES:
            continue  # the discriminated union's tag, not a field
        else:
            sep = "." if parts else ""
            parts.append(sep + item)
            generic.append(sep + item)
    return "".join(parts) or "(root)", "".join(generic)


def field_errors(err: ValidationError) -> list[dict[str, Any]]:
    """Pydantic's errors as {path, message, allowed?}: what a form needs to mark one field."""
    return describe_errors(err.errors(include_url=False))


def describe_errors(items: Iterable[Mapping[str, Any]], *, within: str = "") -> list[dict[str, Any]]:
    """`field_errors` for error dicts already taken out of an exception; `within` is the blueprint's own
    path when it is nested in a larger body (`blueprint` in a run request)."""
    errors = []
    for item in items:
        path, generic = _path(tuple(item["loc"]))
        generic = generic.removeprefix(f"{within}.") if within else generic
        ctx = item.get("ctx") or {}
        entry: dict[str, Any] = {"path": path, "message": str(item["msg"]), "type": str(item["type"])}
        if "allowed" in ctx:
            entry["allowed"] = ctx["allowed"]
        elif item["type"] in ("union_tag_invalid", "union_tag_not_found"):
            entry["message"] = f"unsupported tool type; supported: {', '.join(catalog.TOOL_TYPES)}"
            entry["allowed"] = list(catalog.TOOL_TYPES)
        elif item["type"] == "literal_error":
            entry["allowed"] = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        elif generic in catalog.RANGES and item["type"].startswith(("greater", "less")):
            low, high = catalog.RANGES[generic]
            entry["allowed"] = {"minimum": low, "maximum": high}
        errors.append(entry)
    return errors


def validate_blueprint(data: object, *, knowledge_bases: tuple[str, ...] = ()) -> Blueprint:
    """Validate raw data (already parsed from JSON or YAML) into a normalized blueprint."""
    try:
        return Blueprint.model_validate(data, context={"knowledge_bases": knowledge_bases})
    except ValidationError as err:
        errors = field_errors(err)
        summary = "; ".join(f"{e['path']}: {e['message']}" for e in errors[:5])
        raise BlueprintInvalid(f"invalid blueprint: {summary}", errors=errors) from None
