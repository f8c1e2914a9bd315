"""The OpenEnv protocol (openenv-core 0.3 ``env_server/http_server.py`` and ``types.py``).

HTTP: ``POST /reset`` (``ResetRequest``: ``seed``, ``episode_id``, and here
``example_id``, ``record_tokens``) and ``POST /step`` (``StepRequest``: ``action``,
``timeout_s``, ``request_id``, and here ``episode_id``: openenv-core's own HTTP routes
are stateless, a served rollout is not) answer ``{"observation", "reward", "done"}``;
``GET /health``, ``/metadata``, ``/schema``, ``/state`` (``?episode_id=``). Errors are
FastAPI's: ``{"detail": ...}`` with 422 for a request that does not validate, 404 for
an unknown episode, 409 for an episode that takes no step now (one step at a time: a
second concurrent ``/step`` is refused), 503 at capacity. A step repeated with its
``request_id`` answers the first reply (``StepReplies``); a reset naming a live HTTP
episode's id resets it in its slot.

A step's action is the policy's message, or one of openenv-core's MCP actions
(``{"type": "list_tools"}``, ``{"type": "call_tool", "tool_name", "arguments"}``, what
its ``MCPToolClient`` sends in its default mode): their observations are openenv-core's
``ListToolsObservation`` and ``CallToolObservation`` (``error.error_type``
``tool_not_found`` for a tool the episode was not offered).

WebSocket ``/ws``: one session per connection (``CAPACITY_REACHED`` past
``max_sessions``); messages ``reset``, ``step``, ``state``, ``close`` and ``mcp``;
replies ``observation``, ``state``, ``mcp`` or ``error`` with OpenEnv's ``WSErrorCode``
values (``INVALID_JSON``, ``UNKNOWN_TYPE``, ``VALIDATION_ERROR``, ``EXECUTION_ERROR``,
``CAPACITY_REACHED``, ``SESSION_ERROR``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, cast

import orjson
from pydantic import BaseModel, ConfigDict, Field

import benchmax
from benchmax.serving._actions import PolicyAction, ValidationError, action_schema
from benchmax.serving._episode import Episode, EpisodeError, Turn
from benchmax.serving._errors import ServingError
from benchmax.serving._mcp import (
    PARSE_ERROR,
    SERVER_ERROR,
    McpHandler,
    UnknownTool,
    jsonrpc_error,
)
from benchmax.serving._sessions import (
    MAX_ID_LENGTH,
    CapacityReached,
    ResetOptions,
    Session,
    Sessions,
    UnknownExample,
)
from benchmax.serving._step_replies import StepReplies
from benchmax.serving._websocket import refuse, serve_messages
from benchmax.serving._wire import (
    BodyTimeout,
    BodyTooLarge,
    WebSocketLink,
    body_refusal,
    decode_json,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from aiohttp import web

__all__ = ["OpenEnvRoutes", "observation_data"]

logger = logging.getLogger("benchmax.serving")

MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class ServedObservation(BaseModel):
    """What ``observation`` holds after a reset or a step (``/schema``)."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    example_id: str
    step_count: int
    messages: list[dict[str, Any]] = Field(
        description="Messages since the last action (at reset: the whole prompt): tool "
        "results, a simulated user's turn."
    )
    tools: list[dict[str, Any]] = Field(description="The tools advertised with this call.")
    sampling_args: dict[str, Any] = Field(
        description="The model call's other body fields (temperature, max_tokens...)."
    )
    rewards: dict[str, float] | None = Field(default=None, description="When done.")
    termination_reason: str | None = Field(default=None, description="When done.")
    trajectory: dict[str, Any] | None = Field(
        default=None, description="When done: the rollout record (tokens included)."
    )


class ServedState(BaseModel):
    """What ``/state`` returns (OpenEnv's ``State`` plus this episode's facts)."""

    model_config = ConfigDict(extra="allow")

    episode_id: str | None = None
    step_count: int = 0
    example_id: str | None = None
    awaiting_action: bool = False
    done: bool = False


def observation_data(episode: Episode, turn: Turn) -> dict[str, object]:
    """``{"observation", "reward", "done"}`` for a turn of ``episode``."""
    observation: dict[str, object] = {
        "episode_id": episode.rollout_id,
        "example_id": episode.example.id,
        "step_count": episode.step_count,
        "messages": turn.messages,
        "tools": turn.tools,
        "sampling_args": turn.sampling_args,
    }
    if turn.done:
        observation["rewards"] = turn.rewards
        observation["termination_reason"] = turn.termination_reason
        observation["trajectory"] = turn.trajectory
    return {"observation": observation, "reward": turn.reward, "done": turn.done}


