"""Find agent classes: by dotted path `pkg.module:ClassName`, or by name in an agents directory."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path

from awb.agents.agent import Agent
from awb.agents.errors import AgentNotFound

#: Agents-directory modules are imported under this prefix so they never shadow real packages.
_PREFIX = "awb_agents_dir"


def _agent_classes(module: object) -> list[type[Agent]]:
    name = getattr(module, "__name__", "")
    return [
        value
        for value in vars(module).values()
        if inspect.isclass(value) and issubclass(value, Agent) and value is not Agent and value.__module__ == name
    ]


def discover(directory: Path) -> list[type[Agent]]:
    """Every agent defined in the directory's `*.py` files, in file then definition order."""
    found: list[type[Agent]] = []
    if not directory.is_dir():
        return found
    for path in sorted(directory.glob("*.py")):
        if path.name.startswith("_"):
            continue
        module_name = f"{_PREFIX}.{path.stem}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        found.extend(_agent_classes(module))
    return found


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
    candidates = discover(directory) if directory is not None else []
    for agent in candidates:
        if reference in (agent.mode, agent.__name__):
            return agent
    raise AgentNotFound(
        f"no agent named {reference!r} in {directory}; use pkg.module:ClassName or --agents-dir",
        reference=reference,
        available=[agent.mode for agent in candidates],
    )
