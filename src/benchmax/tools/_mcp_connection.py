"""One live MCP client session (the ``mcp`` SDK's ``Client``), owned by a task of its own.

The SDK holds anyio task groups and cancel scopes for as long as a session is open;
they must be entered and left by one task, and a caller's cancellation (``tool_timeout``
is an ``asyncio.timeout`` in the rollout's task) must never land inside them. So each
:class:`Connection` runs the SDK in an *owner* task:

* the owner enters the transport (a stdio subprocess, or streamable HTTP over an
  ``httpx2`` client), the ``Client`` and a task group for calls, then waits to be closed;
* every call runs as a task of that group; the caller awaits a plain ``asyncio`` future.
  A cancelled caller cancels the call's own ``CancelScope``; the SDK then sends the
  server ``notifications/cancelled`` and the session stays usable;
* closing (or the event loop's end, which cancels the owner) leaves the ``Client`` in the
  owner task; for stdio the server's stdin is closed and what is left of its session
  (its children, a launcher's server) gets SIGTERM, then SIGKILL, within
  ``CLOSE_DEADLINE`` seconds (:mod:`benchmax.tools._mcp_stdio`). A caller cancelled
  while closing (a ``tool_timeout`` running out) still waits for that close.

Errors a call can end with: :class:`ConnectionLost` (the server exited or the HTTP
exchange failed: the session is unusable, a retry needs a new connection) and
:class:`ProtocolFailure` (the server answered with a JSON-RPC error).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx2
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolResult,
    Implementation,
    Tool,
)

from benchmax import __version__, _context
from benchmax._modelhttp import sendable_auth_headers
from benchmax.auth import ModelAuth, ModelRequestContext
from benchmax.tools._errors import ToolLayerError
from benchmax.tools._mcp_stdio import CLOSE_DEADLINE, stdio_transport

__all__ = ["Connection", "ConnectTarget", "ConnectionLost", "ProtocolFailure", "StartupTimedOut"]

logger = logging.getLogger("benchmax.tools.mcp")

_LIST_PAGE_CAP = 100
_CLOSE_SLACK = 5.0
"""Seconds beyond the transport's own close bound a cancelled closer waits: the MCP
client's own teardown around it, on a busy machine."""
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
_HTTP_LIMITS = httpx2.Limits(
    max_connections=100, max_keepalive_connections=20, keepalive_expiry=4.0
)
"""Idle connections are dropped after 4 s, before the usual 5 s server keep-alive timeout
(uvicorn's included): reusing a connection the server is closing fails the request, and
the SDK then ends the whole session."""
_CLIENT_INFO = Implementation(name="benchmax", version=__version__)
_OWNERS: set[asyncio.Task[None]] = set()
"""Owner tasks still running: the event loop keeps only weak references to tasks, and a
session dropped without ``aclose`` must still end cleanly when its loop does."""


class ConnectionLost(ToolLayerError):
    """The connection to the MCP server is gone (the server exited or closed it, or an
    HTTP request failed); calls on it cannot succeed."""


class StartupTimedOut(ConnectionLost):
    """The server did not start (or answer the handshake) within the start-up bound."""


