"""JSON Schema for tool inputs and outputs, held to what the server can afford to run.

A tool's schema is written by whoever crafts the tool, so it is hostile input. It may only refer to
itself (`$ref` never reaches a URL or a file), its patterns run on RE2 (linear time, no backtracking),
its size and nesting are capped, and every validation has a time budget checked at each keyword: CPU time
of the thread that validates, so time spent waiting for the interpreter lock or for a core is not counted.

jsonschema itself is imported on the first check (`_engine`): a process that builds a workbench and
never validates (`awb doctor`, the CLI's listings) does not pay for it.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import re2

if TYPE_CHECKING:
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator

from awb.errors import InvalidParams
from awb.quick_check import Check, quick_check
from awb.schema_bounds import (
    MAX_PROGRAM_MEMORY,
    MAX_SCHEMA_INSTRUCTIONS,
    SchemaTooExpensive,
    additional_properties_keyword,
    compile_pattern,
    is_regex,
    pattern_keyword,
    pattern_properties_keyword,
    unique_items,
)
from awb.schema_rules import DATA_KEYWORDS, NAME_MAPS
from awb.text import cap_text
from awb.thread_lanes import ThreadLane
from awb.validation_budget import ValidationBudget

T = TypeVar("T")

MAX_SCHEMA_BYTES = 64 * 1024
MAX_SCHEMA_DEPTH = 64
#: Subschemas a tool's schema may hold. Checking a schema against JSON Schema's own (jsonschema's
#: metaschema, with dynamic references) costs ~0.5-1 ms a subschema: 60 KB of `anyOf: [{}, ...]`, 15,000
#: of them, took 10 s on the event loop. A schema whose properties have descriptions holds a few hundred.
MAX_SCHEMA_NODES = 1000
MAX_PATTERN_CHARS = 1000
#: Validation errors reported per check, and the length of each message (they quote the input).
MAX_REPORTED_ERRORS = 20
MAX_ERROR_MESSAGE_CHARS = 500
#: CPU time one validation may take in the thread that runs it (`awb.validation_budget`: waiting for the
#: interpreter lock or a core is not counted); checked before every keyword, so a schema cannot run away
#: with it.
VALIDATION_SECONDS = 2.0


# Schemas made only of these keywords validate in time linear in a small instance: on the event loop.
_CHEAP_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "description", "title", "default", "examples", "enum", "const",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems",
        "maxItems", "items", "$schema", "$id", "$comment", "multipleOf", "minProperties", "maxProperties",
        "deprecated", "readOnly", "writeOnly",
    }
)  # fmt: skip


# --- the checks at craft and update ------------------------------------------------------------


def check_tool_schema(schema: Any, field: str) -> None:
    """Refuse, with `invalid_params`, a schema the server will not validate against."""
    if not isinstance(schema, dict):
        raise InvalidParams(f"{field} must be a JSON object", field=field)
    try:
        size = len(json.dumps(schema))
    except (TypeError, ValueError, RecursionError):
        raise InvalidParams(f"{field} is not JSON", field=field) from None
    if size > MAX_SCHEMA_BYTES:
        raise InvalidParams(
            f"{field} is {size} bytes, over the {MAX_SCHEMA_BYTES}-byte limit", field=field, limit=MAX_SCHEMA_BYTES
        )
    keywords: set[str] = set()
    patterns: set[str] = set()
    instructions = 0
    for count, (node, depth) in enumerate(_schema_nodes(schema), 1):
        if depth > MAX_SCHEMA_DEPTH:
            raise InvalidParams(f"{field} nests deeper than {MAX_SCHEMA_DEPTH} levels", field=field)
        if count > MAX_SCHEMA_NODES:
            raise InvalidParams(
                f"{field} has more than {MAX_SCHEMA_NODES} subschemas", field=field, limit=MAX_SCHEMA_NODES
            )
        keywords.update(node)
        for key in ("$ref", "$dynamicRef"):
            ref = node.get(key)
            if isinstance(ref, str) and not ref.startswith("#"):
                raise InvalidParams(
                    f"{field} refers outside itself ({key}: {cap_text(ref, 200)!r}); only local references "
                    "('#...') are allowed",
                    field=field,
                )
        for pattern in _patterns(node):
            if pattern in patterns:
                continue
            patterns.add(pattern)
            instructions += _check_pattern(pattern, field)
            if instructions > MAX_SCHEMA_INSTRUCTIONS:
                # Compiling holds the GIL: the schema stops costing the server here, not after its last pattern.
                raise InvalidParams(
                    f"the patterns in {field} compile to more than {MAX_SCHEMA_INSTRUCTIONS} RE2 instructions "
                    "in all; use fewer or simpler patterns",
                    field=field,
                    limit=MAX_SCHEMA_INSTRUCTIONS,
                )
    if "unevaluatedProperties" in keywords and "patternProperties" in keywords:
        raise InvalidParams(f"{field} may not combine unevaluatedProperties with patternProperties", field=field)
    _check_against_the_metaschema(schema, field)


def _check_against_the_metaschema(schema: dict[str, Any], field: str) -> None:
    """`Draft202012Validator.check_schema`, within the validation time budget (checked at every keyword)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    meta = _engine().validator_class(
        Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    _budget.arm(VALIDATION_SECONDS)
    try:
        error = best_match(meta.iter_errors(schema))
    except SchemaTooExpensive:
        raise InvalidParams(f"{field} takes too long to check", field=field, reason="validation_limit") from None
    except (RecursionError, _unresolvable()):
        raise InvalidParams(f"{field} is not a valid JSON Schema", field=field) from None
    finally:
        _budget.disarm()
    if error is not None:
        raise InvalidParams(
            f"{field} is not a valid JSON Schema: {cap_text(error.message, MAX_ERROR_MESSAGE_CHARS)}", field=field
        )


def _schema_nodes(schema: dict[str, Any]) -> Iterator[tuple[dict[str, Any], int]]:
    """Every (sub)schema object, with its JSON depth; data values and the name maps of `properties`
    and the like are walked through, not reported, so their keys are never taken for keywords."""
    stack: list[tuple[Any, int, bool]] = [(schema, 1, False)]
    while stack:
        node, depth, name_map = stack.pop()
        if isinstance(node, dict):
            if not name_map:
                yield node, depth
            for key, value in node.items():
                if name_map or key not in DATA_KEYWORDS:
                    stack.append((value, depth + 1, not name_map and key in NAME_MAPS and isinstance(value, dict)))
        elif isinstance(node, list):
            stack.extend((value, depth + 1, False) for value in node)


def _patterns(node: dict[str, Any]) -> Iterable[str]:
    if isinstance(node.get("pattern"), str):
        yield node["pattern"]
    if isinstance(node.get("patternProperties"), dict):
        yield from node["patternProperties"]


def _check_pattern(pattern: str, field: str) -> int:
    """The RE2 instructions `pattern` compiles to; `invalid_params` if it does not compile."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidParams(f"a pattern in {field} is over {MAX_PATTERN_CHARS} characters", field=field)
    try:
        return int(compile_pattern(pattern).programsize)
    except re2.error as exc:
        why = "it compiles to too large a program" if "too large" in str(exc) else "it does not compile"
        raise InvalidParams(
            f"pattern {cap_text(pattern, 200)!r} in {field} is not supported ({why}): patterns run on a "
            "linear-time engine (RE2), without backreferences or lookaround, within "
            f"{MAX_PROGRAM_MEMORY >> 20} MB per pattern",
            field=field,
        ) from None


def _bounded(keyword: Callable[..., Any]) -> Callable[..., Any]:
    def run(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _budget.check()
        return keyword(validator, value, instance, schema)

    return run


_budget = ValidationBudget()


@dataclass(frozen=True)
class _Engine:
    """jsonschema's Draft 2020-12 validator with RE2 patterns and the time budget, local references only."""

    validator_class: Any
    registry: Any
    formats: Any


@functools.cache
def _engine() -> _Engine:
    import jsonschema
    import referencing
    import referencing.exceptions
    from jsonschema import Draft202012Validator, FormatChecker

    keywords = {
        **Draft202012Validator.VALIDATORS,
        "pattern": pattern_keyword,
        "patternProperties": pattern_properties_keyword,
        "additionalProperties": additional_properties_keyword,
        "uniqueItems": unique_items(_budget.check),
    }
    validator_class = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator, {name: _bounded(fn) for name, fn in keywords.items()}
    )
    formats = FormatChecker(formats=())
    formats.checks("regex", raises=re2.error)(is_regex)

    def refuse_retrieval(uri: str) -> referencing.Resource[Any]:
        # The server never fetches or reads a schema: a reference not inside the schema does not resolve.
        raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]

    registry: referencing.Registry[Any] = referencing.Registry(retrieve=refuse_retrieval)  # type: ignore[call-arg]
    return _Engine(validator_class, registry, formats)


