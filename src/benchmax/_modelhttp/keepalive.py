"""A small keep-alive HTTP/1.1 client on asyncio protocols, for plain ``http://`` model calls.

The capture endpoint forwards every call a program makes; through aiohttp's client each one
builds a request object, a response object, a header multidict, a payload writer and a
stream reader, which cost more CPU than the rest of the endpoint's work together. This
client sends one ``POST`` as one write of bytes and reads the reply into one buffer:

* **framing**: ``Content-Length`` bodies, ``Transfer-Encoding: chunked`` bodies (chunk
  extensions and trailers skipped), and bodies that end when the server closes (no length,
  or ``Connection: close``); ``1xx`` interim replies are skipped; ``gzip``/``deflate``
  bodies are decoded (none is asked for: ``Accept-Encoding: identity``);
* **connections**: one :class:`KeepAliveConnections` per event loop (owned by the loop's
  ``LoopPool``), keyed by host and port, unbounded, reused most-recent first; a connection
  is put back only when its reply was read whole and the server did not ask to close it.
  A connection the server closed while idle is dropped when the loop sees the close, and
  one whose close the loop has not seen yet is caught by polling its socket before it is
  handed out (nothing has been written to it: a new one is opened instead). A request is
  never sent twice. Idle connections older than ``keepalive_seconds`` are closed;
* **failures** raise aiohttp's public exception types, so the chat call classifies and
  retries them as it does aiohttp's own: a refused or failed connect is
  ``ClientConnectorError``-like ``ClientOSError``; a server that closes before its reply is
  complete ``ServerDisconnectedError`` (nothing read) or ``ClientPayloadError`` (part of
  the body read); a reply that is not HTTP/1.x ``ModelReplyError``. Cancellation (the
  attempt's deadline) closes the connection.

Anything else (``https://``, a proxy, a redirect, an encoding other than gzip and deflate)
is for the caller's general client (``ChatSession`` falls back to aiohttp).
"""

from __future__ import annotations

import asyncio
import select
import zlib
from collections import deque
from dataclasses import dataclass
from typing import Final, cast

import aiohttp

from benchmax import __version__
from benchmax._modelhttp.errors import ModelHTTPError

__all__ = [
    "ChunkedBody",
    "ChunkedBodyError",
    "ChunkedBodyTooLarge",
    "KeepAliveConnections",
    "PlainReply",
    "PlainTarget",
    "UnreadableReply",
    "closed_by_peer",
]

_MAX_HEAD: Final = 64 * 1024
_DEFAULT_HEADERS: Final = {
    "accept": "Accept: application/json\r\n",
    "accept-encoding": "Accept-Encoding: identity\r\n",
    "content-type": "Content-Type: application/json\r\n",
    "user-agent": f"User-Agent: benchmax/{__version__}\r\n",
}
_DEFAULTS: Final = "".join(_DEFAULT_HEADERS.values())
_FRAMING_HEADERS: Final = frozenset({"host", "content-length", "transfer-encoding", "connection"})


class UnreadableReply(ModelHTTPError):
    """The server's answer is not an HTTP/1.x reply this client reads (a bad status line,
    a malformed header, a chunk size that is not hexadecimal, an unknown encoding)."""


@dataclass(frozen=True, slots=True)
class PlainTarget:
    """Where requests go: ``host`` (an IPv6 address without brackets), ``port``, the
    request target ``path`` (with its query) and the ``Host`` header's value."""

    host: str
    port: int
    path: str
    host_header: str

    @classmethod
    def from_url(cls, url: str) -> PlainTarget | None:
        """The target of an ``http://`` URL without a user part, else ``None``."""
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return None
        host = parts.hostname
        if parts.scheme.lower() != "http" or not host or "@" in parts.netloc:
            return None
        port = 80 if port is None else port
        shown = f"[{host}]" if ":" in host else host
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host_header = shown if port == 80 else f"{shown}:{port}"
        return cls(host=host, port=port, path=path, host_header=host_header)


@dataclass(frozen=True, slots=True)
class PlainReply:
    """A whole reply: ``status``, ``headers`` (names lower-cased; a repeated header keeps
    its last value) and the decoded ``body``."""

    status: int
    headers: dict[str, str]
    body: bytes


