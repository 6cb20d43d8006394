"""`awb start --transport http` stopped while it warms up (the REST API's imports, the embedding model,
the CPython zygote and the other runtimes) ends promptly and leaves no process behind."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from clitools import AWB, run_awb, run_program

#: Starts the server with this process as the subreaper of everything it starts (an orphan comes here,
#: whatever session it made for itself), sends SIGTERM once the server has written `line`, and prints how
#: long the server took to exit and which of its descendants still ran then and a second later.
STOP_PROBE = r"""
import ctypes, json, os, select, signal, subprocess, sys, time

awb, line = sys.argv[1], sys.argv[2].encode()
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
server = subprocess.Popen([awb, "start", "--transport", "http", "--port", "0"], stderr=subprocess.PIPE)
seen, deadline = b"", time.monotonic() + 60
while line not in seen:
    if time.monotonic() > deadline or server.poll() is not None:
        sys.exit(f"no {line!r} line: {seen!r}")
    if select.select([server.stderr], [], [], 1)[0]:
        seen += os.read(server.stderr.fileno(), 65536)
sent = time.monotonic()
server.send_signal(signal.SIGTERM)
code = server.wait(timeout=30)
took = time.monotonic() - sent


def running():
    while True:  # the ended ones, reaped
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat, open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                fields, command = stat.read().rsplit(")", 1)[1].split(), cmdline.read()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            found.append(pid + " " + command.replace(b"\0", b" ").decode(errors="replace"))
    return found


at_exit = running()
grace = time.monotonic() + 1
while running() and time.monotonic() < grace:
    time.sleep(0.01)
left = running()
for entry in left:
    os.kill(int(entry.split()[0]), signal.SIGKILL)
print(json.dumps({"took": took, "code": code, "at_exit": at_exit, "left": left}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a subreaper is Linux's")
@pytest.mark.parametrize("line", ["awb: ready on", "awb: web panel on"], ids=["after ready", "before ready"])
def test_a_server_stopped_while_it_warms_up_exits_at_once_and_leaves_no_process(tmp_path: Path, line: str) -> None:
    # Before: 0.9-3 s on an idle machine, 3.7-5.4 s with both cores busy, waiting for the REST API's
    # imports and the embedding model's load to finish, and a CPython zygote cancelled while it started
    # went on running. Now ~0.2-0.4 s, most of it uvicorn's own shutdown.
    assert run_awb(tmp_path, "init").returncode == 0
    done = run_program([sys.executable, "-c", STOP_PROBE, AWB, line], tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["code"] == 0, done.stderr
    assert report["left"] == [] and report["at_exit"] == [], report
    assert report["took"] < 1.0, report
