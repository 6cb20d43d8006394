"""Agent Workbench: a crafting table for AI agents, served over MCP."""

from awb.config import Config
from awb.errors import AwbError
from awb.workbench import Workbench

__all__ = ["AwbError", "Config", "Workbench"]
__version__ = "0.1.0"
