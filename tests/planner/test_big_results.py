"""A tool's or a plan's result of tens of megabytes is redacted off the event loop: other work on the loop
goes on meanwhile, and the secrets in it are still masked."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from awb.agents.models import ScriptedModel
from awb.planner.task import execute_mcp_task
from awb.redaction import MASK
from support import MAX_MASKED_ON_LOOP, run_while_ticking

pytestmark = pytest.mark.anyio

SECRET = "sk-proj-" + "S" * 40
#: About 20 MB of text with a secret in its middle and one at its end.
BIG = "lorem ipsum basic bearer text " * 350_000 + SECRET + " " + "dolor sit amet " * 650_000 + f"Bearer {SECRET}"
#: The most CPU time the loop's thread may spend between two ticks (support.longest_gap). Redacting BIG on
#: the loop held it 1.5-3.5 s; in a thread, the loop does at most the SDK's own handling of the result.
MAX_GAP_SECONDS = 0.75


def big_server() -> MCPServer:
    server = MCPServer("big")

    @server.tool()
    def dump(kind: str) -> str:
        """Dump everything as text (`all`), or its last 900,000 characters (`tail`)."""
        return BIG if kind == "all" else BIG[-900_000:]

    return server


@pytest.mark.timeout(120)
async def test_a_direct_call_returning_20_mb_leaves_the_loop_free_and_masks_its_secrets(tmp_path: Path) -> None:
    call = {
        "action": "call_tool",
        "tool": "planner.call_tool",
        "arguments": {"server": "big", "tool": "dump", "arguments": {"kind": "all"}},
    }
    model = ScriptedModel([call, {"action": "done", "output": {"summary": "dumped"}}])
    result, loop = await run_while_ticking(
        lambda: execute_mcp_task("dump it", servers={"big": big_server()}, model=model, workspace=tmp_path)
    )
    assert result.success, result.error
    assert loop.held < MAX_GAP_SECONDS, f"the event loop was held {loop.held:.2f} s of CPU"
    assert loop.masked_on_loop < MAX_MASKED_ON_LOOP, f"the event loop masked {loop.masked_on_loop} characters itself"
    [ref] = result.raw_outputs["storage_refs"]
    stored = Path(ref).read_text()
    assert SECRET not in stored and SECRET[:12] not in stored
    assert stored.count(MASK) == 2 and len(stored) > 19_000_000
    assert SECRET[:12] not in model.seen[1][0].body


async def test_a_plan_result_near_its_cap_reaches_the_model_with_its_secrets_masked() -> None:
    plan = "return await big.dump(kind='tail')"
    model = ScriptedModel([{"action": "run_code", "code": plan}, {"action": "done", "output": {"summary": "dumped"}}])
    with anyio.fail_after(60):
        result = await execute_mcp_task(
            "dump it", servers={"big": big_server()}, model=model, summarize=False, context_chars=2_000_000
        )
    assert result.success, result.error
    observation = model.seen[1][0].body
    assert f"dolor sit amet Bearer {SECRET}"[:30] not in observation
    assert f"dolor sit amet {MASK}" in observation and SECRET[:12] not in observation
