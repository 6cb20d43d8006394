"""LangChain's MCP adapters, which pin mcp < 2, run their example from a virtual environment of their own.

The environment is created by this test from examples/clients/langchain-requirements.txt, cached under
.venv-clients/<hash of the requirements and the Python version>/ (git-ignored), so the project's own pins
never bend to a client's. It is skipped only when the package registry cannot be reached.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from client_support import EXAMPLES, JOURNEY, RunExample
from support import REPO

REQUIREMENTS = EXAMPLES / "langchain-requirements.txt"
CACHE = REPO / ".venv-clients"
INSTALL_TIMEOUT = 600  # seconds; a first install takes ~15 s with a warm pip cache


def pip(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
    )


def client_venv() -> Path:
    """The cached venv's python; built once per requirements file (under a lock: parallel runs wait)."""
    key = hashlib.sha256(REQUIREMENTS.read_bytes() + sys.version.encode()).hexdigest()[:16]
    home = CACHE / f"langchain-{key}"
    python = home / "bin" / "python"
    CACHE.mkdir(exist_ok=True)
    with (CACHE / f"langchain-{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (home / "ready").exists():
            return python
        shutil.rmtree(home, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(home)], check=True, timeout=120)
        installed = pip(python, "install", "-q", "-r", str(REQUIREMENTS))
        if installed.returncode != 0:
            reachable = pip(python, "download", "-q", "--no-deps", "-d", str(home / "probe"), "langchain-mcp-adapters")
            shutil.rmtree(home, ignore_errors=True)
            if reachable.returncode != 0:
                pytest.skip(f"package registry unreachable, cannot build the LangChain venv: {reachable.stderr[-500:]}")
            pytest.fail(f"pip could not install {REQUIREMENTS.name}:\n{installed.stderr[-4000:]}")
        (home / "ready").write_text(key, encoding="utf-8")
    return python


@pytest.mark.timeout(INSTALL_TIMEOUT + 240)  # a first run builds the venv
def test_langchain_mcp_adapters_example_runs_the_journey_from_its_own_venv(run_example: RunExample) -> None:
    python = client_venv()
    mcp_version = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    assert mcp_version.startswith("1."), f"the adapters' venv should hold the 1.x SDK they pin, got {mcp_version}"
    assert run_example("langchain_adapters.py", python=str(python)) == ["protocol: 2025-11-25", *JOURNEY]
