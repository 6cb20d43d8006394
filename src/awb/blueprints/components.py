"""What the builder needs to draw its forms: per part, the choices, the ranges and the JSON Schema."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from awb.blueprints import catalog
from awb.blueprints.schema import McpArm, Spine, TavilySearchArm, WorkbenchArm, part_schemas


def _range(low: float, high: float, default: Any) -> dict[str, Any]:
    return {"minimum": low, "maximum": high, "default": default}


def _options(model: type[BaseModel]) -> dict[str, Any]:
    properties = model.model_json_schema()["properties"]
    return {name: spec for name, spec in properties.items() if name != "type"}


def component_schemas(knowledge_bases: tuple[str, ...] = ()) -> dict[str, Any]:
    schemas = part_schemas()
    spine = Spine()
    return {
        "head": {
            "required": True,
            "providers": [
                {"name": provider, "models": [{"name": m, "max_tokens": limit} for m, limit in models.items()]}
                for provider, models in catalog.MODELS.items()
            ],
            "parameters": {
                "system_prompt": {"max_length": catalog.SYSTEM_PROMPT_MAX_CHARS, "multiline": True},
                "temperature": _range(*catalog.TEMPERATURE_RANGE, None),
                "max_tokens": {"minimum": 1, "maximum": "the model's max_tokens", "default": None},
            },
            "json_schema": schemas["head"],
        },
        "arms": {
            "required": False,
            "ordered": True,
            "tool_types": [
                {
                    "type": "tavily_search",
                    "description": TavilySearchArm.__doc__,
                    "options": _options(TavilySearchArm),
                    "environment": ["TAVILY_API_KEY"],
                },
                {"type": "mcp", "description": McpArm.__doc__, "options": _options(McpArm), "environment": []},
                {
                    "type": "workbench",
                    "description": WorkbenchArm.__doc__,
                    "options": _options(WorkbenchArm),
                    "environment": [],
                },
            ],
            "json_schema": schemas["arms"],
        },
        "legs": {
            "required": True,
            "modes": [{"mode": mode, "requires": needs} for mode, needs in catalog.MODE_REQUIREMENTS.items()],
            "json_schema": schemas["legs"],
        },
        "heart": {
            "required": False,
            "memory": {"enabled": {"default": False}, "history_length": _range(*catalog.HISTORY_LENGTH_RANGE, 10)},
            "knowledge": {
                "enabled": {"default": False},
                "knowledge_bases": list(knowledge_bases),
                "rule": "knowledge needs knowledge_base set to a configured knowledge base",
            },
            "json_schema": schemas["heart"],
        },
        "spine": {
            "required": False,
            "max_tool_calls": _range(*catalog.MAX_TOOL_CALLS_RANGE, spine.max_tool_calls),
            "timeout_seconds": _range(*catalog.TIMEOUT_SECONDS_RANGE, spine.timeout_seconds),
            "allowed_domains": {
                "default": [],
                "rule": "each a domain name such as example.com; subdomains are allowed too; empty: any domain",
            },
            "json_schema": schemas["spine"],
        },
        "blueprint": {"json_schema": schemas["blueprint"]},
    }
