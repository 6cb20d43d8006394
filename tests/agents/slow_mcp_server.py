"""A process that takes stdio like an MCP server and answers each request of its start, but only after
SECONDS: a server slow enough that its start, or several servers' starts one after another, outlast a run's
time while each request stays within its own bound. `python tests/agents/slow_mcp_server.py SECONDS`"""

from __future__ import annotations

import json
import queue
import sys
import threading


def answer(request: dict[str, object]) -> dict[str, object]:
    method = request.get("method")
    if method == "initialize":
        params = request.get("params")
        version = params.get("protocolVersion") if isinstance(params, dict) else None
        info = {"name": "slow", "version": "1"}
        return {"result": {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}}
    if method == "tools/list":
        return {"result": {"tools": []}}
    return {"error": {"code": -32601, "message": "Method not found"}}


def serve(delay: float) -> None:
    lines: queue.Queue[str | None] = queue.Queue()
    ended = threading.Event()

    def read() -> None:
        for line in sys.stdin:
            lines.put(line)
        ended.set()  # the client closed: stop at once, even in the middle of a wait
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    while (line := lines.get()) is not None:
        request = json.loads(line)
        if "id" not in request:  # a notification wants no answer
            continue
        if request.get("method") in ("initialize", "tools/list") and ended.wait(delay):
            return
        print(json.dumps({"jsonrpc": "2.0", "id": request["id"], **answer(request)}), flush=True)


if __name__ == "__main__":
    serve(float(sys.argv[1]))
