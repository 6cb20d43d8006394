"""A demo chat provider over MCP: channels to list, messages to search, messages to post.

    python examples/demo_servers/chat_server.py        # serve over stdio

Generated from a fixed seed; the people are the mail demo's customers, so tasks can cross-reference.
"""

from __future__ import annotations

import random
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

sys.path.insert(0, str(Path(__file__).parent))
from mail_server import CUSTOMERS

CHANNELS = [
    ("C001", "general", "Company-wide announcements"),
    ("C002", "support", "Customer issues and escalations"),
    ("C003", "finance", "Invoices, refunds and payments"),
    ("C004", "engineering", "Builds, outages and releases"),
    ("C005", "random", "Everything else"),
]
PHRASES = {
    "support": [
        "{who} reports the dashboard is slow",
        "escalation: {who} cannot log in",
        "{who} asked about an outage",
    ],
    "finance": ["refund approved for {who}", "invoice from {who} is overdue", "{who} paid their invoice"],
    "engineering": ["deploy finished", "outage postmortem drafted", "flaky test in the billing service"],
    "general": ["welcome to the team", "all-hands on Friday", "office closed on Monday"],
    "random": ["lunch?", "new coffee machine", "who took my stapler"],
}
CHAT_SIZE = 2000


def build_history(size: int = CHAT_SIZE, seed: int = 11) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, 9, 0)
    history = []
    for i in range(size):
        channel_id, channel, _ = CHANNELS[rng.randrange(len(CHANNELS))]
        who, address = CUSTOMERS[rng.randrange(len(CUSTOMERS))]
        text = rng.choice(PHRASES[channel]).format(who=who)
        history.append(
            {
                "ts": (start + timedelta(minutes=61 * i)).isoformat(timespec="minutes"),
                "channel": channel,
                "channel_id": channel_id,
                "user": f"U{rng.randrange(40):03d}",
                "text": text,
                "mentions": [address] if who in text else [],
            }
        )
    return history


def build_server(history: list[dict[str, Any]] | None = None) -> MCPServer:
    messages = build_history() if history is None else history
    names = {name for _, name, _ in CHANNELS}
    server = MCPServer("chat")

    @server.tool()
    def list_channels() -> list[dict[str, Any]]:
        """List the workspace's channels: id, name, topic and message count."""
        return [
            {"id": cid, "name": name, "topic": topic, "messages": sum(1 for m in messages if m["channel"] == name)}
            for cid, name, topic in CHANNELS
        ]

    @server.tool()
    def search_messages(query: str = "", channel: str | None = None, limit: int = 5000) -> dict[str, Any]:
        """Search messages. `query` matches words in the text (case-insensitive); `channel` is a channel
        name. Returns {total, messages}, oldest first."""
        if channel is not None and channel not in names:
            raise ToolError(f"no channel named {channel}")
        words = query.lower().split()
        found = [
            m
            for m in messages
            if (channel is None or m["channel"] == channel) and all(w in m["text"].lower() for w in words)
        ]
        return {"total": len(found), "messages": found[: max(0, limit)]}

    @server.tool()
    def post_message(channel: str, text: str) -> dict[str, Any]:
        """Post a message to a channel by name. Returns {ok, ts}."""
        if channel not in names:
            raise ToolError(f"no channel named {channel}")
        ts = datetime(2026, 6, 1).isoformat(timespec="minutes") + f"#{len(messages)}"
        messages.append({"ts": ts, "channel": channel, "channel_id": "", "user": "U-awb", "text": text, "mentions": []})
        return {"ok": True, "ts": ts}

    return server


if __name__ == "__main__":
    build_server().run("stdio")
