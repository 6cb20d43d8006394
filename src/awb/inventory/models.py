"""The records the inventory keeps: tools, their versions, and calls."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from awb.errors import InvalidParams
from awb.invisible import hidden_indexes
from awb.safe_text import visible

Language = Literal["python", "javascript", "wasm"]
RuntimeName = Literal["monty", "cpython", "javascript", "wasm"]
MemoryLevel = Literal["short_term", "medium_term", "long_term", "archived"]
Status = Literal["active", "deleted", "archived"]

MEMORY_LEVELS: tuple[MemoryLevel, ...] = ("short_term", "medium_term", "long_term", "archived")
#: Tool names, matched whole (`fullmatch`): no trailing newline, no leading '-' (awb.crafting checks them).
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}")


class Example(BaseModel):
    """An admission test: `params` must give `expected` exactly, or fail with `expected_error`."""

    model_config = ConfigDict(extra="forbid")

    params: dict[str, Any]
    expected: Any = None
    expected_error: str | None = None


def normal_tags(tags: Iterable[str]) -> list[str]:
    """Tags as the inventory keeps them: surrounding whitespace stripped, blank ones dropped, each tag
    once in the order first given. Tags compare exactly, case included (`DB` and `db` are two tags),
    because that is how every store's `tag` filter matches them."""
    return list(dict.fromkeys(stripped for stripped in (tag.strip() for tag in tags) if stripped))


def check_shown(text: str, field: str, what: str) -> None:
    """Refuse a label holding a character that does not show as itself (`awb.invisible`): a control (NUL,
    a tab or newline within it, ESC), a format character (a bidi override, a zero-width space), a space
    other than U+0020. Such a tag was stored, yet the `tag` filter never matched one holding NUL (SQLite
    cuts it there) and the others looked like another tag in every listing."""
    hidden = hidden_indexes(text)
    if hidden:
        at = hidden[0]
        raise InvalidParams(
            f"the {what} '{visible(text)}' holds U+{ord(text[at]):04X} at character {at + 1}: "
            f"{what}s are text that shows (no control, format or invisible characters; spaces are U+0020)",
            field=field,
            **{what.replace(" ", "_"): visible(text)},
        )


def check_tags(tags: Iterable[str]) -> None:
    """`check_shown` for each of the tags (once trimmed, as `normal_tags` keeps them)."""
    for tag in tags:
        check_shown(tag, "tags", "tag")


class ToolMetadata(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tags: list[str] = Field(default_factory=list)
    problem: str = ""
    created_by_agent: str = ""


class Capabilities(BaseModel):
    """What a tool may reach beyond its inputs. Granted by configuration, not by agents."""

    model_config = ConfigDict(extra="forbid")

    read_dirs: list[str] = Field(default_factory=list)


class ToolVersion(BaseModel):
    """One immutable version of a tool's behaviour."""

    version: int
    code: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    examples: list[Example] = Field(default_factory=list)
    runtime: RuntimeName
    created_at: datetime
    usage_count: int = 0
    failure_count: int = 0


class Tool(BaseModel):
    """A tool as the inventory holds it: its current version plus its life so far."""

    tool_id: str
    name: str
    description: str
    language: Language
    runtime: RuntimeName
    code: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    examples: list[Example] = Field(default_factory=list)
    metadata: ToolMetadata = Field(default_factory=ToolMetadata)
    capabilities: Capabilities = Field(default_factory=Capabilities)
    version: int = 1
    parent_version: int | None = None
    created_at: datetime
    updated_at: datetime
    last_used_at: datetime | None = None
    usage_count: int = 0
    success_count: int = 0
    failure_count: int = 0
    memory_level: MemoryLevel = "short_term"
    status: Status = "active"
    equipped: bool = False

    def summary(self, score: float | None = None) -> ToolSummary:
        return ToolSummary(
            tool_id=self.tool_id,
            name=self.name,
            description=self.description,
            score=score,
            memory_level=self.memory_level,
            usage_count=self.usage_count,
            tags=self.metadata.tags,
            status=self.status,
            equipped=self.equipped,
        )


class ToolSummary(BaseModel):
    """What `list` and `search` return for each tool."""

    tool_id: str
    name: str
    description: str
    score: float | None = None
    memory_level: MemoryLevel
    usage_count: int
    tags: list[str] = Field(default_factory=list)
    status: Status = "active"
    equipped: bool = False


class CallRecord(BaseModel):
    #: `call_` + 16 hex characters, also carried by the call's staged writes; empty for calls recorded
    #: before calls had ids.
    call_id: str = ""
    tool_id: str
    version: int
    at: datetime
    duration_ms: float
    ok: bool
    error_code: str | None = None
    #: The most memory the call's sandbox held, where its runtime can measure it (None otherwise).
    peak_memory_bytes: int | None = None


class ToolCounters(BaseModel):
    """A tool's counters and tier right after a call was recorded (read in the same transaction)."""

    usage_count: int
    success_count: int
    failure_count: int
    previous_level: MemoryLevel
    memory_level: MemoryLevel
    status: Status

    @classmethod
    def of_missing_tool(cls) -> ToolCounters:
        """What a call of a tool that is no longer stored counts: nothing."""
        return cls(
            usage_count=0,
            success_count=0,
            failure_count=0,
            previous_level="short_term",
            memory_level="short_term",
            status="active",
        )

    def moved_fields(self, call: CallRecord) -> dict[str, Any]:
        """The tool record's fields that recording `call` left at these values (what a cached copy of the
        record takes instead of being read again)."""
        fields: dict[str, Any] = self.model_dump(exclude={"previous_level"})
        if call.ok:
            fields["last_used_at"] = call.at
        return fields
