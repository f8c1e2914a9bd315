"""One pool of keep-alive model connections per event loop, and its lifetime (beyond.md §1).

Opening connections per rollout or per judge request costs milliseconds of CPU
and about a megabyte each; this module shares them per event loop:

* a registry maps each running loop (weakly) to one :class:`LoopPool`, created
  synchronously on first use and guarded by a ``threading.Lock`` (several
  threads may each run a loop);
* every model call on the loop goes over the pool's one ``aiohttp.ClientSession``:
  no connection cap, keep-alive, ``TCP_NODELAY``, TLS from
  ``ssl.create_default_context()`` (which honors ``SSL_CERT_FILE`` and
  ``SSL_CERT_DIR``), no cookies shared between calls, and the environment's
  proxies (``HTTP(S)_PROXY``, ``ALL_PROXY``, ``NO_PROXY``, read with the
  standard library's rules when the pool is created);
* chat calls (``BaseEnv``) use the session directly; judge calls go through the
  OpenAI SDK over :func:`sdk_http_client`, a new, cheap client of the HTTP
  library the installed SDK is built on (``httpx2`` for openai 3.x, ``httpx``
  for 2.x) whose transport is a non-closing view sending over the session, so
  the SDK's ``close()`` never closes the pool;
* **stale connections**: a pooled connection the server closed while it sat idle
  is replaced before anything is written to it (:class:`_FreshConnector`); a
  request is never sent twice, since aiohttp retries no ``POST`` and nothing
  here does once a byte is written;
* **lifetime**: the pool closes when its loop shuts down its async generators
  (``asyncio.run`` and ``asyncio.Runner`` do), or earlier when the last
  :class:`PoolLease` holder (a ``BaseEnv``) releases it and no call over it is
  still open; a pool whose loop closed without that is dropped without error.
  A new loop gets a new pool.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.metadata
import ssl
import threading
import urllib.parse
import urllib.request
import weakref
from collections.abc import AsyncGenerator, Hashable
from types import ModuleType
from typing import Any

import aiohttp
from aiohttp.connector import Connection
from aiohttp.tracing import Trace

from benchmax import __version__
from benchmax._modelhttp.keepalive import KeepAliveConnections, closed_by_peer

__all__ = ["LoopPool", "PoolLease", "loop_pool", "sdk_http_client", "sdk_http_module"]

KEEPALIVE_SECONDS = 4.0
"""Idle connections are closed after this, before typical server keep-alive
timeouts (5 s), narrowing stale-connection races."""

CONNECT_TIMEOUT_SECONDS = 30.0
"""Seconds to open a connection. The timer runs on the event loop, which also serves every
rollout in flight: on a busy machine (hundreds of rollouts, a server on the same cores) the
loop can be late by more than the OpenAI SDK's 5 s, and a connection the kernel opened at
once would be reported timed out. A refused connection still fails at once."""

PLACEHOLDER_AUTHORIZATION = "Bearer benchmax-runtime-auth"
"""What chat calls send as ``Authorization`` when the auth object gives none
(the header the 0.2 reference's placeholder SDK key produced)."""

_CHAT_HEADERS = {
    "Accept": "application/json",
    "Content-Type": "application/json",
    "User-Agent": f"benchmax/{__version__}",
    "Authorization": PLACEHOLDER_AUTHORIZATION,
}


class _EnvironmentProxies:
    """Which proxy a URL goes through, by the environment at creation time.

    ``HTTP_PROXY``/``HTTPS_PROXY`` (per scheme), ``ALL_PROXY`` (any scheme) and
    ``NO_PROXY`` (hosts, domain suffixes, ``*``), with the standard library's
    rules (``urllib.request.getproxies`` and ``proxy_bypass_environment``).
    """

    __slots__ = ("_proxies", "_routes")

    def __init__(self) -> None:
        self._proxies = {scheme: url for scheme, url in urllib.request.getproxies().items() if url}
        self._routes: dict[tuple[str, str], str | None] = {}

    def for_url(self, url: str) -> str | None:
        """The proxy URL for ``url``, or ``None`` to connect directly."""
        if not self._proxies:
            return None
        try:
            parts = urllib.parse.urlsplit(url)
        except ValueError:  # not a URL: the HTTP client will say so
            return None
        key = (parts.scheme.lower(), parts.netloc)
        try:
            return self._routes[key]
        except KeyError:
            pass
        proxy = self._proxies.get(key[0]) or self._proxies.get("all")
        host = parts.netloc.rpartition("@")[2]
        # The stdlib's NO_PROXY matcher on every platform (``proxy_bypass`` consults the
        # OS settings on macOS/Windows); typeshed omits it as undocumented.
        bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
        if proxy is not None and bypass(host, self._proxies):
            proxy = None
        self._routes[key] = proxy
        return proxy


class _FreshConnector(aiohttp.TCPConnector):
    """A connector whose reused connections are checked just before they carry a request.

    aiohttp drops a pooled connection whose close the event loop has already
    seen. A server's close that reached the socket but not yet the loop is
    caught here: every connection handed out before is checked for readability
    when it is handed out again (nothing is written to it until the caller gets
    it), and replaced if the server closed it.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._handed_out: weakref.WeakSet[object] = weakref.WeakSet()

    async def connect(
        self, req: aiohttp.ClientRequest, traces: list[Trace], timeout: aiohttp.ClientTimeout
    ) -> Connection:
        while True:
            connection = await super().connect(req, traces, timeout)
            protocol = connection.protocol
            if protocol not in self._handed_out:  # new: nothing can have closed it yet
                self._handed_out.add(protocol)
                return connection
            if not closed_by_peer(connection.transport):
                return connection
            connection.close()  # closed while idle: nothing was written; take another


def _new_session() -> aiohttp.ClientSession:
    connector = _FreshConnector(
        limit=0,
        limit_per_host=0,
        keepalive_timeout=KEEPALIVE_SECONDS,
        ssl=ssl.create_default_context(),
    )
    # trust_env stays off: aiohttp would then look up proxies and ~/.netrc in a
    # worker thread for every request (and netrc credentials would clash with
    # the auth headers); the pool resolves the environment's proxies itself.
    return aiohttp.ClientSession(
        connector=connector,
        headers=_CHAT_HEADERS,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_SECONDS),
        cookie_jar=aiohttp.DummyCookieJar(),
    )


@functools.cache
def sdk_http_module() -> ModuleType:
    """The HTTP library the installed OpenAI SDK is built on: ``httpx2`` for openai
    3.x, ``httpx`` for 2.x (found from the SDK's version, without importing it)."""
    major = int(importlib.metadata.version("openai").split(".", 1)[0])
    if major >= 3:
        import httpx2

        return httpx2
    import httpx

    return httpx


# Hop-by-hop and framing headers aiohttp sets itself; Accept-Encoding too, so only
# encodings aiohttp decodes are offered (the body handed back is decoded).
_REQUEST_HEADERS_AIOHTTP_SETS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "accept-encoding"}
)
_DECODED_RESPONSE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


