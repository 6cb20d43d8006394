"""The `awb` command line, run as the venv's real executable in a temporary workspace."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main

from awb.cli.main import app
from awb.clock import ManualClock
from awb.config import load_config
from awb.errors import AwbError
from awb.workbench import Workbench
from clitools import assert_one_error_line, clean_env, http_server, reserved_port, run_awb
from support import REPO, add_tool

pytestmark = pytest.mark.anyio


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return clean_env(AWB_INVENTORY_PATH=str(tmp_path / "inventory.db"), AWB_PID_FILE=str(tmp_path / "awb.pid"), **extra)


@pytest.fixture
def port() -> Iterator[int]:
    """The port `awb doctor` checks: one this test holds, not the machine's 7777."""
    with reserved_port() as held:
        yield held


def test_init_creates_config_inventory_tools_dir_and_an_ignored_state_dir_and_refuses_to_overwrite(
    tmp_path: Path,
) -> None:
    result = run_awb(tmp_path, "init", str(tmp_path / "ws"))
    assert result.returncode == 0, result.stderr
    workspace = tmp_path / "ws"
    assert (workspace / "awb.config.json").exists() and (workspace / "tools").is_dir()
    assert load_config(workspace / "awb.config.json", environ={}).inventory_path.exists()
    assert (workspace / ".awb" / ".gitignore").read_text().splitlines()[-1] == "*"
    again = run_awb(tmp_path, "init", str(workspace))
    assert "already exists" in assert_one_error_line(again, "config_invalid")
    assert run_awb(tmp_path, "init", str(workspace), "--force").returncode == 0


def test_the_repository_ignores_the_workbench_state_dir() -> None:
    assert ".awb/" in (REPO / ".gitignore").read_text().splitlines()


def test_init_with_an_invalid_environment_is_one_error_line(tmp_path: Path) -> None:
    result = run_awb(tmp_path, "init", env=clean_env(AWB_PORT="seven"))
    assert "port" in assert_one_error_line(result, "config_invalid")
    assert result.returncode == 2


def test_doctor_passes_on_a_fresh_workbench_and_reports_json(tmp_path: Path, port: int) -> None:
    assert run_awb(tmp_path, "init").returncode == 0
    result = run_awb(tmp_path, "doctor", "--json", env=clean_env(AWB_PORT=str(port)))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    checks = {check["check"]: check for check in report["checks"]}
    assert report["ok"] and checks["inventory"]["ok"] and checks["fts5"]["ok"] and checks["sandbox:monty"]["ok"]
    assert "search.mode is 'auto'" in checks["search"]["detail"]
    assert checks["port"]["ok"] and checks["port"]["detail"] == f"127.0.0.1:{port} free"


