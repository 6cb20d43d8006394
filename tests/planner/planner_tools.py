"""An in-process toolbox for planner tests: a mailbox with many messages and a chat, no server needed."""

from __future__ import annotations

from typing import Any

from awb.agents.toolbox import Toolbox, ToolOutcome, ToolSpec

MESSAGES = [
    {"id": f"m{i}", "from": f"user{i % 5}@example.com", "label": ["inbox", "billing"][i % 2], "amount": i}
    for i in range(2000)
]

SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "Words to look for."},
        "label": {"type": "string", "enum": ["inbox", "billing"], "description": "Only this label."},
        "limit": {"type": "integer", "description": "At most this many messages."},
    },
    "required": ["query"],
}
POST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"channel": {"type": "string"}, "text": {"type": "string", "description": "The message."}},
    "required": ["channel", "text"],
}


def planner_toolbox(calls: list[tuple[str, dict[str, Any]]]) -> Toolbox:
    """`mail.search_mail`, `mail.fail` and `chat.post-message`; every call is appended to `calls`."""
    toolbox = Toolbox()

    async def search(arguments: dict[str, Any]) -> ToolOutcome:
        calls.append(("mail.search_mail", arguments))
        found = [m for m in MESSAGES if arguments.get("label") in (None, m["label"])]
        return ToolOutcome(ok=True, payload={"messages": found[: arguments.get("limit", len(found))]})

    async def fail(arguments: dict[str, Any]) -> ToolOutcome:
        calls.append(("mail.fail", arguments))
        return ToolOutcome(ok=False, payload="mailbox is locked")

    async def post(arguments: dict[str, Any]) -> ToolOutcome:
        calls.append(("chat.post-message", arguments))
        return ToolOutcome(ok=True, payload={"posted": True, "channel": arguments["channel"]})

    toolbox.add(ToolSpec("mail.search_mail", "Search the mailbox.", SEARCH_SCHEMA, "mail"), search)
    toolbox.add(ToolSpec("mail.fail", "Always fails.", {"type": "object", "properties": {}}, "mail"), fail)
    toolbox.add(ToolSpec("chat.post-message", "Post to a channel.", POST_SCHEMA, "chat"), post)
    return toolbox
