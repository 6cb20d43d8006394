"""MCP servers from configuration, in the format MCP hosts already use:

    {"mcpServers": {"awb": {"command": "awb", "args": ["start"], "env": {...}, "cwd": "..."},
                    "docs": {"url": "https://host/mcp", "headers": {"Authorization": "Bearer ..."}}}}

Found, first match wins, by `--servers FILE`, then `mcp_servers` in awb.config.json or the
`AWB_MCP_SERVERS` environment variable (a file path, or the JSON itself); `--server NAME=...`
entries override by name. Stdio servers inherit the environment, plus their `env`, so `AWB_*`
settings reach a workbench started this way. Other keys hosts write (`type`, `disabled`, ...) are
accepted; a `disabled: true` server is left out.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcp.client.stdio import StdioServerParameters
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from awb.agents.mcp_client import HttpServer, ServerTarget
from awb.config import MAX_MCP_SERVERS
from awb.errors import ConfigError


class ServerEntry(BaseModel):
    model_config = ConfigDict(extra="allow")

    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = {}
    disabled: bool = False

    @model_validator(mode="after")
    def _one_transport(self) -> ServerEntry:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (stdio) or `url` (streamable HTTP)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("`url` must be an http:// or https:// URL")
        return self

    def target(self, base: Path, environ: Mapping[str, str]) -> ServerTarget:
        if self.url is not None:
            return HttpServer(self.url, dict(self.headers))
        assert self.command is not None  # checked by the validator
        cwd = None if self.cwd is None else str((base / self.cwd).resolve())
        return StdioServerParameters(command=self.command, args=self.args, env={**environ, **self.env}, cwd=cwd)


def parse_servers(
    data: object, *, source: str, base: Path | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, ServerTarget]:
    """`{"mcpServers": {...}}`, or the bare name -> entry map, as server targets."""
    environ = os.environ if environ is None else environ
    base = base or Path.cwd()
    if isinstance(data, dict) and "mcpServers" in data:
        data = data["mcpServers"]
    if not isinstance(data, dict):
        raise ConfigError(f'{source}: expected {{"mcpServers": {{name: server}}}}', source=source)
    if len(data) > MAX_MCP_SERVERS:
        # Each is started (a process or a connection) for the run: a generated file of thousands is a mistake.
        raise ConfigError(
            f"{source}: {len(data)} servers, more than the {MAX_MCP_SERVERS} a run may start", source=source
        )
    servers: dict[str, ServerTarget] = {}
    for name, raw in data.items():
        try:
            entry = ServerEntry.model_validate(raw)
        except ValidationError as err:
            problems = "; ".join(str(item["msg"]) for item in err.errors())
            raise ConfigError(f"{source}: server {name!r}: {problems}", source=source, server=name) from None
        if not entry.disabled:
            servers[str(name)] = entry.target(base, environ)
    return servers


def load_servers_file(path: Path, environ: Mapping[str, str] | None = None) -> dict[str, ServerTarget]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"MCP servers file not found: {path}", path=str(path)) from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"MCP servers file {path} is not valid JSON: {err}", path=str(path)) from None
    except RecursionError:  # nested past the decoder's stack: was internal_error
        raise ConfigError(f"MCP servers file {path} is JSON nested too deeply to read", path=str(path)) from None
    return parse_servers(data, source=str(path), base=path.parent, environ=environ)


def configured_servers(
    setting: Mapping[str, Any] | str | None, *, base: Path, environ: Mapping[str, str] | None = None
) -> dict[str, ServerTarget]:
    """The `mcp_servers` config value: the map itself, or a path to a file holding it."""
    if setting is None:
        return {}
    if isinstance(setting, str):
        stripped = setting.strip()
        if stripped.startswith("{"):
            try:
                return parse_servers(json.loads(stripped), source="mcp_servers", base=base, environ=environ)
            except json.JSONDecodeError as err:
                raise ConfigError(f"mcp_servers is not valid JSON: {err}") from None
            except RecursionError:
                raise ConfigError("mcp_servers is JSON nested too deeply to read") from None
        return load_servers_file(base / stripped, environ)
    return parse_servers(dict(setting), source="mcp_servers", base=base, environ=environ)