def test_doctor_probes_in_every_runtime_without_loading_the_mcp_sdk_or_the_embedding_model(
    tmp_path: Path, port: int
) -> None:
    # Nothing is equipped, so the listing check needs none of the SDK's wire models; no check needs the
    # model loaded (the search row reports the mode and why).
    assert run_awb(tmp_path, "init").returncode == 0
    probe = (
        "import sys\n"
        "from awb.cli.main import main\n"
        "try:\n"
        "    main(['doctor', '--json'])\n"
        "except SystemExit as end:\n"
        "    assert end.code == 0, end.code\n"
        "heavy = ('mcp', 'mcp_types', 'onnxruntime')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=clean_env(AWB_PORT=str(port)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    checks = {check["check"]: check for check in json.loads(done.stdout)["checks"]}
    assert checks["sandbox:monty"]["detail"].startswith("probe ran")
    assert checks["equipped tools"]["ok"]
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_doctor_quick_starts_no_worker_and_says_what_it_did_not_check(tmp_path: Path, port: int) -> None:
    assert run_awb(tmp_path, "init").returncode == 0
    result = run_awb(tmp_path, "doctor", "--quick", "--json", env=clean_env(AWB_PORT=str(port)))
    assert result.returncode == 0, result.stderr
    checks = {check["check"]: check for check in json.loads(result.stdout)["checks"]}
    assert "not probed (--quick)" in checks["sandbox:monty"]["detail"]
    assert not any(name.startswith("sandbox:cpython:") for name in checks)
    assert checks["sandbox protections"]["warning"] and "--quick" in checks["sandbox protections"]["detail"]


def test_doctor_fails_with_a_nonzero_exit_on_a_bad_config(tmp_path: Path) -> None:
    (tmp_path / "awb.config.json").write_text('{"port": "seven"}')
    result = run_awb(tmp_path, "doctor")
    assert result.returncode == 1
    assert "port" in result.stdout


def test_unknown_awb_variables_stop_no_command_and_doctor_lists_them(tmp_path: Path) -> None:
    env = env_for(tmp_path, AWB_AGENTS_DIR="agents", AWB_SOMETHING_ELSE="1", AWB_MEMORY__NOT_A_FIELD="2")
    for args in (("init",), ("inventory", "list", "--json"), ("maintain", "--json")):
        result = run_awb(tmp_path, *args, env=env)
        assert result.returncode == 0, (args, result.stderr)
    report = json.loads(run_awb(tmp_path, "doctor", "--json", env=env).stdout)
    environment = next(c for c in report["checks"] if c["check"] == "environment")
    assert environment["warning"] and "AWB_SOMETHING_ELSE" in environment["detail"]
    assert "AWB_MEMORY__NOT_A_FIELD" in environment["detail"] and "AWB_AGENTS_DIR" not in environment["detail"]


def test_checks_and_listings_without_a_config_say_so_and_create_nothing(tmp_path: Path, port: int) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    for args in (
        ("doctor", "--json"),
        ("inventory", "list"),
        ("inventory", "list", "--json"),
        ("inventory", "search", "add numbers"),
        ("staged", "list"),
        ("maintain",),
        ("maintain", "--json"),
        ("reindex",),
        ("reindex", "--json"),
        ("blueprints", "schemas", "--part", "spine"),
    ):
        result = run_awb(tmp_path, *args, env=clean_env(AWB_PORT=str(port)))
        assert result.returncode == 0, (args, result.stderr)
        if args[0] not in ("doctor", "blueprints"):
            assert "no awb.config.json here" in result.stderr and "nothing to show" in result.stderr
    report = json.loads(run_awb(tmp_path, "doctor", "--json", env=clean_env(AWB_PORT=str(port))).stdout)
    config_row = next(c for c in report["checks"] if c["check"] == "config")
    assert "no awb.config.json here" in config_row["detail"]
    # The built-in defaults are what `make run` serves: a pass, not a warning.
    assert config_row["ok"] and not config_row["warning"]
    missing = run_awb(tmp_path, "inventory", "inspect", "adder")
    assert "no inventory" in assert_one_error_line(missing, "tool_not_found")
    assert sorted(p.name for p in tmp_path.iterdir()) == before == []


def test_an_unreadable_inventory_is_one_error_line(tmp_path: Path) -> None:
    (tmp_path / "inventory.db").write_text("this is not a database\n" * 100)
    result = run_awb(tmp_path, "inventory", "list", env=env_for(tmp_path))
    assert "cannot open the inventory" in assert_one_error_line(result, "inventory_unreadable")
    as_json = run_awb(tmp_path, "inventory", "list", "--json", env=env_for(tmp_path))
    assert json.loads(as_json.stderr)["error"]["code"] == "inventory_unreadable" and as_json.stdout == ""


def test_usage_errors_have_the_same_one_line_format_and_json_on_stderr(tmp_path: Path) -> None:
    line = assert_one_error_line(run_awb(tmp_path, "start", "--no-such-option"), "usage_error")
    assert "--no-such-option" in line and "awb start --help" in line
    as_json = run_awb(tmp_path, "inventory", "list", "--limit", "many", "--json")
    assert as_json.returncode == 2 and json.loads(as_json.stderr)["error"]["code"] == "usage_error"
    bad_level = run_awb(tmp_path, "inventory", "list", "--memory-level", "forever")
    assert "forever" in assert_one_error_line(bad_level, "usage_error")


def test_version_and_short_help(tmp_path: Path) -> None:
    from awb import __version__

    assert run_awb(tmp_path, "--version").stdout.strip() == f"awb {__version__}"
    short = run_awb(tmp_path, "-h")
    assert short.returncode == 0 and "Usage: awb" in short.stdout
    assert (
        run_awb(tmp_path, "inventory", "list", "-h").stdout == run_awb(tmp_path, "inventory", "list", "--help").stdout
    )


def _groups(command: Any, path: str = "awb") -> list[tuple[str, Any]]:
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        found.extend(_groups(sub, f"{path} {name}"))
    return found


def test_every_help_lists_every_subcommand_and_shows_no_type_metavar_for_flags_or_lists(tmp_path: Path) -> None:
    for path, command in _groups(typer.main.get_command(app)):
        shown = run_awb(tmp_path, *path.split()[1:], "--help")
        assert shown.returncode == 0, (path, shown.stderr)
        assert "<bool>" not in shown.stdout, path
        # Nor a Python type as a metavar (`--server <list[str]>`): a value's form, as a person types it.
        assert re.search(r"<\w+\[", shown.stdout) is None, (path, shown.stdout)
        subcommands = list(getattr(command, "commands", {}))
        # The group's own help sentence (what its parent's listing shows) names every subcommand.
        missing = [name for name in subcommands if not re.search(rf"\b{name}\b", command.help or "")]
        assert missing == [], (path, missing)


async def test_inventory_commands_show_what_the_workbench_holds_with_whole_ids_in_a_pipe(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    async with Workbench(load_config(None, environ=env), clock=ManualClock()) as workbench:
        tool = await workbench.craft(add_tool("cli_adder"))
        await workbench.call("cli_adder", {"a": 1, "b": 2})
    listed = run_awb(tmp_path, "inventory", "list", "--json", env=env)
    assert json.loads(listed.stdout)["tools"][0]["tool_id"] == tool.tool_id
    table = run_awb(tmp_path, "inventory", "list", env=env)
    assert "cli_adder" in table.stdout and tool.tool_id in table.stdout
    found = json.loads(run_awb(tmp_path, "inventory", "search", "add numbers", "--json", env=env).stdout)
    assert found["results"][0]["name"] == "cli_adder"
    # The only tool, matching the query word for word, scores like a match, not 0.0.
    assert found["results"][0]["score"] >= 0.5
    inspected = json.loads(run_awb(tmp_path, "inventory", "inspect", "cli_adder", "--json", env=env).stdout)
    assert inspected["tool"]["code"] == add_tool()["code"]
    call_id = inspected["recent_calls"][0]["call_id"]
    shown = run_awb(tmp_path, "inventory", "inspect", "cli_adder", env=env).stdout
    assert "versions" in shown and "recent calls (1 of 1)" in shown
    # The tool counts successful uses, a version every call made with it: each says which it is.
    assert re.search(r"uses / failed calls\s*\S\s*1 / 0", shown), shown
    assert re.search(r"version\s*\S\s*created\s*\S\s*calls\s*\S\s*failed", shown), shown
    assert tool.tool_id in shown and call_id in shown
    missing = run_awb(tmp_path, "inventory", "inspect", "nope", env=env)
    assert_one_error_line(missing, "tool_not_found")
    empty = run_awb(tmp_path, "inventory", "search", "  ", "--json", env=env)
    assert empty.returncode == 2 and json.loads(empty.stderr)["error"]["code"] == "invalid_params"


def test_maintain_reports_what_it_moved(tmp_path: Path) -> None:
    result = run_awb(tmp_path, "maintain", "--json", env=env_for(tmp_path))
    assert result.returncode == 0
    assert json.loads(result.stdout) == {"changes": [], "calls_pruned": 0}


async def test_reindex_into_a_file_or_pipe_writes_its_one_result_line_and_no_progress(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    async with Workbench(load_config(None, environ=env)) as workbench:
        await workbench.craft(add_tool("adder"))
    result = run_awb(tmp_path, "reindex", env=env)
    assert result.returncode == 0, result.stderr
    # No empty line left by a progress bar that had no terminal to draw on, on either stream.
    assert result.stdout.splitlines() == [result.stdout.strip()] and result.stdout.startswith("reindexed 1 tool with")
    assert result.stderr == ""


async def test_maintain_prunes_every_tools_call_history_to_what_the_config_keeps(tmp_path: Path) -> None:
    env = env_for(tmp_path, AWB_MEMORY__CALLS_KEPT_PER_TOOL="2", AWB_MEMORY__MAINTENANCE_EVERY_CALLS="0")
    async with Workbench(load_config(None, environ=env)) as workbench:
        for name in ("first", "second"):
            tool = await workbench.craft(add_tool(name))
            last = [(await workbench.call(tool.tool_id, {"a": n, "b": 1})).call_id for n in range(5)][-1]
    result = run_awb(tmp_path, "maintain", "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"changes": [], "calls_pruned": 6}
    shown = run_awb(tmp_path, "maintain", env=env)
    assert shown.returncode == 0 and "pruned" not in shown.stdout  # nothing left to prune
    inspected = json.loads(run_awb(tmp_path, "inventory", "inspect", "second", "--json", env=env).stdout)
    assert inspected["recent_calls"][0]["call_id"] == last
    assert len(inspected["recent_calls"]) == 2 and inspected["tool"]["usage_count"] == 5


def test_python_dash_m_awb_is_awb(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "awb", "--version"], capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith("awb ")


def test_the_cli_imports_nothing_heavy_before_a_command_needs_it() -> None:
    # What `awb --help` loads: the MCP SDK, the agent runtime, the planner, the workbench and the
    # config model (pydantic) are imported by the commands that use them (benchmarks/cli_startup.py).
    # `--help` builds every command's parameters: `awb staged`'s loaded the inventory's pydantic models
    # for one constant, and doubled the time `awb --help` took (0.07 -> 0.13 s).
    probe = (
        "import sys, contextlib, io\n"
        "from awb.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "heavy = ('mcp', 'mcp_types', 'awb.workbench', 'awb.agents.run', 'awb.planner.task', 'pydantic', 'rich')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m in heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(("given", "used"), [(None, "1"), ("4", "4")])
def test_awb_runs_numpy_with_one_blas_thread_unless_told_otherwise(given: str | None, used: str) -> None:
    probe = (
        "import os, sys\n"
        "from awb.cli.main import main\n"
        "try:\n"
        "    main(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "import numpy\n"
        "from threadpoolctl import threadpool_info\n"
        "print(os.environ['OPENBLAS_NUM_THREADS'], [i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'])\n"
    )
    env = clean_env()
    env.pop("OPENBLAS_NUM_THREADS", None)
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    setting, threads = done.stdout.strip().splitlines()[-1].split(" ", 1)
    assert setting == used
    assert all(n <= int(used) for n in json.loads(threads))


@pytest.mark.parametrize(("given", "scanned"), [(None, False), ("", True)])
def test_awb_looks_for_no_pydantic_plugins_unless_told_to(given: str | None, scanned: bool) -> None:
    """`awb` sets PYDANTIC_DISABLE_PLUGINS (unless set; empty keeps every plugin): the models it builds
    then do not make pydantic read every installed package's entry points."""
    probe = (
        "import os\n"
        "from awb.cli.main import main\n"
        "try:\n"
        "    main(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "import pydantic\n"
        "from pydantic.plugin import _loader\n"
        "class Probe(pydantic.BaseModel):\n"
        "    x: int\n"
        "print(repr(os.environ['PYDANTIC_DISABLE_PLUGINS']), _loader._plugins is not None)\n"
    )
    env = clean_env()
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    if given is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = given
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    setting, looked = done.stdout.strip().splitlines()[-1].split(" ")
    assert setting == repr("__all__" if given is None else given)
    assert looked == str(scanned)


async def test_listing_and_text_search_load_neither_the_sandbox_nor_schema_validation(tmp_path: Path) -> None:
    # `awb inventory list` and `search` read the store: no runtime, JSON Schema or MCP SDK is imported,
    # and a text-mode search no embedding model, nor numpy: a small inventory's BM25 postings are dicts
    # (benchmarks/cli_startup.py).
    env = env_for(tmp_path, AWB_SEARCH__MODE="text")
    async with Workbench(load_config(None, environ=env)) as workbench:
        await workbench.craft(add_tool())
    probe = (
        "import sys\n"
        "from awb.cli.main import main\n"
        "for args in (['inventory', 'list'], ['inventory', 'search', 'add numbers'], ['inventory', 'list', '--query', 'add']):\n"
        "    try:\n"
        "        main(args)\n"
        "    except SystemExit as end:\n"
        "        assert end.code == 0, end.code\n"
        "heavy = ('awb.workbench', 'awb.sandbox.monty', 'pydantic_monty', 'jsonschema', 'mcp', 'mcp_types', 'onnxruntime',"
        " 'numpy')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m in heavy), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.count("add_numbers") == 3
    assert done.stderr.strip().splitlines()[-1] == "[]"


#: Runs a command in a fresh interpreter, then says on stderr whether it loaded the embedding model.
SEARCH_PROBE = (
    "import json, sys\n"
    "from awb.cli.main import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit as end:\n"
    "    assert end.code == 0, end.code\n"
    "print('onnxruntime' in sys.modules, file=sys.stderr)\n"
)


def probe_search(cwd: Path, env: dict[str, str], *extra: str) -> tuple[dict[str, Any], str]:
    """`awb inventory search ... --json` in a fresh process: its result, and whether it loaded the model."""
    args = ["inventory", "search", "sum of two numbers", "--json", *extra]
    done = subprocess.run(
        [sys.executable, "-c", SEARCH_PROBE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr.strip().splitlines()[-1]


async def test_search_ranks_as_the_server_does_and_text_never_loads_the_model(tmp_path: Path) -> None:
    env = env_for(tmp_path, AWB_SEARCH__MODE="hybrid")
    async with Workbench(load_config(None, environ=env)) as workbench:
        await workbench.craft(add_tool())  # embedded: the inventory has a vector

    def search(*extra: str) -> tuple[dict[str, Any], str]:
        return probe_search(tmp_path, env, *extra)

    hybrid, model_loaded = search()
    assert hybrid["mode"] == "hybrid" and hybrid["results"][0]["name"] == "add_numbers" and model_loaded == "True"
    text, model_loaded = search("--text")
    assert text["mode"] == "text" and text["results"][0]["name"] == "add_numbers" and model_loaded == "False"
    # The only tool of the inventory, a perfect match: scored against the best match, not raw BM25 (0.0).
    assert text["results"][0]["score"] == 1.0


#: Runs `awb` as its console script does (arguments from sys.argv), then says whether the cyclic garbage
#: collector is on.
GC_PROBE = (
    "import gc, sys\n"
    "from awb.cli.main import main\n"
    "sys.argv = ['awb', *sys.argv[1:]]\n"
    "try:\n"
    "    main()\n"
    "except SystemExit as end:\n"
    "    assert end.code == 0, end.code\n"
    "print(gc.isenabled(), file=sys.stderr)\n"
)


@pytest.mark.parametrize(("args", "collecting"), [(("search", "add", "--text"), False), (("list",), True)])
def test_the_awb_process_of_a_search_runs_without_the_cyclic_garbage_collector(
    tmp_path: Path, args: tuple[str, ...], collecting: bool
) -> None:
    assert run_awb(tmp_path, "init").returncode == 0
    done = subprocess.run(
        [sys.executable, "-c", GC_PROBE, "inventory", *args],
        cwd=tmp_path,
        env=env_for(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == str(collecting)


async def test_a_hybrid_search_by_the_awb_executable_ends_with_its_output_whole(tmp_path: Path) -> None:
    """The `awb` process skips the interpreter's teardown after a search that loaded the model: what it
    printed still arrives whole, to a pipe, and a reader that leaves early gets no traceback."""
    env = env_for(tmp_path, AWB_SEARCH__MODE="hybrid")
    env.pop("PYTHONUNBUFFERED", None)  # as a user's shell has it: stdout to a pipe is block-buffered
    async with Workbench(load_config(None, environ=env)) as workbench:
        for n in range(30):
            await workbench.craft(add_tool(f"adder_{n}", description=f"Add two numbers, variant {n}"))
    found = run_awb(tmp_path, "inventory", "search", "add numbers", "--limit", "30", "--json", env=env)
    assert found.returncode == 0, found.stderr
    result = json.loads(found.stdout)
    assert result["mode"] == "hybrid" and len(result["results"]) == 30
    table = run_awb(tmp_path, "inventory", "search", "add numbers", "--limit", "30", env=env)
    assert table.returncode == 0 and table.stdout.count("adder_") == 30 and table.stderr == ""
    awb = str(Path(sys.executable).parent / "awb")
    piped = subprocess.run(
        f"'{awb}' inventory search 'add numbers' --limit 30 | head -c 1",
        shell=True,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode == 0 and "Traceback" not in piped.stderr, piped.stderr


async def test_search_asks_the_workspaces_running_server_and_searches_the_store_when_there_is_none(
    tmp_path: Path,
) -> None:
    env = env_for(tmp_path, AWB_SEARCH__MODE="hybrid")
    async with Workbench(load_config(None, environ=env)) as workbench:
        await workbench.craft(add_tool())
    with http_server(tmp_path, env=env) as server:
        # The route it asks: awb_search's result; a bad query is a structured error, not a crash. Asked
        # first, with time to spare: the CLI gives a server 10 s, which one that has just said it is
        # ready (its faces and model still loading) can take on a busy machine.
        base = f"http://127.0.0.1:{server.port}/api/tools/search"
        with urllib.request.urlopen(f"{base}?q=add&limit=1", timeout=30) as reply:
            assert [r["name"] for r in json.load(reply)["results"]] == ["add_numbers"]
        served, model_loaded = probe_search(tmp_path, env)
        for bad in ("q=%20", "q=add&limit=0", "limit=3"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"{base}?{bad}", timeout=30)
            assert 400 <= refused.value.code < 500
            assert json.load(refused.value)["error"]["code"] in ("invalid_params", "bad_request")
    # The server ranked it (its model is loaded); this process never loaded one.
    assert served["mode"] == "hybrid" and served["results"][0]["name"] == "add_numbers"
    assert model_loaded == "False"
    local, model_loaded = probe_search(tmp_path, env)  # the server is gone: the store, here
    assert model_loaded == "True"
    assert local == served


def test_a_listing_offset_past_what_a_store_holds_is_one_invalid_params_line(tmp_path: Path) -> None:
    assert run_awb(tmp_path, "init").returncode == 0
    line = assert_one_error_line(run_awb(tmp_path, "inventory", "list", "--offset", str(2**70)), "invalid_params")
    assert "offset must be between 0 and 2147483647" in line


async def test_inventory_delete_is_awb_delete_from_the_command_line(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    async with Workbench(load_config(None, environ=env), clock=ManualClock()) as workbench:
        tool = await workbench.craft(add_tool("doomed"))
        workbench.equip("doomed")
    deleted = json.loads(run_awb(tmp_path, "inventory", "delete", "doomed", "--json", env=env).stdout)
    assert deleted == {"tool_id": tool.tool_id, "name": "doomed", "status": "deleted"}
    # The record stays (inspectable, unequipped) and the tool no longer resolves for calls or a second delete.
    inspected = json.loads(run_awb(tmp_path, "inventory", "inspect", tool.tool_id, "--json", env=env).stdout)
    assert (inspected["tool"]["status"], inspected["tool"]["equipped"]) == ("deleted", False)
    assert_one_error_line(run_awb(tmp_path, "inventory", "delete", "doomed", env=env), "tool_deleted")
    async with Workbench(load_config(None, environ=env), clock=ManualClock()) as workbench:
        with pytest.raises(AwbError, match="deleted"):
            await workbench.call(tool.tool_id, {"a": 1, "b": 2})


async def test_inventory_rollback_says_when_the_version_was_already_current(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    async with Workbench(load_config(None, environ=env), clock=ManualClock()) as workbench:
        await workbench.craft(add_tool("steady"))
        await workbench.update("steady", description="Add two numbers (v2)")
    moved = run_awb(tmp_path, "inventory", "rollback", "steady", "1", env=env)
    assert "steady is now at version 1" in moved.stdout, moved.stdout + moved.stderr
    stayed = run_awb(tmp_path, "inventory", "rollback", "steady", "1", env=env)
    assert "steady was already at version 1" in stayed.stdout, stayed.stdout + stayed.stderr


async def test_inventory_versions_says_when_older_versions_were_removed(tmp_path: Path) -> None:
    env = env_for(tmp_path, AWB_MAX_VERSIONS_PER_TOOL="2")
    async with Workbench(load_config(None, environ=env), clock=ManualClock()) as workbench:
        await workbench.craft(add_tool("cli_adder"))
        for n in (2, 3):
            await workbench.update("cli_adder", description=f"Add two numbers, version {n}")
    shown = run_awb(tmp_path, "inventory", "versions", "cli_adder", env=env).stdout
    assert "versions before 2 were removed (max_versions_per_tool)" in shown, shown


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (("start",), "--transport stdio|http"),
        (("plan",), "--mode auto|direct|code"),
        (("plan",), "--search-mode auto|text|hybrid"),
        (("blueprints", "run"), "--target awb|agno"),
    ],
)
def test_options_taking_one_of_a_few_words_show_the_words(tmp_path: Path, command: tuple[str, ...], shown: str) -> None:
    result = run_awb(tmp_path, *command, "--help")
    assert result.returncode == 0, result.stderr
    assert shown in result.stdout
