"""A process that takes stdio like an MCP server and answers each request of its start, but only after
SECONDS: a server slow enough that its start, or several servers' starts one after another, outlast a run's
time while each request stays within its own bound. `python tests/agents/slow_mcp_server.py SECONDS [PORT]`:
with PORT, it answers initialize only once the test's listener on that loopback port, which it connects to
then, sends it a byte (the test's rendezvous of servers that must be starting at the same time)."""

from __future__ import annotations

import json
import queue
import socket
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


def serve(delay: float, rendezvous: int | None) -> None:
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
        if request.get("method") == "initialize" and rendezvous is not None:
            with socket.create_connection(("127.0.0.1", rendezvous)) as meeting:
                meeting.recv(1)  # the byte, or the test's end
        print(json.dumps({"jsonrpc": "2.0", "id": request["id"], **answer(request)}), flush=True)


if __name__ == "__main__":
    serve(float(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else None)
