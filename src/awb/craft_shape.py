"""The two shapes of a craft request: the product spec's (`metadata: {tags, problem, created_by_agent}`)
and ours (the same fields flat), and the description a tool gets when none is given.

Both shapes give the same record; a field given both ways with different values is refused.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from awb.errors import InvalidParams

METADATA_FIELDS = ("tags", "problem", "created_by_agent")
#: Runtimes that run one language other than Python (the default language).
LANGUAGE_OF_RUNTIME = {"javascript": "javascript", "wasm": "wasm"}
#: What JavaScript starts a line with and Python never does: a function, a declaration, an export.
_JAVASCRIPT = re.compile(
    r"^[ \t]{0,50}(?:export[ \t]+)?(?:(?:async[ \t]+)?function\b|(?:const|let|var)[ \t]+[A-Za-z_$])", re.M
)

MAX_DERIVED_DESCRIPTION = 1024
#: Only the head of the code is read for a description: a docstring or comment sits at the top.
_HEAD_CHARS = 16_384
# Bounded repeats: the code is an agent's, and a pattern that can rescan the head per match must not.
#: `def run(...):` up to where its docstring would begin (a string prefix included).
_RUN_HEAD = r"def\s{1,50}run\s{0,50}\([^)]{0,500}\)[^:\n]{0,200}:\s{0,200}[rRuU]?"
_RUN_DOCSTRING = re.compile(_RUN_HEAD + r"(\"\"\"|''')\s{0,200}([^\n]*)")
_MODULE_DOCSTRING = re.compile(r"[rRuU]?(\"\"\"|''')\s*([^\n]*)")
#: A docstring that is a one-line string in single quotes ('...' or "..."), a docstring too.
_RUN_ONE_LINE_DOCSTRING = re.compile(_RUN_HEAD + r"('(?:[^'\\\n]|\\.){0,500}'|\"(?:[^\"\\\n]|\\.){0,500}\")")


def looks_like_javascript(code: str) -> bool:
    """Whether code that Python could not load reads as JavaScript (`function run(params) {...}`)."""
    return _JAVASCRIPT.search(code[:_HEAD_CHARS]) is not None


def craft_fields(data: Any) -> Any:
    """A craft request in our flat shape, from either shape; anything not a mapping is left to validation."""
    if not isinstance(data, dict):
        return data
    fields = dict(data)
    metadata = fields.pop("metadata", None)
    if metadata is not None:
        if hasattr(metadata, "model_dump"):
            metadata = metadata.model_dump()
        if not isinstance(metadata, dict):
            raise InvalidParams("metadata must be an object {tags, problem, created_by_agent}", field="metadata")
        unknown = sorted(set(metadata) - set(METADATA_FIELDS))
        if unknown:
            raise InvalidParams(
                f"metadata takes only {', '.join(METADATA_FIELDS)}; unknown: {', '.join(map(str, unknown))}",
                field="metadata",
            )
        for key, value in metadata.items():
            if key in fields and fields[key] != value:
                raise InvalidParams(
                    f"metadata.{key} and {key} disagree; give it once (either place is fine)",
                    field=key,
                )
            fields[key] = value
    if fields.get("language") is None and fields.get("runtime") in LANGUAGE_OF_RUNTIME:
        # `runtime: "javascript"` alone says which language the code is in: only one runs there.
        fields["language"] = LANGUAGE_OF_RUNTIME[fields["runtime"]]
    if fields.get("description") is None and isinstance(fields.get("code"), str):
        fields["description"] = description_from_code(fields["code"])
    return fields


def description_from_code(code: str) -> str:
    """The first line of the code's docstring or leading comment; `invalid_params` when there is none."""
    # Capped at the longest tool description the model APIs take (OpenAI: 1024 characters).
    found = _leading_text(code[:_HEAD_CHARS])[:MAX_DERIVED_DESCRIPTION]
    if not found:
        raise InvalidParams(
            "description is required when the code has no docstring or leading comment to take it from "
            "(its first line would become the description)",
            field="description",
        )
    return found


def _leading_text(head: str) -> str:
    lines = [line.strip() for line in head.splitlines()]
    lines = [line for line in lines if line and not line.startswith(("#!", "# -*-", "# coding"))]
    if not lines:
        return ""
    first = lines[0]
    for marker in ("#", "//"):
        if first.startswith(marker):
            return first[len(marker) :].strip()
    if first.startswith("/*"):
        body = [line.lstrip("/*").rstrip("*/").strip() for line in lines[:5]]
        return next((line for line in body if line), "")
    match = _MODULE_DOCSTRING.match(head.lstrip()) or _RUN_DOCSTRING.search(head)
    if match is None:
        return _one_line_docstring(head)
    text = match.group(2).strip().removesuffix(match.group(1)).strip()
    if text:
        return text
    rest = head[match.end() :].lstrip().splitlines()
    return rest[0].strip().removesuffix(match.group(1)).strip() if rest else ""


def _one_line_docstring(head: str) -> str:
    found = _RUN_ONE_LINE_DOCSTRING.search(head)
    if found is None:
        return ""
    literal = found.group(1)
    try:  # the literal's value (escapes undone); at most 500 characters
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        return literal[1:-1].strip()
    return value.strip() if isinstance(value, str) else ""
