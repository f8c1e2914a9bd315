"""What crosses the wire: replies encoded with secrets masked, request bodies read under
a timeout, and the WebSocket link whose reads and writes are bounded.

Every record the server sends (HTTP bodies, WebSocket messages: observations, the final
trajectory and its logs, error texts) is encoded by :meth:`Wire.encode`, which masks the
known secrets exactly as ``benchmax run`` masks its results files
(``benchmax._secret_masking.MaskedRecords``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson

from benchmax._secret_masking import MaskedRecords
from benchmax.serving._errors import ServingError

if TYPE_CHECKING:
    from aiohttp import web

__all__ = [
    "BodyTimeout",
    "BodyTooLarge",
    "Inbox",
    "WebSocketLink",
    "Wire",
    "body_refusal",
    "decode_json",
    "encode_json",
]

_LONG_DIGITS = re.compile(rb"\d{19}")
_LONG_DIGITS_TEXT = re.compile(r"\d{19}")


def encode_json(value: object) -> bytes:
    """``value`` as compact UTF-8 JSON bytes: orjson's, or ``json``'s for what orjson
    refuses (integers past 64 bits, which :func:`decode_json` reads exactly; lone
    surrogates, written as escapes)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate: kept as its \\uXXXX escape
        return json.dumps(value, separators=(",", ":")).encode()


def decode_json(raw: str | bytes) -> object:
    """A client's JSON document, its integers exact.

    orjson reads an integer outside ``[-2**63, 2**64)`` as a float, while a local run
    reads a model's tool arguments with ``json``, exactly; so a document holding 19 digits
    in a row is read again with ``json`` (orjson accepted it: it holds no ``NaN`` or
    ``Infinity``). Raises ``orjson.JSONDecodeError`` when ``raw`` is not JSON.
    """
    data = orjson.loads(raw)
    found = _LONG_DIGITS_TEXT.search(raw) if isinstance(raw, str) else _LONG_DIGITS.search(raw)
    if found is None:
        return data
    try:
        return json.loads(raw)
    except RecursionError:  # nested deeper than json reads, as deep as orjson reads
        return data


class BodyTimeout(ServingError):
    """The client sent nothing of the request body for ``body_timeout`` seconds."""


class BodyTooLarge(ServingError):
    """The request body is larger than the server takes."""


@dataclass(frozen=True, slots=True)
class Wire:
    """The server's rules for what it sends and reads.

    ``masking`` masks the known secrets in every record sent; ``body_timeout`` is the
    most seconds between two reads of a request body (nginx's ``client_body_timeout``);
    ``max_body_bytes`` the largest body taken; ``write_timeout`` the most seconds one
    WebSocket message may take to be written (a client that does not read loses its
    connection); ``close_timeout`` the most seconds a WebSocket close handshake may take
    before the connection is cut; ``max_queue_bytes`` how many bytes of a WebSocket's
    incoming messages wait while a step runs (past it the server stops reading the
    socket: TCP flow control holds the client back).
    """

    masking: MaskedRecords
    body_timeout: float = 60.0
    max_body_bytes: int = 64 * 1024 * 1024
    write_timeout: float = 30.0
    close_timeout: float = 2.0
    max_queue_bytes: int = 16 * 1024 * 1024

    def encode(self, record: object) -> bytes:
        """``record`` as JSON bytes, every known secret masked in its strings."""
        return self.masking.encoded(record, encode_json)

    def json_response(self, record: object, status: int = 200) -> web.Response:
        from aiohttp import web

        return web.Response(
            status=status, body=self.encode(record), content_type="application/json"
        )

    def text_response(self, text: str) -> web.Response:
        from aiohttp import web

        masked = self.masking.encoded(text, lambda value: str(value).encode())
        return web.Response(body=masked, content_type="text/plain", charset="utf-8")

    async def read_body(self, request: web.Request) -> bytes:
        """The whole request body; raises ``BodyTimeout`` when no byte of it arrives for
        ``body_timeout`` seconds, ``BodyTooLarge`` past ``max_body_bytes``."""
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                async with asyncio.timeout(self.body_timeout):
                    chunk = await request.content.readany()
            except TimeoutError:
                raise BodyTimeout(
                    f"no byte of the request body arrived for {self.body_timeout:g} s "
                    "(--body-timeout)"
                ) from None
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > self.max_body_bytes:
                raise BodyTooLarge(f"the request body is larger than {self.max_body_bytes} bytes")
            chunks.append(chunk)


