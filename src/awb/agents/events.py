"""What a run tells while it runs: one event per thing that happened, for progress views and logs.

Pass `on_event=` to `run_agent` (a plain or async function), or iterate `run_agent_stream(...)`.
Subagent events come through the same channel with `depth=1` and the subagent's `agent`. What an event
carries is masked first (`masked`): events are shown, printed and kept, and a tool's arguments or a model's
words may hold a credential.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from awb.redaction import redact_payload, redact_payload_off_loop

EventType = Literal["step_started", "model_reply", "rejected", "tool_call", "tool_result", "subagent", "done"]


class RunEvent(BaseModel):
    """`data` by type: `model_reply` {action, not_run, usage}; `rejected` {code, message};
    `tool_call` {tool, arguments}; `tool_result` {tool, ok, duration_seconds, error};
    `subagent` {agent, phase: started|finished, termination_reason}; `done` {result} (the `RunResult`
    as JSON; at depth 1 a subagent's ending, whose large values are markers naming where the top-level
    `done`'s result has them: `awb.agents.repeats.written_elsewhere`). Actions, arguments, inputs and errors
    are cut (`awb.text.bounded`): events are for watching a run; the top-level `done`'s result has them in
    full. Secrets are masked in all of it (`masked`); the `RunResult` the run returns keeps them."""

    type: EventType
    agent: str
    depth: int = 0
    step: int = 0
    data: dict[str, Any] = Field(default_factory=dict)


EventHandler = Callable[[RunEvent], Awaitable[None] | None]


async def masked(event: RunEvent) -> RunEvent:
    """`event` with its secrets masked (`awb.redaction`: values under secret-named keys, and text
    that looks like a credential). A `done` event carries a run's whole result, which can be tens of
    megabytes: it is masked in a worker thread while the loop goes on; the others are cut already."""
    if event.type == "done":
        data = await redact_payload_off_loop(event.data)
    else:
        data = redact_payload(event.data)
    return event.model_copy(update={"data": data})


class Emitter:
    """Delivers events to an optional handler, awaiting it when it is async."""

    def __init__(self, handler: EventHandler | None = None) -> None:
        self._handler = handler

    @property
    def listening(self) -> bool:
        """Whether events go anywhere: an event nobody receives is not worth masking."""
        return self._handler is not None

    async def __call__(self, event: RunEvent) -> None:
        if self._handler is None:
            return
        outcome = self._handler(event)
        if inspect.isawaitable(outcome):
            await outcome
