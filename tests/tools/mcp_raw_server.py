"""A hand-written MCP server over stdio (newline-delimited JSON-RPC, no SDK: it starts in
milliseconds), misbehaving on purpose for the process-lifetime and pagination tests.

``python mcp_raw_server.py MARKS [BEHAVIOUR ...]``: every process it starts writes
``pid-<pid>`` into the directory ``MARKS`` (whose path is also on each command line, so a
scan of the process table finds them all). Behaviours:

* ``ignore-term``: SIGTERM is ignored and stdin's end does not stop the server;
* ``linger``: stdin's end does not stop the server (it sleeps on);
* ``children``: two child processes (sleeping for an hour) are started first;
* ``launcher``: the process forks the server and exits at once, as a launcher does;
* ``cursor-empty``: ``tools/list`` answers ``nextCursor: ""``;
* ``cursor-repeat``: the second page's ``nextCursor`` points at itself, forever;
* ``cursor-stuck``: the cursor is ignored: every page is the first, ``nextCursor`` the same;
* ``reject-params``: ``tools/call`` with an argument other than ``text`` is answered with
  JSON-RPC error ``-32602`` (invalid params).

Tools: ``echo(text)`` (and ``second`` on a second page).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MARKS = Path(sys.argv[1])
BEHAVIOUR = set(sys.argv[2:])
ECHO = {
    "name": "echo",
    "description": "Echo the text.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}
SECOND = {"name": "second", "inputSchema": {"type": "object", "properties": {}}}
_CHILD = (
    "import os, pathlib, sys, time; "
    "pathlib.Path(sys.argv[1], f'pid-{os.getpid()}').touch(); time.sleep(3600)"
)


def _mark() -> None:
    (MARKS / f"pid-{os.getpid()}").touch()


def _pages(cursor: str | None) -> dict[str, Any]:
    if "cursor-empty" in BEHAVIOUR:
        return {"tools": [ECHO], "nextCursor": ""}
    if "cursor-stuck" in BEHAVIOUR:
        return {"tools": [ECHO], "nextCursor": "page-2"}
    if "cursor-repeat" in BEHAVIOUR:
        if cursor is None:
            return {"tools": [ECHO], "nextCursor": "page-2"}
        return {"tools": [SECOND], "nextCursor": "page-2"}
    return {"tools": [ECHO]}


def _answer(message: dict[str, Any]) -> dict[str, Any] | None:
    method = message.get("method")
    if "id" not in message:
        return None  # a notification
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
    params = message.get("params") or {}
    if method == "initialize":
        reply["result"] = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw", "version": "1"},
        }
    elif method == "tools/list":
        reply["result"] = _pages(params.get("cursor"))
    elif method == "tools/call":
        arguments = params.get("arguments") or {}
        if "reject-params" in BEHAVIOUR and set(arguments) - {"text"}:
            reply["error"] = {"code": -32602, "message": "unexpected argument"}
        else:
            text = str(arguments.get("text", params.get("name")))
            reply["result"] = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "ping":
        reply["result"] = {}
    else:
        reply["error"] = {"code": -32601, "message": f"no method {method}"}
    return reply


def _serve() -> None:
    _mark()
    if "ignore-term" in BEHAVIOUR:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "children" in BEHAVIOUR:
        spawned = [
            subprocess.Popen(
                [sys.executable, "-c", _CHILD, str(MARKS)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
            )
            for _ in range(2)
        ]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(
            (MARKS / f"pid-{child.pid}").exists() for child in spawned
        ):
            time.sleep(0.01)  # serve once the children are up (and have marked)
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = _answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
    if BEHAVIOUR & {"ignore-term", "linger"}:
        time.sleep(3600)


def main() -> None:
    if "launcher" in BEHAVIOUR:
        _mark()
        if os.fork() != 0:
            os._exit(0)  # the launcher is gone; its forked server goes on
    _serve()


if __name__ == "__main__":
    main()
