"""A run's JSON writes each large value once.

The step ledger, the `tool_calls` and `subagent_calls` lists, a step's action and the run's output all
name the same arguments and outputs, so a 5 MB argument was written three times (and again in each
subagent record). In the JSON, a large value met again is a marker naming where it is in full.

A run's events write it once too: a subagent's own `done` event names, for each large value its parent's
result holds (in the subagent's record), where that result has it (`written_elsewhere`).
"""

from __future__ import annotations

import hashlib
import json
import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

#: Values whose JSON is at least this long are written once; a repeat of a smaller one costs less than
#: a marker would save.
REPEAT_MIN_CHARS = 1000
REPEAT_MARKER = "…[a repeat of {path}: {chars} characters]"
#: A large value written in full in another document (the run's final result), where that names.
ELSEWHERE_MARKER = "…[in {where}: {chars} characters]"


def without_repeats(data: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """`data`, `model` dumped as JSON, with each large value after its first appearance (in document
    order) replaced by `REPEAT_MARKER`. Only values a string may stand in for are replaced (strings, and
    the values of free-form slots: `Any`, the entries of `dict[str, Any]`), so the JSON still validates
    as `model`."""
    return _Repeats().record(data, model, "")


def written_elsewhere(
    data: dict[str, Any], model: type[BaseModel], reference: BaseModel, *, where: str, at: str
) -> dict[str, Any]:
    """`data` (`model` dumped as JSON) with each large value that `reference` holds too replaced by
    `ELSEWHERE_MARKER`, naming the place: `where` (the document that holds `reference`), then `at` (the
    path of `reference` in it) and the value's path inside `reference`. Only slots a string may stand in
    for are replaced, so the JSON still validates as `model`."""
    seed = _Repeats()
    seed.record(reference.model_dump(mode="json"), type(reference), at)
    known = {digest: f"{where} at {path}" for digest, path in seed.seen.items()}
    return _Repeats(known).record(data, model, "")


class _Repeats:
    def __init__(self, elsewhere: dict[bytes, str] | None = None) -> None:
        #: Digest of a large value's JSON -> the path of its first appearance.
        self.seen: dict[bytes, str] = {}
        #: Digest of a large value's JSON -> where another document has it in full.
        self.elsewhere = elsewhere or {}

    def record(self, data: dict[str, Any], model: type[BaseModel], path: str) -> dict[str, Any]:
        fields = model.model_fields
        return {
            name: self.typed(value, fields[name].annotation if name in fields else None, _join(path, name))
            for name, value in data.items()
        }

    def typed(self, value: Any, annotation: Any, path: str) -> Any:
        """`value` in a slot of type `annotation`; None when unknown (then only strings are replaced)."""
        if annotation is Any:
            return self.free(value, path, 0)
        if get_origin(annotation) in (Union, types.UnionType):
            arms = [arm for arm in get_args(annotation) if arm is not type(None)]
            annotation = arms[0] if len(arms) == 1 else None
        if isinstance(value, str):
            return self.free(value, path, 0)
        if isinstance(value, dict):
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                return self.record(value, annotation, path)
            item = get_args(annotation)[1] if get_origin(annotation) is dict else None
            return {key: self.typed(v, item, _join(path, key)) for key, v in value.items()}
        if isinstance(value, list):
            item = get_args(annotation)[0] if get_origin(annotation) is list else None
            return [self.typed(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
        return value

    def free(self, value: Any, path: str, depth: int) -> Any:
        """A value any JSON may stand in for: kept the first time it is met, a marker after."""
        if not isinstance(value, str | dict | list):
            return value
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        if len(text) < REPEAT_MIN_CHARS:
            return value
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        where = self.elsewhere.get(digest)
        if where is not None:
            return ELSEWHERE_MARKER.format(where=where, chars=len(text))
        first = self.seen.setdefault(digest, path)
        if first != path:
            return REPEAT_MARKER.format(path=first, chars=len(text))
        if depth >= _MAX_DEPTH:  # each level dumps its value again; deeper parts are rarely repeats
            return value
        # New as a whole, it may still hold a value met before (the arguments of an action whose
        # tool call is recorded first).
        if isinstance(value, dict):
            return {key: self.free(v, _join(path, key), depth + 1) for key, v in value.items()}
        if isinstance(value, list):
            return [self.free(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
        return value


#: How deep into a new free-form value repeats are looked for.
_MAX_DEPTH = 6


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
