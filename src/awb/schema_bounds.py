"""The parts of schema validation whose cost is not one keyword's worth: regular expressions (compiled
programs that stay in memory; the keywords that match them run here, on RE2) and `uniqueItems`
(jsonschema compares items pairwise).

Patterns run on RE2. Compiling one holds the GIL for as long as it takes, and the time grows with the
program, not with the pattern's length (`\\pL{300}`: 360,000 instructions, ~0.5 s at RE2's default 8 MB):
every compile is held within `MAX_PROGRAM_MEMORY` (one that would need more fails in ~15 ms), and a
schema's patterns within `MAX_SCHEMA_INSTRUCTIONS` in all, so checking or recompiling a schema's
patterns costs tens of milliseconds at most. A schema's patterns are compiled once and kept, in a cache
bounded by the size of the programs it holds, not by their number. A pattern given as a value
(`format: "regex"`) is compiled to be checked and let go: client input never enters the cache. The re2 module keeps a cache
of its own (the last 128 programs `re2.compile` made, up to 1 GiB): it is emptied after each compile,
so what this module does not hold is freed.

`uniqueItems` on objects made jsonschema compare every pair inside one keyword, past the time budget
that is checked between keywords (4,000 objects: 29 s). Here items are reduced to hashable keys with
JSON Schema's equality (1 and 1.0 equal, `true` and 1 not, objects whatever their key order), so the
check is linear and looks at the clock as it goes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import re2

from awb.text import cap_text

if TYPE_CHECKING:
    from jsonschema import ValidationError

#: RE2's memory for one program and its matching caches: ~60,000 instructions (a pattern Python's `re`
#: also accepts, which a schema's must be, compiles within ~40 ms here; typical ones take a few hundred).
MAX_PROGRAM_MEMORY = 1 << 20
#: Instructions the distinct patterns of one schema may compile to, in all.
MAX_SCHEMA_INSTRUCTIONS = 50_000
RE2_OPTIONS = re2.Options()
RE2_OPTIONS.log_errors = False
RE2_OPTIONS.max_mem = MAX_PROGRAM_MEMORY
#: RE2 program instructions the cache may hold in all (~10 bytes each, before the matching caches
#: RE2 grows per program within `max_mem`): typical schema patterns are tens to hundreds.
CACHED_INSTRUCTIONS = 2_000_000


class SchemaTooExpensive(Exception):
    """A validation that ran out of its time budget or recursed too deep."""


#: Items `uniqueItems` reduces between looks at the clock.
_CLOCK_EVERY = 256


class PatternCache:
    """Compiled schema patterns, least recently used first out, within `CACHED_INSTRUCTIONS`."""

    def __init__(self, budget: int = CACHED_INSTRUCTIONS) -> None:
        self._budget = budget
        self._held = 0
        self._programs: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def compile(self, pattern: str) -> Any:
        with self._lock:
            program = self._programs.get(pattern)
            if program is not None:
                self._programs.move_to_end(pattern)
                return program
        program = _compiled(pattern)  # off the lock: compiling may take a while
        size = int(program.programsize)
        if size > self._budget:
            return program  # used for this check, not kept
        with self._lock:
            if pattern not in self._programs:
                self._programs[pattern] = program
                self._held += size
            while self._held > self._budget:
                _, evicted = self._programs.popitem(last=False)
                self._held -= int(evicted.programsize)
        return program

    @property
    def instructions(self) -> int:
        return self._held

    def __len__(self) -> int:
        return len(self._programs)


schema_patterns = PatternCache()


def compile_pattern(pattern: str) -> Any:
    """A schema's pattern, compiled (cached)."""
    return schema_patterns.compile(pattern)


def is_regex(instance: object) -> bool:
    """`format: "regex"`: the value compiles on RE2 (never cached: it is input, not schema)."""
    return not isinstance(instance, str) or _compiled(instance) is not None


def _compiled(pattern: str) -> Any:
    """A pattern compiled on RE2 and held by the caller alone."""
    try:
        return re2.compile(pattern, RE2_OPTIONS)
    finally:
        re2.purge()  # the module's own cache of recent programs


# --- keywords that match patterns, on RE2 --------------------------------------------------------


def _search(pattern: str, text: str) -> bool:
    try:
        return compile_pattern(pattern).search(text) is not None
    except re2.error:
        raise SchemaTooExpensive(f"pattern {cap_text(pattern, 200)!r} is not supported") from None


def pattern_keyword(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{cap_text(repr(instance), 200)} does not match {cap_text(repr(pattern), 200)}")


def pattern_properties_keyword(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def additional_properties_keyword(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [key for key in instance if key not in known and not any(_search(p, key) for p in patterns)]
    if validator.is_type(additional, "object"):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif additional is False and extras:
        from jsonschema import ValidationError

        names = ", ".join(repr(cap_text(key, 64)) for key in extras[:10])
        yield ValidationError(f"additional properties are not allowed ({names} unexpected)")


def unique_items(check_budget: Callable[[], None]) -> Callable[..., Iterator[Any]]:
    """The `uniqueItems` keyword, linear in the array; `check_budget` raises past the time budget."""

    def keyword(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not unique or not validator.is_type(instance, "array"):
            return
        seen: set[Any] = set()
        for index, item in enumerate(instance):
            if index % _CLOCK_EVERY == 0:
                check_budget()
            key = _key(item)
            if key in seen:
                from jsonschema import ValidationError

                yield ValidationError(f"has non-unique elements (item {index} repeats an earlier one)")
                return
            seen.add(key)

    return keyword


def json_equal(a: Any, b: Any) -> bool:
    """Equal as JSON values: `true` is not 1 (Python's `==` says it is), 1 and 1.0 are the same number,
    objects compare whatever their key order."""
    return bool(_key(a) == _key(b))


def _key(value: Any) -> Any:
    """A hashable stand-in equal for values JSON Schema counts as equal."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)  # 1 == 1.0, and their hashes agree
    if isinstance(value, str):
        return ("string", value)
    if value is None:
        return ("null",)
    if isinstance(value, list):
        return ("array", tuple(_key(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((name, _key(item)) for name, item in value.items()))
    return ("other", id(value))
