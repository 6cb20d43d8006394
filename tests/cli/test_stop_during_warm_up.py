"""`awb start --transport http` stopped while it warms up (the REST API's imports, the embedding model,
the CPython zygote and the other runtimes) ends without waiting for the warm-up to finish, and leaves
no process behind."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from clitools import AWB, run_awb, run_program
from support import embeddings_installed

#: Installed in the server's process as its `sitecustomize`: an import of `HOLD_IMPORT`'s module in a
#: thread other than the main one (the warm-up's threads) says so on one pipe, then waits before the
#: module runs until the test closes the other: a warm-up step as slow as the test wants, whatever the
#: machine's speed.
HOLD = r"""
import importlib.machinery, os, sys, threading

hold = os.environ.pop("HOLD_IMPORT", None)  # the server's children (zygote, workers) hold nothing
if hold:
    module, said, release = hold.split(":")

    class Hold:
        def find_spec(self, name, path=None, target=None):
            if name != module:
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and threading.current_thread() is not threading.main_thread():
                run = spec.loader.exec_module

                def held(loaded):  # holds only this module's import lock, as a slow import would
                    os.write(int(said), b"held")
                    os.read(int(release), 1)  # until the test closes its end
                    run(loaded)

                spec.loader.exec_module = held
            return spec

    sys.meta_path.insert(0, Hold())
"""

#: Starts the server with this process as the subreaper of everything it starts (an orphan comes here,
#: whatever session it made for itself) and `HOLD` holding the import of `module`; sends SIGTERM once the
#: server has written `line` on stderr, or once the hold is reached (`line` empty); lets the held import
#: go on only once the server has exited, or after 30 s; prints whether the server exited before that,
#: and which of its descendants still ran then and a second later.
STOP_PROBE = r"""
import ctypes, json, os, select, signal, subprocess, sys, time

awb, hold_dir, module, line = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].encode()
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
held_r, held_w = os.pipe()
release_r, release_w = os.pipe()
search_path = os.pathsep.join(filter(None, [hold_dir, os.environ.get("PYTHONPATH")]))
env = dict(os.environ, PYTHONPATH=search_path, HOLD_IMPORT=f"{module}:{held_w}:{release_r}")
server = subprocess.Popen(
    [awb, "start", "--transport", "http", "--port", "0"],
    stderr=subprocess.PIPE, env=env, pass_fds=(held_w, release_r),
)
os.close(held_w)
os.close(release_r)
seen, held, deadline = b"", False, time.monotonic() + 60
while not (line in seen if line else held):
    if time.monotonic() > deadline or server.poll() is not None:
        sys.exit(f"neither {line!r} nor the hold of {module}: {seen!r}")
    for ready in select.select([server.stderr, held_r], [], [], 1)[0]:
        if ready is held_r:
            held = True
            os.read(held_r, 16)
        else:
            seen += os.read(server.stderr.fileno(), 65536)
server.send_signal(signal.SIGTERM)
try:  # the warm-up step stays held for far longer than any stop takes, however loaded the machine
    code = server.wait(timeout=30)
    exited_before_release = True
except subprocess.TimeoutExpired:
    exited_before_release = False
os.close(release_w)
if not exited_before_release:
    code = server.wait(timeout=30)


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
print(json.dumps({"exited_before_release": exited_before_release, "code": code, "at_exit": at_exit, "left": left}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a subreaper is Linux's")
@pytest.mark.parametrize(
    ("line", "module"),
    [
        ("awb: web panel on", "awb.api.app"),  # stopped before it serves; the REST API's import held
        ("", "awb.api.app"),  # stopped while the REST API and the panel are imported
        pytest.param(  # stopped while the embedding model loads (a thread the interpreter would join)
            "",
            "onnxruntime",
            marks=pytest.mark.skipif(not embeddings_installed(), reason="the embed extra is not installed"),
        ),
    ],
    ids=["before ready", "while the REST API is imported", "while the embedding model loads"],
)
def test_a_server_stopped_while_it_warms_up_exits_without_waiting_for_it_and_leaves_no_process(
    tmp_path: Path, line: str, module: str
) -> None:
    # Before: the stop waited for the REST API's imports and the embedding model's load to finish
    # (0.9-5 s then), and a CPython zygote cancelled while it started went on running. The step held
    # here never finishes while the server stops: a stop that waits for it does not exit at all.
    assert run_awb(tmp_path, "init").returncode == 0
    hold_dir = tmp_path / "hold"
    hold_dir.mkdir()
    (hold_dir / "sitecustomize.py").write_text(HOLD)
    done = run_program([sys.executable, "-c", STOP_PROBE, AWB, str(hold_dir), module, line], tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["code"] == 0, done.stderr
    assert report["exited_before_release"], report
    assert report["left"] == [] and report["at_exit"] == [], report
