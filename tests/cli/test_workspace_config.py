"""A workspace's awb.config.json read by the real `awb` executable, wherever it is run from."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from clitools import AWB, assert_one_error_line, clean_env, run_awb
from journey import call

pytestmark = pytest.mark.anyio

#: The product spec's example awb.config.json (its section 11), verbatim: its interface is a contract.
SPEC_EXAMPLE_CONFIG = """\
{
  "port": 7777,
  "inventory_path": "./inventory.db",
  "max_tools": 1000,
  "tool_execution_timeout_ms": 5000,
  "memory": {
    "promotion_threshold_medium": 5,
    "promotion_threshold_long": 50,
    "demotion_days_medium_to_short": 30,
    "archive_days_short": 60
  },
  "search": {
    "mode": "text",  
    "embedding_provider": null
  }
}
"""  # noqa: W291 - the spec's own trailing spaces, kept

WRITER = {
    "name": "writer",
    "description": "Write a note into the granted directory",
    "code": "def run(params):\n    write_file(params['path'], 'note')\n    return params['path']\n",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}


async def test_relative_grants_follow_the_config_file_when_the_server_is_spawned_from_elsewhere(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    (workspace / "tools" / "out").mkdir(parents=True)
    config = workspace / "awb.config.json"
    config.write_text(json.dumps({"sandbox": {"grants": {"writer": ["tools/out"]}}, "search": {"mode": "text"}}))
    # As an MCP host spawns it: from `/`, the workspace named only by --config.
    server = StdioServerParameters(command=AWB, args=["start", "--config", str(config)], env=clean_env(), cwd="/")
    with anyio.fail_after(60):
        async with Client(server) as client:
            crafted = await call(client, "awb_craft", WRITER)
            assert "is_error" not in crafted, crafted
            for path in (str(workspace / "tools" / "out" / "absolute.txt"), "relative.txt"):
                called = await call(client, "awb_call", {"name": "writer", "params": {"path": path}})
                assert "is_error" not in called, called
    listed = run_awb(tmp_path, "staged", "list", "--config", str(config), "--json")
    assert listed.returncode == 0, listed.stderr
    staged = sorted(write["path"] for write in json.loads(listed.stdout)["writes"])
    out = (workspace / "tools" / "out").resolve()
    assert staged == [str(out / "absolute.txt"), str(out / "relative.txt")]


def test_the_product_specs_example_config_is_accepted_as_written(tmp_path: Path) -> None:
    (tmp_path / "awb.config.json").write_text(SPEC_EXAMPLE_CONFIG)
    result = run_awb(tmp_path, "doctor", "--quick", "--json")
    checks = {check["check"]: check for check in json.loads(result.stdout)["checks"]}
    assert checks["config"]["ok"], checks["config"]
    # Port 7777, the example's, may be another program's on this machine: that is all that may fail.
    assert {name for name, check in checks.items() if not check["ok"]} <= {"port"}, checks
    listed = run_awb(tmp_path, "inventory", "list", "--json")
    assert listed.returncode == 0, listed.stderr


def test_init_and_start_refuse_a_size_past_its_ceiling_as_one_config_error_line(tmp_path: Path) -> None:
    refused = run_awb(tmp_path, "init", env=clean_env(AWB_MAX_TOOLS=str(10**18)))
    assert "max_tools: Input should be less than or equal to 1000000" in assert_one_error_line(
        refused, "config_invalid"
    )
    assert not (tmp_path / "awb.config.json").exists()
    assert run_awb(tmp_path, "init").returncode == 0
    config = tmp_path / "awb.config.json"
    data = json.loads(config.read_text())
    data["max_code_bytes"] = 10**18
    data["sandbox"]["max_log_bytes"] = 10**18
    config.write_text(json.dumps(data))
    started = run_awb(tmp_path, "start")
    line = assert_one_error_line(started, "config_invalid")
    assert "max_code_bytes: Input should be less than or equal to 4194304" in line
    assert "sandbox.max_log_bytes: Input should be less than or equal to 16777216" in line
