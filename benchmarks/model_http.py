"""What a model request costs the runtime on the wire: wall and CPU per request over sequential posts to a
loopback OpenAI-compatible server, over plain HTTP and over TLS.

Run: `python benchmarks/model_http.py [--requests 100] [--rounds 3] [--before SRC]`.
The server (a keep-alive HTTP/1.1 server answering a small chat-completions reply at once) runs in a process
of its own, so the CPU counted is the client's alone. Each round runs a fresh client process per variant that
sends `--requests` posts through `ProviderClient.post` the way a run does: inside `model.connections()` where
the code has it (kept connections), else as the code sends them. The TLS server's certificate is a
self-signed one made for the round, trusted through SSL_CERT_FILE (which `tls_context()` reads).
`--before SRC` runs another copy of the code (its `src` folder, e.g. `git archive <commit> src | tar -x -C
/tmp/before`) in the same rounds, the two taking turns, and prints both with the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SERVER = r"""
import json, socket, ssl, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPLY = json.dumps({"choices": [{"message": {"role": "assistant", "content": "{}"}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def setup(self):
        # As a provider's front server does: without, the reply's headers and body, written apart, wait on the
        # client's delayed ACK (40 ms) once a connection is kept.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().setup()
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(REPLY)))
        self.end_headers()
        self.wfile.write(REPLY)
    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
if len(sys.argv) > 1:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[1], sys.argv[2])
    server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"""

CLIENT = r"""
import contextlib, json, sys, time
import anyio
from awb.agents.models.openai import OpenAIModel

url, requests = sys.argv[1], int(sys.argv[2])

async def main():
    model = OpenAIModel("bench", base_url=url, api_key="sk-bench")
    payload = {"model": "bench", "messages": [{"role": "user", "content": "hi"}]}
    hold = getattr(model, "connections", None)
    async with hold() if hold else contextlib.AsyncExitStack():
        await model.http.post("/chat/completions", payload)  # warm: imports, the TLS context
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(requests):
            await model.http.post("/chat/completions", payload)
        return time.perf_counter() - wall, time.process_time() - cpu

wall, cpu = anyio.run(main)
print(json.dumps({"wall_ms": wall / requests * 1000, "cpu_ms": cpu / requests * 1000}))
"""


def _certificate(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    command = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
    command += ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)]
    subprocess.run(
        command,
        check=True,
        capture_output=True,
    )
    return cert, key


def _client(src: Path, url: str, requests: int, cert: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src), "SSL_CERT_FILE": str(cert)}
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, url, str(requests)], env=env, capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, help="the src folder of the code to compare with")
    args = parser.parse_args()
    codes = {"after": Path(__file__).resolve().parent.parent / "src"}
    if args.before is not None:
        codes = {"before": args.before.resolve(), **codes}
    with tempfile.TemporaryDirectory() as folder:
        cert, key = _certificate(Path(folder))
        servers = {
            "http": subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True),
            "https": subprocess.Popen(
                [sys.executable, "-c", SERVER, str(cert), str(key)], stdout=subprocess.PIPE, text=True
            ),
        }
        try:
            urls = {}
            for scheme, server in servers.items():
                assert server.stdout is not None
                urls[scheme] = f"{scheme}://127.0.0.1:{server.stdout.readline().strip()}"
            figures: dict[tuple[str, str], list[dict[str, float]]] = {}
            for _ in range(args.rounds):
                for scheme, url in urls.items():
                    for name, src in codes.items():
                        figures.setdefault((scheme, name), []).append(_client(src, url, args.requests, cert))
        finally:
            for server in servers.values():
                server.terminate()
                server.wait(timeout=10)
    print(f"{args.requests} sequential posts per round, {args.rounds} rounds, median per request")
    print(f"{'wire':6} {'code':7} {'wall ms':>8} {'cpu ms':>8} {'wall ratio':>11} {'cpu ratio':>10}")
    for scheme in urls:
        base = None
        for name in codes:
            runs = figures[(scheme, name)]
            wall = statistics.median(r["wall_ms"] for r in runs)
            cpu = statistics.median(r["cpu_ms"] for r in runs)
            base = base or (wall, cpu)
            print(f"{scheme:6} {name:7} {wall:8.2f} {cpu:8.2f} {wall / base[0]:11.2f} {cpu / base[1]:10.2f}")


if __name__ == "__main__":
    main()