def _state(episode: Episode | None) -> dict[str, object]:
    if episode is None:
        return ServedState().model_dump()
    return ServedState(
        episode_id=episode.rollout_id,
        step_count=episode.step_count,
        example_id=episode.example.id,
        awaiting_action=episode.awaiting_action,
        done=episode.done,
    ).model_dump()


class _Refused(ServingError):
    """A request answered with an HTTP error (``status``, ``detail``) or a WS error code."""

    def __init__(self, status: int, code: str, detail: object) -> None:
        super().__init__(str(detail))
        self.status = status
        self.code = code
        self.detail = detail


def _validation(error: ValidationError | ValueError) -> _Refused:
    if isinstance(error, ValidationError):
        errors = error.errors(include_url=False, include_context=False)
        return _Refused(422, "VALIDATION_ERROR", orjson.loads(orjson.dumps(errors, default=str)))
    return _Refused(422, "VALIDATION_ERROR", str(error))


class OpenEnvRoutes:
    """The OpenEnv routes over one :class:`Sessions`."""

    def __init__(self, sessions: Sessions, mcp: McpHandler) -> None:
        self.sessions = sessions
        self.mcp = mcp
        self.wire = sessions.wire
        self.replies = StepReplies()

    def add_to(self, app: web.Application) -> None:
        app.router.add_get("/health", self.health)
        app.router.add_get("/metadata", self.metadata)
        app.router.add_get("/schema", self.schema)
        app.router.add_get("/state", self.state)
        app.router.add_post("/reset", self.reset)
        app.router.add_post("/step", self.step)
        app.router.add_get("/ws", self.websocket)
        app.router.add_post("/mcp", self.mcp_http)
        app.router.add_get("/mcp", self.mcp_websocket)

    # --- HTTP ---------------------------------------------------------------

    async def health(self, request: web.Request) -> web.StreamResponse:
        return self.wire.json_response({"status": "healthy"})

    async def metadata(self, request: web.Request) -> web.StreamResponse:
        env_class = type(self.sessions.env)
        doc = (env_class.__doc__ or "").strip().splitlines()
        return self.wire.json_response(
            {
                "name": env_class.__name__,
                "description": doc[0] if doc else f"benchmax environment {env_class.__name__}",
                "readme_content": None,
                "version": benchmax.__version__,
                "author": None,
                "documentation_url": None,
            }
        )

    async def schema(self, request: web.Request) -> web.StreamResponse:
        return self.wire.json_response(
            {
                "action": action_schema(),
                "observation": ServedObservation.model_json_schema(),
                "state": ServedState.model_json_schema(),
            }
        )

    async def state(self, request: web.Request) -> web.StreamResponse:
        episode_id = request.query.get("episode_id")
        if episode_id is None:
            return self.wire.json_response(_state(None))
        if not episode_id or len(episode_id) > MAX_ID_LENGTH:
            return self._http_error(
                422,
                f"episode_id must be a non-empty string of at most {MAX_ID_LENGTH} characters",
            )
        session = self.sessions.by_episode.get(episode_id)
        if session is None or session.episode is None:
            return self._http_error(404, f"no live episode {episode_id!r}")
        return self.wire.json_response(_state(session.episode))

    async def reset(self, request: web.Request) -> web.StreamResponse:
        try:
            session, episode, turn = await self._reset_turn(request)
        except _Refused as refused:
            return self._http_error(refused.status, refused.detail)
        except (BodyTimeout, BodyTooLarge) as error:
            return body_refusal(self.wire, error)
        if turn.done:
            await session.release()
        return self.wire.json_response(observation_data(episode, turn))

    async def step(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        try:
            data = await self._body(request)
            action, timeout, request_id = _step_fields(data)
            episode_id = data.get("episode_id")
            if not isinstance(episode_id, str) or not episode_id:
                raise _Refused(
                    422,
                    "VALIDATION_ERROR",
                    "episode_id is required: the observation of /reset names it",
                )
        except _Refused as refused:
            return self._http_error(refused.status, refused.detail)
        except (BodyTimeout, BodyTooLarge) as error:
            return body_refusal(self.wire, error)

        async def run() -> tuple[tuple[int, bytes], bool]:
            return await self._step_reply(episode_id, action, timeout)

        if request_id is None:
            (status, body), _applied = await run()
        else:
            status, body = await self.replies.answer((episode_id, request_id), run)
        return web.Response(status=status, body=body, content_type="application/json")

    async def _reset_turn(self, request: web.Request) -> tuple[Session, Episode, Turn]:
        """Reset an episode: a new session, or the HTTP session already holding the
        named ``episode_id`` (a client that resets it again after giving it up)."""
        options = _reset_options(await self._body(request, allow_empty=True))
        held = self.sessions.by_episode.get(options.episode_id or "")
        if held is not None:
            if held.channel != "http":
                raise _Refused(
                    409,
                    "EXECUTION_ERROR",
                    f"episode_id {options.episode_id!r} is in use by a {held.channel} session",
                )
            if held.stepping:
                raise _Refused(
                    409, "EXECUTION_ERROR", f"episode {options.episode_id!r} is answering a step"
                )
            session = held
        else:
            try:
                session = self.sessions.open("http")
            except CapacityReached as error:
                raise _Refused(503, "CAPACITY_REACHED", str(error)) from None
        session.stepping = True
        try:
            episode, turn = await _reset(session, options)
        except BaseException:
            await asyncio.shield(session.release())
            raise
        finally:
            session.stepping = False
        self.replies.forget_episode(episode.rollout_id)
        return session, episode, turn

    async def _step_reply(
        self, episode_id: str, action: dict[str, object], timeout: float | None
    ) -> tuple[tuple[int, bytes], bool]:
        """The status and body answering one step of ``episode_id``, and whether the
        action was applied (a retry with its ``request_id`` gets the same answer)."""
        session = self.sessions.by_episode.get(episode_id)
        if session is None or session.episode is None:
            return self._error_reply(404, f"no live episode {episode_id!r}"), False
        if session.stepping:
            detail = f"episode {episode_id!r} is answering another step: one step at a time"
            return self._error_reply(409, detail), False
        session.stepping = True
        try:
            data = await self._act(session, action, timeout)
        except _Refused as refused:
            applied = refused.status not in (404, 409, 422)
            return self._error_reply(refused.status, refused.detail), applied
        except asyncio.CancelledError:  # the client went away mid-step
            await asyncio.shield(session.release())
            raise
        finally:
            session.stepping = False
        if data["done"]:
            await session.release()
        return (200, self.wire.encode(data)), True

    async def _act(
        self, session: Session, data: dict[str, object], timeout: float | None
    ) -> dict[str, object]:
        """``{"observation", "reward", "done"}`` for one step's action: the policy's
        message, or openenv-core's MCP actions (``list_tools``, ``call_tool``)."""
        match data.get("type"):
            case "list_tools":
                tools = [
                    {
                        "name": spec["name"],
                        "description": spec["description"],
                        "input_schema": spec["inputSchema"],
                    }
                    for spec in await self.mcp.tool_specs(session)
                ]
                observation = {"tools": tools, "metadata": {}}
                return {"observation": observation, "reward": None, "done": False}
            case "call_tool":
                return await self._call_tool(session, data, timeout)
        episode = session.episode
        if episode is None:
            raise _Refused(409, "EXECUTION_ERROR", "no episode: reset first")
        turn = await _step(session, episode, data, timeout)
        return observation_data(episode, turn)

    async def _call_tool(
        self, session: Session, data: dict[str, object], timeout: float | None
    ) -> dict[str, object]:
        """openenv-core's ``CallToolAction``: one turn calling that tool. The episode
        starts with the next example when the session has none (``MCPToolClient`` does
        not reset); a tool the episode was not offered answers ``tool_not_found``."""
        name = data.get("tool_name")
        arguments = data.get("arguments", {})
        if not isinstance(name, str) or not name:
            raise _Refused(422, "VALIDATION_ERROR", "call_tool needs a tool_name string")
        if not isinstance(arguments, dict):
            raise _Refused(422, "VALIDATION_ERROR", "call_tool arguments must be an object")
        if session.episode is None:
            await _reset(session, ResetOptions())
        episode = session.episode
        assert episode is not None
        try:
            turn, result = await _bounded(
                session, timeout, self.mcp.run_tool(session, name, arguments)
            )
        except UnknownTool as error:
            failure = {"error_type": "tool_not_found", "message": str(error)}
            observation = {"tool_name": name, "result": None, "error": failure, "metadata": {}}
            return {"observation": observation, "reward": None, "done": False}
        session.touch()
        served = observation_data(episode, turn)
        fields = cast("dict[str, object]", served["observation"])
        called: dict[str, object] = {
            "tool_name": name,
            "result": result,
            "error": None,
            "metadata": {},
            **{key: value for key, value in fields.items() if key != "tools"},
        }
        return {"observation": called, "reward": served["reward"], "done": served["done"]}

    async def mcp_http(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        try:
            raw = await self.wire.read_body(request)
        except (BodyTimeout, BodyTooLarge) as error:
            return body_refusal(self.wire, error)
        try:
            data = decode_json(raw)
        except orjson.JSONDecodeError:
            return self.wire.json_response(jsonrpc_error(PARSE_ERROR, "Parse error"))
        answer = await self.mcp.handle(data)
        if answer is None:  # a notification: accepted, no body
            return web.Response(status=202)
        return self.wire.json_response(answer)

    # --- WebSocket ------------------------------------------------------------

    async def _accept(self, request: web.Request) -> WebSocketLink:
        from aiohttp import web

        ws = web.WebSocketResponse(max_msg_size=MAX_MESSAGE_BYTES, timeout=self.wire.close_timeout)
        await ws.prepare(request)
        return WebSocketLink(ws, request, self.wire)

    async def mcp_websocket(self, request: web.Request) -> web.StreamResponse:
        """JSON-RPC over a WebSocket: the connection is one session, whose episode
        starts (with the next example) at its first ``tools/call``."""
        link = await self._accept(request)
        try:
            session = self.sessions.open("websocket")
        except CapacityReached as error:
            data = {"active_sessions": error.active, "max_sessions": error.maximum}
            await refuse(link, jsonrpc_error(SERVER_ERROR, str(error), data=data))
            return link.ws
        session.on_expire = link.close_soon

        async def handle(raw: str | bytes) -> tuple[object, bool]:
            session.touch()
            try:
                data = decode_json(raw)
            except orjson.JSONDecodeError as error:
                return jsonrpc_error(PARSE_ERROR, f"Parse error: {error}"), False
            if (
                session.episode is None
                and isinstance(data, dict)
                and data.get("method") == "tools/call"
            ):
                with contextlib.suppress(UnknownExample, EpisodeError):
                    await session.reset(ResetOptions())
            return await self.mcp.handle(data, session=session), False

        try:
            await serve_messages(link, handle)
        finally:
            await session.release()
            await link.close()
        return link.ws

    async def websocket(self, request: web.Request) -> web.StreamResponse:
        link = await self._accept(request)
        try:
            session = self.sessions.open("websocket")
        except CapacityReached as error:
            refusal = _ws_error(
                "CAPACITY_REACHED",
                str(error),
                active_sessions=error.active,
                max_sessions=error.maximum,
            )
            await refuse(link, refusal)
            return link.ws
        session.on_expire = link.close_soon
        try:
            await serve_messages(link, lambda raw: self._ws_message(session, raw))
        finally:
            await session.release()
            await link.close()
        return link.ws

    async def _ws_message(self, session: Session, raw: str | bytes) -> tuple[object, bool]:
        session.touch()
        try:
            message = decode_json(raw)
        except orjson.JSONDecodeError as error:
            return _ws_error("INVALID_JSON", f"Invalid JSON: {error}"), False
        if not isinstance(message, dict):
            return _ws_error("INVALID_JSON", "a message must be a JSON object"), False
        kind = message.get("type", "")
        unknown = set(message) - {"type", "data"}
        try:
            if unknown and kind in ("reset", "step", "state", "close", "mcp"):
                raise _Refused(422, "VALIDATION_ERROR", f"unknown fields: {sorted(unknown)}")
            data = message.get("data", {})
            match kind:
                case "reset":
                    if not isinstance(data, dict):
                        raise _Refused(422, "VALIDATION_ERROR", "data must be an object")
                    episode, turn = await _reset(session, _reset_options(data))
                    return {"type": "observation", "data": observation_data(episode, turn)}, False
                case "step":
                    if not isinstance(data, dict):
                        raise _Refused(422, "VALIDATION_ERROR", "data must be the action object")
                    answer = await self._act(session, data, None)
                    return {"type": "observation", "data": answer}, False
                case "state":
                    return {"type": "state", "data": _state(session.episode)}, False
                case "close":
                    return None, True
                case "mcp":
                    if not isinstance(data, dict):
                        raise _Refused(422, "VALIDATION_ERROR", "data must be a JSON-RPC object")
                    rpc_answer = await self.mcp.handle(data, session=session)
                    if rpc_answer is None:  # a notification: nothing is sent back
                        return None, False
                    return {"type": "mcp", "data": rpc_answer}, False
                case _:
                    return _ws_error("UNKNOWN_TYPE", f"Unknown message type: {kind}"), False
        except _Refused as refused:
            if refused.code == "VALIDATION_ERROR":
                return (
                    _ws_error("VALIDATION_ERROR", "Invalid message", errors=refused.detail),
                    False,
                )
            return _ws_error(refused.code, str(refused.detail)), False

    # --- bodies and errors ------------------------------------------------------

    async def _body(self, request: web.Request, *, allow_empty: bool = False) -> dict[str, object]:
        raw = await self.wire.read_body(request)
        if not raw.strip() and allow_empty:
            return {}
        try:
            data = decode_json(raw)
        except orjson.JSONDecodeError as error:
            raise _Refused(422, "INVALID_JSON", f"the request body is not JSON: {error}") from None
        if not isinstance(data, dict):
            raise _Refused(422, "VALIDATION_ERROR", "the request body must be a JSON object")
        return data

    def _http_error(self, status: int, detail: object) -> web.StreamResponse:
        return self.wire.json_response({"detail": detail}, status)

    def _error_reply(self, status: int, detail: object) -> tuple[int, bytes]:
        return status, self.wire.encode({"detail": detail})


async def _reset(session: Session, options: ResetOptions) -> tuple[Episode, Turn]:
    try:
        return await session.reset(options)
    except UnknownExample as error:
        raise _Refused(422, "VALIDATION_ERROR", str(error)) from None
    except EpisodeError as error:
        raise _Refused(500, "EXECUTION_ERROR", str(error)) from None


async def _step(
    session: Session, episode: Episode, data: dict[str, object], timeout: float | None
) -> Turn:
    try:
        action = PolicyAction.model_validate(data)
    except ValidationError as error:
        raise _validation(error) from None
    session.touch()
    turn = await _bounded(session, timeout, episode.act(action))
    session.touch()
    return turn


async def _bounded[T](session: Session, timeout: float | None, step: Awaitable[T]) -> T:
    """``step``'s result, within ``timeout`` seconds: past it the episode is closed and the
    request answered 504; an ``EpisodeError`` answers 500 (episode broken) or 409."""
    try:
        async with asyncio.timeout(timeout):
            return await step
    except TimeoutError:
        await session.close_episode()
        raise _Refused(
            504,
            "EXECUTION_ERROR",
            f"the step took longer than timeout_s={timeout}; the episode was closed",
        ) from None
    except EpisodeError as error:
        raise _Refused(500 if error.broken else 409, "EXECUTION_ERROR", str(error)) from None


def _reset_options(data: dict[str, object]) -> ResetOptions:
    try:
        return ResetOptions.from_json(data)
    except ValueError as error:
        raise _validation(error) from None


def _step_fields(
    data: dict[str, object],
) -> tuple[dict[str, object], float | None, str | None]:
    action = data.get("action")
    if not isinstance(action, dict):
        raise _Refused(422, "VALIDATION_ERROR", "action is required and must be an object")
    timeout = data.get("timeout_s")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
    ):
        raise _Refused(422, "VALIDATION_ERROR", "timeout_s must be a positive number")
    request_id = data.get("request_id")
    if request_id is not None and (
        not isinstance(request_id, str) or not request_id or len(request_id) > MAX_ID_LENGTH
    ):
        raise _Refused(
            422,
            "VALIDATION_ERROR",
            f"request_id must be a non-empty string of at most {MAX_ID_LENGTH} characters",
        )
    return action, None if timeout is None else float(timeout), request_id


def _ws_error(code: str, message: str, **extra: object) -> dict[str, object]:
    return {"type": "error", "data": {"message": message, "code": code, **extra}}
