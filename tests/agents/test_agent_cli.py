"""`awb agents run|list` and `artificer agents`, through the real CLI, model and stdio server."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import awb
from awb.agents.cli import agents_app, artificer_app
from clitools import assert_one_error_line, run_awb, run_program

from .agent_fixtures import FakeProvider

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SRC = str(Path(awb.__file__).resolve().parent.parent)
runner = CliRunner()


def function_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {"id": "c", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return {"choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]}


def greeter_server() -> str:
    return shlex.join(["env", f"PYTHONPATH={SRC}", sys.executable, str(EXAMPLES / "hello_agent.py"), "serve"])


@pytest.fixture(autouse=True)
def no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "AWB_MCP_SERVERS"):
        monkeypatch.delenv(name, raising=False)


def test_agents_run_prints_the_structured_result_as_json(fake_provider: FakeProvider) -> None:
    fake_provider.reply(function_call("greeter__greet", {"name": "Ada"}))
    fake_provider.reply(function_call("done", {"greeting": "Hello, Ada!"}))
    server = greeter_server()
    outcome = runner.invoke(
        agents_app,
        [
            "run",
            "hello",
            "Ada",
            "--agents-dir",
            str(EXAMPLES),
            "--model",
            "openai:fake-model",
            "--base-url",
            fake_provider.url,
            "--server",
            f"greeter={server}",
        ],
    )
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.stdout)
    assert result["termination_reason"] == "done"
    assert result["output"] == {"greeting": "Hello, Ada!"}
    assert [c["name"] for c in result["tool_calls"]] == ["greeter.greet"]


def test_agents_run_exits_3_with_the_result_printed_when_the_model_declines(fake_provider: FakeProvider) -> None:
    fake_provider.reply({"choices": [{"message": {"role": "assistant", "refusal": "I won't greet anyone."}}]})
    arguments = ["run", "hello", "Ada", "--agents-dir", str(EXAMPLES), "--model", "openai:fake-model"]
    arguments += ["--base-url", fake_provider.url, "--server", f"greeter={greeter_server()}"]
    outcome = runner.invoke(agents_app, arguments)
    assert outcome.exit_code == 3, outcome.output  # neither an answer (0) nor a failure (1)
    result = json.loads(outcome.stdout)
    assert result["termination_reason"] == "refused"
    assert result["error"]["details"]["refusal"] == "I won't greet anyone."


def test_agents_run_prints_a_large_argument_once_and_cuts_it_in_the_events(fake_provider: FakeProvider) -> None:
    """The printed result held a large argument three times (the `tool_calls` list, the step's action, the step's
    tool call), and `--verbose` wrote it twice more."""
    name = "A" * 100_000
    fake_provider.reply(function_call("greeter__greet", {"name": name}))
    fake_provider.reply(function_call("done", {"greeting": f"Hello, {name}!"}))
    arguments = ["run", "hello", name, "--agents-dir", str(EXAMPLES), "--model", "openai:fake-model"]
    arguments += ["--base-url", fake_provider.url, "--server", f"greeter={greeter_server()}", "--verbose"]
    outcome = runner.invoke(agents_app, arguments)
    assert outcome.exit_code == 0, outcome.output[:2000]
    assert outcome.stdout.count(name) == 2  # the argument and the greeting, once each
    result = json.loads(outcome.stdout)
    assert result["tool_calls"][0]["arguments"] == {"name": name}
    assert result["steps"][0]["tool_call"]["arguments"]["name"].startswith("…[a repeat of ")
    assert outcome.stderr.count(name) == 2  # in the `done` event's result only


def test_agents_list_shows_the_agents_in_the_agents_directory() -> None:
    outcome = runner.invoke(agents_app, ["list", "--agents-dir", str(EXAMPLES)])
    assert outcome.exit_code == 0, outcome.output
    lines = outcome.stdout.splitlines()
    assert lines[0].startswith("crafter\ttools=awb\tCraft a tool")
    assert lines[1].startswith("hello\ttools=greeter\tGreet the person")


def team_module(lead_prompt: str) -> str:
    """An agents module: `lead` (its system prompt `lead_prompt`) with `sums` as its subagent."""
    return (
        "from pydantic import BaseModel\n"
        "from awb.agents import Agent\n\n"
        "class T(BaseModel):\n    text: str\n\n"
        "class Sums(Agent):\n    mode = 'sums'\n    tools = ('math',)\n    Input = T\n    Output = T\n\n"
        "class Lead(Agent):\n    mode = 'lead'\n    tools = ('math', 'files')\n    Input = T\n    Output = T\n"
        f"    system_prompt = {lead_prompt!r}\n    subagents = (Sums,)\n"
    )


def test_agents_list_json_gives_each_agent_with_its_tools_and_subagents(tmp_path: Path) -> None:
    (tmp_path / "team.py").write_text(team_module("Lead the team.\nMore lines."))
    outcome = runner.invoke(agents_app, ["list", "--agents-dir", str(tmp_path), "--json"])
    assert outcome.exit_code == 0, outcome.output
    assert json.loads(outcome.stdout) == [
        {"mode": "sums", "class": "Sums", "tools": ["math"], "subagents": [], "subagent_of": ["lead"], "summary": ""},
        {
            "mode": "lead",
            "class": "Lead",
            "tools": ["math", "files"],
            "subagents": ["sums"],
            "subagent_of": [],
            "summary": "Lead the team.",
        },
    ]


def test_agents_list_marks_subagents_and_reports_a_broken_module_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "team.py").write_text(team_module("Lead the team."))
    (tmp_path / "broken.py").write_text("import no_such_module_here\n")
    outcome = runner.invoke(agents_app, ["list", "--agents-dir", str(tmp_path)])
    assert outcome.exit_code == 0, outcome.output
    assert outcome.stdout.splitlines() == [
        "sums\ttools=math\t(subagent of lead)\t",
        "lead\ttools=math,files\tsubagents=sums\tLead the team.",
    ]
    assert outcome.stderr == "broken.py: cannot import: ModuleNotFoundError: No module named 'no_such_module_here'\n"


def test_agents_list_shows_an_escape_sequence_or_a_tab_in_a_prompt_escaped(tmp_path: Path) -> None:
    (tmp_path / "team.py").write_text(team_module("Lead\x1b[2J the\tteam."))
    outcome = runner.invoke(agents_app, ["list", "--agents-dir", str(tmp_path)])
    assert outcome.exit_code == 0, outcome.output
    assert "lead\ttools=math,files\tsubagents=sums\tLead\\x1b[2J the\\x09team." in outcome.stdout.splitlines()
    assert "\x1b" not in outcome.stdout


def test_agents_list_of_a_missing_directory_is_an_error_with_its_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    outcome = runner.invoke(agents_app, ["list", "--agents-dir", str(missing)])
    assert outcome.exit_code == 2
    assert outcome.stderr.startswith("error (config_invalid): ") and str(missing) in outcome.stderr
    as_json = runner.invoke(agents_app, ["list", "--agents-dir", str(missing), "--json"])
    error = json.loads(as_json.stderr)["error"]
    assert error["code"] == "config_invalid"
    assert str(missing) in error["message"]


def test_agents_list_without_an_agents_directory_here_lists_nothing_and_says_so(tmp_path: Path) -> None:
    """The default directory (agents/) missing is an empty listing, as `awb blueprints list` shows an empty
    table; the real executable, in a workspace made by `awb init`, which creates no agents/."""
    assert run_awb(tmp_path, "init").returncode == 0
    for args, stdout in ((), ""), (("--json",), "[]"):
        outcome = run_awb(tmp_path, "agents", "list", *args)
        assert outcome.returncode == 0, outcome.stderr
        assert outcome.stdout.strip() == stdout
        assert outcome.stderr.startswith(f"no agents directory at {tmp_path.resolve() / 'agents'}: no agents to list")
    assert not (tmp_path / "agents").exists()


def test_artificer_agents_runs_an_agent_found_by_dotted_path(
    fake_provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "artificer_echo_agents.py").write_text(
        "from pydantic import BaseModel\n"
        "from awb.agents import Agent\n\n"
        "class Text(BaseModel):\n    text: str\n\n"
        "class Echo(Agent):\n    Input = Text\n    Output = Text\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    fake_provider.reply(function_call("done", {"text": "hi"}))
    outcome = runner.invoke(
        artificer_app,
        [
            "agents",
            "artificer_echo_agents:Echo",
            '{"text": "hi"}',
            "--model",
            "openai:m",
            "--base-url",
            fake_provider.url,
        ],
    )
    assert outcome.exit_code == 0, outcome.output
    assert json.loads(outcome.stdout)["output"] == {"text": "hi"}


def test_the_artificer_executable_speaks_as_awb_does_plain_help_and_one_line_errors(tmp_path: Path) -> None:
    artificer = str(Path(sys.executable).parent / "artificer")
    for args in (["--help"], ["-h"], ["agents", "--help"]):
        shown = run_program([artificer, *args], tmp_path)
        assert shown.returncode == 0 and "Usage: artificer" in shown.stdout, (args, shown.stderr)
        # No rich boxes, no `<bool>` metavars, no shell-completion options: as `awb --help`.
        assert "<bool>" not in shown.stdout and "completion" not in shown.stdout and "╭" not in shown.stdout
    missing = run_program([artificer, "agents"], tmp_path)
    assert "Missing argument 'agent'" in assert_one_error_line(missing, "usage_error")
    assert "artificer agents --help" in missing.stderr and missing.returncode == 2
    as_json = run_program([artificer, "agents", "nope", "x", "--json"], tmp_path)
    assert json.loads(as_json.stderr)["error"]["code"] == "config_invalid" and as_json.returncode == 2
    debug = run_program([artificer, "agents", "nope", "x", "--debug"], tmp_path)
    assert debug.stderr.splitlines()[1].strip().startswith("path: ")  # --debug adds the details, as in awb


def test_unfinished_run_prints_its_result_and_exits_1(fake_provider: FakeProvider) -> None:
    fake_provider.reply({"error": {"message": "bad model"}}, status=401)
    outcome = runner.invoke(
        agents_app,
        [
            "run",
            "hello",
            "Ada",
            "--agents-dir",
            str(EXAMPLES),
            "--model",
            "openai:nope",
            "--base-url",
            fake_provider.url,
            "--server",
            f"greeter={greeter_server()}",
        ],
    )
    assert outcome.exit_code == 1
    assert json.loads(outcome.stdout)["termination_reason"] == "model_error"


def test_unknown_agent_is_reported_with_its_error_code(tmp_path: Path) -> None:
    outcome = runner.invoke(agents_app, ["run", "ghost", "x", "--agents-dir", str(tmp_path), "--json"])
    assert outcome.exit_code == 2
    assert json.loads(outcome.stderr)["error"]["code"] == "agent_not_found"


def test_server_option_without_a_name_is_a_config_error() -> None:
    outcome = runner.invoke(
        agents_app, ["run", "hello", "Ada", "--agents-dir", str(EXAMPLES), "--server", "just-a-command", "--json"]
    )
    assert outcome.exit_code == 2
    assert json.loads(outcome.stderr)["error"]["code"] == "config_invalid"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["agents", "run", "hello", "Ada", "--agents-dir", str(EXAMPLES), "--timeout", "-1", "--temperature", "5"],
            "error (usage_error): --temperature: Input should be less than or equal to 2 (got 5.0); "
            "--timeout: Input should be greater than 0 (got -1.0)",
        ),
        (
            ["agents", "run", "hello", "Ada", "--agents-dir", str(EXAMPLES), "--max-tokens", "0"],
            "error (usage_error): --max-tokens: Input should be greater than or equal to 1 (got 0)",
        ),
        (
            ["plan", "x", "--max-steps", "0"],
            "error (usage_error): --max-steps: Input should be greater than or equal to 1 (got 0)",
        ),
        (
            ["plan", "x", "--max-cost-usd", "nan"],
            "error (usage_error): --max-cost-usd: Input should be greater than 0 (got nan)",
        ),
    ],
)
def test_option_values_out_of_range_are_one_usage_error_naming_the_option(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    """Checked before any model or server is asked (none is given here): one line, exit 2, no dump."""
    outcome = run_awb(tmp_path, *args)
    assert (outcome.returncode, outcome.stderr.strip()) == (2, expected)
