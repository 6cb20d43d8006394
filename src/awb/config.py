"""The workbench's one configuration: `awb.config.json`, every field defaulted, `AWB_*` overrides.

Lookup order: defaults < config file < environment (`awb.config_env`: `AWB_PORT=8000` sets `port`,
`AWB_MEMORY__PROMOTION_THRESHOLD_MEDIUM=3` a nested field). `Config` is a plain model, and
pydantic-settings is imported only when an `AWB_*` variable names a field, so a command that reads the
config without one (most `awb` runs) does not pay the ~0.05-0.1 s its import costs. Relative paths are
resolved against the config file's folder (or the working directory).

Adding a field is one line in `Config` (or a section): the file, the environment, `awb init`'s
default file and the doctor's list of known names all follow from the model.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, ValidationError, field_validator

from awb import config_env
from awb.config_sections import (
    MAX_ALLOWED_NAMES,
    MAX_MCP_SERVERS,
    MAX_PATH_CHARS,
    MIB,
    BlueprintsConfig,
    HttpConfig,
    MemoryConfig,
    NameText,
    PathText,
    SandboxConfig,
    SearchConfig,
    Section,
)
from awb.errors import ConfigError, UsageError
from awb.meta_tools import ToolNames
from awb.text import cap_text

CONFIG_FILENAME = "awb.config.json"


class Config(BaseModel):
    """Everything the workbench can be told; see the README's configuration table."""

    # A plain model, not pydantic-settings' BaseSettings: `Config(...)` in code is exactly what it is
    # given, and `load_config` layers the file and then the environment (file < environment), so a
    # test's or a library user's Config never picks up a stray shell variable.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    host: str = "127.0.0.1"
    #: 0 picks a free port; `awb start` reports the one bound.
    port: int = Field(7777, ge=0, le=65535)
    inventory_path: Path = Path(".awb/inventory.db")
    #: `postgresql://user@host/db` puts the inventory in PostgreSQL (extra `postgres`), shared by every
    #: server given the same URL; unset, the inventory is the SQLite file at `inventory_path`.
    inventory_url: str | None = Field(None, pattern=r"^postgres(ql)?://")
    #: PostgreSQL inventory: how long a request waits for one of the server's pooled connections before it
    #: fails with `busy` (all in use) or `unavailable` (the database down). Bounded: a request never hangs;
    #: with the statement timeout it bounds a request's wait for the database.
    inventory_pool_wait_seconds: float = Field(10.0, gt=0, le=300)
    #: PostgreSQL inventory: how long one statement may run (PostgreSQL's `statement_timeout`) unless the
    #: URL sets its own; a statement blocked behind a lock, or too slow, ends then and frees its connection.
    inventory_statement_timeout_seconds: float = Field(10.0, gt=0, le=300)
    tools_dir: Path = Path("tools")
    log_file: Path | None = None
    pid_file: Path = Path(".awb/awb.pid")
    #: Every size and count below has a ceiling: a value past it (10**18) would not lift the bound but
    #: defeat it, or overflow a database integer or an allocation later, so it is a config error at start.
    max_tools: int = Field(1000, ge=1, le=1_000_000)
    #: At most 4 MiB, the largest MCP request the HTTP face reads; a job carrying the code to a sandbox
    #: worker (16 MiB) then has room for it quoted as JSON, and for the arguments.
    max_code_bytes: int = Field(65536, ge=16, le=4 * MIB)
    #: Versions kept per tool: a new version past it removes the oldest (never the current one).
    max_versions_per_tool: int = Field(100, ge=1, le=10_000)
    #: Soft-deleted tools kept (inspectable until purged): a delete past it purges the longest-deleted.
    max_deleted_tools: int = Field(1000, ge=0, le=1_000_000)
    tool_execution_timeout_ms: int = Field(5000, ge=10, le=600_000)
    tool_memory_mb: int = Field(100, ge=8, le=16384)
    #: A call's result is held in memory (once per running call) and framed from its worker: 16 MiB at most.
    max_output_bytes: int = Field(1024 * 1024, ge=64, le=16 * MIB)
    max_equipped: int = Field(20, ge=0, le=500)
    auto_equip_long_term: bool = False
    dedupe: Literal["warn", "reject"] = "warn"
    dedupe_threshold: float = Field(0.85, ge=0, le=1)
    tool_names: ToolNames = "underscore"
    #: "auto" serves piped stdin/stdout on the event loop (awb/server/stdio.py); "sdk" always uses the
    #: MCP SDK's own stdio transport.
    stdio_transport: Literal["auto", "sdk"] = "auto"
    #: Streamable HTTP without sessions (the MCP SDK's stateless mode): any replica behind a load
    #: balancer answers any request. Servers then push no notifications (clients re-list).
    stateless_http: bool = False
    #: Bearer token every HTTP request must carry (`Authorization: Bearer ...`); required to bind a
    #: non-loopback address. Set it through `AWB_AUTH_TOKEN` rather than in a file others can read.
    auth_token: SecretStr | None = None
    #: Host headers (`name:port`, `name:*` for any port) accepted beside the loopback names and the
    #: bound address: DNS-rebinding protection is on for every bind address.
    allowed_hosts: list[NameText] = Field(default_factory=list, max_length=MAX_ALLOWED_NAMES)
    #: Origin headers (`http://name:port`, `...:*`) accepted beside the loopback origins.
    allowed_origins: list[NameText] = Field(default_factory=list, max_length=MAX_ALLOWED_NAMES)
    http: HttpConfig = Field(default_factory=HttpConfig)
    #: MCP servers for `awb agents run`: the `{"mcpServers": {...}}` map (or its inner map), or a path to
    #: a file holding it. `AWB_MCP_SERVERS` sets it from the environment.
    #: At most 100 servers (`awb.agents.servers`), a path at most 4,096 characters.
    mcp_servers: Annotated[dict[str, Any], Field(max_length=MAX_MCP_SERVERS)] | PathText | None = None
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    #: Where saved blueprints (YAML) live.
    blueprints_dir: Path = Path("blueprints")
    blueprints: BlueprintsConfig = Field(default_factory=BlueprintsConfig)
    #: The file this config was read from (`load_config`), if any: awb's own, so no staged write may
    #: replace it, whatever its name (`awb start --config ops/awb-prod.json` in a granted folder).
    _source_file: Path | None = PrivateAttr(default=None)

    @property
    def source_file(self) -> Path | None:
        return self._source_file

    @field_validator("mcp_servers", mode="before")
    @classmethod
    def _few_enough_servers(cls, value: Any) -> Any:
        # Said here once, rather than as a failure of each member of the union ("dict[str,any]: ...").
        if isinstance(value, dict) and len(value) > MAX_MCP_SERVERS:
            raise ValueError(f"at most {MAX_MCP_SERVERS} servers (got {len(value)})")
        if isinstance(value, str) and len(value) > MAX_PATH_CHARS:
            raise ValueError(f"a path of at most {MAX_PATH_CHARS} characters (got {len(value)})")
        return value

    @field_validator("auth_token")
    @classmethod
    def _long_enough(cls, token: SecretStr | None) -> SecretStr | None:
        if token is None:
            return None
        value = token.get_secret_value()
        if len(value) < 16:
            raise ValueError("auth_token must be at least 16 characters")
        # What an Authorization header can carry as sent: its value is read as Latin-1 and stripped, so a
        # token outside printable ASCII, or with a space at an end, never matched one (only /login took it).
        if not (value.isascii() and value.isprintable()) or value != value.strip():
            raise ValueError("auth_token must be printable ASCII, with no space at either end")
        return token

    def resolve_paths(self, base: Path) -> Config:
        """Return a copy whose relative paths are anchored at `base`."""
        updates: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, Path) and not value.is_absolute() and str(value) != ":memory:":
                updates[name] = base / value
            elif isinstance(value, Section):
                updates[name] = value.anchored(base)
        return self.model_copy(update=updates)


