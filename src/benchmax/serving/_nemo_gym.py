"""The NeMo-Gym resources-server protocol (nemo-gym 0.4-0.7 ``base_resources_server.py``).

A NeMo-Gym agent seeds a session, calls tools through the resources server while its
model works, then asks ``/verify`` for the reward:

- ``POST /seed_session``: the data row (``responses_create_params`` plus, here,
  ``example_id``; or ``seed``), or nemo-gym 0.7's ``ResourcesSeedSessionRequest``
  (``resources_session_id``, ``episode_id``, ``task_id`` = the example id,
  ``task_data``). Starts the episode (a benchmax rollout whose model is the agent) and
  sets the ``benchmax_session`` cookie, which the agent sends back with every call.
- ``POST /{tool}``: the tool's JSON arguments; one turn of the episode whose assistant
  message calls that tool; the body of the answer is the tool's result.
- ``POST /verify``: ``BaseVerifyRequest`` (``responses_create_params``, ``response``);
  the response's final assistant message (its text and any calls after the last tool
  output) ends the episode, and the answer is the request plus ``reward`` (the scalar
  of the environment's ``reward_weights``), ``reward_components`` (the reward map, each
  also top level), ``termination_reason`` and ``mask_sample`` (an operational failure:
  not a measurement of the policy).
- ``POST /close_session``, ``POST /aggregate_metrics``, ``GET /reverify_mode``.
- ``GET /examples``: the split as NeMo-Gym data rows (JSON lines), for the agent's
  dataset file.

Errors are FastAPI's ``{"detail": ...}`` (400 a bad body or a missing session, 404 an
unknown tool, 503 at capacity).
"""

from __future__ import annotations

import json
import logging
import math
from typing import TYPE_CHECKING

import orjson

