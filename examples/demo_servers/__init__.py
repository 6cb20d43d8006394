"""Two demo MCP servers that behave like a mail and a chat provider, with generated but realistic data."""
