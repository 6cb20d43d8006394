"""A process that takes stdio like an MCP server but never completes its start: it refuses the
2026 `server/discover` probe, as a 2025 server does, then never answers `initialize` or anything else.
`python tests/agents/silent_mcp_server.py`"""

from __future__ import annotations

import json
import sys

if __name__ == "__main__":
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("method") == "server/discover":
            error = {"code": -32601, "message": "Method not found"}
            print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "error": error}), flush=True)
