"""`awb start` / `awb stop`: one server per workspace, a pid file nobody else deletes, clear start-up errors."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client

from clitools import AWB, assert_one_error_line, clean_env, http_server, run_awb
from support import free_port

pytestmark = pytest.mark.anyio


def workspace(tmp_path: Path) -> Path:
    assert run_awb(tmp_path, "init").returncode == 0
    return tmp_path


def pid_file(root: Path) -> Path:
    return root / ".awb" / "awb.pid"


async def test_port_0_reports_the_port_bound_in_the_ready_line_and_the_pid_file(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    with http_server(root) as server:
        assert server.port != 0
        record = json.loads(pid_file(root).read_text())
        assert record == {
            "pid": server.process.pid,
            "transport": "http",
            "host": "127.0.0.1",
            "port": server.port,
            "inventory": str(root / ".awb" / "inventory.db"),
        }
        with anyio.fail_after(30):
            async with Client(server.url) as client:
                assert any(t.name == "awb_craft" for t in (await client.list_tools()).tools)


async def test_the_ready_line_comes_before_the_mcp_sdk_loads_and_a_call_made_then_waits_for_it(tmp_path: Path) -> None:
    """Ready means the socket serves: the MCP SDK's server side (most of start-up) loads after the line, and
    a call sent at once is answered once it has (PYTHONPROFILEIMPORTTIME: each import as a line on stderr)."""
    root = workspace(tmp_path)
    with http_server(root, env=clean_env(PYTHONPROFILEIMPORTTIME="1")) as server:
        before_ready = "".join(server.seen)
        assert " uvicorn\n" in before_ready  # the import lines are there
        assert "mcp.server.lowlevel" not in before_ready and "mcp_types" not in before_ready
        with anyio.fail_after(30):
            async with Client(server.url) as client:
                result = await client.call_tool("awb_list", {})
        assert not result.is_error and result.structured_content is not None
        assert result.structured_content["tools"] == []


def test_an_mcp_sdk_that_fails_to_load_after_the_ready_line_stops_the_server_with_startup_failed(
    tmp_path: Path,
) -> None:
    root = workspace(tmp_path)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "sitecustomize.py").write_text("import sys\nsys.modules['mcp.server.lowlevel'] = None\n")
    search_path = os.pathsep.join([str(broken), *filter(None, [os.environ.get("PYTHONPATH")])])
    with http_server(root, env=clean_env(PYTHONPATH=search_path)) as server:
        assert server.process.wait(timeout=30) == 1
        said = server.all_stderr()
    assert "error (startup_failed): the MCP face did not start: ModuleNotFoundError" in said
    assert not pid_file(root).exists()


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback here")
def test_an_ipv6_servers_banner_writes_its_addresses_in_brackets(tmp_path: Path) -> None:
    with http_server(workspace(tmp_path), "--host", "::1") as server:
        banner = "".join(server.seen)
        assert server.url == f"http://[::1]:{server.port}/mcp"
        assert f"MCP on http://[::1]:{server.port}/mcp, REST on /api" in banner
        assert f"web panel on http://[::1]:{server.port}/\n" in banner
        assert "http://::1" not in banner


def test_a_second_start_on_the_workspace_refuses_and_leaves_the_first_servers_pid_file(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    with http_server(root) as first:
        before = pid_file(root).read_text()
        for port in ("0", str(first.port + 1 if first.port < 65535 else first.port - 1)):
            second = run_awb(root, "start", "--transport", "http", "--port", port)
            line = assert_one_error_line(second, "already_running")
            assert f"pid {first.process.pid}, http, port {first.port}" in line
        assert pid_file(root).read_text() == before
        assert first.process.poll() is None


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP (terminal closed)"])
def test_sigterm_or_sighup_removes_the_pid_file(tmp_path: Path, stop: signal.Signals) -> None:
    root = workspace(tmp_path)
    with http_server(root) as server:
        assert pid_file(root).exists()
        server.process.send_signal(stop)
        assert server.process.wait(timeout=20) == 0
        assert not pid_file(root).exists()


def test_stop_stops_the_server_it_finds_in_the_pid_file(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    with http_server(root) as server:
        stopped = run_awb(root, "stop")
        assert stopped.returncode == 0, stopped.stderr
        assert f"pid {server.process.pid}, http, port {server.port}" in stopped.stdout
        assert server.process.wait(timeout=20) == 0
        assert not pid_file(root).exists()


def test_stop_with_json_names_the_server_it_stopped(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    with http_server(root) as server:
        stopped = run_awb(root, "stop", "--json")
        assert stopped.returncode == 0, stopped.stderr
        said = json.loads(stopped.stdout)
        assert said["stopped"] is True and said["message"].startswith("stopped workbench")
        assert (said["server"]["pid"], said["server"]["port"]) == (server.process.pid, server.port)
        assert server.process.wait(timeout=20) == 0


def test_stop_says_clearly_when_nothing_runs(tmp_path: Path) -> None:
    result = run_awb(tmp_path, "stop")
    assert result.returncode == 0
    assert "no workbench is running" in result.stdout
    assert not (tmp_path / ".awb").exists()


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("not a pid at all", "garbage in the pid file"),
        # What `echo` leaves: quoted as it reads, not as `('garbage\\n')`, a repr escaped a second time.
        ("garbage\n", "garbage in the pid file ('garbage');"),
        ('{"pid": 999999999, "transport": "http"}', "stale pid file"),
    ],
)
def test_stop_reports_and_removes_a_stale_or_garbage_pid_file(tmp_path: Path, content: str, said: str) -> None:
    root = workspace(tmp_path)
    pid_file(root).write_text(content)
    result = run_awb(root, "stop")
    assert result.returncode == 0, result.stderr
    assert said in result.stdout and "removed" in result.stdout
    assert not pid_file(root).exists()


@contextlib.contextmanager
def held_by_another_program(path: Path, record: str) -> Iterator[subprocess.Popen[str]]:
    """A process that is not an awb server holds `path`'s lock, having written `record` (Python that
    evaluates to the text) into it, until the block ends."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, json, os, sys\n"
            f"f = open({str(path)!r}, 'w')\n"
            "fcntl.flock(f, fcntl.LOCK_EX)\n"
            f"f.write({record}); f.flush()\n"
            "print('locked', flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        yield holder
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait(timeout=10)
        holder.stdout.close()


