"""A fast "surely valid" answer for the JSON Schemas most tools have.

Every call checks its arguments twice (the meta-tool's own schema, then the tool's input_schema), and
jsonschema spends most of its time building a validator object per subschema it descends into: on a
trivial call that was a tenth of the server's work on the event loop. Most schemas use only a few
keywords (type, properties, required, additionalProperties, enum, bounds, items), which a plain
predicate checks in a fraction of that time.

The predicate is one-sided: True means the instance is valid under Draft 2020-12 exactly as jsonschema
would find it; False means "not sure". A caller then runs the full validator, which also words the
errors. So anything the predicate does not handle exactly (a float that may be an integer, an enum of
containers, a keyword outside the set) answers False rather than guessing, and a schema with a
keyword outside the set gets no predicate at all.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

#: Keywords that never change whether an instance is valid here (`format` counts, except `regex`: the
#: server's format checker checks only that one).
_ANNOTATIONS = frozenset(
    {"description", "title", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly", "$schema", "$id"}
)
#: Exactly these Python types pass each JSON type for sure (subclasses, bool as a number: not sure).
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "object": (dict,),
    "array": (list,),
}
_BOUNDS: dict[str, Callable[[Any, Any], bool]] = {
    "minimum": lambda value, bound: value >= bound,
    "maximum": lambda value, bound: value <= bound,
    "exclusiveMinimum": lambda value, bound: value > bound,
    "exclusiveMaximum": lambda value, bound: value < bound,
}
_SIZES: dict[str, tuple[type[str | list[Any] | dict[str, Any]], bool]] = {
    "minLength": (str, True),
    "maxLength": (str, False),
    "minItems": (list, True),
    "maxItems": (list, False),
    "minProperties": (dict, True),
    "maxProperties": (dict, False),
}


def quick_check(schema: Any) -> Check | None:
    """A predicate that is True only for instances `schema` surely accepts; None when the schema uses
    a keyword this does not handle (the schema has been checked as valid before it gets here)."""
    try:
        return _compile(schema)
    except _Unsupported:
        return None


class _Unsupported(Exception):
    pass


def _compile(schema: Any) -> Check:
    if schema is True:
        return _always
    if not isinstance(schema, dict):  # False, or not a schema: the full validator says why
        raise _Unsupported
    checks: list[Check] = []
    for keyword, value in schema.items():
        if keyword in _ANNOTATIONS or (keyword == "format" and value != "regex"):
            continue
        checks.append(_keyword(keyword, value, schema))
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    return lambda instance: all(check(instance) for check in checks)


def _keyword(keyword: str, value: Any, schema: dict[str, Any]) -> Check:
    if keyword == "type":
        return _type(value)
    if keyword == "properties" and isinstance(value, dict):
        return _properties({name: _compile(sub) for name, sub in value.items()})
    if keyword == "required" and isinstance(value, list):
        names = list(value)
        return lambda instance: type(instance) is not dict or all(name in instance for name in names)
    if keyword == "additionalProperties":
        return _additional(set(schema.get("properties") or ()), _compile(value) if value is not False else None)
    if keyword in ("enum", "const"):
        options = value if keyword == "enum" else [value]
        if not isinstance(options, list) or not all(_scalar(option) for option in options):
            raise _Unsupported
        return lambda instance: (
            _scalar(instance) and any(type(instance) is type(option) and instance == option for option in options)
        )
    if keyword in _BOUNDS and _number(value):
        holds, bound = _BOUNDS[keyword], value
        return lambda instance: not _number_like(instance) or (_number(instance) and holds(instance, bound))
    if keyword in _SIZES and type(value) is int:
        kind, at_least = _SIZES[keyword]
        size = value
        if at_least:
            return lambda instance: not isinstance(instance, kind) or len(instance) >= size
        return lambda instance: not isinstance(instance, kind) or len(instance) <= size
    if keyword == "items":
        each = _compile(value)
        return lambda instance: type(instance) is not list or all(each(item) for item in instance)
    raise _Unsupported


def _type(value: Any) -> Check:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(name in _TYPES for name in names):
        raise _Unsupported
    allowed = tuple({kind for name in names for kind in _TYPES[name]})
    return lambda instance: type(instance) in allowed


def _properties(checks: dict[str, Check]) -> Check:
    def check(instance: Any) -> bool:
        if type(instance) is not dict:
            return True
        for name, value in instance.items():
            sub = checks.get(name)
            if sub is not None and not sub(value):
                return False
        return True

    return check


def _additional(known: set[str], each: Check | None) -> Check:
    def check(instance: Any) -> bool:
        if type(instance) is not dict:
            return True
        extras = (value for name, value in instance.items() if name not in known)
        return all(each(value) for value in extras) if each is not None else next(extras, _NONE) is _NONE

    return check


_NONE = object()


def _always(instance: Any) -> bool:
    return True


def _scalar(value: Any) -> bool:
    return value is None or type(value) in (str, int, bool)


def _number(value: Any) -> bool:
    """An int, or a finite float: compared exactly as jsonschema compares it."""
    return type(value) is int or (type(value) is float and math.isfinite(value))


def _number_like(value: Any) -> bool:
    """Anything jsonschema may take for a number (so a bound applies to it)."""
    return isinstance(value, int | float) and not isinstance(value, bool)
