"""An MCP server over stdio, written by hand, whose messages can be as long as it is told:
`python tests/agents/hostile_stdio_server.py SIZE [--flood-initialize]`.

Tools: `flood` answers with a reply of SIZE bytes (its id first, as the SDKs write it), `late_id` with one
whose id comes after its body, `notice` sends a notification of SIZE bytes and then answers "noticed", and
`echo` answers with its `text`. A flood is written 64 KB at a time, never held whole. Standard library only.
"""

from __future__ import annotations

import json
import sys

CHUNK = 64 * 1024


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def flood(prefix: str, suffix: str, size: int) -> None:
    """One line of `size` bytes: `prefix`, then `x`s, then `suffix`, written a chunk at a time."""
    left = size - len(prefix) - len(suffix) - 1
    out = sys.stdout.buffer
    out.write(prefix.encode())
    while left > 0:
        out.write(b"x" * min(CHUNK, left))
        left -= CHUNK
    out.write(suffix.encode() + b"\n")
    out.flush()


def text_result(text: str) -> dict[str, object]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def serve(size: int, flood_initialize: bool) -> None:
    tools = [
        {"name": name, "description": name, "inputSchema": {"type": "object"}}
        for name in ("flood", "late_id", "notice", "echo")
    ]
    for line in sys.stdin:
        request = json.loads(line)
        method, rid = request.get("method"), request.get("id")
        if rid is None:
            continue  # a notification of the client's
        if method == "initialize":
            if flood_initialize:
                flood(f'{{"jsonrpc": "2.0", "id": {json.dumps(rid)}, "result": {{"junk": "', '"}}', size)
                continue
            result = {
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "0"},
            }
            send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
        elif method == "tools/call":
            name = request["params"]["name"]
            if name == "flood":
                prefix = (
                    f'{{"jsonrpc": "2.0", "id": {json.dumps(rid)}, "result": {{"content": [{{"type": "text", "text": "'
                )
                flood(prefix, '"}]}}', size)
            elif name == "late_id":
                flood(
                    '{"jsonrpc": "2.0", "result": {"content": [{"type": "text", "text": "',
                    f'"}}]}}, "id": {json.dumps(rid)}}}',
                    size,
                )
            elif name == "notice":
                flood(
                    '{"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "',
                    '"}}',
                    size,
                )
                send({"jsonrpc": "2.0", "id": rid, "result": text_result("noticed")})
            else:
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": rid,
                        "result": text_result(str(request["params"]["arguments"].get("text"))),
                    }
                )
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    serve(int(sys.argv[1]), "--flood-initialize" in sys.argv[2:])
