"""Running the venv's real `awb` executable in a temporary workspace, as a person or a script would."""

from __future__ import annotations

import os
import queue
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

AWB = str(Path(sys.executable).parent / "awb")


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without any AWB_* variable, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWB_")}
    env.update(PYTHONUNBUFFERED="1", **extra)
    return env


@contextmanager
def reserved_port() -> Iterator[int]:
    """A loopback port that `awb doctor` finds free and no other program can serve while the block runs:
    bound with SO_REUSEADDR and never listened on (doctor's probe binds the same way). A test of doctor
    then checks a port it owns, whatever the machine serves on awb's default port 7777."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def run_awb(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_program([AWB, *args], cwd, env=env)


def run_program(
    argv: list[str], cwd: Path, *, env: dict[str, str] | None = None, timeout: float = 60, **popen: Any
) -> subprocess.CompletedProcess[str]:
    """`argv` in `cwd` with no stdin and its output captured, as `run_awb` runs `awb` (`popen`: more of
    `subprocess.run`'s options)."""
    return subprocess.run(
        argv,
        env=clean_env() if env is None else env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
        **popen,
    )


def assert_one_error_line(result: subprocess.CompletedProcess[str], code: str) -> str:
    """The command failed with exactly one `error (<code>): ...` line on stderr and no traceback."""
    assert result.returncode != 0, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error ({code}): "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


class Server:
    """A running `awb start --transport http`: its process, ready line and stderr so far."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert process.stderr is not None
        stream = process.stderr

        def pump() -> None:
            for line in iter(stream.readline, ""):
                self.lines.put(line)
            self.lines.put("")

        self.reader = threading.Thread(target=pump, daemon=True)
        self.reader.start()
        self.url = self._wait_ready()
        found = re.search(r":(\d+)/mcp", self.url)
        assert found is not None
        self.port = int(found.group(1))

    def all_stderr(self) -> str:
        """Everything the server wrote on stderr (call once it has exited)."""
        self.reader.join(timeout=15)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return "".join(self.seen)

    def _wait_ready(self, timeout: float = 60.0) -> str:
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"not ready within {timeout} s: {self.seen}") from None
            if not line:
                raise RuntimeError(f"exited before it was ready: {self.seen}")
            self.seen.append(line)
            found = re.search(r"awb: ready on (\S+)", line)
            if found:
                return found.group(1)


@contextmanager
def http_server(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Server]:
    process = subprocess.Popen(
        [AWB, "start", "--transport", "http", "--port", "0", *args],
        env=clean_env() if env is None else env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield Server(process)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        assert process.stderr is not None
        process.stderr.close()


def snapshot(root: Path) -> set[str]:
    """Every path under `root` (to show a command created nothing)."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}
