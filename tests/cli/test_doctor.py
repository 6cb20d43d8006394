"""`awb doctor` run in this process: what its probes start, and when its report is written."""

from __future__ import annotations

import asyncio
import importlib.abc
import importlib.machinery
import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import awb.cli.doctor
from awb.cli.main import main
from awb.sandbox import registry
from awb.sandbox.cpython import handles
from clitools import reserved_port, run_awb


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A workspace `awb init` made, as this process's working directory, its port one this test holds."""
    assert run_awb(tmp_path, "init").returncode == 0
    for name in [name for name in os.environ if name.startswith("AWB_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    with reserved_port() as port:
        monkeypatch.setenv("AWB_PORT", str(port))
        yield tmp_path


def doctor_report(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with pytest.raises(SystemExit) as end:
        main(["doctor", "--json"])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert end.value.code == (0 if report["ok"] else 1)
    return report


def test_doctor_forks_one_cpython_worker_for_its_probe(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A warm pool of one forked a worker beside the probe's, and another once the probe's was spent.
    spawned: list[int] = []
    spawn = handles.Zygote.spawn

    async def counted(zygote: handles.Zygote) -> handles.Worker:
        spawned.append(1)
        return await spawn(zygote)

    monkeypatch.setattr(handles.Zygote, "spawn", counted)
    checks = {check["check"]: check for check in doctor_report(capsys)["checks"]}
    if not checks["sandbox:cpython"]["detail"].startswith("probe ran"):
        pytest.skip(f"no cpython runtime here: {checks['sandbox:cpython']['detail']}")
    assert checks["sandbox:cpython"]["ok"]
    assert len(spawned) == 1


class _ClosingAfterTheReport:
    """A runtime whose close waits (a bounded wait) for the report to be written."""

    name = "monty"
    language = "python"

    def __init__(self, written: threading.Event) -> None:
        self._written = written
        self.closed_after_the_report: bool | None = None
        #: The JavaScript worker and wasm compile process doctor started ahead for probes this runtime stands in for.
        self.launched: list[Any] = []

    def protections(self) -> dict[str, bool]:
        return {"worker_process": True}

    async def execute(self, code: str, params: dict[str, Any], limits: Any, host: Any) -> Any:
        return SimpleNamespace(value=params["x"] + 1)

    async def close(self) -> None:
        self.closed_after_the_report = await asyncio.to_thread(self._written.wait, 10)
        for process in self.launched:
            process.kill()
            await process.wait()


def test_doctor_writes_its_report_while_the_runtimes_close(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Closing a runtime mostly waits for its processes to end: the report need not wait with it.
    written = threading.Event()
    runtime = _ClosingAfterTheReport(written)

    def build_runtimes(config: Any, *, preload: bool = True, **launched: Any) -> dict[str, Any]:
        if launched.get("launched_zygote") is not None:
            launched["launched_zygote"].discard()
        runtime.launched = [launched[key] for key in ("launched_javascript", "launched_wasm") if launched.get(key)]
        return {"monty": runtime}

    def print_json(value: Any) -> None:
        print(json.dumps(value))
        written.set()

    monkeypatch.setattr(registry, "build_runtimes", build_runtimes)
    monkeypatch.setattr(registry, "_optional_missing", lambda runtimes: {})
    monkeypatch.setattr(awb.cli.doctor, "print_json", print_json)
    checks = {check["check"]: check for check in doctor_report(capsys)["checks"]}
    assert checks["sandbox:monty"]["ok"] and checks["sandbox:monty"]["detail"].startswith("probe ran")
    assert runtime.closed_after_the_report is True


#: A compile process that starts and answers every module with the failure wasmtime would give.
_REFUSING_COMPILER = """
import json, struct, sys
inp, out = sys.stdin.buffer, sys.stdout.buffer
def read():
    (size,) = struct.unpack(">I", inp.read(4))
    return inp.read(size)
def write(body):
    out.write(struct.pack(">I", len(body)) + body)
    out.flush()
if len(sys.argv) < 3:
    read()  # the ids, sent to a process started ahead of them
write(json.dumps({"op": "ready", "layers": {}}).encode())
read()
write(b"\\x01the module does not compile: this compiler is broken")
"""


def test_doctor_runs_a_wasm_module_through_the_compile_process(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The row said "available" without running anything, so a broken compiler passed.
    pytest.importorskip("wasmtime")
    row = {check["check"]: check for check in doctor_report(capsys)["checks"]}["sandbox:wasm"]
    assert row["ok"] and not row["warning"]
    assert row["detail"].startswith("probe ran; ")


@pytest.mark.parametrize(
    ("compiler", "said"),
    [
        (None, "a wasm compile process did not start (is wasmtime importable?)"),
        (_REFUSING_COMPILER, "the module does not compile: this compiler is broken"),
    ],
    ids=["missing", "refusing"],
)
def test_doctor_says_why_the_wasm_probe_failed_when_the_compiler_is_broken(
    workspace: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    compiler: str | None,
    said: str,
) -> None:
    pytest.importorskip("wasmtime")
    from awb.sandbox import wasm_compile

    path = workspace / "broken_compiler.py"
    if compiler is not None:
        path.write_text(compiler, encoding="utf-8")
    monkeypatch.setattr(wasm_compile, "COMPILER_PATH", path)
    row = {check["check"]: check for check in doctor_report(capsys)["checks"]}["sandbox:wasm"]
    # Only Monty is required: another runtime's failed probe is a warning that says why.
    assert row["warning"]
    assert row["detail"] == f"probe failed: {said}"


class _BrokenWasmtime(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A wasmtime that is installed (found) but fails to import, as with a library built for another machine."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.machinery.ModuleSpec(name, self) if name == "wasmtime" else None

    def exec_module(self, module: Any) -> None:
        raise OSError("libwasmtime.so: cannot open shared object file")


def test_doctor_says_why_the_wasm_probe_failed_when_wasmtime_does_not_import(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The import's error went out of the probe, and doctor ended in an internal error, with no report.
    monkeypatch.delitem(sys.modules, "wasmtime", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_BrokenWasmtime(), *sys.meta_path])
    row = {check["check"]: check for check in doctor_report(capsys)["checks"]}["sandbox:wasm"]
    assert row["warning"]
    assert row["detail"] == "probe failed: wasmtime does not import: libwasmtime.so: cannot open shared object file"
