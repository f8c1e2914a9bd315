"""``MCPServer``: the tools of an MCP server (stdio subprocess or streamable HTTP) offered
to a ``BaseEnv`` rollout, through the official ``mcp`` SDK (``benchmax[mcp]``, 2.3+).

This module holds configuration only and never imports the SDK; the session machinery
(:mod:`benchmax.tools._mcp_connection`, :mod:`benchmax.tools._mcp_content`) is imported
when a session is first opened.
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from benchmax._value_checks import is_finite_number, is_int_at_least, is_non_empty_str
from benchmax.auth import ModelAuth, StaticBearerAuth
from benchmax.tools._errors import MCPServerError, ToolError

if TYPE_CHECKING:
    from benchmax.tools._mcp_connection import Connection, ConnectTarget
    from benchmax.tools._mcp_content import OfferedTool

__all__ = ["MCPServer"]

logger = logging.getLogger("benchmax.tools.mcp")

_PREFIX_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_LABEL_LIMIT = 120


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, weakref_slot=True)
class MCPServer:
    """An MCP tool server, as an entry of ``BaseEnv.tools`` (a ``ToolProvider``).

    Give either ``command`` (stdio: the server runs as a subprocess speaking MCP on its
    stdin/stdout) or ``url`` (streamable HTTP)::

        MCPServer(command=["python", "server.py"], env={"DATA_DIR": "/data"}, cwd="srv")
        MCPServer(url="https://tools.example.com/mcp", auth=InjectedAuth("tools"))

    * ``command`` (argv), ``env`` (variables added to the SDK's minimal inherited set:
      HOME, LOGNAME, PATH, SHELL, TERM, USER), ``cwd``; ``stderr``: ``"inherit"`` (the
      server's stderr is this process's) or ``"discard"``.
    * ``url`` (``http``/``https``) and ``auth``, any ``benchmax.auth`` type
      (``StaticBearerAuth``, ``InjectedAuth``...), asked for headers before every HTTP
      request with ``ModelRequestContext(base_url=url, model="mcp", rollout_id=...)``.
    * ``prefix``: put before every tool name (``prefix="fs_"`` offers ``read`` as
      ``fs_read``) when two providers' tools clash. Characters an OpenAI tool name cannot
      hold become ``_``.
    * ``shared``: ``False`` (default) gives each rollout its own session (for stdio its
      own server process), so no state leaks between rollouts; ``True`` gives every
      rollout on an event loop one session, opened on first use and kept until
      :meth:`aclose` or the loop's end.
    * ``startup_timeout`` (seconds, default 30) alone bounds starting and the MCP
      handshake (``BaseEnv``'s ``tool_timeout`` does not apply to it); listing the tools
      and each call are bounded by the environment's ``tool_timeout``. A call that
      outlives it is cancelled on the server (``notifications/cancelled``) and the
      session goes on.
    * ``retries`` (default 1): a call that loses its connection (or meets an internal
      server error) is repeated, on a new session when the old one is gone, only for
      tools the server marks ``readOnlyHint`` or ``idempotentHint``; otherwise the
      rollout ends as ``tool_error`` (:class:`MCPServerError`). Opening a session and
      listing tools are repeated the same way (both are safe to repeat), except after
      ``startup_timeout`` has run out.
    * ``name``: names the server in logs and errors (default: the command or URL).

    Results become tool messages: text -> text, images -> ``image_url`` parts,
    ``structuredContent`` (when there is no content) -> JSON; a result flagged
    ``isError`` reaches the model as a ``ToolError`` (its text is the tool message and
    the rollout goes on). ``env`` values, the bearer token of ``auth`` and a password in
    ``url`` are masked in ``repr``, logs and errors; like every value they are pickled
    with the environment (bundles). The value holds no live session, so it pickles.

    Raises ``ValueError``/``TypeError`` naming the field that is invalid.
    """

    command: Sequence[str] | None = None
    env: Mapping[str, str] | None = None
    cwd: str | os.PathLike[str] | None = None
    url: str | None = None
    auth: ModelAuth | None = None
    prefix: str = ""
    shared: bool = False
    startup_timeout: float = 30.0
    retries: int = 1
    stderr: Literal["inherit", "discard"] = "inherit"
    name: str | None = None

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError("MCPServer needs exactly one of command (stdio) or url (HTTP)")
        if self.command is not None:
            command = self.command
            if isinstance(command, str | bytes) or not isinstance(command, Sequence):
                raise TypeError("MCPServer command must be a sequence of strings (argv)")
            if not command or not all(isinstance(part, str) for part in command):
                raise ValueError("MCPServer command must be a non-empty list of strings")
            if not is_non_empty_str(command[0]):
                raise ValueError("MCPServer command[0] (the executable) must be non-empty")
            object.__setattr__(self, "command", tuple(command))
        if self.env is not None:
            if not isinstance(self.env, Mapping) or not all(
                isinstance(key, str) and isinstance(value, str) for key, value in self.env.items()
            ):
                raise TypeError("MCPServer env must map strings to strings")
            object.__setattr__(self, "env", dict(self.env))
        if self.cwd is not None:
            if not isinstance(self.cwd, str | os.PathLike):
                raise TypeError("MCPServer cwd must be a path")
            object.__setattr__(self, "cwd", os.fspath(self.cwd))
        if self.url is not None:
            self._check_url(self.url)
        elif self.auth is not None:
            raise ValueError("MCPServer auth applies to url servers only")
        if self.auth is not None and not isinstance(self.auth, ModelAuth):
            raise TypeError("MCPServer auth must be a benchmax.auth type (ModelAuth)")
        if self.command is None and (self.env is not None or self.cwd is not None):
            raise ValueError("MCPServer env and cwd apply to command servers only")
        if not isinstance(self.prefix, str) or not set(self.prefix) <= _PREFIX_CHARACTERS:
            raise ValueError("MCPServer prefix may hold only letters, digits, '_' and '-'")
        if not isinstance(self.shared, bool):
            raise TypeError("MCPServer shared must be True or False")
        if not (is_finite_number(self.startup_timeout) and self.startup_timeout > 0):
            raise ValueError("MCPServer startup_timeout must be a positive number of seconds")
        if not is_int_at_least(self.retries, 0):
            raise ValueError("MCPServer retries must be a non-negative integer")
        if self.stderr not in ("inherit", "discard"):
            raise ValueError("MCPServer stderr must be 'inherit' or 'discard'")
        if self.name is not None and not is_non_empty_str(self.name):
            raise ValueError("MCPServer name must be a non-empty string")

    @staticmethod
    def _check_url(url: object) -> None:
        if not isinstance(url, str):
            raise TypeError("MCPServer url must be a string")
        try:
            parts = urlsplit(url)
            valid = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:
            valid = False
        if not valid:
            raise ValueError("MCPServer url must be an http:// or https:// URL with a host")

    def __repr__(self) -> str:
        fields: list[str] = []
        if self.command is not None:
            fields.append(f"command={list(self.command)!r}")
        if self.env is not None:
            fields.append(f"env={dict.fromkeys(self.env, '***')!r}")
        if self.cwd is not None:
            fields.append(f"cwd={self.cwd!r}")
        if self.url is not None:
            fields.append(f"url={self._masked(self.url)!r}")
        if self.auth is not None:
            fields.append(f"auth={self.auth!r}")
        defaults = {"prefix": "", "shared": False, "startup_timeout": 30.0, "retries": 1}
        for key, default in (*defaults.items(), ("stderr", "inherit"), ("name", None)):
            value = getattr(self, key)
            if value != default:
                fields.append(f"{key}={value!r}")
        return f"MCPServer({', '.join(fields)})"

    @property
    def label(self) -> str:
        """How logs and errors name this server: ``name``, else the command or URL
        (secrets masked, at most 120 characters)."""
        if self.name is not None:
            return self.name
        if self.command is not None:  # paths shortened to their last part
            text = " ".join(
                os.path.basename(part) if os.sep in part else part for part in self.command
            )
        else:
            text = str(self.url)
        text = self._masked(text)
        return text if len(text) <= _LABEL_LIMIT else text[: _LABEL_LIMIT - 3] + "..."

    async def open_session(self, rollout_id: str) -> _MCPSession:
        """A session for rollout ``rollout_id`` (see the class docstring).

        Raises :class:`MCPServerError` when the server does not start or answer the
        handshake within ``startup_timeout``.
        """
        from benchmax.tools._mcp_connection import ConnectionLost

        if self.shared:
            holder = _shared_holder(self)
        else:
            holder = _Holder(self, rollout_id)
        try:
            await holder.connection()
        except ConnectionLost as error:
            raise MCPServerError(str(error)) from None
        return _MCPSession(self, holder, owned=not self.shared)

    async def aclose(self) -> None:
        """Close this server's shared session on the running event loop, if one is open
        (per-rollout sessions close with their rollouts)."""
        holders = _SHARED.get(asyncio.get_running_loop())
        holder = None if holders is None else holders.pop(self, None)
        if holder is not None:
            await holder.aclose()

    def _secrets(self) -> tuple[str, ...]:
        secrets = [value for value in (self.env or {}).values() if len(value) >= 4]
        if isinstance(self.auth, StaticBearerAuth):
            secrets.append(self.auth.token)
        if self.url is not None:
            try:
                password = urlsplit(self.url).password
            except ValueError:
                password = None
            if password:
                secrets.append(password)
        return tuple(sorted(secrets, key=len, reverse=True))

    def _masked(self, text: str) -> str:
        for secret in self._secrets():
            text = text.replace(secret, "***")
        return text

    def _target(self) -> ConnectTarget:
        from benchmax.tools._mcp_connection import ConnectTarget

        return ConnectTarget(
            label=self.label,
            command=None if self.command is None else tuple(self.command),
            env=self.env,
            cwd=None if self.cwd is None else os.fspath(self.cwd),
            stderr=self.stderr,
            url=self.url,
            auth=self.auth,
            secrets=self._secrets(),
        )


class _Holder:
    """The connection a session (or every rollout, when shared) calls through: opened on
    first use and opened again when the one before it was lost."""

    def __init__(self, server: MCPServer, rollout_id: str | None) -> None:
        self.target = server._target()
        self._rollout_id = rollout_id
        self._timeout = server.startup_timeout
        self._retries = server.retries
        self._current: Connection | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    async def connection(self) -> Connection:
        """The open connection, (re)opened if there is none or it was lost.

        Raises ``ConnectionLost`` when it cannot be opened or the holder is closed.
        """
        from benchmax.tools._mcp_connection import Connection, ConnectionLost, StartupTimedOut

        async with self._lock:
            current = self._current
            if current is not None and not current.lost:
                return current
            if self._closed:
                raise ConnectionLost(f"MCP server {self.target.label}: the session was closed")
            self._current = None
            if current is not None:
                await current.aclose()
            for attempt in range(1, self._retries + 2):
                try:
                    self._current = await Connection.open(
                        self.target, self._rollout_id, self._timeout
                    )
                    return self._current
                except StartupTimedOut:
                    raise
                except ConnectionLost as error:  # often transient (a reset connection)
                    if attempt > self._retries:
                        raise
                    logger.warning(
                        "mcp.start_retried server=%s attempt=%d: %s",
                        self.target.label,
                        attempt,
                        error,
                    )
            raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        """Close the connection (waiting until a stdio server has exited)."""
        self._closed = True
        async with self._lock:
            current, self._current = self._current, None
        if current is not None:
            await current.aclose()


_SHARED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[MCPServer, _Holder]] = (
    weakref.WeakKeyDictionary()
)


def _shared_holder(server: MCPServer) -> _Holder:
    holders = _SHARED.setdefault(asyncio.get_running_loop(), {})
    holder = holders.get(server)
    if holder is None:
        holder = holders[server] = _Holder(server, None)
    return holder


class _MCPSession:
    """One rollout's view of an MCP server: its tools, and calls routed to them."""

    def __init__(self, server: MCPServer, holder: _Holder, *, owned: bool) -> None:
        self._server = server
        self._holder = holder
        self._owned = owned
        self._offered: dict[str, OfferedTool] | None = None

    async def list_tools(self) -> list[dict[str, object]]:
        """The server's tools as OpenAI function tools, under their offered names.

        Raises :class:`MCPServerError` when the server fails to list them or two would
        share a name.
        """
        from benchmax.tools._mcp_connection import ConnectionLost, ProtocolFailure
        from benchmax.tools._mcp_content import offered_tools

        label = self._holder.target.label
        for attempt in range(1, self._server.retries + 2):  # listing is read-only
            try:
                tools = await (await self._holder.connection()).list_tools()
                self._offered = offered_tools(tools, self._server.prefix, label)
                return [offered.function for offered in self._offered.values()]
            except ConnectionLost as error:
                if attempt > self._server.retries:
                    raise MCPServerError(str(error)) from None
                logger.warning("mcp.list_retried server=%s attempt=%d: %s", label, attempt, error)
            except (ProtocolFailure, ValueError) as error:
                raise MCPServerError(str(error)) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def call_tool(self, name: str, arguments: dict[str, object]) -> Any:
        """Call the tool offered as ``name``; the result as tool-message content.

        Raises ``ToolError`` for a result flagged ``isError``, a name the server does not
        offer or arguments it refuses as invalid params (``-32602``), and
        :class:`MCPServerError` when the call fails otherwise.
        """
        from benchmax.tools._mcp_connection import ConnectionLost, ProtocolFailure
        from benchmax.tools._mcp_content import result_content

        if self._offered is None:
            await self.list_tools()
        assert self._offered is not None
        tool = self._offered.get(name)
        if tool is None:
            raise ToolError(f"Unknown tool: {name}")
        attempts = 1 + (self._server.retries if tool.retryable else 0)
        for attempt in range(1, attempts + 1):
            try:
                connection = await self._holder.connection()
                result = await connection.call_tool(tool.server_name, arguments)
            except (ConnectionLost, ProtocolFailure) as error:
                if isinstance(error, ProtocolFailure) and error.invalid_params:
                    raise ToolError(f"Invalid tool arguments: {error}") from None
                retryable = isinstance(error, ConnectionLost) or error.retryable
                if attempt == attempts or not retryable:
                    raise MCPServerError(str(error)) from None
                logger.warning(
                    "mcp.call_retried server=%s tool=%s attempt=%d: %s",
                    self._holder.target.label,
                    tool.server_name,
                    attempt,
                    error,
                )
                continue
            return result_content(result)
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        """Close a per-rollout session (a shared one stays open for other rollouts)."""
        if self._owned:
            await self._holder.aclose()
