"""Calls recorded together (`Store.record_calls`): grouped by tool, each tool's counters moved once for
its group, and each call given the counters it would have read back had it been recorded alone. Both
stores count this way."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from awb.inventory.models import CallRecord, MemoryLevel, ToolCounters


def by_tool(calls: Sequence[CallRecord]) -> list[list[int]]:
    """The indexes of `calls`, grouped by tool (each group in call order)."""
    groups: dict[str, list[int]] = {}
    for i, call in enumerate(calls):
        groups.setdefault(call.tool_id, []).append(i)
    return list(groups.values())


@dataclass(frozen=True)
class GroupMoves:
    """What one group of calls moves on its tool: its successes and failures, its last success's time."""

    tool_id: str
    ok: int
    failed: int
    last_used: CallRecord | None

    @classmethod
    def of(cls, calls: Sequence[CallRecord], group: list[int]) -> GroupMoves:
        ok = [calls[i] for i in group if calls[i].ok]
        return cls(calls[group[0]].tool_id, len(ok), len(group) - len(ok), ok[-1] if ok else None)


def per_version(calls: Sequence[CallRecord], group: list[int]) -> dict[int, tuple[int, int]]:
    """{version: (uses, failures)} of one tool's calls."""
    counts: dict[int, list[int]] = {}
    for i in group:
        seen = counts.setdefault(calls[i].version, [0, 0])
        seen[0] += 1
        seen[1] += 0 if calls[i].ok else 1
    return {version: (uses, failed) for version, (uses, failed) in counts.items()}


def one_by_one(
    calls: Sequence[CallRecord],
    group: list[int],
    moves: GroupMoves,
    after: tuple[int, int, int, MemoryLevel, str],
    recorded: list[Any],
    level_after: Callable[[MemoryLevel, int], MemoryLevel] | None,
) -> tuple[MemoryLevel, dict[str, Any]]:
    """Fill in `recorded[i]` for each call of `group` (which moved its tool by `moves`) from the tool's
    counters `after` the group (usage, successes, failures) with its tier before the group and its
    status: back to the counters before the calls, then forward one call at a time. Returns the tier
    the group's successes earn and the fields the tool's record moved to (for a cached copy)."""
    usage, successes, failed, level, status = after
    usage, successes, failed = usage - moves.ok, successes - moves.ok, failed - moves.failed
    for i in group:
        previous = level
        if calls[i].ok:
            usage, successes = usage + 1, successes + 1
            if level_after is not None:
                level = level_after(level, usage)
        else:
            failed += 1
        recorded[i] = ToolCounters(
            usage_count=usage,
            success_count=successes,
            failure_count=failed,
            previous_level=previous,
            memory_level=level,
            status=status,
        )
    # The last call's counters, as its ToolCounters holds them (without dumping it: this runs on every record).
    fields: dict[str, Any] = {
        "usage_count": usage,
        "success_count": successes,
        "failure_count": failed,
        "memory_level": level,
        "status": status,
    }
    if moves.last_used is not None:
        fields["last_used_at"] = moves.last_used.at
    return level, fields
