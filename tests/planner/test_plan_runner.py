from __future__ import annotations

from typing import Any

import anyio
import pytest

from awb.agents.toolbox import Toolbox, ToolOutcome, ToolSpec
from awb.planner.calls import CallMade
from awb.planner.plan_runner import MAX_PLAN_ERROR_CHARS, PlanRunner, plan_source, run_python_plan

from .planner_tools import planner_toolbox

pytestmark = pytest.mark.anyio


async def test_a_plan_calls_tools_through_the_wrappers_and_returns_aggregates() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    observed: list[tuple[str, str, bool]] = []
    code = """
found = await mail.search_mail(query="invoice", label="billing")
total = sum(m["amount"] for m in found["messages"])
print("messages:", len(found["messages"]))
await chat.post_message(channel="finance", text=f"billing total {total}")
return {"count": len(found["messages"]), "total": total}
"""
    result = await run_python_plan(
        code, tools=planner_toolbox(calls), on_call=lambda s, t, p, ok, ms: observed.append((s, t, ok))
    )
    assert result.success, result.error
    assert result.result == {"count": 1000, "total": sum(range(1, 2000, 2))}
    assert result.logs == ["messages: 1000"]
    assert result.tool_calls == 2
    assert calls == [
        ("mail.search_mail", {"query": "invoice", "label": "billing"}),
        ("chat.post-message", {"channel": "finance", "text": f"billing total {sum(range(1, 2000, 2))}"}),
    ]
    assert observed == [("mail", "search_mail", True), ("chat", "post-message", True)]
    assert [(c.server, c.tool, c.outcome) for c in result.calls] == [
        ("mail", "search_mail", "ok"),
        ("chat", "post-message", "ok"),
    ]


async def test_a_failed_tool_call_is_an_exception_the_plan_can_catch() -> None:
    code = """
try:
    await mail.fail()
except Exception as exc:
    return {"caught": str(exc)}
"""
    result = await run_python_plan(code, tools=planner_toolbox([]))
    assert result.success
    assert result.result == {"caught": "mail.fail failed: mailbox is locked"}


async def test_an_uncaught_error_fails_the_plan_with_its_traceback() -> None:
    result = await run_python_plan("return 1 / 0", tools=planner_toolbox([]))
    assert not result.success and result.error_code == "runtime_error"
    assert "ZeroDivisionError" in (result.error or "")


async def test_wrong_arguments_are_refused_before_any_call() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    result = await run_python_plan("return await mail.search_mail(q='x')", tools=planner_toolbox(calls))
    assert not result.success and "unexpected keyword arguments: q" in (result.error or "")
    assert calls == []


async def test_a_plan_that_runs_too_long_times_out() -> None:
    result = await run_python_plan("while True:\n    pass", tools=planner_toolbox([]), timeout_sec=0.5)
    assert not result.success and result.timed_out and result.error_code == "timeout"


async def test_the_tool_call_limit_fails_the_plan_even_when_the_plan_swallows_the_refusal() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    code = """
for i in range(10):
    try:
        await chat.post_message(channel="c", text=str(i))
    except Exception:
        pass
return "finished"
"""
    result = await run_python_plan(code, tools=planner_toolbox(calls), max_tool_calls=3)
    assert not result.success and result.error_code == "limit_exceeded"
    assert len(calls) == 3 and result.tool_calls == 3


@pytest.mark.parametrize(
    "escape",
    [
        "return open('/etc/passwd').read()",
        "import os\nreturn os.listdir('/')",
        "import socket\nreturn str(socket.create_connection(('127.0.0.1', 9)))",
        "import subprocess\nreturn subprocess.run(['true']).returncode",
        "return __import__('os').environ['HOME']",
        "import sys\nreturn sys.modules",
    ],
)
async def test_a_plan_cannot_reach_the_filesystem_network_or_processes(escape: str) -> None:
    # Monty refuses outright; a module it lacks sends the plan to the CPython runtime, whose kernel
    # lockdown refuses the act itself.
    result = await run_python_plan(escape, tools=planner_toolbox([]))
    assert not result.success
    assert result.error_code in ("runtime_error", "sandbox_violation"), result.error


