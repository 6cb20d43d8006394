"""A demo mail provider over MCP: thousands of generated messages to search, fetch one, send.

    python examples/demo_servers/mail_server.py        # serve over stdio

The mailbox is generated from a fixed seed, so every run (and every test) sees the same messages.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

CUSTOMERS = [
    ("Ada Lovelace", "ada@analytical.io"),
    ("Grace Hopper", "grace@cobol.dev"),
    ("Alan Turing", "alan@bletchley.uk"),
    ("Katherine Johnson", "katherine@orbit.nasa"),
    ("Edsger Dijkstra", "edsger@shortest.path"),
    ("Barbara Liskov", "barbara@substitution.org"),
    ("Donald Knuth", "don@taocp.org"),
    ("Margaret Hamilton", "margaret@apollo.space"),
    ("Linus Torvalds", "linus@kernel.fi"),
    ("Radia Perlman", "radia@spanning.tree"),
]
TOPICS = [
    ("invoice", "Invoice {n} for {month}", "billing"),
    ("refund", "Refund request for order {n}", "billing"),
    ("outage", "Service outage on {day}", "support"),
    ("meeting", "Meeting notes: {month} planning", "inbox"),
    ("travel", "Your trip itinerary #{n}", "travel"),
    ("newsletter", "{month} product newsletter", "promotions"),
]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September"]
MAILBOX_SIZE = 3000


def build_mailbox(size: int = MAILBOX_SIZE, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, 8, 0)
    messages = []
    for i in range(size):
        name, address = CUSTOMERS[rng.randrange(len(CUSTOMERS))]
        kind, subject, label = TOPICS[rng.randrange(len(TOPICS))]
        sent = start + timedelta(minutes=97 * i + rng.randrange(60))
        amount = round(rng.uniform(20, 2000), 2) if kind in ("invoice", "refund") else None
        subject_text = subject.format(n=1000 + i, month=MONTHS[sent.month - 1], day=sent.date().isoformat())
        body = (
            f"Hello,\n\n{name} here about {kind}. "
            + (f"The amount is ${amount:.2f}. " if amount is not None else "")
            + "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * rng.randint(2, 8)
            + f"\n\nBest,\n{name}"
        )
        messages.append(
            {
                "id": f"msg-{i:05d}",
                "thread_id": f"thr-{i // 3:05d}",
                "from": address,
                "from_name": name,
                "to": "me@workbench.example",
                "subject": subject_text,
                "date": sent.isoformat(timespec="minutes"),
                "labels": [label, *(["unread"] if rng.random() < 0.3 else [])],
                "kind": kind,
                "amount": amount,
                "body": body,
            }
        )
    return messages


def _row(message: dict[str, Any]) -> dict[str, Any]:
    """A search result row: everything but the body (as real providers return snippets)."""
    row = {k: v for k, v in message.items() if k != "body"}
    row["snippet"] = message["body"][:80]
    return row


def build_server(mailbox: list[dict[str, Any]] | None = None) -> MCPServer:
    messages = build_mailbox() if mailbox is None else mailbox
    by_id = {m["id"]: m for m in messages}
    sent: list[dict[str, Any]] = []
    server = MCPServer("mail")

    @server.tool()
    def search_mail(
        query: str = "",
        label: str | None = None,
        sender: str | None = None,
        after: str | None = None,
        before: str | None = None,
        limit: int = 5000,
    ) -> dict[str, Any]:
        """Search the mailbox. `query` matches words in the subject or body (case-insensitive); `label`
        (inbox, billing, support, travel, promotions, unread), `sender` (an address), and ISO dates
        `after`/`before` narrow it. Returns {total, messages} with one row per message, newest last."""
        words = query.lower().split()
        found = [
            m
            for m in messages
            if all(w in m["subject"].lower() or w in m["body"].lower() for w in words)
            and (label is None or label in m["labels"])
            and (sender is None or m["from"] == sender)
            and (after is None or m["date"] >= after)
            and (before is None or m["date"] < before)
        ]
        return {"total": len(found), "messages": [_row(m) for m in found[: max(0, limit)]]}

    @server.tool()
    def get_message(id: str) -> dict[str, Any]:
        """Fetch one message, with its body, by id."""
        if id not in by_id:
            raise ToolError(f"no message with id {id}")
        return by_id[id]

    @server.tool()
    def send_mail(to: str, subject: str, body: str) -> dict[str, Any]:
        """Send a message. Returns {id, status}."""
        if "@" not in to:
            raise ToolError(f"not an address: {to}")
        message = {"id": f"sent-{len(sent):05d}", "to": to, "subject": subject, "body": body}
        sent.append(message)
        return {"id": message["id"], "status": "sent"}

    return server


if __name__ == "__main__":
    build_server().run("stdio")
