"""awb_call's reply: the call's record and its result, as the workbench returned them, built without
encoding the record a second time on the event loop."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest

from awb.calling import CallResult
from awb.server.mcp import McpFace
from awb.workbench import Workbench

pytestmark = pytest.mark.anyio

LOGGING_CODE = "def run(params):\n    print('seen', params['x'])\n    return {'x': params['x'], 'tags': ['a', 'b']}\n"


async def test_the_reply_holds_the_record_in_call_result_order_and_the_result_as_returned(
    workbench: Workbench,
) -> None:
    await workbench.craft({"name": "echo", "description": "Echo x.", "code": LOGGING_CODE})
    face = McpFace(workbench)
    with anyio.fail_after(30):
        reply = await face.call("awb_call", {"name": "echo", "params": {"x": 7}})
    assert not reply.is_error, reply
    structured: dict[str, Any] = reply.structured_content  # type: ignore[assignment]
    assert list(structured) == list(CallResult.model_fields)
    assert structured["result"] == {"x": 7, "tags": ["a", "b"]}
    assert structured["logs"] == ["seen 7\n"]
    assert structured["name"] == "echo" and structured["version"] == 1 and structured["usage_count"] == 1
    assert structured["memory_level"] == "short_term" and isinstance(structured["duration_ms"], float)
    [record] = workbench.inspect("echo").recent_calls
    assert structured["call_id"] == record.call_id


async def test_the_reply_is_built_without_dumping_the_call_result(
    workbench: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A mode="json" dump walked the record's fields again on every call, for values JSON carries already.
    await workbench.craft({"name": "echo", "description": "Echo x.", "code": LOGGING_CODE})
    face = McpFace(workbench)

    def dumped(self: CallResult, **kwargs: Any) -> dict[str, Any]:
        raise AssertionError("awb_call's reply dumped its CallResult")

    monkeypatch.setattr(CallResult, "model_dump", dumped)
    with anyio.fail_after(30):
        reply = await face.call("awb_call", {"name": "echo", "params": {"x": 7}})
    assert not reply.is_error, reply
    assert reply.structured_content is not None and reply.structured_content["result"]["x"] == 7


async def test_the_handler_hands_the_sdk_the_wire_form_the_result_model_would_dump(workbench: Workbench) -> None:
    # The face gives the SDK its tools/call results as dicts: each must be what the model dumps to.
    await workbench.craft({"name": "echo", "description": "Echo x.", "code": LOGGING_CODE})
    await workbench.lane.call(workbench.equip, "echo")
    face = McpFace(workbench)
    with anyio.fail_after(30):
        replies = [
            await face._reply("awb_call", {"name": "echo", "params": {"x": 7}}, None),
            await face._reply("awb_call", {"name": "missing"}, None),
            await face._reply("echo", {"x": 7}, None),
        ]
    for reply in replies:
        dumped = types.CallToolResult.model_validate(reply).model_dump(by_alias=True, mode="json", exclude_none=True)
        assert reply == dumped
    assert [reply["isError"] for reply in replies] == [False, True, False]