async def test_a_result_over_the_output_cap_is_output_exceeded() -> None:
    async with PlanRunner(planner_toolbox([]), max_output_bytes=1000) as runner:
        result = await runner.run("return 'x' * 5000")
    assert not result.success and result.error_code == "output_exceeded"


async def test_one_runner_serves_several_plans_and_each_starts_clean() -> None:
    async with PlanRunner(planner_toolbox([])) as runner:
        first = await runner.run("global leftover\nleftover = 41\nreturn leftover + 1")
        second = await runner.run("return leftover")
    assert first.result == 42
    assert not second.success and "NameError" in (second.error or "")


def test_the_plan_module_imports_every_server_and_wraps_the_body() -> None:
    source = plan_source("  x = 1\n  return x", ["mail", "chat-ops"])
    assert "from servers import mail, chat_ops" in source
    assert "async def main():\n    x = 1\n    return x" in source


@pytest.mark.parametrize("runtime", ["monty", "cpython"])
async def test_printing_past_the_log_cap_and_returning_what_is_not_json_read_the_same_in_both_runtimes(
    runtime: Any,
) -> None:
    """Monty reports its print cap as a MemoryError and turned a set into its text: a plan in Monty was
    told it ran out of memory, and `return {1, 2}` succeeded there while CPython refused it."""
    printer = await run_python_plan(
        "for i in range(700):\n    print('x' * 100)\nreturn 1", tools=Toolbox(), runtime=runtime
    )
    assert (printer.error_code, printer.error) == ("output_exceeded", "printed output is over the 65536-byte cap")
    for value in ("{1, 2}", "float('nan')"):
        returned = await run_python_plan(f"return {value}", tools=Toolbox(), runtime=runtime)
        assert returned.error_code == "invalid_output", (value, returned.error)
        assert returned.error is not None and "not JSON-serialisable" in returned.error


@pytest.mark.parametrize("runtime", ["monty", "cpython"])
async def test_a_plan_waiting_on_a_tool_ends_at_its_deadline_and_the_call_is_cancelled(runtime: Any) -> None:
    """A plan blocked on a tool outlived its time limit by 5 s (Monty's own clock stops while the plan waits
    on the host), and the call went on running after the plan had ended."""
    cancelled = anyio.Event()

    async def hang(arguments: dict[str, Any]) -> ToolOutcome:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    tools = Toolbox()
    tools.add(ToolSpec("slow.hang", "Blocks until cancelled.", {"type": "object", "properties": {}}, "slow"), hang)
    async with PlanRunner(tools, runtime=runtime) as runner:
        await runner.run("return 1")  # the worker is up, so the clock below times the plan alone
        started = anyio.current_time()
        with anyio.fail_after(10):
            result = await runner.run("await slow.hang()\nreturn 'never'", timeout_sec=0.5)
        elapsed = anyio.current_time() - started
        with anyio.move_on_after(5):
            await cancelled.wait()
    assert (result.success, result.timed_out, result.error_code) == (False, True, "timeout")
    assert result.error == "the plan ran past 0.5 s"
    # The hanging call never ends: the limit ended the plan (0.50 s here, three busy processes on two cores
    # or not). Before the fix it ended at a backstop 5 s past the limit (5.5 s, never sooner): the bound is
    # a second under that, with 4 s to spare for a loaded machine.
    assert elapsed < 0.5 + 4, elapsed
    assert cancelled.is_set(), "the in-flight call was left running after the plan ended"
    assert result.calls == [CallMade("slow", "hang", "plan", "cancelled")]


