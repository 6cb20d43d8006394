"""Find agent classes: by dotted path `pkg.module:ClassName`, or by name in an agents directory.

A module of the directory that fails to import (a syntax error, an agent that fails its
definition checks) is reported as one failure; the other modules are still read.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path

from awb.agents.agent import Agent
from awb.agents.errors import AgentNotFound
from awb.errors import ConfigError

#: Agents-directory modules are imported under this prefix so they never shadow real packages.
_PREFIX = "awb_agents_dir"


@dataclass
class Scan:
    agents: list[type[Agent]] = field(default_factory=list)
    #: File name -> one line saying why it could not be imported.
    failures: dict[str, str] = field(default_factory=dict)


def _agent_classes(module: object) -> list[type[Agent]]:
    name = getattr(module, "__name__", "")
    return [
        value
        for value in vars(module).values()
        if inspect.isclass(value) and issubclass(value, Agent) and value is not Agent and value.__module__ == name
    ]


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")


def scan(directory: Path) -> Scan:
    """Every agent defined in the directory's `*.py` files, in file then definition order.

    Raises `ConfigError` (with the path) when the directory does not exist.
    """
    if not directory.is_dir():
        raise ConfigError(f"agents directory not found: {directory.resolve()}", path=str(directory.resolve()))
    found = Scan()
    for path in sorted(directory.glob("*.py")):
        if path.name.startswith("_"):
            continue
        module_name = f"{_PREFIX}.{path.stem}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as err:  # boundary: any import failure is one line, the others still load
            sys.modules.pop(module_name, None)
            found.failures[path.name] = _one_line(err)
            continue
        found.agents.extend(_agent_classes(module))
    return found


def discover(directory: Path) -> list[type[Agent]]:
    """The agents `scan` finds; an empty list when the directory does not exist."""
    return scan(directory).agents if directory.is_dir() else []


def load_agent(reference: str, directory: Path | None = None) -> type[Agent]:
    """`pkg.module:ClassName`, or an agent's `mode` or class name found in `directory`."""
    if ":" in reference:
        module_name, _, attribute = reference.partition(":")
        try:
            value = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as err:
            raise AgentNotFound(f"cannot load agent {reference!r}: {err}", reference=reference) from None
        if not (inspect.isclass(value) and issubclass(value, Agent)):
            raise AgentNotFound(f"{reference!r} is not an Agent subclass", reference=reference)
        return value
    if directory is None:
        raise AgentNotFound(f"no agent named {reference!r}; use pkg.module:ClassName or --agents-dir")
    found = scan(directory)
    for agent in found.agents:
        if reference in (agent.mode, agent.__name__):
            return agent
    hint = "".join(f"; {name} did not import ({why})" for name, why in found.failures.items())
    raise AgentNotFound(
        f"no agent named {reference!r} in {directory}{hint}",
        reference=reference,
        available=[agent.mode for agent in found.agents],
        failures=found.failures,
    )
