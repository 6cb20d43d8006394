"""`awb_inspect` answers with a size the server bounds, not one a tool's author chooses: its history lists
each kept version without its code, schemas and examples (every one of them went out whole: 100 versions of
a tool padded to its caps made a 44 MB answer), and `version` asks for one of them whole."""

from __future__ import annotations

import json

import anyio
import pytest
from mcp import Client

from awb.server.mcp import McpFace
from awb.workbench import Workbench
from journey import call

pytestmark = pytest.mark.anyio

PADDING = "#" + "p" * 30_000 + "\n"
RUN = "def run(params):\n    return 1\n"
VERSIONS = 8


async def test_the_history_leaves_out_each_versions_code_schemas_and_examples(workbench: Workbench) -> None:
    with anyio.fail_after(120):
        await workbench.craft({"name": "padded", "description": "padded versions", "code": RUN + PADDING})
        for number in range(2, VERSIONS + 1):
            await workbench.update("padded", code=f"{RUN}{PADDING}# version {number}\n")
        async with Client(McpFace(workbench).server) as client:
            result = await client.call_tool("awb_inspect", {"name": "padded"})
            whole = await call(client, "awb_inspect", {"name": "padded", "version": 3})
            missing = await call(client, "awb_inspect", {"name": "padded", "version": 99})
    text = result.content[0].text  # type: ignore[union-attr]
    assert len(text) < 3 * len(PADDING)  # the current code once, not every version's
    reply = json.loads(text)
    assert [v["version"] for v in reply["versions"]] == list(range(1, VERSIONS + 1))
    assert all(not {"code", "input_schema", "examples"} & set(v) for v in reply["versions"])
    assert {"usage_count", "failure_count", "created_at", "runtime", "description"} <= set(reply["versions"][0])
    assert reply["tool"]["code"].endswith(f"# version {VERSIONS}\n")
    assert whole["version"]["version"] == 3 and whole["version"]["code"].endswith("# version 3\n")
    assert missing["is_error"] and missing["error"]["code"] == "invalid_params"
    assert missing["error"]["details"]["versions"] == list(range(1, VERSIONS + 1))
