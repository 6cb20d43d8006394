"""What reaches the wire is capped: huge exception messages, admission reports and deep results come
back as small structured errors, and a call that failed that way is recorded as a failure."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest
from mcp import Client

from awb.config import Config
from awb.server.mcp import McpFace
from awb.text import MAX_RESULT_DEPTH
from awb.workbench import Workbench
from journey import call

pytestmark = pytest.mark.anyio

#: Far above any capped reply, far below what an uncapped one would be.
SMALL_REPLY = 64 * 1024


async def craft_and_call(workbench: Workbench, code: str, params: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Craft a tool over MCP, call it once; the call's reply and the size of its text."""
    with anyio.fail_after(60):
        async with Client(McpFace(workbench).server) as client:
            crafted = await call(client, "awb_craft", {"name": "hostile", "description": "d", "code": code})
            assert "error" not in crafted, crafted
            result = await client.call_tool("awb_call", {"name": "hostile", "params": params})
    assert result.structured_content is not None
    text = result.content[0].text  # type: ignore[union-attr]
    return result.structured_content, len(text)


async def test_an_exception_message_of_tens_of_megabytes_comes_back_capped(workbench: Workbench) -> None:
    code = "def run(params):\n    raise ValueError('\\x00' * 20_000_000)\n"
    reply, size = await craft_and_call(workbench, code, {})
    assert reply["error"]["code"] == "runtime_error"
    assert size < SMALL_REPLY
    [record] = workbench.inspect("hostile").recent_calls
    assert not record.ok and record.error_code == "runtime_error"


@pytest.mark.parametrize("depth", [MAX_RESULT_DEPTH + 1, 3000, 100_000])
async def test_a_result_nested_past_the_limit_is_output_exceeded_and_recorded_as_a_failure(
    workbench: Workbench, depth: int
) -> None:
    code = "def run(params):\n    x = []\n    for i in range(params['n']):\n        x = [x]\n    return x\n"
    reply, size = await craft_and_call(workbench, code, {"n": depth})
    assert reply["error"]["code"] == "output_exceeded"
    assert size < SMALL_REPLY
    tool = workbench.resolve("hostile")
    [record] = workbench.inspect("hostile").recent_calls
    assert (record.ok, record.error_code) == (False, "output_exceeded")
    assert (tool.usage_count, tool.success_count, tool.failure_count) == (0, 0, 1)


async def test_a_result_at_the_depth_limit_is_returned(workbench: Workbench) -> None:
    code = "def run(params):\n    x = []\n    for i in range(params['n']):\n        x = [x]\n    return x\n"
    reply, _ = await craft_and_call(workbench, code, {"n": MAX_RESULT_DEPTH - 1})
    assert reply["result"] is not None
    assert workbench.resolve("hostile").success_count == 1


async def test_an_admission_report_of_huge_results_comes_back_capped(workbench: Workbench) -> None:
    code = "def run(params):\n    return 'y' * 500_000\n"
    examples = [{"params": {"i": i}, "expected": "n"} for i in range(30)]
    with anyio.fail_after(60):
        async with Client(McpFace(workbench).server) as client:
            result = await client.call_tool(
                "awb_craft", {"name": "bloated", "description": "d", "code": code, "examples": examples}
            )
    assert result.is_error and result.structured_content is not None
    assert result.structured_content["error"]["code"] == "admission_failed"
    assert len(result.content[0].text) < 4 * SMALL_REPLY  # type: ignore[union-attr]
    assert workbench.store.count_active() == 0


async def test_meta_tool_arguments_that_are_huge_or_deep_get_a_structured_error(workbench: Workbench) -> None:
    deep: Any = "x"
    for _ in range(5000):
        deep = {"k": deep}
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server) as client:
            face = McpFace(workbench)
            for arguments in (
                {"name": "ok", "description": "d", "code": "x", "tags": ["t"] * 200_000},
                {"name": "ok", "description": "d", "code": "x", "input_schema": deep},
                {"name": "trailing\n", "description": "d", "code": "def run(params):\n    return 1\n"},
            ):
                result = await face.call("awb_craft", arguments)
                assert result.is_error and result.structured_content is not None
                assert result.structured_content["error"]["code"] == "invalid_params"
                assert len(result.content[0].text) < SMALL_REPLY  # type: ignore[union-attr]
            assert (await call(client, "awb_list", {}))["count"] == 0