#: Parts of a field's path whose values are never echoed in an error: tokens, keys, headers, environments.
_SECRET_PARTS = ("token", "key", "secret", "password", "authorization", "headers", "env", "credential")
#: Longest echo of a rejected value.
_SHOWN_CHARS = 200


def _shown(loc: tuple[Any, ...], value: Any) -> str:
    """What an error says it got: never a secret (an `auth_token` too short was printed in full), never
    the values inside an object (a server entry's headers), never more than a line."""
    if any(part in str(name).lower() for name in loc for part in _SECRET_PARTS):
        return f"a value of {len(value)} characters" if isinstance(value, str) else f"a {type(value).__name__}"
    if isinstance(value, Mapping):
        return "an object with keys " + ", ".join(str(key) for key in list(value)[:20]) if value else "{}"
    return cap_text(repr(value), _SHOWN_CHARS)


def _format_validation_error(err: ValidationError, source: str) -> ConfigError:
    problems = []
    for item in err.errors():
        field = ".".join(str(p) for p in item["loc"]) or "(root)"
        if item["type"] == "extra_forbidden":
            problems.append(f"{field}: unknown key")
        else:
            problems.append(f"{field}: {item['msg']} (got {_shown(item['loc'], item.get('input'))})")
    fields = [".".join(str(p) for p in item["loc"]) for item in err.errors()]
    return ConfigError(f"invalid configuration in {source}: " + "; ".join(problems), fields=fields)