@functools.cache
def _sdk_view_class(module: ModuleType) -> type[Any]:
    # The base class comes from whichever HTTP library the installed SDK uses.
    class PooledTransportView(module.AsyncBaseTransport):  # type: ignore[misc, name-defined]
        """What one judge request's client holds: sends its requests over the loop's
        pooled aiohttp session; closing it only tells the pool this use is over.

        Bodies are read whole (judge calls do not stream). aiohttp's failures come
        back as the library's own errors (``ConnectError``, ``ReadError``,
        ``ReadTimeout``), which the SDK classifies and retries as usual.
        """

        def __init__(self, pool: LoopPool) -> None:
            self._pool = pool
            self._closed = False
            pool.open_use()

        async def handle_async_request(self, request: Any) -> Any:
            if self._closed:
                raise RuntimeError("the pooled HTTP client has been closed")
            url = str(request.url)
            headers = [
                (name, value)
                for name, value in request.headers.multi_items()
                if name.lower() not in _REQUEST_HEADERS_AIOHTTP_SETS
            ]
            body = await request.aread()
            session = self._pool.session()
            try:
                async with session.request(
                    request.method,
                    url,
                    data=body or None,
                    headers=headers,
                    proxy=self._pool.proxy_for(url),
                    allow_redirects=False,
                ) as reply:
                    content = await reply.read()
                    status = reply.status
                    reply_headers = [
                        (name, value)
                        for name, value in reply.headers.items()
                        if name.lower() not in _DECODED_RESPONSE_HEADERS
                    ]
            except (TimeoutError, aiohttp.ServerTimeoutError) as error:
                raise module.ReadTimeout(str(error) or "timed out", request=request) from error
            except aiohttp.ClientConnectorError as error:
                raise module.ConnectError(str(error), request=request) from error
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as error:
                raise module.ReadError(str(error) or type(error).__name__, request=request) from (
                    error
                )
            return module.Response(status, headers=reply_headers, content=content)

        async def aclose(self) -> None:
            if not self._closed:
                self._closed = True
                await self._pool.close_use()

    return PooledTransportView