async def test_a_plan_returning_a_value_nested_thousands_deep_fails_with_output_exceeded() -> None:
    """Its JSON encoding recursed past the stack: a RecursionError out of the runner ended the run.
    (The CPython runtime's worker refuses such a result itself.)"""
    code = "x = 'bottom'\nfor i in range(5000):\n    x = [x]\nreturn x"
    with anyio.fail_after(60):
        result = await run_python_plan(code, tools=planner_toolbox([]), runtime="monty")
    assert not result.success and result.error_code == "output_exceeded"
    assert result.error == "the plan's result nests deeper than 64 levels; return flatter data"


def _odd_results_toolbox() -> Toolbox:
    """`odd.surrogate` returns text with a lone surrogate (`json.loads` makes one of a `\\ud800` escape),
    `odd.deep` a result nested 3000 deep, `odd.set` a value that is not JSON."""
    tools = Toolbox()
    empty: dict[str, Any] = {"type": "object", "properties": {}}

    async def surrogate(arguments: dict[str, Any]) -> ToolOutcome:
        return ToolOutcome(ok=True, payload={"text": "a\ud800b", "k\udc00": 1})

    async def deep(arguments: dict[str, Any]) -> ToolOutcome:
        value: Any = "bottom"
        for _ in range(3000):
            value = [value]
        return ToolOutcome(ok=True, payload=value)

    async def not_json(arguments: dict[str, Any]) -> ToolOutcome:
        return ToolOutcome(ok=True, payload={"ids": {1, 2}})

    for name, tool in (("surrogate", surrogate), ("deep", deep), ("set", not_json)):
        tools.add(ToolSpec(f"odd.{name}", name, empty, "odd"), tool)
    return tools


@pytest.mark.parametrize("runtime", ["monty", "cpython"])
async def test_a_tool_result_with_a_lone_surrogate_reaches_the_plan_with_replacement_characters(runtime: Any) -> None:
    """Monty failed the plan with a UnicodeEncodeError at the call, and in CPython the error escaped the
    runner: the run ended with an exception, not a result."""
    code = "r = await odd.surrogate()\nreturn [r['text'], sorted(r)]"
    with anyio.fail_after(30):
        result = await run_python_plan(code, tools=_odd_results_toolbox(), runtime=runtime)
    assert result.success, result.error
    assert result.result == ["a\ufffdb", ["k\ufffd", "text"]]


@pytest.mark.parametrize("tool", ["deep", "set"])
async def test_a_tool_result_the_cpython_worker_cannot_be_sent_fails_that_call_and_the_plan_goes_on(tool: str) -> None:
    """Encoding such a result for the worker raised (RecursionError, TypeError) out of the runner, ending
    the run with an exception instead of failing the one call. (Monty takes both as they are.)"""
    code = f"try:\n    await odd.{tool}()\nexcept Exception as exc:\n    return 'caught: ' + str(exc)\nreturn 'passed'"
    with anyio.fail_after(30):
        result = await run_python_plan(code, tools=_odd_results_toolbox(), runtime="cpython")
    assert result.success, result.error
    assert isinstance(result.result, str), result.result
    assert result.result.startswith(f"caught: odd.{tool} returned a result a plan cannot be sent"), result.result
    assert result.calls == [CallMade("odd", tool, "plan", "ok")]


@pytest.mark.parametrize("runtime", ["monty", "cpython"])
async def test_a_plan_raising_an_exception_with_a_huge_message_fails_with_a_short_error(runtime: Any) -> None:
    """Monty's traceback carried the whole message: 50 MB of error, whose redaction on its way to the
    model held the event loop for 5 s."""
    code = "raise ValueError('start ' + 'ab ' * 1_000_000 + ' end')"
    with anyio.fail_after(30):
        result = await run_python_plan(code, tools=Toolbox(), runtime=runtime)
    assert not result.success and result.error_code == "runtime_error"
    assert result.error is not None and len(result.error) <= MAX_PLAN_ERROR_CHARS + 100, len(result.error)
    assert "ValueError" in result.error and "start" in result.error