class ProtocolFailure(ToolLayerError):
    """The MCP server answered a request with a JSON-RPC error (``code``); ``retryable``
    when that is an internal error (``-32603``), which a repeated call may not meet;
    ``invalid_params`` when it refused the request's parameters (``-32602``: for a tool
    call, the model's arguments)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = code == INTERNAL_ERROR
        self.invalid_params = code == INVALID_PARAMS


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectTarget:
    """Where and how to connect: a stdio ``command`` (argv, extra ``env``, ``cwd``,
    ``stderr``) or a streamable-HTTP ``url`` (with ``auth``). ``label`` names the server
    in logs and errors; ``secrets`` are masked in every message this module builds."""

    label: str
    command: tuple[str, ...] | None = None
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    stderr: Literal["inherit", "discard"] = "inherit"
    url: str | None = None
    auth: ModelAuth | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def mask(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def describe(self, error: BaseException) -> str:
        """``error`` as ``Type: message`` (a group's first leaf), secrets masked."""
        while isinstance(error, BaseExceptionGroup) and error.exceptions:
            error = error.exceptions[0]
        text = str(error)
        return self.mask(f"{type(error).__name__}: {text}" if text else type(error).__name__)


class Connection:
    """An open MCP session on the running event loop (see the module docstring)."""

    def __init__(self, target: ConnectTarget, rollout_id: str | None) -> None:
        self._target = target
        self._rollout_id = rollout_id
        self._loop = asyncio.get_running_loop()
        self._closing = asyncio.Event()
        self._client: Client | None = None
        self._calls: anyio.abc.TaskGroup | None = None
        self._owner: asyncio.Task[None] | None = None
        self._lost: str | None = None
        self._pending: set[asyncio.Future[Any]] = set()

    @classmethod
    async def open(
        cls, target: ConnectTarget, rollout_id: str | None, timeout: float | None
    ) -> Connection:
        """Start the server (stdio) or connect (HTTP) and complete the MCP handshake
        within ``timeout`` seconds.

        ``rollout_id`` is given to ``auth`` (``ModelRequestContext.rollout_id``) and
        attributes the session's logs to that rollout; ``None`` for a shared session.
        Raises ``ConnectionLost`` naming the cause (a timeout included); nothing is
        left running after a failure.
        """
        connection = cls(target, rollout_id)
        ready = connection._loop.create_future()
        context = contextvars.copy_context()
        if rollout_id is None:  # a shared session belongs to no rollout
            context.run(_context.CURRENT_ROLLOUT_ID.set, None)
            context.run(_context.CURRENT_GROUP_RIDS.set, None)
        owner = connection._loop.create_task(
            connection._own(ready), name=f"benchmax-mcp-{target.label}", context=context
        )
        connection._owner = owner
        _OWNERS.add(owner)
        owner.add_done_callback(_OWNERS.discard)
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(ready)
        except BaseException as error:
            await connection.aclose()
            if isinstance(error, TimeoutError):
                raise StartupTimedOut(
                    f"MCP server {target.label} did not start within {timeout:g}s"
                ) from None
            if not isinstance(error, Exception):
                raise
            cause = str(error) if isinstance(error, ConnectionLost) else target.describe(error)
            raise ConnectionLost(f"MCP server {target.label} failed to start: {cause}") from None
        return connection

    @property
    def lost(self) -> bool:
        """Whether the connection is gone (closed, or the server went away)."""
        return self._lost is not None

    async def list_tools(self) -> list[Tool]:
        """Every tool the server lists, following ``nextCursor`` for at most 100 pages.

        An empty cursor (``""``) ends the listing like none; a cursor the server gave
        before, or the page cap, ends it too (logged: the server's pagination is broken,
        the pages read so far are used). A tool listed again exactly as before (a server
        that ignores the cursor sends the same page) is kept once; two different tools of
        one name still reach the duplicate-name check.
        """
        label = self._target.label

        async def walk(client: Client) -> list[Tool]:
            tools: list[Tool] = []
            cursor: str | None = None
            seen: set[str] = set()
            for _ in range(_LIST_PAGE_CAP):
                page = await client.list_tools(cursor=cursor)
                tools.extend(tool for tool in page.tools if tool not in tools)
                cursor = page.next_cursor
                if not cursor:
                    return tools
                if cursor in seen:
                    logger.warning(
                        "mcp.list_cursor_repeated server=%s pages=%d: tools/list gave the "
                        "cursor %.40r again; the listing ends here",
                        label,
                        len(seen) + 1,
                        cursor,
                    )
                    return tools
                seen.add(cursor)
            logger.warning(
                "mcp.list_page_cap server=%s pages=%d: tools/list still had a next page; "
                "the listing ends here",
                label,
                _LIST_PAGE_CAP,
            )
            return tools

        return await self._run(walk, "tools/list")

    async def call_tool(self, name: str, arguments: dict[str, object]) -> CallToolResult:
        """Call tool ``name`` (its name on the server). Cancelling the caller cancels
        the call on the server; the connection stays open."""

        async def call(client: Client) -> CallToolResult:
            return await client.call_tool(name, arguments)

        return await self._run(call, f"tools/call {name!r}")

    async def aclose(self) -> None:
        """Close the session and wait until it is closed (for stdio: every process of the
        server's session has exited or been killed), at most ``CLOSE_DEADLINE`` seconds
        and a little more. A caller cancelled meanwhile still waits for the close; the
        cancellation is raised once it is done."""
        self._lost = self._lost or "the connection was closed"
        self._closing.set()
        owner = self._owner
        if owner is None or owner.done():
            return
        if self._calls is None:  # still starting: stop the handshake
            owner.cancel()
        try:
            await asyncio.wait({owner})
        except asyncio.CancelledError:
            await asyncio.wait({owner}, timeout=CLOSE_DEADLINE + _CLOSE_SLACK)
            raise

    async def _run[T](self, operation: Callable[[Client], Awaitable[T]], what: str) -> T:
        if self._lost is not None or self._calls is None or self._client is None:
            raise ConnectionLost(f"MCP server {self._target.label}: {self._lost}")
        future: asyncio.Future[T] = self._loop.create_future()
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        scope = anyio.CancelScope()
        try:
            self._calls.start_soon(self._call, future, scope, operation, self._client, what)
        except RuntimeError:  # the task group already ended
            raise ConnectionLost(f"MCP server {self._target.label}: {self._lost}") from None
        try:
            return await future
        finally:
            if not future.done() or future.cancelled():
                scope.cancel()

    async def _call[T](
        self,
        future: asyncio.Future[T],
        scope: anyio.CancelScope,
        operation: Callable[[Client], Awaitable[T]],
        client: Client,
        what: str,
    ) -> None:
        label = self._target.label
        outcome: BaseException | None = None
        try:
            with scope:
                result = await operation(client)
                if not future.done():
                    future.set_result(result)
                return
        except MCPError as error:
            if error.code == CONNECTION_CLOSED:
                self._lose("the server closed the connection")
                outcome = ConnectionLost(f"MCP server {label}: connection closed during {what}")
            else:
                message = self._target.mask(error.error.message)
                outcome = ProtocolFailure(
                    f"MCP server {label} answered {what} with error {error.code}: {message}",
                    error.code,
                )
        except (httpx2.HTTPError, anyio.BrokenResourceError, anyio.ClosedResourceError) as error:
            self._lose(self._target.describe(error))
            outcome = ConnectionLost(
                f"MCP server {label}: {what} failed: {self._target.describe(error)}"
            )
        except Exception as error:
            outcome = error
        finally:
            # No outcome: the owner cancelled the call as the session ends; the owner
            # fails it with the reason once it knows it.
            if outcome is not None and not future.done():
                future.set_exception(outcome)

    def _lose(self, reason: str) -> None:
        if self._lost is None:
            self._lost = reason
            logger.warning("mcp.connection_lost server=%s: %s", self._target.label, reason)

    async def _own(self, ready: asyncio.Future[None]) -> None:
        target = self._target
        try:
            async with AsyncExitStack() as stack:
                transport = await self._transport(stack)
                client = Client(transport, cache=None, client_info=_CLIENT_INFO)
                await stack.enter_async_context(client)
                calls = await stack.enter_async_context(anyio.create_task_group())
                self._client, self._calls = client, calls
                if not ready.done():
                    ready.set_result(None)
                await self._closing.wait()
                calls.cancel_scope.cancel()
        except BaseException as error:
            if isinstance(error, asyncio.CancelledError):  # the event loop is ending
                self._lost = self._lost or "the event loop ended"
            self._lose(f"session ended: {target.describe(error)}")
            if not ready.done():
                ready.set_exception(ConnectionLost(target.describe(error)))
                ready.exception()  # retrieved: the opener may have given up waiting
            elif not isinstance(error, asyncio.CancelledError):
                logger.warning(
                    "mcp.session_error server=%s: %s", target.label, target.describe(error)
                )
            if isinstance(error, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
        finally:
            self._lose("the connection was closed")
            self._client = self._calls = None
            for future in list(self._pending):
                if not future.done():
                    future.set_exception(ConnectionLost(f"MCP server {target.label}: {self._lost}"))

    async def _transport(self, stack: AsyncExitStack) -> Any:
        target = self._target
        if target.command is not None:
            return stdio_transport(
                target.command, target.env, target.cwd, target.stderr, target.label
            )
        assert target.url is not None
        auth = None
        if target.auth is not None:
            context = ModelRequestContext(
                base_url=target.url, model="mcp", rollout_id=self._rollout_id or "shared"
            )
            auth = _RequestAuth(target.auth, context)
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                auth=auth, timeout=_HTTP_TIMEOUT, limits=_HTTP_LIMITS, follow_redirects=False
            )
        )
        return streamable_http_client(target.url, http_client=http)


class _RequestAuth(httpx2.Auth):
    """Asks a ``ModelAuth`` for the headers of every HTTP request to the server."""

    def __init__(self, auth: ModelAuth, context: ModelRequestContext) -> None:
        self._auth = auth
        self._context = context

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        headers = sendable_auth_headers(await self._auth.headers_for_request(self._context))
        for name, value in headers.items():
            request.headers[name] = value
        yield request
