"""A minimal keep-alive chat-completions server for benchmarks (run in its own process).

``MockModelServer`` parses HTTP with h11 and records requests; at thousands of
requests per second it, not the client, is what a benchmark would measure. This
server answers from a raw ``asyncio.Protocol``, with canned replies chosen by the
path prefix: ``/hold/...`` waits ``--hold`` seconds first, ``/score/...`` answers a
judge verdict, anything else answers ``"42"``. It prints ``listening on URL`` once
ready, and serves until terminated.

    python benchmarks/_fast_server.py [--hold 2.0]
"""

from __future__ import annotations

import argparse
import asyncio
import json


def _reply(content: str) -> bytes:
    body = json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        }
    ).encode()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(
        body
    )
    return head + body


ANSWER = _reply("42")
VERDICT = _reply('{"score": 1, "reasoning": "ok"}')


class _Connection(asyncio.Protocol):
    hold = 0.0

    def __init__(self) -> None:
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[: end + 2].lower()
            start = head.find(b"content-length:")
            length = int(head[start + 15 : head.find(b"\r\n", start)]) if start >= 0 else 0
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length :]
            path = head.split(b" ", 2)[1]
            reply = VERDICT if path.startswith(b"/score/") else ANSWER
            if path.startswith(b"/hold/") and self.hold > 0:
                asyncio.get_running_loop().call_later(self.hold, self._send, reply)
            else:
                self._send(reply)

    def _send(self, reply: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


async def serve(hold: float) -> None:
    _Connection.hold = hold
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Connection, "127.0.0.1", 0, backlog=4096)
    port = server.sockets[0].getsockname()[1]
    print(f"listening on http://127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hold", type=float, default=2.0, help="seconds /hold/ requests wait")
    arguments = parser.parse_args()
    try:
        asyncio.run(serve(arguments.hold))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
