"""The sections of the configuration (`memory`, `search`, `sandbox`, `blueprints`, `http`) and the ceilings
every size, count, list and map setting is held to; `awb.config` assembles them into `Config`."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from awb.shares import default_share

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


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    def anchored(self, base: Path) -> Any:
        """This section with its relative paths anchored at `base` (most sections hold none)."""
        return self


class MemoryConfig(Section):
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


class SearchConfig(Section):
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


class SandboxConfig(Section):
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


class BlueprintsConfig(Section):
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


class HttpConfig(Section):
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