from benchmax._vocabulary import TRAINABLE_REASONS
from benchmax.envs import BaseEnv
from benchmax.serving._actions import AssistantMessage, PolicyAction, ValidationError
from benchmax.serving._episode import EpisodeError, Turn
from benchmax.serving._errors import ServingError
from benchmax.serving._responses import (
    final_assistant_message,
    responses_input,
    responses_tools,
)
from benchmax.serving._sessions import (
    MAX_ID_LENGTH,
    CapacityReached,
    ResetOptions,
    Session,
    Sessions,
    UnknownExample,
)
from benchmax.serving._wire import (
    BodyTimeout,
    BodyTooLarge,
    body_refusal,
    decode_json,
    encode_json,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from aiohttp import web

    type _Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

__all__ = ["SESSION_COOKIE", "NemoGymRoutes"]

logger = logging.getLogger("benchmax.serving")

SESSION_COOKIE = "benchmax_session"
UNFINISHED = "unfinished"
"""The ``termination_reason`` of a verify after which the environment wanted another
turn (a simulated user answered, or the final calls ran): NeMo-Gym's agent has ended."""

_RESERVED = frozenset(
    {
        "seed_session",
        "verify",
        "close_session",
        "aggregate_metrics",
        "reverify_mode",
        "examples",
        "mcp",
    }
)
_RESPONSE_FIELDS = frozenset(
    {
        "reward",
        "reward_components",
        "termination_reason",
        "mask_sample",
        "failure_kind",
        "failure_reason",
        "response",
        "responses_create_params",
    }
)


class _Refused(ServingError):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status


class NemoGymRoutes:
    """The resources-server routes over one :class:`Sessions`."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions
        self.wire = sessions.wire
        self._by_resources_id: dict[str, Session] = {}

    def add_to(self, app: web.Application) -> None:
        app.router.add_post("/seed_session", self._guarded(self.seed_session))
        app.router.add_post("/verify", self._guarded(self.verify))
        app.router.add_post("/close_session", self._guarded(self.close_session))
        app.router.add_post("/aggregate_metrics", self._guarded(self.aggregate_metrics))
        app.router.add_get("/reverify_mode", self.reverify_mode)
        app.router.add_get("/examples", self.examples)
        app.router.add_post("/{tool}", self._guarded(self.tool))

    def _guarded(self, handler: _Handler) -> _Handler:
        async def guarded(request: web.Request) -> web.StreamResponse:
            try:
                return await handler(request)
            except _Refused as refused:
                return self.wire.json_response({"detail": str(refused)}, refused.status)
            except (BodyTimeout, BodyTooLarge) as error:
                return body_refusal(self.wire, error)

        return guarded

    async def seed_session(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        resources_id = body.get("resources_session_id")
        if resources_id is not None:
            if not isinstance(resources_id, str) or not 0 < len(resources_id) <= MAX_ID_LENGTH:
                raise _Refused(
                    400,
                    "resources_session_id must be a non-empty string of at most "
                    f"{MAX_ID_LENGTH} characters",
                )
            existing = self._by_resources_id.get(resources_id)
            if existing is not None and existing.episode is not None:  # idempotent
                return self._with_cookie({"resources_session_id": resources_id}, existing)
            task_id = body.get("task_id")
            if task_id is not None and (not isinstance(task_id, str) or not task_id):
                raise _Refused(
                    400,
                    "task_id must be the example id, a non-empty string "
                    f"(got {type(task_id).__name__})",
                )
            options_data: dict[str, object] = {"example_id": task_id}
            task_data = body.get("task_data")
            if isinstance(task_data, dict) and "example_id" in task_data:
                options_data["example_id"] = task_data["example_id"]
        else:
            options_data = {key: body.get(key) for key in ("example_id", "seed")}
        try:
            options = ResetOptions.from_json(
                {k: v for k, v in options_data.items() if v is not None}
            )
        except ValueError as error:
            raise _Refused(400, str(error)) from None
        try:
            session = self.sessions.open("http")
        except CapacityReached as error:
            raise _Refused(503, str(error)) from None
        try:
            _episode, turn = await session.reset(options)
        except UnknownExample as error:
            await session.release()
            raise _Refused(400, str(error)) from None
        except EpisodeError as error:
            await session.release()
            raise _Refused(500, str(error)) from None
        except BaseException:
            await session.release()
            raise
        if turn.done:
            logger.warning(
                "benchmax.serve.nemo_gym episode %s ended before any model call (%s)",
                session.id,
                turn.termination_reason,
            )
        if resources_id is not None:
            if len(self._by_resources_id) >= self.sessions.max_sessions:  # timed-out ones
                for key, value in list(self._by_resources_id.items()):
                    if value.released:
                        del self._by_resources_id[key]
            self._by_resources_id[resources_id] = session
            return self._with_cookie({"resources_session_id": resources_id}, session)
        return self._with_cookie({}, session)

    async def tool(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["tool"]
        if name in _RESERVED:
            raise _Refused(404, "Not Found")
        session = self._session(request)
        episode = session.episode
        assert episode is not None
        if episode.final is not None:
            reason = episode.final.termination_reason
            raise _Refused(400, f"the episode is over ({reason}): verify it or seed another")
        if name not in _tool_names(episode.tools):
            raise _Refused(
                404, f"no tool named {name!r} (tools: {sorted(_tool_names(episode.tools))})"
            )
        arguments = await self._body(request)
        call_id = f"call_{episode.step_count + 1}"
        action = PolicyAction(
            message=AssistantMessage(
                role="assistant",
                content=None,
                tool_calls=[
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": encode_json(arguments).decode()},
                    }
                ],
            )
        )
        turn = await _act(session, action)
        replies = [m for m in turn.messages if m.get("role") == "tool"]
        reply = next((m for m in replies if m.get("tool_call_id") == call_id), None)
        if reply is None:
            reason = turn.termination_reason or "no tool result"
            return self.wire.text_response(f"the episode ended ({reason}) without running the tool")
        content = reply.get("content")
        return self.wire.text_response(
            content if isinstance(content, str) else orjson.dumps(content).decode()
        )

    async def verify(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        response = body.get("response")
        if not isinstance(body.get("responses_create_params"), dict):
            raise _Refused(400, "responses_create_params is required and must be an object")
        if not isinstance(response, dict) or not isinstance(response.get("output"), list):
            raise _Refused(400, "response is required: a Responses object with an output list")
        session = self._session(request)
        episode = session.episode
        assert episode is not None
        turn = episode.final
        if turn is None:
            message = final_assistant_message(response["output"])
            if message is None:
                message = {"role": "assistant", "content": ""}
            try:
                action = PolicyAction(message=AssistantMessage.model_validate(message))
            except ValidationError as error:
                raise _Refused(400, f"the response's final message is unusable: {error}") from None
            turn = await _act(session, action)
        keys = tuple(self.sessions.env.reward_keys)
        await session.release()
        self._forget(session)
        return self.wire.json_response({**body, **_verdict(turn, keys)})

    async def close_session(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        resources_id = body.get("resources_session_id")
        if not isinstance(resources_id, str) or not resources_id:
            raise _Refused(400, "resources_session_id is required")
        session = self._by_resources_id.pop(resources_id, None)
        if session is not None:
            await session.release()
        return self.wire.json_response({"resources_session_id": resources_id})

    async def aggregate_metrics(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        responses = body.get("verify_responses")
        if not isinstance(responses, list) or not all(isinstance(r, dict) for r in responses):
            raise _Refused(400, "verify_responses must be a list of verify responses")
        scored = [r for r in responses if not r.get("mask_sample")]
        metrics: dict[str, object] = {
            "num_rollouts": len(responses),
            "num_masked": len(responses) - len(scored),
        }
        values: dict[str, list[float]] = {"reward": []}
        for item in scored:
            values["reward"].extend(_finite(item.get("reward")))
            components = item.get("reward_components")
            if isinstance(components, dict):
                for key, value in components.items():
                    values.setdefault(key, []).extend(_finite(value))
        for key, series in values.items():
            if series:
                metrics[f"mean/{key}"] = finite_mean(series)
        key_metrics = {k: v for k, v in metrics.items() if k.startswith("mean/")}
        return self.wire.json_response(
            {"group_level_metrics": [], "agent_metrics": metrics, "key_metrics": key_metrics}
        )

    async def reverify_mode(self, request: web.Request) -> web.StreamResponse:
        return self.wire.json_response("unsupported")

    async def examples(self, request: web.Request) -> web.StreamResponse:
        env = self.sessions.env
        tools = responses_tools(await env.list_tools()) if isinstance(env, BaseEnv) else []
        lines = []
        for example in self.sessions.examples:
            payload = example.payload if isinstance(example.payload, dict) else {}
            prompt = payload.get("prompt_messages") or []
            params: dict[str, object] = {"input": responses_input(prompt)}
            if tools:
                params["tools"] = tools
            lines.append(
                orjson.dumps({"responses_create_params": params, "example_id": example.id})
            )
        from aiohttp import web

        return web.Response(body=b"\n".join(lines) + b"\n", content_type="application/jsonl")

    def _session(self, request: web.Request) -> Session:
        session_id = request.cookies.get(SESSION_COOKIE) or request.headers.get(
            "X-Benchmax-Session"
        )
        session = self.sessions.session(session_id) if session_id else None
        if session is None or session.episode is None:
            raise _Refused(
                400,
                "no live session: call /seed_session first and send its benchmax_session "
                "cookie (sessions close after verify and after --session-timeout idle)",
            )
        session.touch()
        return session

    async def _body(self, request: web.Request) -> dict[str, object]:
        raw = await self.wire.read_body(request)
        try:
            data = decode_json(raw) if raw.strip() else {}
        except orjson.JSONDecodeError as error:
            # Python's json writes inf and nan as Infinity and NaN (a NeMo-Gym agent's
            # reward can be one), and numbers past a double's range: read those too.
            try:
                data = json.loads(raw)
            except (ValueError, RecursionError):
                raise _Refused(400, f"the request body is not JSON: {error}") from None
        if not isinstance(data, dict):
            raise _Refused(400, "the request body must be a JSON object")
        return data

    def _with_cookie(self, data: dict[str, object], session: Session) -> web.StreamResponse:
        response = self.wire.json_response(data)
        response.set_cookie(SESSION_COOKIE, session.id, httponly=True, samesite="Lax")
        return response

    def _forget(self, session: Session) -> None:
        for key, value in list(self._by_resources_id.items()):
            if value is session:
                del self._by_resources_id[key]


async def _act(session: Session, action: PolicyAction) -> Turn:
    episode = session.episode
    assert episode is not None
    try:
        return await episode.act(action)
    except EpisodeError as error:
        raise _Refused(500 if error.broken else 400, str(error)) from None


def _verdict(turn: Turn, keys: tuple[str, ...]) -> dict[str, object]:
    if not turn.done:
        components = dict.fromkeys(keys, 0.0)
        reason = UNFINISHED
        reward = 0.0
        failure: str | None = (
            "the environment wanted another turn after the agent's final message (a "
            "simulated user, or tool calls to run); serve it over OpenEnv for multi-turn "
            "conversations"
        )
    else:
        components = dict(turn.rewards or {})
        reason = turn.termination_reason or UNFINISHED
        reward = float(turn.reward or 0.0)
        failure = None if reason in TRAINABLE_REASONS else reason
    verdict: dict[str, object] = {
        key: value for key, value in components.items() if key not in _RESPONSE_FIELDS
    }
    verdict.update(
        reward=reward,
        reward_components=components,
        termination_reason=reason,
        mask_sample=failure is not None and reason != UNFINISHED,
        failure_reason=failure,
    )
    return verdict


def _finite(value: object) -> list[float]:
    """``[value]`` as a float when it is a finite number (not a bool), else ``[]``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond any float
            return []
        if math.isfinite(number):
            return [number]
    return []


def finite_mean(values: list[float]) -> float:
    """The mean of finite ``values`` without overflow: each is divided by the count
    before the exact sum (``math.fsum``), so values near ``±1.8e308`` average to a
    finite float."""
    count = len(values)
    return math.fsum(value / count for value in values)


def _tool_names(tools: list[dict[str, object]]) -> set[str]:
    names = set()
    for tool in tools:
        function = tool.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return names
