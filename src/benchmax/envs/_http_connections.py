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

**Stale connections.** A server may close an idle keep-alive connection at any
time. Such a connection is recognized when it is taken from the stack, and
checked once more immediately before the request's first byte is written to
it; if the server's close has arrived by then, nothing is sent on it and the
request goes out once on a new connection. A request is never sent twice: once
any part of it has been written (or on a new connection), a failure is the
caller's, even if the server dropped the connection without answering.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import httpcore
import httpx

__all__ = ["KeepAlivePool", "install_keep_alive_pool"]

_PRUNE_INTERVAL = 1.0
_BEFORE_WRITING = "send_request_headers.started"

type _OriginKey = tuple[bytes, bytes, int]
type _Trace = Callable[[str, dict[str, Any]], Awaitable[None]]


def _key(origin: httpcore.Origin) -> _OriginKey:
    return (origin.scheme, origin.host, origin.port)  # httpcore.Origin is unhashable


class _ClosedWhileIdle(Exception):
    """The server closed a pooled connection before the request was written to it."""


def _server_closed(connection: httpcore.AsyncConnectionInterface) -> bool:
    """Whether the socket under an idle connection has become readable (which, with
    no request on it, means the server closed it). Unknown connection shapes say no."""
    layer: object = connection
    for _ in range(3):  # direct: HTTPConnection -> HTTP11Connection; proxies add a layer
        stream = getattr(layer, "_network_stream", None)
        if stream is not None:
            return bool(stream.get_extra_info("is_readable"))
        layer = getattr(layer, "_connection", None)
    return False


def _checked_before_writing(
    request: httpcore.Request, connection: httpcore.AsyncConnectionInterface
) -> httpcore.Request:
    """``request`` with a trace hook that refuses a reused connection the server
    closed since it was taken from the pool, just before anything is written."""
    user_trace: _Trace | None = request.extensions.get("trace")

    async def trace(event: str, info: dict[str, Any]) -> None:
        if user_trace is not None:
            await user_trace(event, info)
        if event.endswith(_BEFORE_WRITING) and _server_closed(connection):
            raise _ClosedWhileIdle

    return httpcore.Request(
        method=request.method,
        url=request.url,
        headers=request.headers,
        content=request.stream,
        extensions={**request.extensions, "trace": trace},
    )


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
        try:
            with anyio.CancelScope(shield=True):
                close = getattr(self._stream, "aclose", None)
                if close is not None:
                    await close()
        finally:
            # Even when interrupted: a connection that did not finish its
            # response is not idle, so check_in closes it instead of pooling it.
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

    @property
    def idle_count(self) -> int:
        """Connections waiting in the pool for their next request."""
        return sum(len(idle) for idle in self._idle.values())

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        if request.url.scheme not in (b"http", b"https"):
            scheme = request.url.scheme.decode() or "no"
            raise httpcore.UnsupportedProtocol(f"unsupported URL protocol: {scheme!r}")
        self._raise_if_closed()
        origin = request.url.origin
        connection = await self._idle_connection(origin)
        if connection is not None:
            try:
                return await self._send(connection, _checked_before_writing(request, connection))
            except _ClosedWhileIdle:
                pass  # nothing was written: send it once on a new connection
            self._raise_if_closed()
        connection = self._factory.create_connection(origin)
        self._open.add(connection)
        return await self._send(connection, request)

    def _raise_if_closed(self) -> None:
        if self._closed:
            raise RuntimeError("the connection pool has been closed")

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
            # has_expired() also covers an idle socket the server has closed.
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
            if not idle and self._idle.get(key) is idle:
                del self._idle[key]

    async def _discard(self, connection: httpcore.AsyncConnectionInterface) -> None:
        self._open.discard(connection)
        with anyio.CancelScope(shield=True):
            await connection.aclose()

    async def aclose(self) -> None:
        self._closed = True
        connections, self._open = list(self._open), set()
        self._idle.clear()
        interrupted: BaseException | None = None
        with anyio.CancelScope(shield=True):
            for connection in connections:
                try:  # an interruption must not leave the remaining sockets open
                    await connection.aclose()
                except BaseException as error:
                    interrupted = interrupted or error
        if interrupted is not None:
            raise interrupted

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
