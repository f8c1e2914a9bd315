"""Serve the guessing game as an OpenEnv server on 127.0.0.1 (openenv-core's create_app).

    uv run python examples/openenv_guess/server.py --port 8000

serves until Ctrl-C. With a command after ``--``, it serves only while that command runs
(``{url}`` in it is replaced by the server's URL; ``--port 0`` picks a free port) and
exits with its status::

    uv run python examples/openenv_guess/server.py --port 0 -- \\
        uv run benchmax run openenv --env-arg base_url={url} \\
        --mock-policy examples/openenv_guess/policy.py:guess
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import uvicorn
from openenv.core.env_server.http_server import create_app

sys.path.insert(0, str(Path(__file__).resolve().parent))
from environment import GuessAction, GuessEnvironment, GuessObservation

app = create_app(GuessEnvironment, GuessAction, GuessObservation, max_concurrent_envs=64)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    # openenv-core 0.3 logs a traceback whenever a client ends its session (its server closes
    # a socket the client has already closed), so only critical messages are shown.
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical"))
    command = [part.replace("{url}", url) for part in args.command if part != "--"]
    if not command:
        print(f"serving {url} (Ctrl-C stops)", flush=True)
        server.run(sockets=[sock])
        return 0
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            print("the server did not start", file=sys.stderr)
            return 1
        time.sleep(0.05)
    try:
        return subprocess.run(command, check=False).returncode
    finally:
        server.should_exit = True
        thread.join(timeout=30)


if __name__ == "__main__":
    raise SystemExit(main())
