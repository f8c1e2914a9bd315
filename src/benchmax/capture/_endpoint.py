"""The capture endpoint: an OpenAI-compatible chat-completions server in front of an upstream.

Routes (any method other than these is 405; any other path 404):

* ``POST /rollouts/<rollout id>/v1/chat/completions`` - a rollout's own base URL;
* ``POST /v1/chat/completions`` (or any other path ending in ``/chat/completions``) - for
  programs that cannot change paths: attributed by the API key alone;
* ``GET .../models`` - the session's model, as ``/v1/models`` lists it.

Every request must carry ``Authorization: Bearer <the session's key>``; a missing,
unknown or foreign key (another rollout's key on this rollout's path) is answered 401
and counted (``rejected_requests``). The endpoint never forwards the program's headers:
the upstream gets its own credential from the session. It listens on 127.0.0.1 by
default and writes no access log (paths carry rollout ids, never keys).

Per call the endpoint decodes the program's body once and encodes the upstream request once
(orjson), reads the upstream reply over the event loop's plain keep-alive connections
(``benchmax._modelhttp``; aiohttp for ``https://``, proxies and redirects), and answers
with one write: the reply's JSON, or the whole event stream as one body. It serves with
its own small HTTP/1.1 server (``_http.py``); docs/performance.md has its cost per call.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, Self
from urllib.parse import quote, unquote

import orjson

from benchmax._async_service import AsyncService
from benchmax._modelhttp import encode_json
from benchmax._value_checks import is_int_at_least
from benchmax.auth import ModelAuth
from benchmax.capture._address import check_advertised_host, is_loopback, is_wildcard
from benchmax.capture._calls import CapturedCall
from benchmax.capture._http import Answer, ProgramRequest, ProgramServer
from benchmax.capture._session import CaptureSession, Refusal, program_reply
from benchmax.capture._sse import reply_events

__all__ = ["CaptureEndpoint"]

logger = logging.getLogger("benchmax.capture")

_COMPLETIONS: Final = "/chat/completions"
_MODELS: Final = "/models"
_ROLLOUTS: Final = "/rollouts/"
_MAX_BODY: Final = 64 * 1024 * 1024
_KEY_PREFIX: Final = "bmx-capture-"
_TOO_LARGE: Final = Refusal(
    413, "request_too_large", f"the request body is over {_MAX_BODY // 2**20} MiB"
)
_EVENT_STREAM_HEADERS: Final = "Cache-Control: no-cache\r\n"


class CaptureEndpoint(AsyncService):
    """An OpenAI-compatible endpoint that records every call a program makes, per rollout.

    Use it as an async context manager (or ``start()``/``stop()``); ``host`` and ``port``
    say where it listens (``127.0.0.1``, port 0: a free one); ``advertised_host``, when
    given, is the host its URLs name instead of ``host`` (an agent in a container reaches
    the host machine by another name: ``host.docker.internal``); ``on_call(session, call)``,
    when given, is called with each call recorded, before the program gets its reply.
    ``open_session(...)`` gives
    a rollout its ``CaptureSession`` (base URL, API key, budget, recorded calls);
    ``close_session`` forgets it (its key is refused from then on). Raises ``ValueError``
    for a port outside 0-65535 or an ``advertised_host`` that is not a host name or IP
    address. Listening beyond loopback logs a warning: the per-rollout keys are then what
    guards it.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        advertised_host: str | None = None,
        on_call: Callable[[CaptureSession, CapturedCall], None] | None = None,
    ) -> None:
        if not is_int_at_least(port, 0) or port > 65535:
            raise ValueError("capture endpoint port must be an integer from 0 to 65535")
        if advertised_host is not None:
            check_advertised_host(advertised_host, "advertised_host")
        elif is_wildcard(host):
            raise ValueError(
                f"capture endpoint host {host!r} listens on every address, which is no URL a"
                " program can call: pass advertised_host=, the host programs reach this"
                " machine by (such as host.docker.internal)"
            )
        self._host = host
        self._advertised = host if advertised_host is None else advertised_host
        self._port = port
        self._bound: int | None = None
        self._server: ProgramServer | None = None
        self._by_key: dict[str, CaptureSession] = {}
        self._on_call = on_call
        self.rejected_requests = 0
        """Requests refused for a missing, unknown or foreign API key (HTTP 401)."""

    def __repr__(self) -> str:
        where = self.origin if self._bound is not None else "not started"
        return f"CaptureEndpoint({where}, sessions={len(self._by_key)})"

    @property
    def origin(self) -> str:
        """``http://HOST:PORT``, HOST the advertised host (``RuntimeError`` before
        ``start``)."""
        if self._bound is None:
            raise RuntimeError("the capture endpoint is not started")
        host = self._advertised
        host = f"[{host}]" if ":" in host and not host.startswith("[") else host
        return f"http://{host}:{self._bound}"

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1``: the URL for programs attributed by their key alone."""
        return self.origin + "/v1"

    @property
    def sessions(self) -> int:
        """How many sessions are open."""
        return len(self._by_key)

    async def start(self) -> Self:
        """Listen (``OSError`` when the address cannot be bound)."""
        server = ProgramServer(
            self._handle,
            host=self._host,
            port=self._port,
            max_body=_MAX_BODY,
            on_too_large=lambda: _error(_TOO_LARGE),
        )
        await server.start()
        self._bound = server.port
        self._server = server
        if not is_loopback(self._host):
            logger.warning(
                "capture.listening_beyond_loopback host=%s port=%d: the capture endpoint is"
                " reachable from the network at this address; each rollout's API key is"
                " what guards it",
                self._host,
                self._bound,
            )
        return self

    async def stop(self) -> None:
        for session in list(self._by_key.values()):
            await self.close_session(session)
        server, self._server = self._server, None
        if server is not None:
            await server.close()

    def open_session(
        self,
        *,
        rollout_id: str,
        model: str | None,
        upstream_url: str,
        upstream_auth: ModelAuth,
        timeout: float | None = None,
        retries: int = 0,
        sampling_args: Mapping[str, Any] = MappingProxyType({}),
        max_calls: int | None = None,
        max_sampled_tokens: int | None = None,
    ) -> CaptureSession:
        """A new session for one rollout: its own base URL
        (``http://HOST:PORT/rollouts/<rollout id>/v1``) and a fresh random API key.

        ``model`` is the only model name the program may call (``None``: any);
        ``upstream_url``/``upstream_auth`` where calls go and with which credential;
        ``timeout``/``retries`` bound each upstream call as ``model_timeout`` and
        ``model_retries`` do; ``sampling_args`` are set on every upstream request (over
        the program's own fields); ``max_calls`` and ``max_sampled_tokens`` the budget
        (``None``: none). Must be called on the loop the endpoint serves.
        """
        key = _KEY_PREFIX + secrets.token_urlsafe(24)
        session = CaptureSession(
            rollout_id=rollout_id,
            api_key=key,
            base_url=f"{self.origin}{_ROLLOUTS}{quote(rollout_id, safe='')}/v1",
            model=model,
            upstream_url=upstream_url,
            upstream_auth=upstream_auth,
            timeout=timeout,
            retries=retries,
            sampling_args=sampling_args,
            max_calls=max_calls,
            max_sampled_tokens=max_sampled_tokens,
        )
        self._by_key[key] = session
        return session

    async def close_session(self, session: CaptureSession) -> None:
        """Forget ``session`` (later requests with its key get 401) and close its upstream
        connection use."""
        if self._by_key.get(session.api_key) is session:
            del self._by_key[session.api_key]
        await session.aclose()

    async def _handle(self, request: ProgramRequest) -> Answer:
        path = request.path
        if path.endswith(_COMPLETIONS):
            prefix, route = path[: -len(_COMPLETIONS)], "completions"
        elif path.endswith(_MODELS):
            prefix, route = path[: -len(_MODELS)], "models"
        else:
            return _error(Refusal(404, "unknown_url", f"unknown path {path}"))
        session = self._session_for(request, prefix)
        if isinstance(session, Refusal):
            self.rejected_requests += 1
            return _error(session)
        if route == "models":
            if request.method not in ("GET", "HEAD"):
                return _error(Refusal(405, "method_not_allowed", "use GET for /models"))
            name = session.model or "captured"
            listing = {"object": "list", "data": [{"id": name, "object": "model"}]}
            return _json(200, listing)
        if request.method != "POST":
            return _error(Refusal(405, "method_not_allowed", "use POST for /chat/completions"))
        try:
            body = _decoded_request(request.body)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than json decodes
            return _error(Refusal(400, "invalid_json", "the request body is not JSON"))
        if not isinstance(body, dict):
            return _error(Refusal(400, "invalid_request", "the body must be a JSON object"))
        answer = await session.complete(body)
        if isinstance(answer, Refusal):
            return _error(answer)
        if self._on_call is not None:
            self._on_call(session, answer)
        return _reply(answer)

    def _session_for(self, request: ProgramRequest, prefix: str) -> CaptureSession | Refusal:
        header = request.headers.get("authorization", "")
        scheme, _, key = header.partition(" ")
        session = self._by_key.get(key.strip()) if scheme.lower() == "bearer" else None
        if session is None:
            return Refusal(401, "invalid_api_key", "missing or unknown API key")
        named = _named_rollout(prefix)
        if named is not None and named != session.rollout_id:
            return Refusal(401, "invalid_api_key", "this API key belongs to another rollout")
        return session


def _decoded_request(raw: bytes) -> object:
    """The request's JSON; ``ValueError`` when it is not JSON, or holds ``NaN``/``Infinity``
    (not JSON, and a recorded call must write back as JSON)."""
    try:
        return orjson.loads(raw)  # refuses NaN and Infinity itself
    except orjson.JSONDecodeError:
        # what orjson refuses but JSON allows (lone surrogate escapes, huge numbers)
        return json.loads(raw, parse_constant=_no_constant)


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _named_rollout(prefix: str) -> str | None:
    """The rollout id a path prefix names (``/rollouts/<id>/v1``), else ``None``."""
    if not prefix.startswith(_ROLLOUTS):
        return None
    rest = prefix[len(_ROLLOUTS) :]
    rest = rest.removesuffix("/v1")
    return unquote(rest)


def _reply(call: CapturedCall) -> Answer:
    """The program's answer; a stream it asked for is sent whole, as one body (the reply is
    complete before the first event: nothing is gained by writing events one by one)."""
    reply = program_reply(call)
    if not call.streamed:
        return _json(200, reply)
    options = call.request.get("stream_options")
    include_usage = isinstance(options, dict | Mapping) and options.get("include_usage") is True
    return Answer(
        200,
        b"".join(reply_events(reply, include_usage=include_usage)),
        "text/event-stream",
        _EVENT_STREAM_HEADERS,
    )


def _json(status: int, body: object) -> Answer:
    return Answer(status, encode_json(body))


def _error(refusal: Refusal) -> Answer:
    return _json(refusal.status, refusal.body())
