"""A pass-through HTTP proxy on 127.0.0.1 that keeps every exchange with a real server, so
tests can compare what benchmax recorded with the raw replies it was sent."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

__all__ = ["Exchange", "RecordingProxy"]


@dataclass(frozen=True)
class Exchange:
    """One request forwarded: its path, decoded JSON body (``None`` for a GET), the
    server's status and decoded reply (``None`` when not JSON)."""

    path: str
    body: Any
    status: int
    reply: Any


class RecordingProxy:
    """``with RecordingProxy("http://127.0.0.1:8000") as proxy:`` forwards
    ``proxy.base_url`` (``.../v1``) to the upstream root and keeps :attr:`exchanges`."""

    def __init__(self, upstream_root: str) -> None:
        self.upstream = upstream_root.rstrip("/")
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=1800)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._forward(self.rfile.read(length))

            def _forward(self, data: bytes | None) -> None:
                headers = {"Content-Type": "application/json"}
                if "Authorization" in self.headers:
                    headers["Authorization"] = self.headers["Authorization"]
                method = "GET" if data is None else "POST"
                answer = proxy._client.request(
                    method, proxy.upstream + self.path, content=data, headers=headers
                )
                proxy._keep(self.path, data, answer)
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("content-type", "text/plain"))
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, message: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _keep(self, path: str, data: bytes | None, answer: httpx.Response) -> None:
        try:
            reply = answer.json()
        except ValueError:
            reply = None
        body = json.loads(data) if data else None
        with self._lock:
            self.exchanges.append(Exchange(path, body, answer.status_code, reply))

    def chat(self) -> list[Exchange]:
        """The chat-completions exchanges, in the order they completed."""
        with self._lock:
            return [e for e in self.exchanges if e.path.endswith("/chat/completions")]

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(30)
        self._client.close()