def unknown_env_names(environ: Mapping[str, str] | None = None) -> list[str]:
    """`AWB_*` variables that are not configuration: ignored, listed by `awb doctor` as a warning."""
    return config_env.unknown_env_names(Config, os.environ if environ is None else environ)


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
    if file is not None:
        try:
            # utf-8-sig: the byte-order mark some editors put first is not the file's content.
            loaded = json.loads(file.read_text(encoding="utf-8-sig"))
        except FileNotFoundError as exc:
            raise ConfigError(f"config file not found: {file}", path=str(file)) from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"config file {file} is not UTF-8 text ({exc.reason} at byte {exc.start}): save it as UTF-8",
                path=str(file),
            ) from None
        except OSError as exc:  # a directory, no permission, a device that fails
            raise ConfigError(f"cannot read config file {file}: {exc.strerror or exc}", path=str(file)) from None
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"config file {file} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                path=str(file),
            ) from exc
        except RecursionError:  # nested past the decoder's stack: was internal_error from every command
            raise ConfigError(f"config file {file} is JSON nested too deeply to read", path=str(file)) from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {file} must hold a JSON object", path=str(file))
        data = loaded
    return config_from(data, file, environ)


def config_from(data: dict[str, Any], file: Path | None, environ: Mapping[str, str] | None = None) -> Config:
    """The config `file` holding `data` gives (`AWB_*` overrides applied, paths anchored at its folder),
    whether or not the file is written yet: `awb init` checks what it will write before writing it."""
    environ = os.environ if environ is None else environ
    source = "defaults" if file is None else str(file)
    overrides = config_env.env_overrides(Config, environ)
    if overrides:
        source = f"{source} + AWB_* environment"
    try:
        config = Config.model_validate(_merge(data, overrides))
    except ValidationError as exc:
        raise _format_validation_error(exc, source) from exc
    base = file.parent if file is not None else Path.cwd()
    resolved = config.resolve_paths(base.resolve())
    if file is not None:
        resolved._source_file = file.absolute()
    return resolved


def with_overrides(config: Config, **overrides: Any) -> Config:
    """`config` with command-line values (None means "not given"), validated like the file's."""
    updates = {key: value for key, value in overrides.items() if value is not None}
    if not updates:
        return config
    for key, value in updates.items():
        if isinstance(value, Path) and not value.is_absolute():
            updates[key] = value.resolve()
    try:
        updated = Config.model_validate({**config.model_dump(), **updates})
        updated._source_file = config.source_file
        return updated
    except ValidationError as exc:
        if all(item["loc"] and item["loc"][0] in updates for item in exc.errors()):
            # The options as the person typed them, not the fields they set (`--port`, not `port`).
            said = [
                f"{_option(str(item['loc'][0]))}: {item['msg']} (got {item.get('input')!r})" for item in exc.errors()
            ]
            raise UsageError("; ".join(said), options=[_option(str(item["loc"][0])) for item in exc.errors()]) from None
        raise _format_validation_error(exc, "the command line") from exc


def _option(field: str) -> str:
    return "--inventory" if field == "inventory_path" else "--" + field.replace("_", "-")


def default_config_data() -> dict[str, Any]:
    """The config `awb init` writes: every field, at its default."""
    return Config().model_dump(mode="json")


def default_config_json() -> str:
    return json.dumps(default_config_data(), indent=2) + "\n"


# The sections are part of this module's interface (`from awb.config import SearchConfig`), kept in their own.
__all__ = [
    "CONFIG_FILENAME",
    "MAX_MCP_SERVERS",
    "BlueprintsConfig",
    "Config",
    "HttpConfig",
    "MemoryConfig",
    "SandboxConfig",
    "SearchConfig",
    "config_from",
    "default_config_data",
    "default_config_json",
    "find_config_file",
    "load_config",
    "unknown_env_names",
    "with_overrides",
]
