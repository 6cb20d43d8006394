"""`awb plan` end to end: the real executable, the demo mail and chat servers over stdio, and a fake
OpenAI-compatible provider on loopback that plays the model."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from agents.agent_fixtures import FakeProvider, openai_calls

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo_servers"
AWB = str(Path(sys.executable).parent / "awb")

PLAN = """
found = await mail.search_mail(query="invoice", label="billing")
total = round(sum(m["amount"] for m in found["messages"]), 2)
posted = await chat.post_message(channel="finance", text=f"{found['total']} invoices, ${total}")
return {"invoices": found["total"], "total": total, "posted": posted["ok"]}
"""


def servers_file(tmp_path: Path) -> Path:
    path = tmp_path / "servers.json"
    entries = {
        name: {"command": sys.executable, "args": [str(DEMO / f"{name}_server.py")]} for name in ("mail", "chat")
    }
    path.write_text(json.dumps({"mcpServers": entries}))
    return path


def expected_invoices() -> tuple[int, float]:
    sys.path.insert(0, str(DEMO))
    try:
        from mail_server import build_mailbox  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(DEMO))
    invoices = [m for m in build_mailbox() if "invoice" in m["subject"].lower() and "billing" in m["labels"]]
    return len(invoices), round(sum(m["amount"] for m in invoices), 2)


def run_plan(tmp_path: Path, provider: FakeProvider, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AWB_"))}
    env["OPENAI_API_KEY"] = "test-key"
    command = [AWB, "plan", "add up my billing invoices and tell #finance", "--model", "openai:gpt-4o-mini"]
    command += ["--base-url", provider.url, "--servers", str(servers_file(tmp_path)), *extra]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def test_awb_plan_runs_a_code_plan_across_two_stdio_servers_and_prints_the_result(
    tmp_path: Path, fake_provider: FakeProvider
) -> None:
    count, total = expected_invoices()
    fake_provider.reply(openai_calls(("run_code", json.dumps({"code": PLAN}))))
    answer = {"summary": f"{count} invoices", "data": {"invoices": count, "total": total}}
    fake_provider.reply(openai_calls(("done", json.dumps(answer))))
    done = run_plan(tmp_path, fake_provider)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["success"] is True and result["raw_outputs"]["result"] == {"invoices": count, "total": total}
    assert result["budget_usage"]["code_runs"] == 1 and result["budget_usage"]["tool_calls"] == 2
    first, second = fake_provider.bodies()
    offered = {tool["function"]["name"] for tool in first["tools"]}
    assert offered == {"done", "run_code", "planner__search_tools", "planner__call_tool"}
    menu = first["messages"][1]["content"]
    assert "search_mail" in menu and "post_message" in menu
    observation: dict[str, Any] = json.loads(
        second["messages"][1]["content"].split("tool_result (run_code): ")[1].splitlines()[0]
    )
    assert observation["result"] == {"invoices": count, "total": total, "posted": True}
    events = [e["event"] for e in result["logs"]]
    assert events.count("mcp.action.called") == 2 and "mcp.sandbox.run" in events


def test_awb_plan_exits_1_with_the_limit_named_when_the_budget_runs_out(
    tmp_path: Path, fake_provider: FakeProvider
) -> None:
    search = json.dumps({"query": "mail"})
    for _ in range(3):
        fake_provider.reply(openai_calls(("planner__search_tools", search)))
    done = run_plan(tmp_path, fake_provider, "--max-steps", "2")
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["success"] is False and result["error"].startswith("budget exceeded: max_steps")


def test_a_configuration_error_is_one_line_and_json_only_when_asked(tmp_path: Path) -> None:
    broken = tmp_path / "servers.json"
    broken.write_text(json.dumps({"mcpServers": {"mail": {"args": ["x"]}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AWB_"))}
    command = [AWB, "plan", "anything", "--servers", str(broken)]
    line = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert line.returncode == 2 and line.stdout == ""
    assert line.stderr.startswith("error (config_invalid): ") and len(line.stderr.strip().splitlines()) == 1
    as_json = subprocess.run([*command, "--json"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert as_json.returncode == 2 and json.loads(as_json.stderr)["error"]["code"] == "config_invalid"


def test_the_readmes_servers_file_and_plan_command_run_as_written_from_the_clone_with_the_venv_active(
    tmp_path: Path, fake_provider: FakeProvider
) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command_at = readme.index('awb plan "Add up my billing invoices and tell #finance" --servers servers.json')
    servers_block = readme[readme.rindex("```json\n", 0, command_at) + len("```json\n") : command_at]
    servers = json.loads(servers_block[: servers_block.index("```")])
    (tmp_path / "servers.json").write_text(json.dumps(servers))
    fake_provider.reply(openai_calls(("run_code", json.dumps({"code": PLAN}))))
    fake_provider.reply(openai_calls(("done", json.dumps({"summary": "posted", "data": None}))))
    # The venv active: its bin first on PATH, so the file's `python` is the venv's; run in the clone.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AWB_"))}
    env.update(OPENAI_BASE_URL=fake_provider.url, PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}")
    line = readme[command_at : readme.index("\n", command_at)].replace("servers.json", str(tmp_path / "servers.json"))
    done = subprocess.run(shlex.split(line), capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["budget_usage"]["tool_calls"] == 2


def test_awb_plan_keeps_tool_vectors_where_the_config_says(tmp_path: Path, fake_provider: FakeProvider) -> None:
    import sqlite3

    from awb.search.embeddings import EmbedderUnavailable, local_model_files

    try:
        local_model_files()
    except EmbedderUnavailable:
        import pytest

        pytest.skip("the embed extra is not installed: no vectors to keep")
    (tmp_path / "awb.config.json").write_text(json.dumps({"search": {"vector_cache": "cache/vectors.sqlite3"}}))
    fake_provider.reply(openai_calls(("done", json.dumps({"summary": "nothing to do"}))))
    done = run_plan(tmp_path, fake_provider)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(tmp_path / "cache" / "vectors.sqlite3") as conn:
        assert conn.execute("SELECT count(*) FROM vectors").fetchone()[0] >= 5  # the demo servers' tools


def test_awb_plan_exits_3_with_the_models_words_printed_when_it_declines(
    tmp_path: Path, fake_provider: FakeProvider
) -> None:
    """As `awb agents run` and `awb blueprints run`: 0 an answer, 1 a failure, 2 a usage error, 3 a refusal."""
    fake_provider.reply({"choices": [{"message": {"role": "assistant", "refusal": "I won't touch the mail."}}]})
    done = run_plan(tmp_path, fake_provider)
    assert done.returncode == 3, done.stderr
    result = json.loads(done.stdout)
    assert (result["success"], result["termination_reason"]) == (False, "refused")
    assert result["refusal"] == "I won't touch the mail."


def test_an_empty_or_blank_task_is_refused_before_any_server_or_model_is_asked(tmp_path: Path) -> None:
    """`awb plan ""` searched tools for nothing and asked the model to do nothing (a model_error result with
    no key, a paid request with one); `awb blueprints run` refuses an empty message the same way."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AWB_"))}
    for task in ("", "  \n\t"):
        command = [AWB, "plan", task, "--servers", str(servers_file(tmp_path))]
        line = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
        assert line.returncode == 2 and line.stdout == "", line
        assert line.stderr == "error (invalid_params): the task is empty: say what to do\n", line.stderr
