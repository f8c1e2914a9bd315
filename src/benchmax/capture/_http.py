"""The capture endpoint's HTTP/1.1 server: the programs' side, on an ``asyncio.Protocol``.

Every model call of every program passes through here, so it does the least HTTP/1.1 a
client needs (aiohttp's server built a request object, a header multidict, a URL, a
payload stream and a response object per call, which cost more CPU than the call's own
work):

* requests with a ``Content-Length`` body, a ``Transfer-Encoding: chunked`` body (chunk
  extensions and trailers skipped) or none; ``Expect: 100-continue`` answered with
  ``100 Continue`` (curl sends it for bodies over 1 KiB); keep-alive (HTTP/1.1 unless
  ``Connection: close``; HTTP/1.0 only with ``Connection: keep-alive``); requests sent
  before the previous answer (pipelining) wait their turn;
* a body over ``max_body`` bytes is answered by ``on_too_large()`` before it is read (a
  declared length) or as soon as it passes the limit (chunked), and the connection closed;
  a head over 64 KiB is 431, a head or chunk that is not HTTP/1.1 is 400 (both then close);
* each request is a task running ``handle(request)``; its :class:`Answer` is written in one
  write. A program that disconnects does not cancel its request (the call is still
  recorded); an answer to a closed connection is dropped.

:class:`ProgramServer` listens; ``close()`` stops listening, closes every connection and
cancels the requests still being handled.
"""

from __future__ import annotations

import asyncio
import http
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, cast

from benchmax._modelhttp import ChunkedBody, ChunkedBodyError, ChunkedBodyTooLarge
from benchmax.capture._errors import CaptureError

__all__ = ["Answer", "ProgramRequest", "ProgramServer"]

logger = logging.getLogger("benchmax.capture")

_MAX_HEAD: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class ProgramRequest:
    """One request: ``method`` (upper case as sent), ``path`` (the target without its
    query, still percent-encoded), ``headers`` (names lower-cased; a repeated header keeps
    its last value) and the whole ``body``."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer: an HTTP ``status``, the ``body`` and its ``content_type``, and extra
    header lines (``"Name: value\\r\\n"`` each)."""

    status: int
    body: bytes
    content_type: str = "application/json"
    extra_headers: str = ""


Handler = Callable[[ProgramRequest], Awaitable[Answer]]


def _status_line(status: int) -> bytes:
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = "Unknown"
    return f"HTTP/1.1 {status} {phrase}\r\n".encode()


_STATUS_LINES: Final = {status.value: _status_line(status.value) for status in http.HTTPStatus}


class ProgramServer:
    """Serves ``handle`` on ``host``:``port`` (``start()``, then ``port`` is the bound
    one); ``on_too_large()`` answers a body over ``max_body`` bytes."""

    __slots__ = (
        "_connections",
        "_handle",
        "_host",
        "_max_body",
        "_on_too_large",
        "_port",
        "_server",
        "port",
    )

    def __init__(
        self,
        handle: Handler,
        *,
        host: str,
        port: int,
        max_body: int,
        on_too_large: Callable[[], Answer],
    ) -> None:
        self._handle = handle
        self._host = host
        self._port = port
        self._max_body = max_body
        self._on_too_large = on_too_large
        self._server: asyncio.Server | None = None
        self._connections: set[_ProgramConnection] = set()
        self.port = port

    async def start(self) -> None:
        """Listen; ``OSError`` when the address cannot be bound."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _ProgramConnection(self), self._host, self._port, reuse_address=True
        )
        sockets = self._server.sockets
        self.port = int(sockets[0].getsockname()[1]) if sockets else self._port

    async def close(self) -> None:
        """Stop listening, close every connection, cancel the requests in flight."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        pending = []
        for connection in list(self._connections):
            pending.extend(connection.abandon())
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        if server is not None:
            await server.wait_closed()


