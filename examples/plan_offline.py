"""The code-mode planner, offline: the demo mail and chat servers, and a scripted model that writes one plan.

    python examples/plan_offline.py

A real model would choose these actions itself (`awb plan "<task>" --model openai:gpt-4o-mini`); the
scripted model plays them back, so the example runs with no network and no API key.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent / "demo_servers"))
from chat_server import build_server as chat_server
from mail_server import build_server as mail_server

from awb.agents.models import ScriptedModel
from awb.planner import Budget, MCPTaskResult, execute_mcp_task

PLAN = """
invoices = await mail.search_mail(query="invoice", label="billing")
total = round(sum(m["amount"] for m in invoices["messages"]), 2)
await chat.post_message(channel="finance", text=f"{invoices['total']} invoices, ${total} in all")
return {"invoices": invoices["total"], "total": total}
"""


async def main() -> MCPTaskResult:
    model = ScriptedModel(
        [
            {"action": "run_code", "code": PLAN},
            # A real model reads the plan's result from its context; the script knows it in advance.
            {"action": "done", "output": {"summary": "Posted the invoice total to #finance.", "data": None}},
        ]
    )
    result = await execute_mcp_task(
        "Add up my billing invoices and tell #finance",
        servers={"mail": mail_server(), "chat": chat_server()},
        model=model,
        budget=Budget(max_steps=5, max_tool_calls=10),
    )
    plan_result = model.seen[1][0].body.split("tool_result (run_code): ", 1)[1].splitlines()[0]
    print("plan result seen by the model:", plan_result)
    print(result.model_dump_json(indent=2, exclude={"logs"}))
    return result


if __name__ == "__main__":
    anyio.run(main)
