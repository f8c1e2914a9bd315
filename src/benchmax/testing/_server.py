"""``MockModelServer``: lifecycle, routing, recording and fault injection of the mock API."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, Self
from urllib.parse import quote, unquote

import h11

from benchmax._async_service import AsyncService
from benchmax.testing._completions import (
    DEFAULT_MODEL,
    PolicyResultError,
    completion_reply,
    error_reply,
    fault_reply,
    models_reply,
)
from benchmax.testing._faults import Fault, FaultSchedule
from benchmax.testing._http import HttpConnection, IncomingRequest, MalformedRequest, Reply
from benchmax.testing._policies import BoundPolicy, Policy, bind_policy, echo, runs_inline
from benchmax.testing._recording import RecordedRequest
from benchmax.testing._tokens import ChatTemplateName, ToyChatTemplate

__all__ = ["DEFAULT_MAX_BODY_SIZE", "MockModelServer", "session_of_path"]

logger = logging.getLogger("benchmax.testing")

DEFAULT_MAX_BODY_SIZE: Final = 64 * 1024 * 1024
_POLICY_THREADS: Final = 64  # sync user policies answer in parallel up to this many
_CHAT_SUFFIX: Final = "/chat/completions"
_MODELS_SUFFIX: Final = "/models"
_SESSIONS_PREFIX: Final = "/sessions/"
ROLLOUT_ID_TEMPLATE: Final = "{rollout_id}"
"""Kept as written by ``session_url``: the runner puts each rollout's id in its place
(``RunConfig.base_url``'s placeholder), so every rollout gets a session of its own."""


def session_of_path(path: str) -> str:
    """The session named by the part of ``path`` before ``/chat/completions`` (or ``/models``).

    A trailing ``/v1`` and a leading ``/sessions/`` are dropped and the rest is
    percent-decoded: ``/v1/chat/completions`` -> ``""``,
    ``/sessions/abc/v1/chat/completions`` -> ``"abc"``, ``/team/x/v1/chat/completions``
    -> ``"team/x"``.
    """
    for suffix in (_CHAT_SUFFIX, _MODELS_SUFFIX):
        if path.endswith(suffix):
            prefix = path[: -len(suffix)]
            break
    else:
        return ""
    if prefix.endswith("/v1"):
        prefix = prefix[:-3]
    if prefix.startswith(_SESSIONS_PREFIX):
        prefix = prefix[len(_SESSIONS_PREFIX) :]
    return unquote(prefix.strip("/"))


class MockModelServer(AsyncService):
    """An OpenAI-compatible chat-completions server on 127.0.0.1 answering from a policy.

    Use it as an async context manager (``async with MockModelServer(echo) as server``)
    or call ``start()``/``stop()``. ``base_url`` is ``http://127.0.0.1:PORT/v1``;
    ``session_url(name)`` gives a per-session base URL whose requests are recorded with
    ``session == name``. Every request is recorded (``requests``, ``requests_for``)
    unless ``record=False``; ``inject`` queues faults. ``policy`` may be replaced at any
    time. ``GET .../v1/models`` lists one model named ``model``. With
    ``keep_alive=False`` every response carries ``Connection: close`` and the server
    closes the connection after it; ``close_idle_connections()`` closes kept-alive
    connections on demand (to exercise a client's handling of stale pooled connections).
    A request body over ``max_body_size`` bytes (default 64 MiB) is refused with HTTP
    413 (code ``request_too_large``) without being buffered; a header block over 64 KiB
    gets HTTP 431.

    With ``tokens=True`` (token mode) replies are shaped as vLLM's and, when the request
    asks (``logprobs``, ``return_token_ids``, ``return_tokens_as_token_ids``), carry the
    prompt ids, completion ids and logprobs of a deterministic toy tokenizer and chat
    template (``chat_template``: ``"chatml"``, or ``"qwen3"`` which drops the reasoning of
    assistant turns before the last user message); see ``benchmax.testing.ToyChatTemplate``.

    Async policies and the built-in ones run on the server's event loop; any other sync
    policy (a plain ``def`` that may block) runs in a worker thread, so a slow one does not
    hold up other requests (it must then be safe to call from several threads at once).
    """

    def __init__(
        self,
        policy: Policy = echo,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        record: bool = True,
        model: str = DEFAULT_MODEL,
        keep_alive: bool = True,
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
        tokens: bool = False,
        chat_template: ChatTemplateName = "chatml",
    ) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError("mock server port must be an integer from 0 to 65535")
        if (
            isinstance(max_body_size, bool)
            or not isinstance(max_body_size, int)
            or max_body_size < 1
        ):
            raise ValueError("mock server max_body_size must be a positive integer")
        if not isinstance(model, str) or not model:
            raise ValueError("mock server model must be a non-empty string")
        self._max_body_size = max_body_size
        if not isinstance(tokens, bool):
            raise TypeError("mock server tokens must be True or False")
        template = ToyChatTemplate(chat_template)
        self._template = template if tokens else None
        self._policy = policy
        self._bound: BoundPolicy = bind_policy(policy)
        self._inline = runs_inline(policy)
        self._threads: ThreadPoolExecutor | None = None
        self._host = host
        self._port = port
        self._record = record
        self._model = model
        self._requests: list[RecordedRequest] = []
        self._faults = FaultSchedule()
        self._failures_told: set[str] = set()
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._bound_port: int | None = None
        self._connection_count = 0
        self._idle: set[asyncio.Task[None]] = set()
        self._keep_alive = keep_alive

    # -- configuration ------------------------------------------------------------------------

    @property
    def policy(self) -> Policy:
        """The policy answering chat completions; assign to swap it (also while serving)."""
        return self._policy

    @policy.setter
    def policy(self, policy: Policy) -> None:
        self._bound = bind_policy(policy)
        self._inline = runs_inline(policy)
        self._policy = policy

    @property
    def port(self) -> int:
        """The bound TCP port (``RuntimeError`` before ``start()``)."""
        if self._bound_port is None:
            raise RuntimeError("MockModelServer is not started")
        return self._bound_port

    @property
    def origin(self) -> str:
        """``http://HOST:PORT`` (no path)."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The default-session base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"{self.origin}/v1"

    def session_url(self, name: str) -> str:
        """Base URL ``http://127.0.0.1:PORT/sessions/<name>/v1`` recording ``session == name``.

        ``session_url("")`` is ``base_url``. Any characters are allowed (percent-encoded),
        except that ``{rollout_id}`` is kept as written: a ``RunConfig.base_url`` such as
        ``session_url("{rollout_id}")`` or ``session_url("eval-{rollout_id}")`` gives every
        rollout its own session, named after its rollout id.
        """
        if not isinstance(name, str):
            raise TypeError("session name must be a string")
        if not name:
            return self.base_url
        encoded = ROLLOUT_ID_TEMPLATE.join(
            quote(part, safe="") for part in name.split(ROLLOUT_ID_TEMPLATE)
        )
        return f"{self.origin}{_SESSIONS_PREFIX}{encoded}/v1"

    # -- recording and faults -----------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every recorded request, in arrival order."""
        return list(self._requests)

    def requests_for(self, session: str) -> list[RecordedRequest]:
        """The recorded requests of one session (``""`` is the default ``/v1`` session)."""
        return [request for request in self._requests if request.session == session]

    def clear_requests(self) -> None:
        """Forget every recorded request."""
        self._requests.clear()

    def inject(self, fault: Fault, *, session: str | None = None, times: int | None = 1) -> None:
        """Apply ``fault`` to the next ``times`` chat-completion calls (``None``: all).

        With ``session`` only that session's calls are affected; session faults fire
        before faults for any session. Faults queue up in order. Status, malformed,
        drop and no-choices faults replace the policy's answer (the policy is not
        called); a delay fault waits, then the policy answers.
        """
        self._faults.add(fault, session=session, times=times)

    def clear_faults(self) -> None:
        """Drop every queued fault, including ``times=None`` ones."""
        self._faults.clear()

    @property
    def pending_faults(self) -> int:
        """How many injected fault entries have not yet been used up."""
        return self._faults.pending()

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Whether the server is listening."""
        return self._server is not None

    async def start(self) -> Self:
        """Bind and start listening (``RuntimeError`` if already started); returns ``self``."""
        if self._server is not None:
            raise RuntimeError("MockModelServer is already started")
        self._server = await asyncio.start_server(
            self._serve_connection, self._host, self._port, backlog=4096
        )
        self._bound_port = self._server.sockets[0].getsockname()[1]
        logger.debug("mock model server listening on %s", self.base_url)
        return self

    async def stop(self) -> None:
        """Stop listening, close every connection and wait for their handlers to end."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        tasks = list(self._connections)
        for task, writer in list(self._connections.items()):
            writer.transport.abort()
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()
        threads, self._threads = self._threads, None
        if threads is not None:
            threads.shutdown(wait=False, cancel_futures=True)
        logger.debug("mock model server on port %s stopped", self._bound_port)

    aclose = stop

    async def close_idle_connections(self) -> int:
        """Close every connection waiting for its next request; return how many."""
        idle = list(self._idle)
        for task in idle:
            writer = self._connections.get(task)
            if writer is not None:
                writer.transport.close()
        if idle:
            await asyncio.wait(idle, timeout=5)
        return len(idle)

    async def serve_forever(self) -> None:
        """Serve (starting first if needed) until cancelled, then stop."""
        if self._server is None:
            await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    def __repr__(self) -> str:
        where = self.base_url if self._bound_port is not None and self.started else "stopped"
        return f"MockModelServer({self._policy!r}, {where})"

    # -- HTTP ---------------------------------------------------------------------------------

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is None or self._server is None:  # accepted while stopping
            writer.transport.abort()
            return
        self._connections[task] = writer
        self._connection_count += 1
        connection_id = self._connection_count
        http = HttpConnection(
            reader,
            writer,
            max_body_size=self._max_body_size,
            on_busy=lambda: self._idle.discard(task),
        )
        abort = True
        try:
            while True:
                self._idle.add(task)
                received = await http.next_request()
                if received is None:
                    break
                if isinstance(received, MalformedRequest):
                    logger.debug(
                        "mock server connection %d: malformed request (%d %s)",
                        connection_id,
                        received.status,
                        received.message,
                    )
                    await http.respond(error_reply(received.status, received.message))
                    break
                reply = await self._answer(received, connection_id)
                if reply.status is None:  # drop fault: no response at all
                    return
                if not await http.respond(reply, keep_alive=self._keep_alive):
                    break
            abort = False
        except (ConnectionError, h11.ProtocolError) as error:
            logger.debug("mock server connection %d ended: %s", connection_id, error)
        except asyncio.CancelledError:
            # Only stop() (or loop shutdown) cancels a connection. Ending normally keeps
            # asyncio's stream callback from logging the cancellation as an error.
            return
        except Exception:
            logger.exception("mock server connection %d failed", connection_id)
        finally:
            self._connections.pop(task, None)
            self._idle.discard(task)
            if abort:
                http.abort()
            else:
                await http.close()

    async def _answer(self, incoming: IncomingRequest, connection_id: int) -> Reply:
        path = incoming.target.partition("?")[0]
        body: Any = None
        if incoming.body:
            try:
                body = json.loads(incoming.body)
            except (ValueError, RecursionError):
                body = None
        record = RecordedRequest(
            session=session_of_path(path),
            method=incoming.method,
            path=path,
            headers=incoming.headers,
            body=body,
            time=time.time(),
            raw_body=incoming.body,
            connection=connection_id,
        )
        if self._record:
            self._requests.append(record)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("mock server received %s", repr(record))

        if incoming.oversized:
            return error_reply(
                413,
                f"request body is larger than the mock server's limit of "
                f"{self._max_body_size} bytes (max_body_size)",
                code="request_too_large",
            )
        if path.endswith(_CHAT_SUFFIX):
            if incoming.method != "POST":
                return error_reply(405, f"use POST for {path}")
            return await self._chat_completion(record, len(incoming.body))
        if path.endswith(_MODELS_SUFFIX) and incoming.method in ("GET", "HEAD"):
            return models_reply(self._model)
        return error_reply(404, f"unknown path {path}", code="unknown_url")

    async def _chat_completion(self, record: RecordedRequest, size: int) -> Reply:
        fault = self._faults.take(record.session)
        if fault is not None:
            if fault.kind != "delay":
                logger.debug("mock server injects %r into session %r", fault, record.session)
                return fault_reply(fault, record.body)
            await asyncio.sleep(fault.seconds or 0.0)
        body = record.body
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return error_reply(400, "request body must be a JSON object with a 'messages' list")
        if body.get("stream"):
            return error_reply(
                400,
                "the mock server does not stream responses; send stream=false",
                code="unsupported_parameter",
            )
        try:
            result = await self._call_policy(body, record)
            if inspect.isawaitable(result):
                result = await result
        except Fault as raised:
            result = raised
        except Exception as error:
            self._tell_failure(
                f"{type(error).__name__}: {error}",
                "mock policy %r failed with %s: %s (request %s %s)",
                self._policy,
                type(error).__name__,
                error,
                record.method,
                record.path,
                exc_info=error,
            )
            return error_reply(
                500,
                f"mock policy raised {type(error).__name__}: {error}",
                error_type="server_error",
                code="mock_policy_error",
            )
        if isinstance(result, Fault):
            return fault_reply(result, body)
        try:
            return completion_reply(body, result, size, template=self._template)
        except (PolicyResultError, TypeError, ValueError) as error:
            self._tell_failure(
                f"unusable: {error}",
                "mock policy %r gave an unusable answer: %s",
                self._policy,
                error,
            )
            return error_reply(500, str(error), error_type="server_error", code="mock_policy_error")

    def _tell_failure(
        self, key: str, message: str, *args: object, exc_info: BaseException | None = None
    ) -> None:
        """Log a policy failure in full the first time it happens (traceback included),
        later ones alike at DEBUG: a policy that fails every request says so once, not once
        per rollout (each request still gets its 500)."""
        if key in self._failures_told:
            logger.debug(message + " (again)", *args)
            return
        self._failures_told.add(key)
        logger.error(
            message + " (the same failure on later requests is logged at DEBUG)",
            *args,
            exc_info=exc_info,
        )

    async def _call_policy(self, body: dict[str, object], record: RecordedRequest) -> object:
        """The policy's answer: inline for async and built-in policies, else in a thread."""
        bound = self._bound
        if self._inline:
            return bound(body, record)
        if self._threads is None:
            self._threads = ThreadPoolExecutor(_POLICY_THREADS, thread_name_prefix="mock-policy")
        return await asyncio.get_running_loop().run_in_executor(
            self._threads, _without_stop_iteration, bound, body, record
        )


def _without_stop_iteration(policy: Callable[..., object], *args: object) -> object:
    """Call ``policy``; a ``StopIteration`` it raises becomes a ``RuntimeError``.

    An asyncio future cannot hold a ``StopIteration`` (``set_exception`` refuses it),
    so one raised in the policy thread (a ``next()`` on an exhausted iterator) would
    leave the request waiting forever instead of answering 500.
    """
    try:
        return policy(*args)
    except StopIteration as error:
        raise RuntimeError(f"the policy raised StopIteration: {error!r}") from error
