"""The policy bridge: an OpenAI-compatible endpoint on 127.0.0.1 whose answers come from
the remote policy.

Every served rollout's model base URL is ``{bridge}/{rollout_id}/v1``. A chat-completions
request to it parks as a :class:`ModelCall` handed to the rollout's listener (its
episode) until the episode answers it with the policy's reply, or drops it (the episode
closed: HTTP 503, which the rollout settles as a model failure). The path starts with a
random secret, so no other local client can answer for the policy.

The endpoint is registered in-process too (``benchmax._modelhttp.register_in_process``): a
``BaseEnv`` rollout's calls reach :meth:`PolicyBridge.answer_in_process` without a
socket; environments with their own HTTP clients use the URL.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING

import orjson

from benchmax._modelhttp import register_in_process, unregister_in_process

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["ModelCall", "PolicyBridge"]


class ModelCall:
    """One parked chat-completions request of a rollout: its decoded ``body``."""

    __slots__ = ("_reply", "body")

    def __init__(self, body: dict[str, object]) -> None:
        self.body = body
        self._reply: asyncio.Future[dict[str, object] | None] = (
            asyncio.get_running_loop().create_future()
        )

    def answer(self, reply: dict[str, object]) -> None:
        """Send ``reply`` (a chat-completions response body) to the waiting rollout."""
        if not self._reply.done():
            self._reply.set_result(reply)

    def drop(self) -> None:
        """Give the rollout no answer (HTTP 503): its episode is closing."""
        if not self._reply.done():
            self._reply.set_result(None)

    async def reply(self) -> dict[str, object] | None:
        return await self._reply


Listener = Callable[[ModelCall], bool]
"""Takes a rollout's model call; ``False`` when it cannot (HTTP 409)."""


class PolicyBridge:
    """The in-process endpoint every served rollout calls as its model.

    ``async with PolicyBridge() as bridge`` listens on a free port of 127.0.0.1;
    ``bridge.base_url(rollout_id)`` is that rollout's endpoint root and
    ``bridge.listen(rollout_id, listener)`` routes its calls (``forget`` stops it).
    """

    def __init__(self) -> None:
        self._secret = secrets.token_urlsafe(16)
        self._listeners: dict[str, Listener] = {}
        self._runner: web.AppRunner | None = None
        self._origin = ""

    async def __aenter__(self) -> PolicyBridge:
        from aiohttp import web

        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/{secret}/{rollout_id}/v1/chat/completions", self._completions)
        app.router.add_get("/{secret}/{rollout_id}/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        port = self._runner.addresses[0][1]
        self._origin = f"http://127.0.0.1:{port}/{self._secret}"
        register_in_process(self._origin + "/", self.answer_in_process)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        unregister_in_process(self._origin + "/")
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def base_url(self, rollout_id: str) -> str:
        """The endpoint root a rollout's requests must use."""
        return f"{self._origin}/{rollout_id}/v1"

    def listen(self, rollout_id: str, listener: Listener) -> None:
        self._listeners[rollout_id] = listener

    def forget(self, rollout_id: str) -> None:
        self._listeners.pop(rollout_id, None)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        if request.match_info["secret"] != self._secret:
            return _error(404, "not found")
        status, body = await self._answer(request.match_info["rollout_id"], await request.read())
        return web.Response(status=status, body=body, content_type="application/json")

    async def answer_in_process(self, url: str, data: bytes) -> tuple[int, bytes]:
        """The status and body answering a call to ``url`` (a rollout's endpoint)."""
        rest = url[len(self._origin) + 1 :]
        rollout_id, _, path = rest.partition("/")
        if path != "v1/chat/completions":
            return 404, _error_body(404, "not found")
        return await self._answer(rollout_id, data)

    async def _answer(self, rollout_id: str, data: bytes) -> tuple[int, bytes]:
        listener = self._listeners.get(rollout_id)
        if listener is None:
            return 404, _error_body(404, "no episode is waiting for this rollout")
        try:
            body = orjson.loads(data)
        except orjson.JSONDecodeError:
            return 400, _error_body(400, "the request body is not JSON")
        if not isinstance(body, dict):
            return 400, _error_body(400, "the request body is not a JSON object")
        call = ModelCall(body)
        if not listener(call):
            return 409, _error_body(409, "the episode already has a model call waiting")
        reply = await call.reply()
        if reply is None:
            return 503, _error_body(503, "the episode closed before the policy answered")
        return 200, orjson.dumps(reply)

    async def _models(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        data = {"object": "list", "data": [{"id": "policy", "object": "model"}]}
        return web.Response(body=orjson.dumps(data), content_type="application/json")


def _error_body(status: int, message: str) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": "bridge_error", "code": status}})


def _error(status: int, message: str) -> web.StreamResponse:
    from aiohttp import web

    return web.Response(
        status=status, body=_error_body(status, message), content_type="application/json"
    )
