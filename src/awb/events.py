"""Changes in the inventory that faces care about (the MCP face re-lists equipped tools)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

EventKind = Literal[
    "crafted",
    "updated",
    "deleted",
    "equipped",
    "unequipped",
    "tier_changed",
    "external",
    # A craft's admission test began / failed (data: name, runtime / reason); "crafted" follows success.
    "craft_started",
    "craft_rejected",
]


@dataclass(frozen=True)
class Event:
    kind: EventKind
    tool_id: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def changes_tool_list(self) -> bool:
        """Whether clients that show equipped tools must re-list."""
        return self.kind in ("equipped", "unequipped", "external") or bool(self.data.get("equipped"))


Listener = Callable[[Event], None]


class EventBus:
    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def publish(self, event: Event) -> None:
        for listener in list(self._listeners):
            listener(event)
