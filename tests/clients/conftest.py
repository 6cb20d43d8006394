"""Running the client examples (examples/clients/*.py) as a user would: a subprocess with `awb` on PATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from client_support import EXAMPLES, RunExample


@pytest.fixture
def run_example(tmp_path: Path) -> RunExample:
    """Run one example file with `python` (default: this interpreter) and return its stdout lines.

    `awb` is the one installed next to this interpreter; the examples' temporary workspaces land in
    tmp_path. Bounded by a subprocess timeout; a failure shows the example's stderr.
    """

    def run(name: str, python: str = sys.executable) -> list[str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith("AWB_")}
        env.update(
            WORKBENCH_BIN=str(Path(sys.executable).parent / "awb"),
            AGNO_TELEMETRY="false",
            TMPDIR=str(tmp_path),
            PYTHONUNBUFFERED="1",
        )
        done = subprocess.run(
            [python, str(EXAMPLES / name)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, f"{name} failed:\n{done.stdout}\n{done.stderr[-4000:]}"
        return done.stdout.splitlines()

    return run