class LoopPool:
    """One event loop's model connections (one aiohttp session) and who still uses them."""

    __slots__ = (
        "__weakref__",
        "_keepalive",
        "_limiters",
        "_proxies",
        "_session",
        "closed",
        "closer",
        "holders",
        "loop_ref",
        "release_pending",
        "users",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop_ref = weakref.ref(loop)
        self._proxies = _EnvironmentProxies()
        self._session: aiohttp.ClientSession | None = None
        self._keepalive: KeepAliveConnections | None = None
        self._limiters: dict[Hashable, asyncio.Semaphore] = {}
        self.users = 0
        self.holders = 0
        self.release_pending = False
        self.closed = False
        self.closer: AsyncGenerator[None, None] | None = None

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("the model connection pool has been closed")

    def session(self) -> aiohttp.ClientSession:
        """The aiohttp session every model call on this loop shares."""
        session = self._session
        if session is None:
            self._check_open()
            session = self._session = _new_session()
        return session

    def keepalive(self) -> KeepAliveConnections:
        """This loop's plain-HTTP keep-alive connections (``_modelhttp.keepalive``)."""
        connections = self._keepalive
        if connections is None:
            self._check_open()
            connections = self._keepalive = KeepAliveConnections(
                keepalive_seconds=KEEPALIVE_SECONDS, connect_timeout=CONNECT_TIMEOUT_SECONDS
            )
        return connections

    def proxy_for(self, url: str) -> str | None:
        """The environment's proxy for ``url`` (``None``: connect directly)."""
        return self._proxies.for_url(url)

    def limiter(self, key: Hashable, limit: int) -> asyncio.Semaphore:
        """A semaphore of ``limit`` slots shared on this loop by every holder of ``key``."""
        semaphore = self._limiters.get(key)
        if semaphore is None:
            semaphore = self._limiters[key] = asyncio.Semaphore(limit)
        return semaphore

    def open_use(self) -> None:
        """Count one call (a rollout's chat session, a judge request) using the pool."""
        self._check_open()
        self.users += 1

    async def close_use(self) -> None:
        """End one use; closes the pool when it was released while in use."""
        self.users -= 1
        if self.users == 0 and self.holders == 0 and self.release_pending:
            await self.shutdown()

    async def aclose(self) -> None:
        """Close every connection and forget the pool."""
        _forget(self)
        if self.closed:
            return
        self.closed = True
        connections, self._keepalive = self._keepalive, None
        if connections is not None:
            connections.close()
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def shutdown(self) -> None:
        """Close now, retiring the loop-shutdown closer as well."""
        closer, self.closer = self.closer, None
        if closer is not None:
            await closer.aclose()
        else:
            await self.aclose()


_REGISTRY: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopPool] = (
    weakref.WeakKeyDictionary()
)
_REGISTRY_LOCK = threading.Lock()


