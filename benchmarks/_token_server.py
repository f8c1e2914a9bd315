"""A keep-alive chat-completions server with canned 1,000-token replies (own process).

A request whose body asks for ``return_token_ids`` gets a vLLM-shaped reply carrying
``prompt_token_ids``, the choice's ``token_ids`` and ``logprobs.content`` (one entry per
token, as vLLM writes them: token text, float logprob, UTF-8 bytes, empty
``top_logprobs``); any other request gets the same 1,000-token message with those
fields ``null``. Prints ``listening on URL`` once ready and serves until terminated.

    python benchmarks/_token_server.py [--tokens 1000] [--prompt 200] [--delay-ms 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from typing import Any

WORDS = (" the", " model", " sampled", " token", " answer", " is", " 42", ".", " and", " so")


def replies(completion_tokens: int, prompt_tokens: int) -> tuple[bytes, bytes]:
    """(reply with token data, reply without), both HTTP responses with headers."""
    rng = random.Random(17)
    texts = [rng.choice(WORDS) for _ in range(completion_tokens)]
    ids = [rng.randrange(151_000) for _ in range(completion_tokens)]
    # Sampled tokens' logprobs: mostly near 0, some far; float32 values printed as doubles.
    logprobs = [
        float(f"{-rng.expovariate(1 / 0.6):.9g}") + rng.random() * 1e-12
        for _ in range(completion_tokens)
    ]
    prompt = [rng.randrange(151_000) for _ in range(prompt_tokens)]
    content = "".join(texts)

    def body(with_tokens: bool) -> bytes:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": content, "tool_calls": []},
            "logprobs": None,
            "finish_reason": "stop",
            "stop_reason": None,
            "token_ids": None,
        }
        if with_tokens:
            choice["logprobs"] = {
                "content": [
                    {
                        "token": text,
                        "logprob": logprob,
                        "bytes": list(text.encode()),
                        "top_logprobs": [],
                    }
                    for text, logprob in zip(texts, logprobs, strict=True)
                ]
            }
            choice["token_ids"] = ids
        data = json.dumps(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [choice],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                    "completion_tokens": completion_tokens,
                },
                "prompt_logprobs": None,
                "prompt_token_ids": prompt if with_tokens else None,
            }
        ).encode()
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
        return head % len(data) + data

    return body(True), body(False)


class _Connection(asyncio.Protocol):
    with_tokens = b""
    without_tokens = b""
    delay = 0.0  # seconds before each reply (an inference server's time per call)

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
            request_body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            wants = b'"return_token_ids":true' in request_body.replace(b" ", b"")
            reply = self.with_tokens if wants else self.without_tokens
            if self.delay > 0:
                asyncio.get_running_loop().call_later(self.delay, self._send, reply)
            else:
                self._send(reply)

    def _send(self, reply: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


async def serve(completion_tokens: int, prompt_tokens: int, delay: float = 0.0) -> None:
    _Connection.delay = delay
    _Connection.with_tokens, _Connection.without_tokens = replies(completion_tokens, prompt_tokens)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Connection, "127.0.0.1", 0, backlog=4096)
    port = server.sockets[0].getsockname()[1]
    print(f"listening on http://127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=1000, help="completion tokens per reply")
    parser.add_argument("--prompt", type=int, default=200, help="prompt tokens per reply")
    parser.add_argument(
        "--delay-ms", type=float, default=0.0, help="milliseconds before each reply"
    )
    arguments = parser.parse_args()
    try:
        asyncio.run(serve(arguments.tokens, arguments.prompt, arguments.delay_ms / 1000))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
