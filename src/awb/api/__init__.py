"""The REST face (FastAPI), served beside MCP in the same HTTP server."""
