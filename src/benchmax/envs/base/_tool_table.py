"""The tools a ``BaseEnv`` declares in ``tools``, opened for one rollout.

Entries are ``@tool`` functions (``FunctionTool``; a plain typed function is made one),
``Toolset`` instances and ``ToolProvider``s (``MCPServer``). When a rollout starts,
``open_declared_tools`` enters every toolset's per-rollout copy and opens one session
per provider, lists their tools once and makes that table the running task's; the
default ``BaseEnv.list_tools``/``run_tool`` read and call it. ``RolloutTools.aclose``
exits the toolsets' contexts in reverse order (bounded by ``tool_timeout``), then closes
the providers' sessions together, each within its provider's own bound (``MCPServer``:
``CLOSE_DEADLINE``, never cut short by ``tool_timeout``, so no server process outlives
its rollout), also after a failure or cancellation.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchmax.envs._hook_errors import hook_errors
from benchmax.envs.base._tool_calls import ToolTimedOut
from benchmax.envs.errors import EnvError
from benchmax.envs.shared_types import TOOL_ERROR, TOOL_TIMEOUT, RolloutFailure
from benchmax.tools import FunctionTool, ToolProvider, ToolSession, Toolset, tool

if TYPE_CHECKING:
    from benchmax.envs.shared_types import RolloutRequest

__all__ = [
    "RolloutTools",
    "checked_entries",
    "listed_tools",
    "open_declared_tools",
    "run_declared_tool",
]

logger = logging.getLogger("benchmax.envs.base.env")

_ACTIVE: ContextVar[RolloutTools | None] = ContextVar("benchmax_rollout_tools", default=None)
_WRAPPED: weakref.WeakKeyDictionary[Callable[..., Any], FunctionTool[..., Any]] = (
    weakref.WeakKeyDictionary()
)
_LISTING_ROLLOUT_ID = "benchmax.list_tools"
_SESSION_CLOSE_BOUND = 120.0
"""Seconds a provider's session may take to close before it is abandoned (logged): a
provider bounds its own close (``MCPServer``: seconds); this only catches one that hangs."""


class DuplicateToolName(EnvError, ValueError):
    """Two declared tools advertise the same name."""


def checked_entries(entries: object) -> tuple[FunctionTool[..., Any] | Toolset | ToolProvider, ...]:
    """``entries`` as a tuple of tools, toolsets and providers (plain typed functions made
    ``FunctionTool``s, once per function). Raises ``TypeError`` naming a wrong entry."""
    if isinstance(entries, str | bytes | Mapping) or not isinstance(entries, Sequence):
        raise TypeError(
            "tools must be a list of @tool functions, Toolsets and tool providers (MCPServer)"
        )
    checked: list[FunctionTool[..., Any] | Toolset | ToolProvider] = []
    for index, entry in enumerate(entries):
        if isinstance(entry, FunctionTool | Toolset):
            checked.append(entry)
        elif isinstance(entry, type) and issubclass(entry, Toolset):
            raise TypeError(
                f"tools[{index}] is the Toolset class {entry.__name__}; use an instance"
            )
        elif isinstance(entry, ToolProvider):
            checked.append(entry)
        elif callable(entry):
            wrapped = _WRAPPED.get(entry)
            if wrapped is None:
                wrapped = _WRAPPED[entry] = tool(entry)
            checked.append(wrapped)
        else:
            raise TypeError(
                f"tools[{index}] is a {type(entry).__name__}; use a @tool function, a Toolset "
                "or a tool provider (MCPServer)"
            )
    return tuple(checked)


@dataclass(frozen=True, slots=True)
class _Route:
    """Where calls to one advertised name go."""

    function: FunctionTool[..., Any] | None
    instance: Toolset | None
    session: ToolSession | None


class RolloutTools:
    """One rollout's declared tools: what is advertised and where each name goes."""

    def __init__(self, rollout_id: str) -> None:
        self.rollout_id = rollout_id
        self.specs: list[dict[str, Any]] = []
        self._routes: dict[str, _Route] = {}
        self._stack = AsyncExitStack()
        self._sessions: list[ToolSession] = []
        self._token: Token[RolloutTools | None] | None = None

    def _add(self, spec: Mapping[str, Any], route: _Route, origin: str) -> None:
        function = spec.get("function") if isinstance(spec, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str):
            raise TypeError(f"{origin} listed a tool without a name: {spec!r:.200}")
        if name in self._routes:
            raise DuplicateToolName(
                f"tool name {name!r} is declared twice in tools ({origin} offers it again); "
                "rename one (MCPServer takes a prefix)"
            )
        self._routes[name] = route
        self.specs.append(dict(spec))

    def knows(self, name: str) -> bool:
        """Whether ``name`` is one of this rollout's declared tools."""
        return name in self._routes

    async def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """Run declared tool ``name``; ``ValueError("Unknown tool: ...")`` for another name."""
        route = self._routes.get(name)
        if route is None:
            raise ValueError(f"Unknown tool: {name}")
        if route.function is not None:
            return await route.function.invoke(arguments, instance=route.instance)
        assert route.session is not None
        return await route.session.call_tool(name, dict(arguments))

    async def aclose(self, timeout: float | None = None) -> None:
        """Exit the toolsets' contexts (reverse order, bounded by ``timeout``), then close
        the sessions together (each bounded by its provider); errors are logged, never
        raised."""
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None
        try:
            try:
                async with asyncio.timeout(timeout):
                    await self._stack.aclose()
            finally:
                sessions, self._sessions = self._sessions, []
                await self._close_sessions(sessions)
        except Exception as error:
            logger.warning(
                "base.rollout.tools_close_failed rollout_id=%s: %s",
                self.rollout_id,
                error,
                exc_info=error,
            )

    async def _close_sessions(self, sessions: list[ToolSession]) -> None:
        if not sessions:
            return
        closes = [asyncio.ensure_future(session.aclose()) for session in reversed(sessions)]
        done, pending = await asyncio.wait(closes, timeout=_SESSION_CLOSE_BOUND)
        for task in pending:
            task.cancel()
            logger.warning(
                "base.rollout.tools_close_failed rollout_id=%s: a tool session did not close "
                "within %gs",
                self.rollout_id,
                _SESSION_CLOSE_BOUND,
            )
        for task in done:
            if not task.cancelled() and (error := task.exception()) is not None:
                logger.warning(
                    "base.rollout.tools_close_failed rollout_id=%s: %s",
                    self.rollout_id,
                    error,
                    exc_info=error,
                )