def body_refusal(wire: Wire, error: BodyTimeout | BodyTooLarge) -> web.Response:
    """408 (timeout) or 413 (too large), closing the connection: the rest of the body is
    not read."""
    status = 408 if isinstance(error, BodyTimeout) else 413
    response = wire.json_response({"detail": str(error)}, status)
    response.force_close()
    return response


_MESSAGE_OVERHEAD = 64
"""Bytes each queued message counts beyond its text (so empty messages are bounded too)."""


class Inbox:
    """Incoming WebSocket messages waiting to be handled, at most ``max_bytes`` of them
    (one message of any size is always taken when none waits)."""

    def __init__(self, max_bytes: int) -> None:
        self._items: deque[str | bytes | None] = deque()
        self._bytes = 0
        self._max_bytes = max_bytes
        self._changed = asyncio.Event()

    @property
    def queued_bytes(self) -> int:
        return self._bytes

    async def put(self, item: str | bytes | None) -> None:
        """Add ``item`` (``None``: the connection ended), waiting while the inbox is full."""
        size = 0 if item is None else len(item) + _MESSAGE_OVERHEAD
        while item is not None and self._items and self._bytes + size > self._max_bytes:
            self._changed.clear()
            await self._changed.wait()
        self._items.append(item)
        self._bytes += size
        self._changed.set()

    def end(self) -> None:
        """Mark the connection ended without waiting (after anything queued)."""
        self._items.append(None)
        self._changed.set()

    async def get(self) -> str | bytes | None:
        while not self._items:
            self._changed.clear()
            await self._changed.wait()
        item = self._items.popleft()
        self._bytes -= 0 if item is None else len(item) + _MESSAGE_OVERHEAD
        self._changed.set()
        return item


class WebSocketLink:
    """One server-side WebSocket with bounded writes and a bounded close.

    ``send`` gives up after ``wire.write_timeout`` (the peer does not read) and cuts the
    connection, freeing what was buffered for it; ``close`` waits ``wire.close_timeout``
    for the close handshake, then cuts the connection.
    """

    def __init__(self, ws: web.WebSocketResponse, request: web.Request, wire: Wire) -> None:
        self.ws = ws
        self.wire = wire
        self._transport = request.transport
        self._closing: set[asyncio.Task[None]] = set()

    async def send(self, record: object) -> None:
        """Send ``record`` as one text message; ``ConnectionResetError`` when the peer
        did not take it within ``write_timeout`` (the connection is cut)."""
        text = self.wire.encode(record).decode()
        try:
            async with asyncio.timeout(self.wire.write_timeout):
                await self.ws.send_str(text)
        except TimeoutError:
            self.abort()
            raise ConnectionResetError(
                f"the client did not read a message for {self.wire.write_timeout:g} s"
            ) from None

    async def close(self) -> None:
        """Close politely within ``close_timeout``, else cut the connection."""
        try:
            async with asyncio.timeout(self.wire.close_timeout):
                await self.ws.close()
            return
        except Exception:  # timed out, or the connection broke: cut it
            pass
        self.abort()

    def close_soon(self) -> None:
        """``close`` from a callback (the session timed out); never blocks the caller."""
        task = asyncio.ensure_future(self.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def abort(self) -> None:
        """Cut the connection at once, dropping whatever waits to be written."""
        transport, self._transport = self._transport, None
        if transport is not None:
            with contextlib.suppress(Exception):
                transport.abort()
