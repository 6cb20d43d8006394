"""The planner's telemetry: one redacted, structured event per search, action, plan, summary and
budget stop. Each is kept in the task's result, logged on `awb.planner`, and (when an OpenTelemetry
SDK is configured) recorded as a span."""

from __future__ import annotations

import logging
import time
from typing import Any, Literal

from awb.agents.telemetry import span
from awb.redaction import EVENT_CHARS, redact_record

EventName = Literal[
    "mcp.search.run", "mcp.action.called", "mcp.sandbox.run", "mcp.summary.created", "mcp.budget.exceeded"
]
log = logging.getLogger("awb.planner")


class TaskTelemetry:
    def __init__(self, task_id: str, user_id: str) -> None:
        self.task_id = task_id
        self.user_id = user_id
        #: The loop's current step, kept up to date from the run's events.
        self.step_index = 0
        self.events: list[dict[str, Any]] = []

    def emit(self, name: EventName, **payload: Any) -> dict[str, Any]:
        event = {
            "event": name,
            "task_id": self.task_id,
            "user_id": self.user_id,
            "step_index": self.step_index,
            "at": time.time(),
            "payload": redact_record(payload, max_chars=EVENT_CHARS),
        }
        self.events.append(event)
        log.debug("%s step=%d %s", name, self.step_index, event["payload"], extra={"awb_event": event})
        attributes: dict[str, str | int | float | bool | None] = {
            "awb.task_id": self.task_id,
            "awb.user_id": self.user_id,
            "awb.step_index": self.step_index,
        }
        with span(name, attributes):
            pass
        return event