class _ProgramConnection(asyncio.Protocol):
    """One program's connection: parses requests from ``_buffer``, one handled at a time."""

    __slots__ = (
        "_buffer",
        "_busy",
        "_chunks",
        "_closing",
        "_continued",
        "_head",
        "_length",
        "_server",
        "_task",
        "_transport",
    )

    def __init__(self, server: ProgramServer) -> None:
        self._server = server
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._busy = False
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._new_request()

    def _new_request(self) -> None:
        self._head: tuple[str, str, dict[str, str], bool] | None = None
        self._length = 0
        self._chunks: ChunkedBody | None = None  # a chunked body being read
        self._continued = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport (not always an asyncio.Transport subclass: uvloop's is not)
        self._transport = cast(asyncio.Transport, transport)
        self._server._connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._server._connections.discard(self)

    def abandon(self) -> list[asyncio.Task[None]]:
        """Close; the request task still running, if any."""
        self._closing = True
        if self._transport is not None:
            self._transport.close()
        task = self._task
        return [task] if task is not None and not task.done() else []

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self._buffer += data
        if not self._busy:
            self._next()

    def _next(self) -> None:
        """Parse the buffer; start handling a request when one is whole."""
        try:
            request = self._parse()
        except _BadRequest as error:
            self._answer_and_close(error.answer)
            return
        if request is not None:
            self._busy = True
            self._task = asyncio.get_running_loop().create_task(self._serve(request))

    def _parse(self) -> ProgramRequest | None:
        buffer = self._buffer
        head = self._head
        if head is None:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > _MAX_HEAD:
                    raise _BadRequest(431, "the request's header is over 64 KiB")
                return None
            head = self._head = _read_head(bytes(buffer[:end]))
            del buffer[: end + 4]
            headers = head[2]
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self._chunks = ChunkedBody(limit=self._server._max_body)
            elif "content-length" in headers:
                length = headers["content-length"].strip()
                if not length.isdigit():
                    raise _BadRequest(400, "the Content-Length is not a number")
                self._length = int(length)
                if self._length > self._server._max_body:
                    raise _TooLarge(self._server._on_too_large())
        if self._chunks is not None:
            body = self._read_chunks(self._chunks)
            if body is None:
                self._continue_if_asked(head)
                return None
        else:
            if len(buffer) < self._length:
                self._continue_if_asked(head)
                return None
            body = bytes(buffer[: self._length])
            del buffer[: self._length]
        method, path, headers, _ = head
        return ProgramRequest(method, path, headers, body)

    def _continue_if_asked(self, head: tuple[str, str, dict[str, str], bool]) -> None:
        if not self._continued and head[2].get("expect", "").lower() == "100-continue":
            self._continued = True
            assert self._transport is not None
            self._transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _read_chunks(self, chunks: ChunkedBody) -> bytes | None:
        try:
            end = chunks.read(self._buffer)
        except ChunkedBodyTooLarge:
            raise _TooLarge(self._server._on_too_large()) from None
        except ChunkedBodyError as error:
            raise _BadRequest(400, str(error)) from None
        if end is None:
            return None
        del self._buffer[:end]
        return chunks.body()

    async def _serve(self, request: ProgramRequest) -> None:
        try:
            answer = await self._server._handle(request)
        except Exception:
            logger.exception("capture.handler_failed path=%s", request.path)
            answer = Answer(500, b'{"error":{"message":"internal error","code":"internal"}}')
        keep_alive = self._head is not None and self._head[3]
        self._write(answer, head_only=request.method == "HEAD", close=not keep_alive)
        if not keep_alive:
            self._closing = True
            return
        self._busy = False
        self._task = None
        self._new_request()
        if self._buffer and not self._closing:
            self._next()

    def _answer_and_close(self, answer: Answer) -> None:
        self._write(answer, head_only=False, close=True)
        self._closing = True

    def _write(self, answer: Answer, *, head_only: bool, close: bool) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        status_line = _STATUS_LINES.get(answer.status) or _status_line(answer.status)
        head = (
            f"Content-Type: {answer.content_type}\r\nContent-Length: {len(answer.body)}\r\n"
            f"{answer.extra_headers}{'Connection: close' + chr(13) + chr(10) if close else ''}"
            "\r\n"
        ).encode("latin-1")
        transport.write(status_line + head if head_only else status_line + head + answer.body)
        if close:
            transport.close()


class _BadRequest(CaptureError):
    """A request this server will not read: answered with ``answer``, then closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        error = {"message": message, "type": "invalid_request_error", "code": "bad_request"}
        self.answer = Answer(status, json.dumps({"error": error}).encode())


class _TooLarge(_BadRequest):
    def __init__(self, answer: Answer) -> None:
        Exception.__init__(self, "too large")
        self.answer = answer


def _read_head(raw: bytes) -> tuple[str, str, dict[str, str], bool]:
    """(method, path, headers with lower-cased names, whether to keep the connection)."""
    lines = raw.decode("latin-1").split("\r\n")
    while lines and not lines[0]:  # stray CRLFs between requests
        del lines[0]
    parts = lines[0].split(" ") if lines else []
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[0].isalpha():
        raise _BadRequest(400, "the request line is not HTTP/1.x")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise _BadRequest(400, "a header line is malformed")
        headers[name.lower()] = value.strip()
    connection = headers.get("connection", "").lower()
    if version == "HTTP/1.1":
        keep_alive = "close" not in connection
    else:
        keep_alive = "keep-alive" in connection
    path = target.partition("?")[0]
    if "://" in path:  # absolute form: keep the path
        path = "/" + path.split("://", 1)[1].partition("/")[2]
    return method, path, headers, keep_alive
