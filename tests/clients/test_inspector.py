"""The MCP Inspector's CLI (Node.js, via npx) drives the whole journey from an `mcpServers` config file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from client_support import EXAMPLES, JOURNEY

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"


@pytest.mark.timeout(600)  # seven Inspector runs, each starting the server; the first also fetches the Inspector
def test_mcp_inspector_cli_crafts_calls_searches_equips_and_calls_the_equipped_tool(tmp_path: Path) -> None:
    if shutil.which("npx") is None:
        pytest.skip("Node.js (npx) is not installed: the MCP Inspector runs on it")
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWB_")}
    env.update(WORKBENCH_BIN=str(Path(sys.executable).parent / "awb"), TMPDIR=str(tmp_path))
    done = subprocess.run(
        ["bash", str(EXAMPLES / "inspector.sh")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=540
    )
    if done.returncode != 0:
        probe = subprocess.run(["npm", "view", INSPECTOR, "version"], capture_output=True, text=True, timeout=120)
        if probe.returncode != 0:
            pytest.skip(f"npm registry unreachable, cannot fetch {INSPECTOR}: {probe.stderr[-500:]}")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-4000:]}"
    expected = [line.replace("['word_count']", '["word_count"]') for line in JOURNEY]
    assert done.stdout.splitlines() == expected