def warm_up() -> None:
    """Import and extend jsonschema now (a server does it in a worker thread once it serves), so the
    first check does not pay for it on the event loop."""
    _engine()


# --- validating ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolSchema:
    """A compiled tool schema; `cheap` ones validate small instances on the event loop, and `quick`
    (when the schema has one: `awb.quick_check`) passes most valid instances without jsonschema."""

    validator: Validator
    cheap: bool
    quick: Check | None

    @classmethod
    def compile(cls, schema: dict[str, Any], *, trusted: bool = False) -> ToolSchema:
        """`trusted` schemas (the server's own) count as cheap: only big instances leave the loop."""
        engine = _engine()
        validator = engine.validator_class(schema, registry=engine.registry, format_checker=engine.formats)
        keywords: set[str] = set()
        for node, _ in _schema_nodes(schema):
            keywords.update(node)
        return cls(validator, trusted or keywords <= _CHEAP_KEYWORDS, quick_check(schema))

    def problems(
        self, instance: Any, deadline: float | None = None, until: float | None = None
    ) -> list[dict[str, str]]:
        """Up to MAX_REPORTED_ERRORS errors, in this thread; raises `SchemaTooExpensive` past
        `deadline` (this thread's `time.thread_time()`; default: VALIDATION_SECONDS of it from now) or
        past `until` (`time.monotonic()`) when given."""
        if self._surely_valid(instance):
            return []
        return schema_errors(self.validator, instance, deadline, until)

    async def problems_off_loop(self, instance: Any, until: float | None = None) -> list[dict[str, str]]:
        """`problems`, in a worker thread unless the instance is small and either the quick check
        passes it or the schema is cheap; within VALIDATION_SECONDS of CPU time, and `until` when given."""
        if not _small(instance):
            return await _off_loop(self.problems, instance, None, until)
        if self._surely_valid(instance):
            return []
        if self.cheap:
            return schema_errors(self.validator, instance, None, until)
        # The quick check has had its say: the thread runs only the full validator.
        return await _off_loop(schema_errors, self.validator, instance, None, until)

    def _surely_valid(self, instance: Any) -> bool:
        try:
            return self.quick is not None and self.quick(instance)
        except RecursionError:  # the full validator reports what nests too deeply
            return False

    async def first_problems_off_loop(self, instances: list[Any]) -> tuple[int, list[dict[str, str]]] | None:
        """The index and errors of the first instance that fails, all checked in one worker thread
        within one time budget; None when all pass."""

        def check() -> tuple[int, list[dict[str, str]]] | None:
            deadline = time.thread_time() + VALIDATION_SECONDS
            for index, instance in enumerate(instances):
                problems = self.problems(instance, deadline)
                if problems:
                    return index, problems
            return None

        return await _off_loop(check)