def _forget(pool: LoopPool) -> None:
    loop = pool.loop_ref()
    with _REGISTRY_LOCK:
        if loop is not None and _REGISTRY.get(loop) is pool:
            del _REGISTRY[loop]


async def _close_at_loop_shutdown(pool: LoopPool) -> AsyncGenerator[None, None]:
    """Parked async generator: the loop's ``shutdown_asyncgens`` closes it,
    which closes the pool while the loop can still run the close."""
    try:
        yield
    finally:
        pool.closer = None
        await pool.aclose()


def _register_closer(pool: LoopPool) -> None:
    closer = _close_at_loop_shutdown(pool)
    # Calling __anext__ registers the generator with the running loop (its
    # first-iteration hook); driving the awaitable once parks it at ``yield``
    # without suspending, because nothing before the yield awaits.
    step = closer.__anext__()
    try:
        step.send(None)
    except StopIteration:
        pool.closer = closer
    else:  # pragma: no cover - the body cannot suspend before its yield
        raise RuntimeError("pool closer suspended unexpectedly")


def loop_pool() -> LoopPool:
    """The running loop's pool, created on first use (synchronously).

    Raises ``RuntimeError`` when no event loop is running.
    """
    loop = asyncio.get_running_loop()
    with _REGISTRY_LOCK:
        pool = _REGISTRY.get(loop)
        if pool is not None and not pool.closed:
            return pool
        for stale in [other for other in _REGISTRY if other.is_closed()]:
            del _REGISTRY[stale]
        pool = LoopPool(loop)
        _REGISTRY[loop] = pool
    _register_closer(pool)
    return pool


def sdk_http_client(*, auth: Any = None, timeout: float | None = None) -> Any:
    """A new, cheap HTTP client of the SDK's kind over the running loop's pool.

    Give it to ``AsyncOpenAI(http_client=...)``: closing it (as the SDK's
    ``close()`` does) ends only this use, never the pooled connections. ``auth``
    is an ``Auth`` of that library; ``timeout`` in seconds (``None``: none).
    """
    module = sdk_http_module()
    return module.AsyncClient(
        transport=_sdk_view_class(module)(loop_pool()),
        auth=auth,
        timeout=timeout,
        follow_redirects=True,
    )


class PoolLease:
    """A long-lived user's hold (a ``BaseEnv``'s) on the pools of the loops it uses.

    While any lease holds a loop's pool, it stays open between calls; when the
    last holder calls :meth:`aclose` on that loop, the pool closes (at once, or
    as soon as the calls still open over it end). Pools of loops that have
    ended are simply forgotten. A lease pickles and copies as a fresh, empty one.
    """

    __slots__ = ("__weakref__", "_pools")

    def __init__(self) -> None:
        self._pools: weakref.WeakSet[LoopPool] = weakref.WeakSet()

    def __reduce__(self) -> tuple[type[PoolLease], tuple[()]]:
        return (PoolLease, ())

    def hold(self) -> LoopPool:
        """The running loop's pool, held by this lease until :meth:`aclose`."""
        pool = loop_pool()
        if pool not in self._pools:
            with _REGISTRY_LOCK:
                self._pools.add(pool)
                pool.holders += 1
                pool.release_pending = False
        return pool

    async def aclose(self) -> None:
        """Release this lease's hold on the running loop's pool."""
        loop = asyncio.get_running_loop()
        with _REGISTRY_LOCK:
            mine = [pool for pool in self._pools if pool.loop_ref() is loop]
            for pool in mine:
                self._pools.discard(pool)
        for pool in mine:
            pool.holders -= 1
            if pool.holders > 0 or pool.closed:
                continue
            if pool.users > 0:
                pool.release_pending = True
                continue
            await pool.shutdown()
