"""`awb maintain` and `awb reindex`: the inventory's upkeep, on demand."""

from __future__ import annotations

from typing import TYPE_CHECKING

from awb.cli.common import ConfigOption, JsonOption, config_for, inventory_missing, with_workbench
from awb.cli.output import print_json, say, table

if TYPE_CHECKING:
    from awb.workbench import Workbench


def maintain(config_path: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Run memory maintenance now: demote idle medium-term tools, archive idle short-term ones, and
    prune each tool's call history to its memory.calls_kept_per_tool most recent records."""
    config = config_for(config_path, as_json)
    if inventory_missing(config, config_path):  # upkeep of nothing creates nothing
        if as_json:
            print_json({"changes": [], "calls_pruned": 0})
        return

    def run(workbench: Workbench) -> tuple[list[dict[str, str]], int]:
        changes = [
            {"tool_id": c.tool_id, "name": c.name, "before": c.before, "after": c.after, "reason": c.reason}
            for c in workbench.maintain()
        ]
        return changes, workbench.prune_calls()

    rows, pruned = with_workbench(config, as_json, run)
    if as_json:
        print_json({"changes": rows, "calls_pruned": pruned})
        return
    if not rows:
        say("nothing to do: every tool is where it belongs")
    else:
        table(
            "maintenance",
            ["tool", "from", "to", "why"],
            [(r["name"], r["before"], r["after"], r["reason"]) for r in rows],
        )
    if pruned:
        say(f"pruned {pruned} call records past the {config.memory.calls_kept_per_tool} kept per tool")


def reindex(config_path: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Recompute every live tool's embedding with the current model (hybrid search), with progress."""
    from awb.cli.reindex import reindex_command

    reindex_command(config_path, as_json)
