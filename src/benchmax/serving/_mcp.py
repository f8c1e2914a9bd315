"""Tools over MCP JSON-RPC 2.0 (``/mcp``, and ``mcp`` messages on ``/ws``).

Methods: ``initialize``, ``ping``, ``tools/list`` (MCP tool specs: ``name``,
``description``, ``inputSchema``), ``tools/call`` and OpenEnv's session methods
``openenv/session/create`` (a new episode; ``params`` as a reset's) and
``openenv/session/close``. A ``tools/call`` is one turn of the session's episode: the
policy's assistant message calling that one tool, run by the environment under its own
limits (``max_tool_calls``, ``max_turns``), so it needs a session (``session_id``, or
the WebSocket's). Errors use JSON-RPC's codes (-32700 parse error, -32600 invalid
request, -32601 method not found, -32602 invalid params and, as MCP's spec says, an
unknown tool, -32603 internal error, -32000 server error: capacity, or a step already
running in the episode).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence

from benchmax.envs import BaseEnv
from benchmax.serving._actions import AssistantMessage, PolicyAction
from benchmax.serving._episode import EpisodeError, Turn
from benchmax.serving._errors import ServingError
from benchmax.serving._sessions import (
    CapacityReached,
    ResetOptions,
    Session,
    Sessions,
    UnknownExample,
)

__all__ = ["McpHandler", "UnknownTool", "jsonrpc_error"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_ERROR = -32000

PROTOCOL_VERSION = "2025-06-18"
_CALL_IDS = itertools.count(1)


def jsonrpc_error(
    code: int, message: str, request_id: object = None, data: object = None
) -> dict[str, object]:
    error: dict[str, object] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _result(result: object, request_id: object) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


class _RpcError(ServingError):
    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data


class UnknownTool(ServingError):
    """A tool call named a tool the episode was not offered."""


class McpHandler:
    """Answers JSON-RPC requests about one server's tools and sessions."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

    async def handle(
        self, request: object, *, session: Session | None = None
    ) -> dict[str, object] | None:
        """The JSON-RPC response to one decoded request (never raises); ``None`` for a
        valid notification (a request with no ``id`` member), which JSON-RPC 2.0 answers
        with nothing. An invalid request is answered even without an ``id``."""
        if not isinstance(request, dict):
            return jsonrpc_error(INVALID_REQUEST, "a JSON-RPC request must be an object")
        request_id = request.get("id")
        if not isinstance(request_id, str | int | None) or isinstance(request_id, bool):
            return jsonrpc_error(INVALID_REQUEST, "id must be a string, a number or null")
        unknown = set(request) - {"jsonrpc", "method", "params", "id"}
        method = request.get("method")
        params = request.get("params", {})
        if request.get("jsonrpc") != "2.0" or unknown or not isinstance(method, str):
            return jsonrpc_error(
                INVALID_REQUEST,
                "Invalid Request: needs jsonrpc '2.0' and a method name"
                + (f"; unknown fields {sorted(unknown)}" if unknown else ""),
                request_id,
            )
        if not isinstance(params, dict):
            return jsonrpc_error(INVALID_PARAMS, "Params must be an object", request_id)
        try:
            answer = _result(await self._call(method, params, session), request_id)
        except _RpcError as error:
            answer = jsonrpc_error(error.code, str(error), request_id, error.data)
        return answer if "id" in request else None

    async def _call(
        self, method: str, params: dict[str, object], session: Session | None
    ) -> object:
        match method:
            case "initialize":
                return {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": type(self.sessions.env).__name__, "version": "1"},
                }
            case "ping":
                return {}
            case "tools/list":
                session = self._session(params, session, needed=False)
                return {"tools": await self.tool_specs(session)}
            case "tools/call":
                return await self._call_tool(params, self._session(params, session, needed=True))
            case "openenv/session/create":
                return await self._create(params)
            case "openenv/session/close":
                return await self._close(params, session)
            case _:
                raise _RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _session(
        self, params: dict[str, object], session: Session | None, *, needed: bool
    ) -> Session | None:
        session_id = params.get("session_id")
        if session_id is None:
            if needed and session is None:
                raise _RpcError(
                    INVALID_PARAMS,
                    "tools/call runs in an episode: pass session_id (from "
                    "openenv/session/create or a reset's episode_id)",
                )
            return session
        found = self.sessions.by_episode.get(session_id) if isinstance(session_id, str) else None
        if found is None:
            raise _RpcError(INVALID_PARAMS, f"Unknown session_id: {session_id}")
        return found

    async def tool_specs(self, session: Session | None) -> list[dict[str, object]]:
        """MCP tool specs (``name``, ``description``, ``inputSchema``): those advertised
        to the session's episode at its last model call, else the environment's."""
        specs: Sequence[object]
        if session is not None and session.episode is not None and session.episode.tools:
            specs = session.episode.tools
        elif isinstance(self.sessions.env, BaseEnv):
            specs = list(await self.sessions.env.list_tools())
        else:
            specs = []
        tools = []
        for spec in specs:
            function = spec.get("function") if isinstance(spec, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                tools.append(
                    {
                        "name": function["name"],
                        "description": function.get("description") or "",
                        "inputSchema": function.get("parameters") or {"type": "object"},
                    }
                )
        return tools

    async def run_tool(
        self, session: Session, name: str, arguments: dict[str, object]
    ) -> tuple[Turn, dict[str, object]]:
        """One turn of the session's episode calling tool ``name``: the turn, and the
        MCP ``CallToolResult`` (``content``, ``isError``, and ``data``: the result text).

        Raises ``UnknownTool`` (nothing is applied) when the episode was not offered
        ``name``, ``EpisodeError`` when the episode takes no step now.
        """
        episode = session.episode
        if episode is None:
            raise EpisodeError("the session has no episode: reset first")
        offered = {spec["name"] for spec in await self.tool_specs(session)}
        if name not in offered:
            listed = ", ".join(sorted(str(n) for n in offered)) or "none"
            raise UnknownTool(f"Unknown tool: {name} (tools: {listed})")
        call_id = f"mcp_{next(_CALL_IDS)}"
        call: dict[str, object] = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        action = PolicyAction(
            message=AssistantMessage(role="assistant", content=None, tool_calls=[call])
        )
        session.touch()
        turn = await episode.act(action)
        replies = [m for m in turn.messages if m.get("role") == "tool"]
        reply = next((m for m in replies if m.get("tool_call_id") == call_id), None)
        if reply is None and replies:
            reply = replies[0]
        if reply is None:
            reason = turn.termination_reason or "no tool result"
            text = f"the episode ended ({reason}) without running the tool"
            return turn, {
                "content": [{"type": "text", "text": text}],
                "isError": True,
                "data": text,
            }
        content = reply.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        return turn, {"content": [{"type": "text", "text": text}], "isError": False, "data": text}

    async def _call_tool(self, params: dict[str, object], session: Session | None) -> object:
        name = params.get("name")
        arguments = params.get("arguments", {})
        if not isinstance(name, str) or not name:
            raise _RpcError(INVALID_PARAMS, "Missing 'name' in params")
        if not isinstance(arguments, dict):
            raise _RpcError(INVALID_PARAMS, "'arguments' must be an object")
        assert session is not None
        if session.stepping or (session.episode is not None and session.episode.busy):
            raise _RpcError(SERVER_ERROR, "the episode is already running a step")
        try:
            _turn, result = await self.run_tool(session, name, arguments)
        except UnknownTool as error:
            raise _RpcError(INVALID_PARAMS, str(error)) from None
        except EpisodeError as error:
            raise _RpcError(INTERNAL_ERROR, str(error)) from None
        return result

    async def _create(self, params: dict[str, object]) -> object:
        try:
            options = ResetOptions.from_json(params)
        except ValueError as error:
            raise _RpcError(INVALID_PARAMS, str(error)) from None
        try:
            session = self.sessions.open("mcp")
        except CapacityReached as error:
            raise _RpcError(
                SERVER_ERROR,
                str(error),
                {"active_sessions": error.active, "max_sessions": error.maximum},
            ) from None
        try:
            episode, _turn = await session.reset(options)
        except (UnknownExample, EpisodeError) as error:
            await session.release()
            raise _RpcError(INVALID_PARAMS, str(error)) from None
        except BaseException:
            await session.release()
            raise
        return {"session_id": episode.rollout_id}

    async def _close(self, params: dict[str, object], current: Session | None) -> object:
        session_id = params.get("session_id")
        if session_id is None:
            raise _RpcError(INVALID_PARAMS, "Invalid params - 'session_id' is required")
        if not isinstance(session_id, str) or not session_id:
            raise _RpcError(
                INVALID_PARAMS, "Invalid params - 'session_id' must be a non-empty string"
            )
        session = self.sessions.by_episode.get(session_id)
        if session is None:
            raise _RpcError(INVALID_PARAMS, f"Unknown session_id: {session_id}")
        if session is current:
            raise _RpcError(
                INVALID_REQUEST, "Cannot close active WebSocket-managed session via MCP method"
            )
        await session.release()
        return {"session_id": session_id, "closed": True}