class ChunkedBodyError(ModelHTTPError):
    """A chunked body whose framing is broken; the message says how."""


class ChunkedBodyTooLarge(ChunkedBodyError):
    """A chunked body longer than the reader's ``limit``."""


class ChunkedBody:
    """An HTTP/1.1 ``Transfer-Encoding: chunked`` body, read from a buffer as it grows
    (RFC 9112 section 7.1; chunk extensions and trailers are skipped). ``at`` is where the
    first chunk's size line starts in the buffer; ``limit`` the most body bytes taken
    (``None``: no limit). The client side of the capture endpoint's upstream calls and its
    server side for the programs' requests read chunks with it."""

    __slots__ = ("_chunks", "_limit", "_size", "at")

    def __init__(self, at: int = 0, limit: int | None = None) -> None:
        self.at = at
        self._limit = limit
        self._size = 0
        self._chunks: list[bytes] = []

    def read(self, buffer: bytearray) -> int | None:
        """Take the whole chunks ``buffer`` holds from ``at`` on; the offset just past the
        body (its last chunk and trailers) once it is whole, else ``None``.
        ``ChunkedBodyError`` for a size line that is no hexadecimal number or a chunk not
        followed by CRLF; ``ChunkedBodyTooLarge`` past ``limit``."""
        at = self.at
        while True:
            line_end = buffer.find(b"\r\n", at)
            if line_end < 0:
                return None
            size_text = bytes(buffer[at:line_end]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                size = -1
            if size < 0:
                raise ChunkedBodyError(f"a chunk size of {size_text[:40]!r}")
            if size == 0:
                if buffer.startswith(b"\r\n", line_end + 2):
                    return line_end + 4
                trailers_end = buffer.find(b"\r\n\r\n", line_end + 2)
                return None if trailers_end < 0 else trailers_end + 4
            if self._limit is not None and self._size + size > self._limit:
                raise ChunkedBodyTooLarge(f"a body over {self._limit} bytes")
            data_end = line_end + 2 + size
            if len(buffer) < data_end + 2:
                return None
            if buffer[data_end : data_end + 2] != b"\r\n":
                raise ChunkedBodyError("a chunk that does not end with CRLF")
            self._chunks.append(bytes(buffer[line_end + 2 : data_end]))
            self._size += size
            at = self.at = data_end + 2

    def body(self) -> bytes:
        """The chunks' bytes read so far, joined."""
        return b"".join(self._chunks)


class _Connection(asyncio.Protocol):
    """One connection; reads one reply at a time into a buffer and hands it to ``waiter``."""

    __slots__ = (
        "_body_start",
        "_buffer",
        "_chunked",
        "_framing",
        "_head",
        "_length",
        "closed",
        "idle_since",
        "key",
        "owner",
        "reusable",
        "transport",
        "used",
        "waiter",
    )

    def __init__(self, owner: KeepAliveConnections, key: tuple[str, int]) -> None:
        self.owner = owner
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[PlainReply] | None = None
        self.closed = False
        self.used = False
        self.reusable = False
        self.idle_since = 0.0
        self._reset()

    def _reset(self) -> None:
        self._buffer = bytearray()
        self._head: tuple[int, dict[str, str], bool] | None = None
        self._framing = ""  # "length", "chunked" or "close" once the head is read
        self._body_start = 0
        self._length = 0
        self._chunked = ChunkedBody()

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport (not always an asyncio.Transport subclass: uvloop's is not)
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.waiter is None or self.waiter.done():
            # bytes nobody asked for: the connection cannot carry another request
            self.reusable = False
            self.close()
            return
        self._buffer += data
        try:
            reply = self._parse()
        except UnreadableReply as error:
            self._fail(error)
            return
        if reply is not None:
            self.waiter.set_result(reply)

    def eof_received(self) -> bool:
        waiter = self.waiter
        if waiter is not None and not waiter.done() and self._framing == "close":
            head = self._head
            assert head is not None
            try:
                waiter.set_result(_reply(head, bytes(self._buffer[self._body_start :])))
            except UnreadableReply as error:
                waiter.set_exception(error)
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        self.owner.forget(self)
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            if self._head is None and not self._buffer:
                error: Exception = aiohttp.ServerDisconnectedError()
            else:
                error = aiohttp.ClientPayloadError(
                    "Response payload is not completed: the server closed the connection"
                    " before the reply's end"
                )
            if exc is not None:
                error.__cause__ = exc
            waiter.set_exception(error)

    # one exchange

    async def exchange(self, request: bytes) -> PlainReply:
        """Send ``request`` (whole) and read its reply."""
        transport = self.transport
        assert transport is not None
        self._reset()
        self.reusable = False
        waiter: asyncio.Future[PlainReply] = asyncio.get_running_loop().create_future()
        self.waiter = waiter
        self.used = True
        transport.write(request)
        try:
            return await waiter
        except BaseException:
            self.close()  # a reply half-read (or a cancelled one) leaves the stream unusable
            raise
        finally:
            self.waiter = None

    def _fail(self, error: Exception) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        self.close()

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None and not self.closed:
            self.transport.close()

    def _parse(self) -> PlainReply | None:
        head = self._head
        buffer = self._buffer
        while head is None:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > _MAX_HEAD:
                    raise UnreadableReply(f"the reply's header is over {_MAX_HEAD} bytes")
                return None
            status, headers, keep_alive = _read_head(bytes(buffer[:end]))
            if 100 <= status < 200:  # interim (100 Continue, 103 Early Hints): skip
                del buffer[: end + 4]
                continue
            head = self._head = (status, headers, keep_alive)
            self._body_start = end + 4
            if status in (204, 304):
                self._framing, self._length = "length", 0
            elif "chunked" in headers.get("transfer-encoding", "").lower():
                self._framing = "chunked"
                self._chunked = ChunkedBody(at=self._body_start)
            elif "content-length" in headers:
                length = headers["content-length"].strip()
                if not length.isdigit():
                    raise UnreadableReply(f"the reply's Content-Length is {length[:40]!r}")
                self._framing, self._length = "length", int(length)
            else:
                self._framing = "close"
        if self._framing == "length":
            end = self._body_start + self._length
            if len(buffer) < end:
                return None
            if len(buffer) > end:
                raise UnreadableReply("the server sent more than its reply")
            body = bytes(buffer[self._body_start : end])
            self.reusable = head[2]
            return _reply(head, body)
        if self._framing == "chunked":
            return self._read_chunks(head)
        return None  # "close": the body ends at EOF

    def _read_chunks(self, head: tuple[int, dict[str, str], bool]) -> PlainReply | None:
        try:
            end = self._chunked.read(self._buffer)
        except ChunkedBodyError as error:
            raise UnreadableReply(str(error)) from None
        if end is None:
            return None
        if len(self._buffer) > end:
            raise UnreadableReply("the server sent more than its reply")
        self.reusable = head[2]
        return _reply(head, self._chunked.body())


def _reply(head: tuple[int, dict[str, str], bool], body: bytes) -> PlainReply:
    status, headers, _ = head
    encoding = headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("identity", ""):
        body = _decoded_body(encoding, body)
    return PlainReply(status, headers, body)


def _read_head(raw: bytes) -> tuple[int, dict[str, str], bool]:
    """(status, headers with lower-cased names, whether the connection stays open)."""
    lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise UnreadableReply(f"the reply's status line is {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise UnreadableReply(f"a reply header line {line[:80]!r}")
        headers[name.lower()] = value.strip()
    connection = headers.get("connection", "").lower()
    if version == "HTTP/1.1":
        keep_alive = "close" not in connection
    else:
        keep_alive = "keep-alive" in connection
    return int(code), headers, keep_alive


def _decoded_body(encoding: str, body: bytes) -> bytes:
    try:
        if encoding in ("gzip", "x-gzip"):
            return zlib.decompress(body, wbits=16 + zlib.MAX_WBITS)
        if encoding == "deflate":
            try:
                return zlib.decompress(body)
            except zlib.error:
                return zlib.decompress(body, wbits=-zlib.MAX_WBITS)  # raw deflate
    except zlib.error as error:
        raise UnreadableReply(f"the reply's {encoding} body does not decode: {error}") from None
    raise UnreadableReply(f"the reply's Content-Encoding {encoding[:40]!r}")


class KeepAliveConnections:
    """One event loop's plain-HTTP keep-alive connections, by (host, port): an idle one is
    closed after ``keepalive_seconds``; opening one may take ``connect_timeout`` seconds."""

    __slots__ = ("_busy", "_closed", "_connect_timeout", "_idle", "_keepalive")

    def __init__(self, *, keepalive_seconds: float, connect_timeout: float) -> None:
        self._keepalive = keepalive_seconds
        self._connect_timeout = connect_timeout
        self._idle: dict[tuple[str, int], deque[_Connection]] = {}
        self._busy: set[_Connection] = set()
        self._closed = False

    @property
    def idle_connections(self) -> int:
        """How many open connections wait for a request."""
        return sum(len(idle) for idle in self._idle.values())

    async def post(self, target: PlainTarget, headers: dict[str, str], body: bytes) -> PlainReply:
        """``POST`` ``body`` to ``target`` with ``headers`` (checked: no CR or LF in them;
        framing headers among them are dropped) and JSON ``Accept``/``Content-Type``, a
        ``User-Agent`` and ``Accept-Encoding: identity`` where ``headers`` names none; the
        whole reply. Raises aiohttp's connection and payload errors,
        :class:`UnreadableReply`, or ``RuntimeError`` once closed."""
        names = [name.lower() for name in headers]
        defaults = _DEFAULTS
        if not _DEFAULT_HEADERS.keys().isdisjoint(names):
            defaults = "".join(v for k, v in _DEFAULT_HEADERS.items() if k not in names)
        extra = "".join(
            f"{name}: {value}\r\n"
            for name, value in headers.items()
            if name.lower() not in _FRAMING_HEADERS
        )
        head = (
            f"POST {target.path} HTTP/1.1\r\nHost: {target.host_header}\r\n{defaults}"
            f"{extra}Content-Length: {len(body)}\r\n\r\n"
        )
        request = head.encode("latin-1") + body
        connection = await self._connection(target)
        self._busy.add(connection)
        try:
            reply = await connection.exchange(request)
        finally:
            self._busy.discard(connection)
        if connection.reusable and not connection.closed and not self._closed:
            connection.idle_since = asyncio.get_running_loop().time()
            self._idle.setdefault(connection.key, deque()).append(connection)
        else:
            connection.close()
        return reply

    async def _connection(self, target: PlainTarget) -> _Connection:
        if self._closed:
            raise RuntimeError("the model connection pool has been closed")
        key = (target.host, target.port)
        idle = self._idle.get(key)
        if idle:
            now = asyncio.get_running_loop().time()
            while idle and now - idle[0].idle_since > self._keepalive:
                idle.popleft().close()  # the oldest first: past its keep-alive
            while idle:
                connection = idle.pop()  # the most recent: the likeliest still open
                if not connection.closed and not closed_by_peer(connection.transport):
                    return connection
                connection.close()
        return await self._open(key)

    async def _open(self, key: tuple[str, int]) -> _Connection:
        loop = asyncio.get_running_loop()
        host, port = key
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, protocol = await loop.create_connection(
                    lambda: _Connection(self, key), host, port
                )
        except TimeoutError:
            raise aiohttp.ServerTimeoutError(
                f"Connection timeout to host {host}:{port} after {self._connect_timeout:g}s"
            ) from None
        except OSError as error:
            raise aiohttp.ClientOSError(
                error.errno, f"Cannot connect to host {host}:{port} [{error.strerror or error}]"
            ) from error
        return protocol

    def forget(self, connection: _Connection) -> None:
        """Drop a closed connection from the idle lists."""
        idle = self._idle.get(connection.key)
        if idle is not None and connection in idle:
            idle.remove(connection)

    def close(self) -> None:
        """Close every connection (idle ones, and those carrying a request)."""
        self._closed = True
        for idle in self._idle.values():
            for connection in list(idle):
                connection.close()
        self._idle.clear()
        for connection in list(self._busy):
            connection.close()


def closed_by_peer(transport: asyncio.BaseTransport | None) -> bool:
    """Whether an idle connection's socket has become readable: with no request on
    it, that means the server closed it (or sent something it should not have)."""
    if transport is None or transport.is_closing():
        return True
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    fd = sock.fileno()
    if fd < 0:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | getattr(select, "POLLRDHUP", 0))
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)  # pragma: no cover - no poll() (Windows)
    return bool(readable)
