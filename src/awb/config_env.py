"""The `AWB_*` layer of the configuration: which variables set a field, and what they set.

`AWB_PORT=8000` sets `port`; `AWB_MEMORY__PROMOTION_THRESHOLD_MEDIUM=3` sets a nested field (double
underscore); a list, an object or a whole section is written as JSON. Values are parsed by
pydantic-settings, imported only when such a variable is set. Any other `AWB_*` variable (a shell's,
another tool's) is ignored, never an error; `awb doctor` lists them. This module works on the model
class it is given, so `awb.config` imports it and nothing here imports `awb.config`.
"""

from __future__ import annotations

import json
import types
from collections.abc import Mapping
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from awb.errors import ConfigError
from awb.text import cap_text

ENV_PREFIX = "AWB_"
ENV_NESTED_DELIMITER = "__"
#: A variable's value that is JSON's null, as in the file: `AWB_SEARCH__EMBEDDING_PROVIDER=null`.
ENV_NULL = "null"
#: `AWB_*` names the workbench reads that are not config fields.
ENV_NOT_FIELDS = frozenset({"AWB_CONFIG", "AWB_AGENTS_DIR"})
#: Longest echo of a variable's value that is not JSON.
_SHOWN_CHARS = 80


def _sections(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """The fields of `model` that are sections (models of their own), by name."""
    return {
        name: field.annotation
        for name, field in model.model_fields.items()
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
    }


def known_env_names(model: type[BaseModel]) -> set[str]:
    """Every `AWB_*` name that sets a field of `model`: top-level fields, sections as JSON, section fields."""
    names = set(ENV_NOT_FIELDS)
    sections = _sections(model)
    for name in model.model_fields:
        key = f"{ENV_PREFIX}{name.upper()}"
        names.add(key)
        if name in sections:
            names.update(f"{key}{ENV_NESTED_DELIMITER}{sub.upper()}" for sub in sections[name].model_fields)
    return names


def unknown_env_names(model: type[BaseModel], environ: Mapping[str, str]) -> list[str]:
    """`AWB_*` variables that set no field of `model`: ignored, listed by `awb doctor` as a warning."""
    known = known_env_names(model)
    return sorted(key for key in environ if key.upper().startswith(ENV_PREFIX) and key.upper() not in known)


def _takes_json(annotation: Any) -> bool:
    """Whether a field of this type is read from the environment as JSON (a list, an object, a section)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _takes_json(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        # `dict | str` (a map, or a path to a file holding one) takes any text: only JSON-only types ask.
        return all(_takes_json(arg) for arg in get_args(annotation) if arg is not type(None))
    if origin in (dict, list) or annotation in (dict, list):
        return True
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _annotation_of(model: type[BaseModel], variable: str) -> Any:
    """The type of the field `variable` (a known `AWB_*` name) sets."""
    name, _, sub = variable.upper().removeprefix(ENV_PREFIX).lower().partition(ENV_NESTED_DELIMITER)
    annotation = model.model_fields[name].annotation
    return _sections(model)[name].model_fields[sub].annotation if sub else annotation


def _not_json(model: type[BaseModel], known: Mapping[str, str]) -> ConfigError | None:
    """The error for the first variable whose field takes JSON and whose value is not JSON, if any.

    pydantic-settings would raise its own `SettingsError` naming the section rather than the
    variable (`error parsing value for field "sandbox"`), which is no configuration error a person can
    act on; said here first, it names the variable and the form it wants."""
    for variable, value in sorted(known.items()):
        if value == ENV_NULL or not _takes_json(_annotation_of(model, variable)):
            continue
        try:
            json.loads(value)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested past the decoder's stack
            name = variable.upper()
            annotation = _annotation_of(model, variable)
            shape = "a list" if list in (annotation, get_origin(annotation)) else "an object"
            example = '\'["a", "b"]\'' if shape == "a list" else "'{\"key\": 1}'"
            return ConfigError(
                f"{name} must be {shape} written as JSON, as in awb.config.json (e.g. {name}={example}); "
                f"got {cap_text(repr(value), _SHOWN_CHARS)} ({getattr(exc, 'msg', exc)})",
                variable=name,
            )
    return None


def env_overrides(model: type[BaseModel], environ: Mapping[str, str]) -> dict[str, Any]:
    """The fields of `model` the environment sets, parsed by pydantic-settings; unknown names never reach
    it. A value that is not the JSON its field needs is a `ConfigError` naming the variable."""
    fields = known_env_names(model) - ENV_NOT_FIELDS
    known = {key: value for key, value in environ.items() if key.upper() in fields}
    if not known:
        return {}
    error = _not_json(model, known)
    if error is not None:
        raise error
    from pydantic_settings import EnvSettingsSource, SettingsError

    class MappingEnvSource(EnvSettingsSource):
        """pydantic-settings' environment source over the given mapping, for a plain model."""

        def _load_env_vars(self) -> Mapping[str, str | None]:
            return {key.lower(): None if value == ENV_NULL else value for key, value in known.items()}

    source = MappingEnvSource(
        model,  # type: ignore[arg-type]  # a BaseModel: the source reads only its fields and model_config
        case_sensitive=False,
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTED_DELIMITER,
        env_parse_none_str=ENV_NULL,
    )
    try:
        overrides = source()
    except SettingsError as exc:  # what `_not_json` did not foresee: still a configuration error
        raise ConfigError(f"cannot read the AWB_* environment: {exc}", variables=sorted(known)) from None
    # The source leaves a top-level field that is null out (as if unset); it is null, as in the file:
    # `AWB_PORT=null` is refused like `"port": null`, not quietly the default.
    for key, value in known.items():
        name = key.upper().removeprefix(ENV_PREFIX).lower()
        if value == ENV_NULL and ENV_NESTED_DELIMITER not in name:
            overrides.setdefault(name, None)
    return overrides
