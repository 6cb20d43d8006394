"""The web panel: Active Tools, inspect, kill, staged writes, agent runs and live toasts, served beside
MCP and the REST API by `awb start --transport http` (see `awb.web.app`)."""

from awb.web.app import Panel, create_panel

__all__ = ["Panel", "create_panel"]
