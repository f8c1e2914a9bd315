"""A keep-alive HTTP/1.1 connection pool whose cost per request does not grow with its size.

httpcore's ``AsyncConnectionPool`` rescans every connection (and, for each idle
one, every connection again) whenever a request starts or ends, which makes a
thousand requests in flight quadratic. This pool keeps, per origin, a stack of
idle connections: a request takes the most recently used one that is still
healthy or opens a new one, and hands it back when its response is closed.
There is deliberately no connection cap: every request in flight gets a
connection at once.

Connections themselves (direct, through an HTTP proxy, TLS) are created by the
stock httpcore pool the transport was configured with, so proxy and TLS
settings behave exactly as in httpx.

A request sent on a *reused* connection that the server had already closed
fails before any response byte arrives; such a request is sent once more on a
new connection (see :func:`_is_stale_connection_error`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator

import anyio
import httpcore
import httpx

__all__ = ["KeepAlivePool", "install_keep_alive_pool"]

_PRUNE_INTERVAL = 1.0

type _OriginKey = tuple[bytes, bytes, int]


def _key(origin: httpcore.Origin) -> _OriginKey:
    return (origin.scheme, origin.host, origin.port)  # httpcore.Origin is unhashable


def _is_stale_connection_error(error: Exception) -> bool:
    """Whether a failure on a reused connection means it was closed while idle.

    The server closing an idle keep-alive connection shows up as an end of
    stream (or a reset) before any part of a response, never after one.
    """
    if isinstance(error, httpcore.RemoteProtocolError):
        return "without sending a response" in str(error)
    return isinstance(error, httpcore.ReadError | httpcore.WriteError)


def _replayable(request: httpcore.Request) -> bool:
    return isinstance(request.stream, httpx.ByteStream | bytes)


class _ReturningStream:
    """A response body that hands its connection back to the pool when closed."""

    __slots__ = ("_closed", "_connection", "_origin", "_pool", "_stream")

    def __init__(
        self,
        stream: AsyncIterable[bytes],
        pool: KeepAlivePool,
        connection: httpcore.AsyncConnectionInterface,
        origin: httpcore.Origin,
    ) -> None:
        self._stream = stream
        self._pool = pool
        self._connection = connection
        self._origin = origin
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._stream:
                yield part
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            close = getattr(self._stream, "aclose", None)
            if close is not None:
                await close()
        await self._pool.check_in(self._connection, self._origin)


class KeepAlivePool:
    """Idle connections per origin, most recently used first; no connection cap."""

    def __init__(self, factory: httpcore.AsyncConnectionPool) -> None:
        self._factory = factory
        self._idle: dict[_OriginKey, deque[httpcore.AsyncConnectionInterface]] = {}
        self._open: set[httpcore.AsyncConnectionInterface] = set()
        self._closed = False
        self._last_prune = time.monotonic()

    @property
    def connection_count(self) -> int:
        """Open connections, idle or busy."""
        return len(self._open)

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        if request.url.scheme not in (b"http", b"https"):
            scheme = request.url.scheme.decode() or "no"
            raise httpcore.UnsupportedProtocol(f"unsupported URL protocol: {scheme!r}")
        if self._closed:
            raise RuntimeError("the connection pool has been closed")
        origin = request.url.origin
        connection = await self._idle_connection(origin)
        if connection is not None:
            try:
                return await self._send(connection, request)
            except (httpcore.RemoteProtocolError, httpcore.ReadError, httpcore.WriteError) as error:
                if not (_is_stale_connection_error(error) and _replayable(request)):
                    raise
        connection = self._factory.create_connection(origin)
        self._open.add(connection)
        return await self._send(connection, request)

    async def _send(
        self, connection: httpcore.AsyncConnectionInterface, request: httpcore.Request
    ) -> httpcore.Response:
        try:
            response = await connection.handle_async_request(request)
        except BaseException:
            await self._discard(connection)
            raise
        assert isinstance(response.stream, AsyncIterable)
        return httpcore.Response(
            status=response.status,
            headers=response.headers,
            content=_ReturningStream(response.stream, self, connection, request.url.origin),
            extensions=response.extensions,
        )

    async def _idle_connection(
        self, origin: httpcore.Origin
    ) -> httpcore.AsyncConnectionInterface | None:
        idle = self._idle.get(_key(origin))
        while idle:
            connection = idle.pop()
            if connection.is_available() and not connection.has_expired():
                return connection
            await self._discard(connection)
        return None

    async def check_in(
        self, connection: httpcore.AsyncConnectionInterface, origin: httpcore.Origin
    ) -> None:
        """Take back a connection whose response was closed."""
        if self._closed or connection.is_closed() or not connection.is_idle():
            await self._discard(connection)
        else:
            self._idle.setdefault(_key(origin), deque()).append(connection)
        now = time.monotonic()
        if now - self._last_prune >= _PRUNE_INTERVAL:
            self._last_prune = now
            await self._prune()

    async def _prune(self) -> None:
        """Close idle connections past their keep-alive expiry (oldest are first)."""
        for key, idle in list(self._idle.items()):
            while idle and idle[0].has_expired():
                await self._discard(idle.popleft())
            if not idle:
                del self._idle[key]

    async def _discard(self, connection: httpcore.AsyncConnectionInterface) -> None:
        self._open.discard(connection)
        with anyio.CancelScope(shield=True):
            await connection.aclose()

    async def aclose(self) -> None:
        self._closed = True
        connections, self._open = list(self._open), set()
        self._idle.clear()
        with anyio.CancelScope(shield=True):
            for connection in connections:
                await connection.aclose()

    async def __aenter__(self) -> KeepAlivePool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def install_keep_alive_pool(transport: httpx.AsyncHTTPTransport) -> httpx.AsyncHTTPTransport:
    """Make ``transport`` route requests through a :class:`KeepAlivePool`.

    The transport's own httpcore pool stays the factory for new connections,
    so its TLS, proxy and socket settings apply unchanged.
    """
    factory = transport._pool
    if not isinstance(factory, httpcore.AsyncConnectionPool):  # pragma: no cover
        raise TypeError(f"cannot pool connections of {type(factory).__name__}")
    transport._pool = KeepAlivePool(factory)  # type: ignore[assignment]
    return transport
