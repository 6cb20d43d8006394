"""The workbench's one configuration: `awb.config.json`, every field defaulted, `AWB_*` overrides.

Lookup order: defaults < config file < environment. `AWB_PORT=8000` sets `port`;
`AWB_MEMORY__PROMOTION_THRESHOLD_MEDIUM=3` sets a nested field (double underscore).
Relative paths are resolved against the config file's folder (or the working directory).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from awb.errors import ConfigError

CONFIG_FILENAME = "awb.config.json"
ENV_PREFIX = "AWB_"
#: Environment variables with the prefix that are not config fields.
_ENV_NOT_FIELDS = {"AWB_CONFIG", "AWB_AGENTS_DIR"}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class MemoryConfig(_Section):
    promotion_threshold_medium: int = Field(5, ge=1)
    promotion_threshold_long: int = Field(50, ge=1)
    demotion_days_medium_to_short: float = Field(30, gt=0)
    archive_days_short: float = Field(60, gt=0)
    #: Maintenance runs by itself after this many calls (0 turns that off; `awb maintain` still works).
    maintenance_every_calls: int = Field(100, ge=0)


class SearchConfig(_Section):
    mode: Literal["text", "hybrid"] = "text"
    #: `local` uses the bundled offline model from the `embed` extra; `none` disables embeddings.
    embedding_provider: Literal["local", "none"] = "local"


class SandboxConfig(_Section):
    #: `auto` tries Monty first and falls back to full CPython when Monty cannot run the tool.
    python_runtime: Literal["auto", "monty", "cpython"] = "auto"
    #: Warm workers per runtime pool.
    pool_size: int = Field(2, ge=1, le=64)
    #: Executions allowed at once; past it a call fails fast with `busy`.
    max_concurrent: int = Field(8, ge=1, le=256)
    max_log_bytes: int = Field(64 * 1024, ge=1024)
    #: Let `cpython` run where some kernel protections are missing (default: refuse and say why).
    allow_degraded_cpython: bool = False
    #: Directories a tool may read, by tool name. Granting is configuration, never an MCP call.
    grants: dict[str, list[str]] = Field(default_factory=dict)


class Config(BaseModel):
    """Everything the workbench can be told; see the README's configuration table."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    host: str = "127.0.0.1"
    port: int = Field(7777, ge=1, le=65535)
    inventory_path: Path = Path(".awb/inventory.db")
    #: `postgresql://user@host/db` puts the inventory in PostgreSQL (extra `postgres`), shared by every
    #: server given the same URL; unset, the inventory is the SQLite file at `inventory_path`.
    inventory_url: str | None = Field(None, pattern=r"^postgres(ql)?://")
    tools_dir: Path = Path("tools")
    log_file: Path | None = None
    pid_file: Path = Path(".awb/awb.pid")
    max_tools: int = Field(1000, ge=1)
    max_code_bytes: int = Field(65536, ge=16)
    tool_execution_timeout_ms: int = Field(5000, ge=10, le=600_000)
    tool_memory_mb: int = Field(100, ge=8, le=16384)
    max_output_bytes: int = Field(1024 * 1024, ge=64)
    max_equipped: int = Field(20, ge=0, le=500)
    auto_equip_long_term: bool = False
    dedupe: Literal["warn", "reject"] = "warn"
    dedupe_threshold: float = Field(0.85, ge=0, le=1)
    tool_names: Literal["underscore", "dotted"] = "underscore"
    #: "auto" serves piped stdin/stdout on the event loop (awb/server/stdio.py); "sdk" always uses the
    #: MCP SDK's own stdio transport.
    stdio_transport: Literal["auto", "sdk"] = "auto"
    #: Streamable HTTP without sessions (the MCP SDK's stateless mode): any replica behind a load
    #: balancer answers any request. Servers then push no notifications (clients re-list).
    stateless_http: bool = False
    #: MCP servers for `awb agents run`: the `{"mcpServers": {...}}` map (or its inner map), or a path to
    #: a file holding it. `AWB_MCP_SERVERS` sets it from the environment.
    mcp_servers: dict[str, Any] | str | None = None
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)

    def resolve_paths(self, base: Path) -> Config:
        """Return a copy whose relative paths are anchored at `base`."""
        updates: dict[str, Any] = {}
        for name in ("inventory_path", "tools_dir", "log_file", "pid_file"):
            value = getattr(self, name)
            if isinstance(value, Path) and not value.is_absolute() and str(value) != ":memory:":
                updates[name] = base / value
        return self.model_copy(update=updates)


def _format_validation_error(err: ValidationError, source: str) -> ConfigError:
    problems = []
    for item in err.errors():
        field = ".".join(str(p) for p in item["loc"]) or "(root)"
        if item["type"] == "extra_forbidden":
            problems.append(f"{field}: unknown key")
        else:
            problems.append(f"{field}: {item['msg']} (got {item.get('input')!r})")
    fields = [".".join(str(p) for p in item["loc"]) for item in err.errors()]
    return ConfigError(f"invalid configuration in {source}: " + "; ".join(problems), fields=fields)


def _env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, raw in environ.items():
        if not key.startswith(ENV_PREFIX) or key in _ENV_NOT_FIELDS:
            continue
        path = key[len(ENV_PREFIX) :].lower().split("__")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if isinstance(value, (int, float, bool)) and path[-1].endswith(("_path", "_dir", "_file", "host")):
            value = raw
        node = data
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return data


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def find_config_file(explicit: Path | None = None, environ: Mapping[str, str] | None = None) -> Path | None:
    environ = os.environ if environ is None else environ
    if explicit is not None:
        return explicit
    if environ.get("AWB_CONFIG"):
        return Path(environ["AWB_CONFIG"])
    candidate = Path.cwd() / CONFIG_FILENAME
    return candidate if candidate.exists() else None


def load_config(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Load defaults, then the config file (if any), then `AWB_*` overrides; paths resolved."""
    environ = os.environ if environ is None else environ
    file = find_config_file(path, environ)
    data: dict[str, Any] = {}
    source = "defaults"
    if file is not None:
        source = str(file)
        try:
            loaded = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ConfigError(f"config file not found: {file}", path=str(file)) from exc
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"config file {file} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                path=str(file),
            ) from exc
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {file} must hold a JSON object", path=str(file))
        data = loaded
    overrides = _env_overrides(environ)
    if overrides:
        source = f"{source} + AWB_* environment"
    try:
        config = Config.model_validate(_merge(data, overrides))
    except ValidationError as exc:
        raise _format_validation_error(exc, source) from exc
    base = file.parent if file is not None else Path.cwd()
    return config.resolve_paths(base.resolve())


def default_config_json() -> str:
    """The config `awb init` writes: every field, at its default."""
    data = Config().model_dump(mode="json")
    return json.dumps(data, indent=2) + "\n"
