"""The memory policy: how tools move between short-, medium- and long-term memory and the archive.

Pure functions over a tool's counters and timestamps, so the rules read in one place and tests can
drive them with any clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from awb.config import MemoryConfig
from awb.inventory.models import MemoryLevel, Tool


@dataclass(frozen=True)
class TierChange:
    tool_id: str
    name: str
    before: MemoryLevel
    after: MemoryLevel
    reason: str


class MemoryPolicy:
    def __init__(self, config: MemoryConfig) -> None:
        self.config = config

    def level_after_success(self, level: MemoryLevel, usage_count: int) -> MemoryLevel:
        """The tier a tool belongs in after a successful call took its usage to `usage_count`."""
        if level == "archived":
            level = "short_term"
        if level == "short_term" and usage_count >= self.config.promotion_threshold_medium:
            level = "medium_term"
        if level == "medium_term" and usage_count >= self.config.promotion_threshold_long:
            level = "long_term"
        return level

    def idle_before(self, now: datetime) -> dict[str, str]:
        """For each tier maintenance moves, a time (ISO text, UTC) such that every tool of that tier
        idle long enough was last used before it: what the store reads instead of the whole tier.

        Stored times are ISO text compared as text, and a time written with another UTC offset can
        read up to 14 hours off: the cut-offs are a day later than the rule, and
        `maintenance_change` still decides each tool exactly."""
        margin = timedelta(days=1)
        rules = {
            "medium_term": self.config.demotion_days_medium_to_short,
            "short_term": self.config.archive_days_short,
        }
        return {
            level: (now - timedelta(days=days) + margin).astimezone(UTC).isoformat(timespec="microseconds")
            for level, days in rules.items()
        }

    def maintenance_change(self, tool: Tool, now: datetime) -> TierChange | None:
        """Demotion or archiving due for `tool` at `now`, if any. Long-term memory is never demoted."""
        last = tool.last_used_at or tool.created_at
        idle = now - last
        if tool.memory_level == "medium_term" and idle >= timedelta(days=self.config.demotion_days_medium_to_short):
            return TierChange(tool.tool_id, tool.name, "medium_term", "short_term", f"unused for {idle.days} days")
        if tool.memory_level == "short_term" and idle >= timedelta(days=self.config.archive_days_short):
            return TierChange(tool.tool_id, tool.name, "short_term", "archived", f"unused for {idle.days} days")
        return None
