"""Plans Monty cannot run go to the hardened CPython runtime: same wrappers, same single way out
(`call_tool`, bridged and counted by the host), same limits; and a plan that already called a tool is
never run twice."""

from __future__ import annotations

from typing import Any

import pytest

from awb.agents.toolbox import ToolOutcome, ToolSpec
from awb.config import Config
from awb.errors import SandboxViolation
from awb.planner.plan_runner import PlanRunner, run_python_plan
from awb.sandbox import host as host_module
from awb.workbench import Workbench

from .planner_tools import MESSAGES, planner_toolbox

pytestmark = pytest.mark.anyio

BILLING_TOTAL = sum(m["amount"] for m in MESSAGES if m["label"] == "billing")


async def test_a_plan_needing_a_module_monty_lacks_runs_in_cpython_with_the_same_wrappers() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    observed: list[tuple[str, str, bool]] = []
    code = """
import statistics
found = await mail.search_mail(query="invoice", label="billing")
amounts = [m["amount"] for m in found["messages"]]
print("messages:", len(amounts))
await chat.post_message(channel="finance", text=f"billing total {sum(amounts)}")
return {"count": len(amounts), "total": sum(amounts), "median": statistics.median(amounts)}
"""
    result = await run_python_plan(
        code, tools=planner_toolbox(calls), on_call=lambda s, t, p, ok, ms: observed.append((s, t, ok))
    )
    assert result.success, result.error
    assert result.runtime == "cpython"
    assert result.result == {"count": 1000, "total": BILLING_TOTAL, "median": 1000.0}
    assert "messages: 1000" in result.logs
    assert any("Monty cannot run this plan (ModuleNotFoundError" in line for line in result.logs)
    assert result.tool_calls == 2
    assert calls == [
        ("mail.search_mail", {"query": "invoice", "label": "billing"}),
        ("chat.post-message", {"channel": "finance", "text": f"billing total {BILLING_TOTAL}"}),
    ]
    assert observed == [("mail", "search_mail", True), ("chat", "post-message", True)]


async def test_syntax_monty_does_not_support_and_asyncio_gather_run_in_cpython() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    code = """
def labels():
    yield "inbox"
    yield "billing"
pages = await asyncio.gather(*[mail.search_mail(query="x", label=label, limit=2) for label in labels()])
return [m["id"] for page in pages for m in page["messages"]]
"""
    result = await run_python_plan(code, tools=planner_toolbox(calls))
    assert result.success, result.error
    assert result.runtime == "cpython"
    assert result.result == ["m0", "m2", "m1", "m3"]
    assert [c[1]["label"] for c in calls] == ["inbox", "billing"]


async def test_a_plan_that_already_called_a_tool_is_not_run_again_elsewhere() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    code = """
await chat.post_message(channel="finance", text="once")
import statistics
return statistics.mean([1, 2])
"""
    result = await run_python_plan(code, tools=planner_toolbox(calls))
    assert not result.success and result.runtime == "monty"
    assert "ModuleNotFoundError" in (result.error or "")
    assert calls == [("chat.post-message", {"channel": "finance", "text": "once"})]


async def test_the_runtime_can_be_chosen() -> None:
    code = "import statistics\nreturn statistics.mean([1, 2])"
    monty = await run_python_plan(code, tools=planner_toolbox([]), runtime="monty")
    assert not monty.success and monty.runtime == "monty" and "ModuleNotFoundError" in (monty.error or "")
    cpython = await run_python_plan("return sum([1, 2])", tools=planner_toolbox([]), runtime="cpython")
    assert cpython.success and cpython.runtime == "cpython" and cpython.result == 3