#: Validations running at once in worker threads. They share anyio's default pool (40 threads) with
#: listings and searches: 45 slow validations at once left `awb_list` waiting 30 s. Past this many, a
#: validation waits its turn (its time budget starts when it runs).
VALIDATION_THREADS = 4
_VALIDATIONS = ThreadLane(VALIDATION_THREADS)


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in one of the validation threads (the craft-time checks of a schema run there)."""
    return await _off_loop(fn, *args)


async def _off_loop(fn: Callable[..., T], *args: Any) -> T:
    return await _VALIDATIONS.run(fn, *args)


def _small(instance: Any, budget: int = 2000) -> bool:
    """True when the instance has few nodes and little text (checked without walking all of a big one)."""
    stack = [instance]
    while stack:
        node = stack.pop()
        budget -= 1
        if isinstance(node, str):
            budget -= len(node) // 64
        elif isinstance(node, dict):
            stack.extend(node.values())
            budget -= sum(len(k) // 64 for k in node)
        elif isinstance(node, list):
            stack.extend(node)
        if budget < 0:
            return False
    return True


def schema_errors(
    validator: Validator, instance: Any, deadline: float | None = None, until: float | None = None
) -> list[dict[str, str]]:
    """Validation errors as {path, message}, capped in number and length; raises `SchemaTooExpensive`
    when the check runs out of CPU time (past `deadline`, this thread's `time.thread_time()`, default
    VALIDATION_SECONDS of it from now), out of wall time (past `until`, when given) or recursion."""
    _budget.arm(VALIDATION_SECONDS, deadline, until)
    errors: list[ValidationError] = []
    try:
        for error in validator.iter_errors(instance):
            errors.append(error)
            if len(errors) >= MAX_REPORTED_ERRORS:
                break
        errors.sort(key=lambda e: [str(p) for p in e.absolute_path])
        return [
            {
                "path": cap_text("/" + "/".join(str(p) for p in e.absolute_path), 200),
                "message": cap_text(e.message, MAX_ERROR_MESSAGE_CHARS),
            }
            for e in errors
        ]
    except RecursionError:
        raise SchemaTooExpensive("the instance or schema nests too deeply to validate") from None
    except _unresolvable():
        raise SchemaTooExpensive("the schema has a reference that does not resolve inside it") from None
    finally:
        _budget.disarm()


def _unresolvable() -> type[Exception]:
    import referencing.exceptions

    return referencing.exceptions.Unresolvable
