"""``MockModelServer``: an OpenAI-compatible HTTP/1.1 server on asyncio streams and h11."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Final, Self
from urllib.parse import quote, unquote

import h11

from benchmax.testing._completions import (
    DEFAULT_MODEL,
    MALFORMED_BODY,
    PolicyResultError,
    completion_body,
    error_body,
    fault_error_body,
    models_body,
)
from benchmax.testing._faults import Fault, FaultSchedule
from benchmax.testing._policies import BoundPolicy, Policy, bind_policy, echo
from benchmax.testing._recording import RecordedRequest

__all__ = ["MockModelServer", "session_of_path"]

logger = logging.getLogger("benchmax.testing")

_CHAT_SUFFIX: Final = "/chat/completions"
_MODELS_SUFFIX: Final = "/models"
_SESSIONS_PREFIX: Final = "/sessions/"
_READ_SIZE: Final = 65536
_JSON_HEADERS: Final = ((b"content-type", b"application/json"),)


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


class _Reply:
    """One HTTP response to send (``status`` ``None`` means: drop the connection)."""

    __slots__ = ("body", "headers", "status")

    def __init__(
        self,
        status: int | None,
        body: bytes = b"",
        headers: Sequence[tuple[bytes, bytes]] = (),
    ) -> None:
        self.status = status
        self.body = body
        self.headers = headers


_DROP: Final = _Reply(None)


def _error(status: int, message: str, *, error_type: str, code: str | None) -> _Reply:
    return _Reply(status, error_body(message, error_type=error_type, code=code), _JSON_HEADERS)


def _fault_reply(fault: Fault, request_body: Any) -> _Reply:
    match fault.kind:
        case "drop":
            return _DROP
        case "malformed":
            return _Reply(200, MALFORMED_BODY, _JSON_HEADERS)
        case "no_choices":
            body = request_body if isinstance(request_body, dict) else {}
            return _Reply(200, completion_body(body, None, 0, with_choice=False), _JSON_HEADERS)
        case "status":
            headers = list(_JSON_HEADERS)
            if fault.retry_after is not None:
                seconds = fault.retry_after
                text = str(int(seconds)) if float(seconds).is_integer() else repr(float(seconds))
                headers.append((b"retry-after", text.encode()))
            return _Reply(fault.status_code, fault_error_body(fault), headers)
        case _:
            return _error(
                500,
                "a mock policy cannot return a delay fault; await asyncio.sleep() in the policy",
                error_type="server_error",
                code="mock_policy_error",
            )


class MockModelServer:
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
    ) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError("mock server port must be an integer from 0 to 65535")
        self._policy = policy
        self._bound: BoundPolicy = bind_policy(policy)
        self._host = host
        self._port = port
        self._record = record
        self._model = model
        self._requests: list[RecordedRequest] = []
        self._faults = FaultSchedule()
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._bound_port: int | None = None
        self._connection_count = 0
        self._idle: set[asyncio.Task[None]] = set()
        self._keep_alive = keep_alive

    # -- configuration ------------------------------------------------------------------------

    @property
    def policy(self) -> Policy:
        return self._policy

    @policy.setter
    def policy(self, policy: Policy) -> None:
        self._bound = bind_policy(policy)
        self._policy = policy

    @property
    def port(self) -> int:
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

        ``session_url("")`` is ``base_url``. Any characters are allowed (percent-encoded).
        """
        if not isinstance(name, str):
            raise TypeError("session name must be a string")
        if not name:
            return self.base_url
        return f"{self.origin}{_SESSIONS_PREFIX}{quote(name, safe='')}/v1"

    # -- recording and faults -----------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every recorded request, in arrival order."""
        return list(self._requests)

    def requests_for(self, session: str) -> list[RecordedRequest]:
        """The recorded requests of one session (``""`` is the default ``/v1`` session)."""
        return [request for request in self._requests if request.session == session]

    def clear_requests(self) -> None:
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
        self._faults.clear()

    @property
    def pending_faults(self) -> int:
        """How many injected fault entries have not yet been used up."""
        return self._faults.pending()

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self._server is not None

    async def start(self) -> Self:
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

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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
        connection = h11.Connection(h11.SERVER)
        abort = True
        try:
            while True:
                self._idle.add(task)
                received = await self._read_request(connection, reader, writer, task)
                if received is None:
                    break
                reply = await self._answer(*received, connection_id)
                if reply.status is None:  # drop fault: no response at all
                    return
                headers = [*reply.headers, (b"content-length", str(len(reply.body)).encode())]
                if not self._keep_alive:
                    headers.append((b"connection", b"close"))
                writer.write(
                    connection.send(h11.Response(status_code=reply.status, headers=headers))
                    + connection.send(h11.Data(data=reply.body))
                    + connection.send(h11.EndOfMessage())
                )
                await writer.drain()
                if connection.our_state is not h11.DONE or connection.their_state is not h11.DONE:
                    break  # Connection: close (either side) or HTTP/1.0
                connection.start_next_cycle()
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
            if abort or writer.transport.is_closing():
                writer.transport.abort()
            else:
                await self._close_gracefully(writer)

    @staticmethod
    async def _close_gracefully(writer: asyncio.StreamWriter) -> None:
        """Flush what is buffered, then close (an abort could lose the last response)."""
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError, asyncio.CancelledError):
            writer.transport.abort()

    async def _read_request(
        self,
        connection: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        task: asyncio.Task[None],
    ) -> tuple[h11.Request, bytes] | None:
        request: h11.Request | None = None
        chunks: list[bytes] = []
        while True:
            try:
                event = connection.next_event()
            except h11.RemoteProtocolError as error:
                if connection.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    body = error_body(str(error), error_type="invalid_request_error", code=None)
                    writer.write(
                        connection.send(
                            h11.Response(
                                status_code=error.error_status_hint,
                                headers=[
                                    *_JSON_HEADERS,
                                    (b"content-length", str(len(body)).encode()),
                                    (b"connection", b"close"),
                                ],
                            )
                        )
                        + connection.send(h11.Data(data=body))
                        + connection.send(h11.EndOfMessage())
                    )
                    await writer.drain()
                return None
            if event is h11.NEED_DATA:
                if connection.they_are_waiting_for_100_continue:
                    writer.write(
                        connection.send(h11.InformationalResponse(status_code=100, headers=[]))
                    )
                data = await reader.read(_READ_SIZE)
                self._idle.discard(task)
                connection.receive_data(data)
            elif isinstance(event, h11.Data):
                chunks.append(event.data)
            elif isinstance(event, h11.Request):
                self._idle.discard(task)  # (a pipelined request arrives without a read)
                request = event
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None
                return request, b"".join(chunks)
            else:  # ConnectionClosed (client closed an idle connection), PAUSED
                return None

    async def _answer(self, request: h11.Request, raw_body: bytes, connection_id: int) -> _Reply:
        target = request.target.decode("latin-1")
        path = target.partition("?")[0]
        method = request.method.decode("latin-1")
        headers: dict[str, str] = {}
        for name, value in request.headers:
            key = name.decode("latin-1")
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        body: Any = None
        if raw_body:
            try:
                body = json.loads(raw_body)
            except ValueError:
                body = None
        record = RecordedRequest(
            session=session_of_path(path),
            method=method,
            path=path,
            headers=headers,
            body=body,
            time=time.time(),
            raw_body=raw_body,
            connection=connection_id,
        )
        if self._record:
            self._requests.append(record)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("mock server received %r", record)

        if path.endswith(_CHAT_SUFFIX):
            if method != "POST":
                return _error(
                    405, f"use POST for {path}", error_type="invalid_request_error", code=None
                )
            return await self._chat_completion(record, len(raw_body))
        if path.endswith(_MODELS_SUFFIX) and method == "GET":
            return _Reply(200, models_body(self._model), _JSON_HEADERS)
        return _error(
            404, f"unknown path {path}", error_type="invalid_request_error", code="unknown_url"
        )

    async def _chat_completion(self, record: RecordedRequest, size: int) -> _Reply:
        fault = self._faults.take(record.session)
        if fault is not None:
            if fault.kind != "delay":
                logger.debug("mock server injects %r into session %r", fault, record.session)
                return _fault_reply(fault, record.body)
            await asyncio.sleep(fault.seconds or 0.0)
        body = record.body
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(
                400,
                "request body must be a JSON object with a 'messages' list",
                error_type="invalid_request_error",
                code=None,
            )
        try:
            result = self._bound(body, record)
            if inspect.isawaitable(result):
                result = await result
        except Fault as raised:
            result = raised
        except Exception as error:
            logger.exception("mock policy %r failed on %r", self._policy, record)
            return _error(
                500,
                f"mock policy raised {type(error).__name__}: {error}",
                error_type="server_error",
                code="mock_policy_error",
            )
        if isinstance(result, Fault):
            return _fault_reply(result, body)
        try:
            return _Reply(200, completion_body(body, result, size), _JSON_HEADERS)
        except (PolicyResultError, TypeError, ValueError) as error:
            logger.error("mock policy %r gave an unusable answer: %s", self._policy, error)
            return _error(500, str(error), error_type="server_error", code="mock_policy_error")
