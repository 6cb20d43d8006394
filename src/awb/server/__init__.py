"""Protocol faces of the workbench that serve agents (MCP)."""
