"""HTTP/1.1 framing for the mock server: one h11 server connection over asyncio streams."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import h11

__all__ = ["HttpConnection", "IncomingRequest", "MalformedRequest", "Reply"]

_READ_SIZE: Final = 65536
MAX_HEADER_BYTES: Final = 64 * 1024
"""Request line plus headers larger than this are refused with HTTP 431."""
_LINGER_SECONDS: Final = 2.0
# h11 quotes the offending bytes (a header line, perhaps with a credential) in its messages.
_QUOTED_BYTES: Final = re.compile(r"""\s*:?\s*b(['"]).*$""", re.DOTALL)


class Reply:
    """One HTTP response to send (``status`` ``None`` means: drop the connection)."""

    __slots__ = ("body", "headers", "status")

    def __init__(
        self,
        status: int | None,
        body: bytes = b"",
        headers: Sequence[tuple[bytes, bytes]] = (),
    ) -> None:
        self.status = status
        self.body = body
        self.headers = headers


@dataclass(frozen=True, slots=True)
class IncomingRequest:
    """A complete request; ``oversized`` when its body exceeded the limit (body left unread)."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    oversized: bool = False


@dataclass(frozen=True, slots=True)
class MalformedRequest:
    """Bytes that are not a valid HTTP/1.1 request: answer ``status`` and close."""

    status: int
    message: str


class HttpConnection:
    """Reads requests from, and writes replies to, one client connection.

    ``on_busy`` is called whenever bytes of a request arrive (the connection is no
    longer idle). Request bodies over ``max_body_size`` bytes are not buffered.
    """

    __slots__ = ("_h11", "_head", "_max_body_size", "_on_busy", "_reader", "_writer")

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        max_body_size: int,
        on_busy: Callable[[], None],
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        self._max_body_size = max_body_size
        self._on_busy = on_busy
        self._head = False  # answering a HEAD request: headers only

    async def next_request(self) -> IncomingRequest | MalformedRequest | None:
        """The next request, or ``None`` once the client has closed the connection."""
        connection = self._h11
        request: h11.Request | None = None
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                event = connection.next_event()
            except h11.RemoteProtocolError as error:
                message = _QUOTED_BYTES.sub("", str(error)) or "malformed HTTP request"
                return MalformedRequest(error.error_status_hint, message)
            if event is h11.NEED_DATA:
                if connection.they_are_waiting_for_100_continue:
                    self._writer.write(
                        connection.send(h11.InformationalResponse(status_code=100, headers=[]))
                    )
                data = await self._reader.read(_READ_SIZE)
                self._on_busy()
                connection.receive_data(data)
            elif isinstance(event, h11.Request):
                self._on_busy()  # (a pipelined request arrives without a read)
                request = event
                self._head = event.method == b"HEAD"
                if _content_length(event) > self._max_body_size:
                    return _incoming(event, b"", oversized=True)
            elif isinstance(event, h11.Data):
                assert request is not None
                size += len(event.data)
                if size > self._max_body_size:
                    return _incoming(request, b"", oversized=True)
                chunks.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None
                return _incoming(request, b"".join(chunks))
            else:  # ConnectionClosed (the client closed an idle connection), PAUSED
                return None

    async def respond(self, reply: Reply, *, keep_alive: bool = True) -> bool:
        """Send ``reply`` (status not ``None``); ``True`` when another request may follow."""
        connection = self._h11
        # Read the state into a local: sending below changes ``our_state``, so the
        # attribute must not stay narrowed to these two states.
        state = connection.our_state
        if state is not h11.IDLE and state is not h11.SEND_RESPONSE:
            return False
        assert reply.status is not None
        headers = [*reply.headers, (b"content-length", str(len(reply.body)).encode())]
        if not keep_alive or connection.their_state is not h11.DONE:
            headers.append((b"connection", b"close"))
        self._writer.write(
            connection.send(h11.Response(status_code=reply.status, headers=headers))
            + (b"" if self._head else connection.send(h11.Data(data=reply.body)))
            + connection.send(h11.EndOfMessage())
        )
        await self._writer.drain()
        if connection.our_state is h11.DONE and connection.their_state is h11.DONE:
            connection.start_next_cycle()
            return True
        return False  # Connection: close (either side), HTTP/1.0, or an unread body

    def abort(self) -> None:
        self._writer.transport.abort()

    async def close(self) -> None:
        """Close after flushing what is buffered (an abort could lose the last response).

        When the client may still be sending (a refused body or header block), what it
        sends is read and discarded for a moment first, so that it reads our answer
        instead of a connection reset.
        """
        writer = self._writer
        if writer.transport.is_closing():
            writer.transport.abort()
            return
        try:
            if self._h11.their_state in (h11.SEND_BODY, h11.ERROR) and writer.can_write_eof():
                writer.write_eof()
                await self._discard_input()
            writer.close()
            await writer.wait_closed()
        except (ConnectionError, OSError, asyncio.CancelledError):
            writer.transport.abort()

    async def _discard_input(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _LINGER_SECONDS
        while (remaining := deadline - loop.time()) > 0:
            try:
                async with asyncio.timeout(remaining):
                    if not await self._reader.read(_READ_SIZE):
                        return
            except TimeoutError:
                return


def _content_length(request: h11.Request) -> int:
    for name, value in request.headers:
        if name == b"content-length":
            return int(value)  # h11 has checked it is a single decimal number
    return 0


def _incoming(request: h11.Request, body: bytes, *, oversized: bool = False) -> IncomingRequest:
    headers: dict[str, str] = {}
    for name, value in request.headers:
        key = name.decode("latin-1")
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return IncomingRequest(
        method=request.method.decode("latin-1"),
        target=request.target.decode("latin-1"),
        headers=headers,
        body=body,
        oversized=oversized,
    )
