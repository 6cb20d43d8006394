"""Agent Workbench: a crafting table for AI agents, served over MCP."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from awb.config import Config
    from awb.errors import AwbError
    from awb.workbench import Workbench

__all__ = ["AwbError", "Config", "Workbench"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Imported on first use: `awb --help` and the CLI's listings must not pay for the whole workbench.
    if name == "Config":
        from awb.config import Config

        return Config
    if name == "AwbError":
        from awb.errors import AwbError

        return AwbError
    if name == "Workbench":
        from awb.workbench import Workbench

        return Workbench
    raise AttributeError(f"module 'awb' has no attribute {name!r}")
