"""The CLI serves no MCP tools: its errors name its own commands, or a meta-tool as an MCP client reaches it
(`awb.call over MCP`), never a bare meta-tool name as if the CLI served it. The real executable."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from awb.cli.common import CLI_COMMANDS
from awb.cli.inventory import inventory_app
from awb.clock import ManualClock
from awb.config import load_config
from awb.workbench import Workbench
from clitools import assert_one_error_line, clean_env, run_awb

pytestmark = pytest.mark.anyio

PICKER = {
    "name": "picker",
    "description": "Say which of two keys was given",
    "code": "def run(params):\n    return sorted(params)\n",
    # A root combinator: callable, but not servable as a tool of its own.
    "input_schema": {"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
}
UPPER = {
    "name": "upper",
    "description": "Turn text into upper case letters",
    "code": "def run(params):\n    return params['text'].upper()\n",
    "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}
#: A meta-tool's name said as if this face served it: neither "the meta-tool awb.call" (what MCP serves, a
#: fact) nor "awb.call over MCP" (where to do it).
BARE = re.compile(r"(?<!the meta-tool )awb[._](call|update|craft)(?! over MCP)")


def test_every_command_the_cli_names_for_an_action_is_one_it_has() -> None:
    commands = {command.name for command in inventory_app.registered_commands}
    assert {words.removeprefix("awb inventory ") for words in CLI_COMMANDS.values()} <= commands


async def test_equip_refusals_and_doctor_name_the_call_as_an_mcp_client_reaches_it(tmp_path: Path) -> None:
    env = clean_env(
        AWB_INVENTORY_PATH=str(tmp_path / "inventory.db"),
        AWB_PID_FILE=str(tmp_path / "awb.pid"),
        AWB_TOOL_NAMES="dotted",
    )
    config = load_config(None, environ=env)
    clock = ManualClock()
    async with Workbench(config, clock=clock) as workbench:
        picker = await workbench.craft(PICKER)
        upper = await workbench.craft(UPPER)
        # A record from before craft refused meta-tools' names, equipped: left out of every listing.
        workbench.store.add_tool(
            upper.model_copy(update={"tool_id": "tool_older", "name": "AWB_CALL", "equipped": True})
        )

    line = assert_one_error_line(run_awb(tmp_path, "inventory", "equip", "picker", env=env), "not_equippable")
    assert "It stays callable with awb.call over MCP; to equip it" in line and not BARE.search(line)
    as_json = run_awb(tmp_path, "inventory", "equip", "picker", "--json", env=env)
    error = json.loads(as_json.stderr)["error"]
    assert error["details"] == {"tool_id": picker.tool_id, "rule": "input_schema_root"}

    doctor = run_awb(tmp_path, "doctor", "--quick", "--json", env=env)
    [equipped] = [check for check in json.loads(doctor.stdout)["checks"] if check["check"] == "equipped tools"]
    assert "unequip it (awb.call over MCP still reaches it)" in equipped["detail"], equipped
    assert not BARE.search(equipped["detail"])

    async with Workbench(config, clock=clock) as workbench:
        clock.advance(days=config.memory.archive_days_short + 1)
        workbench.maintain()
    line = assert_one_error_line(run_awb(tmp_path, "inventory", "equip", "upper", env=env), "not_equippable")
    assert "is archived; call it once (awb.call over MCP) to bring it back" in line and not BARE.search(line)