def test_stop_refuses_a_held_pid_file_whose_record_it_cannot_read_with_stop_failed(tmp_path: Path) -> None:
    path = pid_file(workspace(tmp_path))
    # A process holds the lock but its record is not one: stop cannot know whom it would signal.
    with held_by_another_program(path, "'half a rec'") as holder:
        refused = run_awb(tmp_path, "stop")
        assert "record is unreadable" in assert_one_error_line(refused, "stop_failed")
        assert holder.poll() is None and path.exists()


def test_stop_never_signals_a_process_that_is_not_an_awb_server(tmp_path: Path) -> None:
    path = pid_file(workspace(tmp_path))
    # Another program holds the lock and wrote its own pid: a pid file an awb server did not write.
    record = "json.dumps({'pid': os.getpid(), 'transport': 'http', 'port': 1})"
    with held_by_another_program(path, record) as holder:
        refused = run_awb(tmp_path, "stop")
        assert "is not an awb server" in assert_one_error_line(refused, "not_an_awb_server")
        assert holder.poll() is None and path.exists()


def test_a_port_in_use_is_one_error_line(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_awb(root, "start", "--transport", "http", "--port", str(port))
    assert "already in use" in assert_one_error_line(result, "startup_failed")
    assert not pid_file(root).exists()


def test_an_inventory_that_cannot_be_opened_is_one_error_line_with_no_banner_before_it(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    (root / "not-a-db").write_text("this is not a database\n" * 100)
    result = run_awb(root, "start", "--transport", "http", "--port", "0", "--inventory", str(root / "not-a-db"))
    # The server announces its URLs only once it can serve them.
    assert "cannot open the inventory" in assert_one_error_line(result, "inventory_unreadable")
    assert not pid_file(root).exists()


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (("--port", "70000"), "usage_error", "--port: Input should be less than or equal to 65535 (got 70000)"),
        (("--host", "not a host!"), "startup_failed", "not an IP address or a host name"),
        # TEST-NET-1 (RFC 5737): a valid address no interface has, refused by bind() without any traffic.
        (("--host", "192.0.2.1"), "startup_failed", "cannot listen on 192.0.2.1"),
        (("--transport", "carrier-pigeon"), "usage_error", "unknown transport"),
    ],
)
def test_bad_start_options_are_one_error_line(tmp_path: Path, args: tuple[str, ...], code: str, said: str) -> None:
    root = workspace(tmp_path)
    result = run_awb(root, "start", "--transport", "http", *args)
    assert said in assert_one_error_line(result, code)


