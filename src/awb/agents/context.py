"""Working memory of one run: observations the model needs next, not a chat transcript.

The system prompt and the task are always kept. Observations are bounded by a character budget:
an oversize payload is cut with a marker, and the oldest observations go first when the whole
exceeds the budget. Trimming depends only on what was added, so a run replays identically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from awb.safe_copy import safe_dumps

Kind = Literal["tool_result", "tool_error", "subagent_output", "subagent_error", "note", "feedback"]

TRUNCATED = "…[truncated {n} chars]"
#: Room reserved for the marker, so a truncated observation never exceeds its limit.
_MARKER_ROOM = 32


@dataclass(frozen=True)
class Observation:
    kind: Kind
    source: str
    text: str

    def render(self) -> str:
        return f"- {self.kind} ({self.source}): {self.text}"


def to_text(payload: Any) -> str:
    if isinstance(payload, str):
        return payload
    # A payload from a tool or a model nested past the encoder's stack is written as its safe copy.
    return safe_dumps(payload, ensure_ascii=False, sort_keys=True, default=str)


@dataclass
class Context:
    system_prompt: str
    task: str
    max_chars: int = 16_000
    #: One observation never takes more than this share of the budget, so a single huge result
    #: cannot push everything else out.
    max_observation_share: float = 0.5
    observations: list[Observation] = field(default_factory=list)

    def add(self, kind: Kind, source: str, payload: Any) -> Observation:
        text = to_text(payload)
        limit = max(64, int(self.max_chars * self.max_observation_share))
        if len(text) > limit:
            keep = limit - _MARKER_ROOM
            text = text[:keep] + TRUNCATED.format(n=len(text) - keep)
        observation = Observation(kind, source, text)
        self.observations.append(observation)
        return observation

    def visible(self) -> tuple[list[Observation], int]:
        """The newest observations that fit the budget, oldest first, and how many were dropped."""
        kept: list[Observation] = []
        used = 0
        for observation in reversed(self.observations):
            size = len(observation.render()) + 1
            if used + size > self.max_chars:
                break
            kept.append(observation)
            used += size
        kept.reverse()
        return kept, len(self.observations) - len(kept)

    def render(self) -> str:
        kept, dropped = self.visible()
        lines = [f"## Task\n{self.task}", "## Working memory"]
        if dropped:
            lines.append(f"({dropped} older observations trimmed)")
        if not self.observations:
            lines.append("(empty)")
        lines.extend(observation.render() for observation in kept)
        return "\n".join(lines)
