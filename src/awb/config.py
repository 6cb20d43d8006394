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

import ipaddress
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, StringConstraints, ValidationError, field_validator

from awb import config_env
from awb.errors import ConfigError, UsageError
from awb.meta_tools import ToolNames
from awb.shares import default_share
from awb.text import cap_text

CONFIG_FILENAME = "awb.config.json"
#: Names of knowledge bases (`blueprints.knowledge`), as a blueprint's `heart.knowledge.knowledge_base` names them.
KNOWLEDGE_NAME = r"^[A-Za-z][A-Za-z0-9_-]{0,39}$"
MIB = 1024 * 1024
#: Ceiling of a threshold or cadence counted in calls: fits a 32-bit database integer.
MAX_COUNT = 1_000_000_000
#: Ceiling of an idle span in days (a century): maintenance's cutoff (now minus the span) must stay a date
#: `datetime` can hold (year 1 onward), and `timedelta` itself overflows at a billion days.
MAX_DAYS = 36_500
#: Ceilings of the list and map settings (every size and count has one): far past any real setting,
#: low enough that a stray generated file cannot make the server match each request against a million
#: names or index a million knowledge bases.
MAX_ALLOWED_NAMES = 1000
MAX_GRANTED_TOOLS = 10_000
MAX_DIRS_PER_GRANT = 100
MAX_KNOWLEDGE_BASES = 100
MAX_MCP_SERVERS = 100
#: Longest path or name in those settings (Linux's PATH_MAX), and longest Host/Origin entry.
MAX_PATH_CHARS = 4096
MAX_NAME_CHARS = 300
PathText = Annotated[str, StringConstraints(max_length=MAX_PATH_CHARS)]
NameText = Annotated[str, StringConstraints(max_length=MAX_NAME_CHARS)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    def anchored(self, base: Path) -> Any:
        """This section with its relative paths anchored at `base` (most sections hold none)."""
        return self


class MemoryConfig(_Section):
    #: Every count and span here has a ceiling (`MAX_COUNT`, `MAX_DAYS`): a huge value (10**18) would not
    #: mean "never" but overflow a date (`timedelta`) or a database integer later, in the middle of maintenance.
    promotion_threshold_medium: int = Field(5, ge=1, le=MAX_COUNT)
    promotion_threshold_long: int = Field(50, ge=1, le=MAX_COUNT)
    demotion_days_medium_to_short: float = Field(30, gt=0, le=MAX_DAYS)
    archive_days_short: float = Field(60, gt=0, le=MAX_DAYS)
    #: Maintenance runs by itself after this many calls (0 turns that off; `awb maintain` still works).
    maintenance_every_calls: int = Field(100, ge=0, le=MAX_COUNT)
    #: Each tool's most recent call records kept (inspect's recent calls, exports); maintenance prunes
    #: older ones so the history cannot grow without end. Counters and tiers are not affected. 0 keeps all.
    calls_kept_per_tool: int = Field(1000, ge=0, le=1_000_000)


class SearchConfig(_Section):
    #: `auto`: hybrid when the `embed` extra is installed, text otherwise (said at start and by `awb doctor`).
    mode: Literal["auto", "text", "hybrid"] = "auto"
    #: `local` uses the bundled offline model from the `embed` extra; `none` (or null) disables embeddings.
    embedding_provider: Literal["local", "none"] = "local"
    #: `auto`: a PostgreSQL inventory whose server has the pgvector extension keeps vectors in an HNSW
    #: index and searches there; `off`: every server keeps its vectors in memory (`awb doctor` says which).
    pgvector: Literal["auto", "off"] = "auto"
    #: The file the planner keeps its tools' vectors in between runs; None: `$XDG_CACHE_HOME/awb` or
    #: `~/.cache/awb` (`awb.search.vector_cache.default_cache_path`).
    vector_cache: Path | None = None
    #: Vectors kept there at most (~1.6 KB each), the least recently used pruned; 0 turns the cache off.
    vector_cache_entries: int = Field(10_000, ge=0, le=1_000_000)

    @field_validator("embedding_provider", mode="before")
    @classmethod
    def _null_is_none(cls, value: Any) -> Any:
        # The product spec's own example config says `"embedding_provider": null`: no provider.
        return "none" if value is None else value

    def anchored(self, base: Path) -> SearchConfig:
        cache = self.vector_cache
        return self.model_copy(update={"vector_cache": base / cache}) if cache and not cache.is_absolute() else self


class SandboxConfig(_Section):
    #: `auto` tries Monty first and falls back to full CPython when Monty cannot run the tool.
    python_runtime: Literal["auto", "monty", "cpython"] = "auto"
    #: Warm workers per runtime pool.
    pool_size: int = Field(2, ge=1, le=64)
    #: Executions allowed at once; past it a call fails fast with `busy`.
    max_concurrent: int = Field(8, ge=1, le=256)
    #: Executions one client may hold at once (a remote address, IPv6 by /64; on loopback an MCP session,
    #: or with none a client name: `awb.shares`); past it that client's calls fail fast with `busy`, so
    #: the rest stay free for other clients.
    #: None: three quarters of `max_concurrent`; `max_concurrent` or more: no per-client share.
    max_concurrent_per_client: int | None = Field(None, ge=1, le=256)
    #: A call's logs are held in memory and sent in the worker's reply frame: 16 MiB at most.
    max_log_bytes: int = Field(64 * 1024, ge=1024, le=16 * MIB)
    #: Let `cpython` run where some kernel protections are missing (default: refuse and say why).
    allow_degraded_cpython: bool = False
    #: The uid (and gid, the same number) `cpython` and `javascript` workers and `wasm` compile processes
    #: take when the server runs as root. `auto`: one of this server's own, unused on the machine, from
    #: 2000000000 up; never `nobody`, whose task count, signals and files the machine's other `nobody`
    #: processes share.
    worker_uid: int | Literal["auto"] = "auto"
    #: Directories a tool may read, by tool name. Granting is configuration, never an MCP call.
    #: A tool's staged writes must also fall inside them. Relative paths are anchored at the config file's folder.
    #: At most 10,000 tools, each with at most 100 directories.
    grants: dict[
        Annotated[str, StringConstraints(max_length=MAX_NAME_CHARS)],
        Annotated[list[PathText], Field(max_length=MAX_DIRS_PER_GRANT)],
    ] = Field(default_factory=dict, max_length=MAX_GRANTED_TOOLS)
    #: The whole admission test of a craft or update (load check + every example), in milliseconds.
    admission_timeout_ms: int = Field(30_000, ge=100, le=3_600_000)
    #: Pending staged-write bytes one tool may hold, and all tools together.
    #: At most 1 GiB each: staged writes are rows in the inventory, read whole to apply.
    max_staged_bytes_per_tool: int = Field(16 * MIB, ge=1024, le=1024 * MIB)
    max_staged_bytes_total: int = Field(64 * MIB, ge=1024, le=1024 * MIB)
    #: Pending staged writes one tool may hold, and all tools together: empty writes pass the byte caps.
    max_staged_writes_per_tool: int = Field(1000, ge=1, le=1_000_000)
    max_staged_writes_total: int = Field(10_000, ge=1, le=1_000_000)

    @field_validator("worker_uid", mode="before")
    @classmethod
    def _a_uid_or_auto(cls, value: Any) -> Any:
        # One message instead of one per member of the union; root (0) and (uid_t)-1 are no worker's.
        if value == "auto" or (type(value) is int and 1 <= value <= 4_294_967_294):
            return value
        if isinstance(value, str) and value.isdigit() and 1 <= int(value) <= 4_294_967_294:
            return int(value)  # from the environment
        raise ValueError("must be `auto` or a uid from 1 to 4294967294")

    @property
    def per_client_share(self) -> int:
        """`max_concurrent_per_client`, or by default what leaves a quarter of the slots to other clients."""
        if self.max_concurrent_per_client is not None:
            return self.max_concurrent_per_client
        return default_share(self.max_concurrent)

    def anchored(self, base: Path) -> SandboxConfig:
        # A grant is a directory like any other path in the file: a server an MCP host spawns from `/`
        # must grant the workspace's `tools/out`, not `/tools/out`.
        grants = {
            name: [path if Path(path).is_absolute() else str(base / path) for path in dirs]
            for name, dirs in self.grants.items()
        }
        return self.model_copy(update={"grants": grants}) if grants != self.grants else self


class BlueprintsConfig(_Section):
    """The blueprint runtime and its REST face (`awb.blueprints`, `/api`)."""

    #: Model of the agent behind `POST /api/instructions/improve`.
    improve_model: str = "openai:gpt-4o-mini"
    #: Tavily's API root; the key comes from `TAVILY_API_KEY`.
    tavily_base_url: str = "https://api.tavily.com"
    #: Let blueprints start MCP servers by command (`mcp` arms with `command`). Off: a blueprint posted
    #: over HTTP would otherwise run any program on this machine.
    allow_mcp_commands: bool = False
    #: Let blueprints posted over HTTP reach MCP servers at loopback, private or link-local addresses
    #: (cloud metadata) when the server is bound off loopback or behind `http.trusted_proxies`; bound to
    #: loopback with no proxy, every caller is on this machine and reaches them anyway, so it is not asked.
    allow_private_mcp_urls: bool = False
    #: Compiled blueprints kept in memory, by id.
    cache_size: int = Field(256, ge=1, le=100_000)
    #: Model runs the REST API has going at once (`POST /api/agents/run`, `/api/instructions/improve`):
    #: each talks to a model for up to its timeout and spends tokens. Past it a new run is `429 busy`;
    #: one remote client holds at most three quarters of them (`awb.api.run_share`).
    max_concurrent_runs: int = Field(16, ge=1, le=10_000)
    #: Knowledge bases a blueprint's `heart.knowledge` may name: name -> a directory of text and
    #: Markdown files, searched by the agent's `search_knowledge` tool.
    knowledge: dict[Annotated[str, StringConstraints(pattern=KNOWLEDGE_NAME)], Path] = Field(
        default_factory=dict, max_length=MAX_KNOWLEDGE_BASES
    )
    #: How knowledge bases are searched: `text` (BM25) indexes a base in well under a second; `hybrid` also
    #: embeds every passage (with the `embed` extra), which costs tens of milliseconds per passage or more.
    knowledge_search: Literal["text", "hybrid"] = "text"
    #: Characters a run's log keeps of one value an agent or a tool sent (a call's arguments, an error);
    #: longer text is cut with a marker giving its size and SHA-256.
    log_value_chars: int = Field(4000, ge=256, le=10_000_000)
    #: Characters one run's log keeps in all; past them, each value keeps 160.
    log_run_chars: int = Field(256_000, ge=4096, le=100_000_000)

    def anchored(self, base: Path) -> BlueprintsConfig:
        relative = {name: base / path for name, path in self.knowledge.items() if not path.is_absolute()}
        return self.model_copy(update={"knowledge": self.knowledge | relative}) if relative else self


class HttpConfig(_Section):
    """Limits of the HTTP server, against clients that open connections and never finish a request, and
    against guessing the token."""

    #: Connections open at once; past it the oldest one still waiting for its headers (or body) is closed.
    #: Notification streams may hold at most half of them (awb.server.http_streams), and one remote client
    #: three quarters of them in flight (awb.server.request_share).
    max_connections: int = Field(100, ge=2, le=10_000)
    #: Time a client has to send a request's headers (from connecting, or from the previous response).
    header_timeout_seconds: float = Field(10.0, gt=0, le=600)
    #: Time a client has to send a request's body, once its headers are in.
    body_timeout_seconds: float = Field(30.0, gt=0, le=3600)
    #: Idle time before a kept-alive connection is closed.
    keep_alive_seconds: float = Field(5.0, gt=0, le=600)
    #: Answer each MCP request POST with one JSON body rather than an SSE stream (both are MCP; clients
    #: take either): a third less work per call for the server and the client. The workbench sends
    #: nothing else on a request's stream; tool-list changes go out on the session's own stream.
    json_response: bool = True
    #: MCP sessions open at once (each holds ~45 KB); past it a new session ends the idle ones unused for
    #: longest (`awb.server.session_room`), or is refused (503) when every session is in use. One remote
    #: client holds at most three quarters of them: past that, its new session ends its own idle ones.
    max_sessions: int = Field(10_000, ge=1, le=1_000_000)
    #: Time a session may go with no request in flight and no open listen stream before the server ends
    #: it: a client that opens a session per call and never ends it fills the table for this long.
    session_idle_timeout_seconds: float = Field(1800.0, gt=0, le=7 * 24 * 3600)
    #: Wrong credentials (a bearer token, a `/login` token, a forged panel pass) one client address may
    #: present in `auth_failure_window_seconds`; past them it is refused (429) until that window has
    #: passed, even with the right token. Missing credentials are not counted.
    max_auth_failures: int = Field(20, ge=1, le=100_000)
    auth_failure_window_seconds: float = Field(60.0, gt=0, le=24 * 3600)
    #: Client addresses whose failures are remembered at once; past it the oldest are forgotten.
    auth_failure_addresses: int = Field(10_000, ge=1, le=1_000_000)
    #: Reverse proxies (IP addresses or networks) whose `X-Forwarded-For` / `X-Forwarded-Proto` headers
    #: the server believes. Empty (the default): no one's. Anyone who reaches the server can send these
    #: headers, and the client address they name is what the credential limiter and each client's share
    #: of the execution slots count by. Set, it needs `auth_token`: a proxy serves other machines.
    trusted_proxies: list[str] = Field(default_factory=list, max_length=1000)

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, entries: list[str]) -> list[str]:
        # uvicorn takes an entry it cannot read as a name to compare the peer with, which never
        # matches: a typo would quietly trust no one. Said here, it is a configuration error.
        networks = []
        for entry in entries:
            try:
                networks.append(str(ipaddress.ip_network(entry.strip(), strict=False)))
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or network (e.g. 10.0.0.5, 10.0.0.0/8)") from None
        return networks


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
    #: PostgreSQL inventory: how long a request waits for one of the server's pooled connections (all
    #: busy, or the database down) before it fails with `unavailable`. Bounded: a request never hangs.
    inventory_pool_wait_seconds: float = Field(10.0, gt=0, le=300)
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
        if token is not None and len(token.get_secret_value()) < 16:
            raise ValueError("auth_token must be at least 16 characters")
        return token

    def resolve_paths(self, base: Path) -> Config:
        """Return a copy whose relative paths are anchored at `base`."""
        updates: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, Path) and not value.is_absolute() and str(value) != ":memory:":
                updates[name] = base / value
            elif isinstance(value, _Section):
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
    return config.resolve_paths(base.resolve())


def with_overrides(config: Config, **overrides: Any) -> Config:
    """`config` with command-line values (None means "not given"), validated like the file's."""
    updates = {key: value for key, value in overrides.items() if value is not None}
    if not updates:
        return config
    for key, value in updates.items():
        if isinstance(value, Path) and not value.is_absolute():
            updates[key] = value.resolve()
    try:
        return Config.model_validate({**config.model_dump(), **updates})
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