@pytest.mark.parametrize("args", [("--port", "8123"), ("--host", "127.0.0.1"), ("--port", "0", "--host", "::1")])
def test_a_port_or_host_given_to_a_stdio_server_is_a_usage_error(tmp_path: Path, args: tuple[str, ...]) -> None:
    root = workspace(tmp_path)
    for transport in ((), ("--transport", "stdio")):  # stdio is the default
        result = run_awb(root, "start", *transport, *args)
        assert "to --transport http only" in assert_one_error_line(result, "usage_error")
        assert not pid_file(root).exists()


def test_debug_shows_the_details_of_an_error(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    result = run_awb(root, "--debug", "start", "--transport", "http", "--host", "not a host!")
    assert result.stderr.splitlines()[0].startswith("error (startup_failed)")
    assert "  host: not a host!" in result.stderr


def test_verbose_start_logs_its_config_and_search_mode(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    with http_server(root, "--verbose") as server:
        pass
    said = server.all_stderr()
    assert "DEBUG awb.cli: config: {" in said
    assert "INFO awb.server: search: " in said


def test_stdio_servers_take_no_lock_so_several_clients_can_each_spawn_one(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    with http_server(root):
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}) + "\n"
        done = subprocess.run(
            [AWB, "start"], input=line, env=clean_env(), cwd=root, capture_output=True, text=True, timeout=60
        )
        assert json.loads(done.stdout.splitlines()[0])["result"]["serverInfo"]["name"]
        assert os.path.exists(pid_file(root))


def test_doctor_passes_the_port_its_own_workspace_server_holds_and_fails_one_another_process_holds(
    tmp_path: Path,
) -> None:
    root = workspace(tmp_path)

    def port_row(port: int) -> dict[str, object]:
        result = run_awb(root, "doctor", "--quick", "--json", env=clean_env(AWB_PORT=str(port)))
        return next(c for c in json.loads(result.stdout)["checks"] if c["check"] == "port")

    with http_server(root) as server:
        row = port_row(server.port)
        assert row["ok"] is True, row
        assert f"served by this workspace's awb (pid {server.process.pid}, http, port {server.port})" in str(
            row["detail"]
        )
        with socket.socket() as other:
            other.bind(("127.0.0.1", 0))
            other.listen()
            taken = other.getsockname()[1]
            row = port_row(taken)
            assert row["ok"] is False
            assert "in use by another process" in str(row["detail"])
            assert f"this workspace's awb runs on port {server.port}" in str(row["detail"])


def test_doctor_names_the_workspaces_running_server_whatever_port_it_took(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    configured = free_port()
    with http_server(root) as server:  # on --port 0, not the configured port
        result = run_awb(root, "doctor", "--quick", "--json", env=clean_env(AWB_PORT=str(configured)))
        row = next(c for c in json.loads(result.stdout)["checks"] if c["check"] == "port")
        assert row["ok"] is True, row
        assert row["detail"] == (
            f"127.0.0.1:{configured} free; this workspace's awb runs on port {server.port}: "
            f"http://127.0.0.1:{server.port}/mcp (pid {server.process.pid}, http, port {server.port})"
        )


def test_stdio_started_from_a_terminal_says_what_it_waits_for_and_how_to_serve_a_url(tmp_path: Path) -> None:
    """`awb start` typed at a prompt served stdio in silence (one log line, then nothing): a person who
    wanted a server to reach had no word that it waits for a client's JSON-RPC on this very terminal."""
    run_awb(tmp_path, "init")
    controller, terminal = os.openpty()
    lines: queue.Queue[str] = queue.Queue()
    try:
        with subprocess.Popen(
            [AWB, "start"], env=clean_env(), cwd=tmp_path, stdin=terminal, stderr=subprocess.PIPE, text=True
        ) as process:
            os.close(terminal)
            stream = process.stderr
            assert stream is not None
            threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
            try:
                first = lines.get(timeout=60)  # said before the server serves; bounded all the same
            finally:
                process.terminate()
                process.wait(timeout=30)
    finally:
        os.close(controller)
    assert first.startswith("awb: MCP on stdio for a client that spawns awb"), first
    assert "awb start --transport http" in first
    # Spawned by a client (stdin a pipe or /dev/null), it says nothing of the kind.
    piped = run_awb(tmp_path, "start")
    assert piped.returncode == 0 and "client that spawns awb" not in piped.stderr, piped.stderr