async def test_failures_limits_and_escapes_in_cpython_plans() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    async with PlanRunner(planner_toolbox(calls), max_output_bytes=64 * 1024) as runner:
        caught = await runner.run(
            "try:\n    await mail.fail()\nexcept Exception as exc:\n    return {'caught': str(exc)}", runtime="cpython"
        )
        assert caught.success, caught.error
        assert "mail.fail failed: mailbox is locked" in caught.result["caught"]

        swallowed = await runner.run(
            "for i in range(5):\n    try:\n        await chat.post_message(channel='c', text=str(i))\n"
            "    except Exception:\n        pass\nreturn 'done'",
            runtime="cpython",
            max_tool_calls=3,
        )
        assert not swallowed.success and swallowed.error_code == "limit_exceeded" and swallowed.tool_calls == 3
        assert sum(1 for c in calls if c[0] == "chat.post-message") == 3

        spinning = await runner.run("while True:\n    pass", runtime="cpython", timeout_sec=1)
        assert not spinning.success and spinning.timed_out and spinning.error_code == "timeout"

        huge = await runner.run("return 'x' * 200_000", runtime="cpython")
        assert not huge.success and huge.error_code == "output_exceeded"

        unknown = await runner.run("from servers import client\nreturn 1", runtime="cpython")
        assert not unknown.success

        for escape in [
            "return open('/etc/passwd').read()",
            "import socket\nreturn str(socket.socket())",
            "import os\nreturn os.system('true')",
            "return read_file('/etc/passwd')",
            "return write_file('/tmp/x', 'data')",
        ]:
            refused = await runner.run(escape, runtime="cpython")
            assert not refused.success, escape
            assert refused.error_code == "sandbox_violation", (escape, refused.error)

        # Only connected servers' tools: a made-up name goes nowhere.
        made_up = await runner.run("return call_tool('mail', 'drop_all', {})", runtime="cpython")
        assert not made_up.success and "not a tool of the connected servers" in (made_up.error or "")
        assert all(c[0] != "mail.drop_all" for c in calls)


async def test_a_crafted_tool_cannot_use_the_plan_bridge(config: Config) -> None:
    code = "def run(params):\n    return call_tool('mail', 'search_mail', {'query': 'x'})\n"
    async with Workbench(config) as workbench:
        await workbench.craft(
            {"name": "sneaky", "description": "Tries the plan bridge", "code": code, "runtime": "cpython"}
        )
        with pytest.raises(SandboxViolation) as refused:
            await workbench.call("sneaky", {})
    assert "only available to plans" in refused.value.message


async def test_one_servers_unparseable_description_does_not_break_plans_over_the_others() -> None:
    """A server's tool described with `\\N` made the generated module fail to compile: every CPython plan failed."""
    toolbox = planner_toolbox([])

    async def never(arguments: dict[str, Any]) -> ToolOutcome:
        raise AssertionError("not called")

    toolbox.add(ToolSpec("odd.tool", "a \\N escape and a trailing backslash \\", {"type": "object"}, "odd"), never)
    code = (
        "import statistics\nfound = await mail.search_mail(query='x', label='billing')\nreturn len(found['messages'])"
    )
    result = await run_python_plan(code, tools=toolbox)
    assert (result.success, result.runtime, result.result) == (True, "cpython", 1000), result.error


async def test_a_plan_making_host_calls_in_a_loop_ends_at_the_host_call_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan's `log`, refused file calls and malformed host calls each cost the server a round trip on
    the event loop; a plan, like a tool, makes at most `MAX_HOST_CALLS_PER_CALL` of them."""
    monkeypatch.setattr(host_module, "MAX_HOST_CALLS_PER_CALL", 300)  # the budget tools and plans share
    async with PlanRunner(planner_toolbox([])) as runner:
        for body in (
            "for i in range(1000):\n    log('')\nreturn 1",
            "for i in range(1000):\n    try:\n        read_file('x')\n    except Exception:\n        pass\nreturn 1",
        ):
            flood = await runner.run(body, runtime="cpython", timeout_sec=20)
            assert not flood.success and flood.error_code == "output_exceeded", (body, flood.error)