async def _bounded[T](awaitable: Awaitable[T], timeout: float | None, what: str) -> T:
    if timeout is None:
        return await awaitable
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            return await awaitable
    except TimeoutError as error:
        if deadline.expired():
            raise ToolTimedOut(what, timeout) from error
        raise


async def _fill(
    table: RolloutTools,
    entries: Sequence[FunctionTool[..., Any] | Toolset | ToolProvider],
    example: Any,
    timeout: float | None,
    enter: bool,
) -> None:
    rollout_id = table.rollout_id
    for entry in entries:
        if isinstance(entry, FunctionTool):
            table._add(entry.spec, _Route(entry, None, None), f"@tool {entry.name!r}")
        elif isinstance(entry, Toolset):
            origin = f"Toolset {type(entry).__name__}"
            twin = entry.for_rollout(rollout_id)
            if enter:
                await table._stack.enter_async_context(twin.rollout_context(rollout_id, example))
            for function in type(twin).function_tools():
                table._add(function.spec, _Route(function, twin, None), origin)
        else:
            origin = type(entry).__name__
            # Start-up is the provider's to bound (MCPServer: startup_timeout), never
            # tool_timeout: a server that takes 5 s to import must not fail every rollout
            # of an environment whose calls get 2 s. Listing is a call like the others.
            session = await entry.open_session(rollout_id)
            table._sessions.append(session)
            listed = await _bounded(session.list_tools(), timeout, origin)
            if not isinstance(listed, list):
                raise TypeError(f"{origin} session listed a {type(listed).__name__}, not a list")
            for spec in listed:
                table._add(spec, _Route(None, None, session), origin)


async def open_declared_tools(
    env: Any, request: RolloutRequest[Any], timeout: float | None
) -> tuple[RolloutTools | None, str | None]:
    """Open ``env.tools`` for ``request``'s rollout: ``(table, None)``, or ``(None, reason)``
    when a toolset or provider failed to open (``tool_error``, ``tool_timeout`` or a
    ``RolloutFailure``'s reason; logged). Declaration errors (a wrong entry, a name
    declared twice) raise, naming the ``tools`` hook."""
    with hook_errors(env, "tools"):
        entries = checked_entries(env.tools)
    rollout_id = request.rollout_id
    table = RolloutTools(rollout_id)
    try:
        with hook_errors(env, "tools"):
            await _fill(table, entries, request.example, timeout, enter=True)
    except DuplicateToolName:
        await table.aclose(timeout)
        raise
    except ToolTimedOut as error:
        await table.aclose(timeout)
        logger.error(
            "base.rollout.tool_failed rollout_id=%s termination_reason=tool_timeout: "
            "opening tools: %s",
            rollout_id,
            error,
        )
        return None, TOOL_TIMEOUT
    except RolloutFailure as failure:
        await table.aclose(timeout)
        logger.error(
            "base.rollout.tool_failed rollout_id=%s termination_reason=%s: opening tools: %s",
            rollout_id,
            failure.termination_reason,
            failure,
            exc_info=failure,
        )
        return None, failure.termination_reason
    except Exception as error:
        await table.aclose(timeout)
        logger.error(
            "base.rollout.tool_failed rollout_id=%s termination_reason=tool_error: "
            "opening tools: %s",
            rollout_id,
            error,
            exc_info=error,
        )
        return None, TOOL_ERROR
    except BaseException:
        await table.aclose(timeout)
        raise
    table._token = _ACTIVE.set(table)
    return table, None


async def listed_tools(env: Any) -> list[dict[str, Any]]:
    """``env.tools`` as OpenAI function tools: the running rollout's table, or outside a
    rollout a listing of their own (providers' sessions opened and closed for it)."""
    active = _ACTIVE.get()
    if active is not None:
        return list(active.specs)
    entries = checked_entries(env.tools)
    table = RolloutTools(_LISTING_ROLLOUT_ID)
    try:
        await _fill(table, entries, None, env.tool_timeout, enter=False)
    finally:
        await table.aclose(env.tool_timeout)
    return table.specs


async def run_declared_tool(rollout_id: str, name: str, arguments: Mapping[str, Any]) -> Any:
    """Run ``name`` from the running rollout's declared tools.

    Raises ``ValueError("Unknown tool: <name>")`` for a name they do not offer and
    ``RuntimeError`` outside the rollout ``rollout_id``.
    """
    active = _ACTIVE.get()
    if active is None or active.rollout_id != rollout_id:
        raise RuntimeError(
            f"declared tools run only inside their rollout (run_tool for {rollout_id!r} "
            "was called outside it)"
        )
    return await active.call(name, arguments)