class Unbounded:
    """A runtime that caps nothing: what the server sends must still be capped."""

    name = "monty"
    language = "python"

    def __init__(self, logs: list[str], error: Exception | None = None) -> None:
        self.logs = logs
        self.error = error

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def check(self, code: str, limits: Any) -> None:
        pass

    async def execute(self, code: str, params: dict[str, Any], limits: Any, host: Any) -> Any:
        from awb.sandbox.base import Execution

        if params.get("fail") and self.error is not None:
            raise self.error
        return Execution(value=1, logs=list(self.logs))

    def protections(self) -> dict[str, bool]:
        return {}


async def test_logs_and_errors_from_a_runtime_that_caps_nothing_are_capped_by_the_server(
    config: Config,
) -> None:
    from awb.errors import ToolRuntimeError

    runtime = Unbounded(
        ["z" * 3_000_000, "more"] * 10, ToolRuntimeError("boom " * 5_000_000, trace=["t" * 10**6] * 1000)
    )
    async with Workbench(config, runtimes={"monty": runtime}) as workbench:
        await workbench.craft({"name": "loud", "description": "d", "code": "def run(params):\n    return 1\n"})
        result = await workbench.call("loud", {})
        assert sum(len(line) for line in result.logs) <= config.sandbox.max_log_bytes + 200
        face = McpFace(workbench)
        reply = await face.call("awb_call", {"name": "loud", "params": {"fail": True}})
        assert reply.is_error and len(reply.content[0].text) < SMALL_REPLY  # type: ignore[union-attr]
        assert reply.structured_content is not None
        assert reply.structured_content["error"]["code"] == "runtime_error"
        [failed, succeeded] = workbench.inspect("loud").recent_calls
        assert (failed.ok, succeeded.ok) == (False, True)


class Held:
    """A workbench method whose calls wait in their worker thread until the test releases them."""

    def __init__(self, method: Any) -> None:
        self.method = method
        self.entered, self.release = threading.Event(), threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.entered.set()
        assert self.release.wait(30), "the held call was never released"
        return self.method(*args, **kwargs)

    async def answered_beside(
        self, client: Client, held: tuple[str, dict[str, Any]], others: list[tuple[str, dict[str, Any]]]
    ) -> dict[str, Any]:
        """Send the `held` request; once it is stuck in its worker thread, send `others` one by one and
        check each is answered meanwhile; then release it. Every reply, by tool name."""
        replies: dict[str, Any] = {}
        async with anyio.create_task_group() as tasks:

            async def held_request() -> None:
                replies[held[0]] = await call(client, *held)

            tasks.start_soon(held_request)
            await anyio.to_thread.run_sync(self.entered.wait, 30)
            for name, arguments in others:
                replies[name] = await call(client, name, arguments)
            assert held[0] not in replies
            self.release.set()
        return replies


async def test_a_slow_search_does_not_hold_up_other_requests(
    workbench: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A first search at 100k tools builds its indexes for seconds, and a query waits for its
    # embedding: that runs in a worker thread, so the event loop answers other requests meanwhile.
    held = Held(workbench.search)
    with anyio.fail_after(60):
        async with Client(McpFace(workbench).server) as client:
            crafted = await call(
                client, "awb_craft", {"name": "adder", "description": "adds", "code": "def run(p):\n    return 1\n"}
            )
            assert crafted["status"] == "created"
            monkeypatch.setattr(workbench, "search", held)
            # The search is stuck in its thread: a call and a listing are still answered.
            replies = await held.answered_beside(
                client,
                ("awb_search", {"query": "adds"}),
                [("awb_call", {"name": "adder", "params": {}}), ("awb_list", {})],
            )
    assert replies["awb_call"]["result"] == 1
    assert [t["name"] for t in replies["awb_list"]["tools"]] == ["adder"]
    assert [r["name"] for r in replies["awb_search"]["results"]] == ["adder"]


async def test_a_slow_listing_does_not_hold_up_other_requests(
    workbench: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A listing counts every match: milliseconds at 100k tools, more for a tag most tools carry. It runs
    # in a worker thread, with or without a query.
    held = Held(workbench.list_page)
    with anyio.fail_after(60):
        async with Client(McpFace(workbench).server) as client:
            await call(
                client,
                "awb_craft",
                {"name": "adder", "description": "adds", "code": "def run(p):\n    return 1\n", "tags": ["math"]},
            )
            monkeypatch.setattr(workbench, "list_page", held)
            replies = await held.answered_beside(
                client, ("awb_list", {"tag": "math"}), [("awb_call", {"name": "adder", "params": {}})]
            )
    assert replies["awb_call"]["result"] == 1
    assert [t["name"] for t in replies["awb_list"]["tools"]] == ["adder"]
