"""One chat-completions call of a rollout: auth per attempt, a deadline per attempt,
retries, failure classification (envs.md §4.3-4.4, beyond.md §2 and §7).

:class:`ChatSession` posts ``{base_url}/chat/completions`` over the event loop's
pooled aiohttp session (``benchmax._modelhttp.connections``) and returns the
decoded JSON reply as plain data. A ``user:password@`` in ``base_url`` is sent as
Basic authorization, never in the URL (``benchmax._url_credentials``).
Failures never raise out of :meth:`ChatSession.complete` except cancellation and other
``BaseException`` instances; they come back as a :class:`CallFailure` naming the termination
reason, for ``BaseEnv`` to log and settle.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from benchmax._json_types import JSONValue
from benchmax._modelhttp import in_process, json_codec, retries
from benchmax._modelhttp.connections import PLACEHOLDER_AUTHORIZATION, LoopPool, loop_pool
from benchmax._modelhttp.deadlines import AttemptTimedOut, within_deadline
from benchmax._modelhttp.errors import ModelHTTPError
from benchmax._modelhttp.headers import wire_headers
from benchmax._modelhttp.keepalive import PlainTarget
from benchmax._modelhttp.overflow import is_context_overflow
from benchmax._url_credentials import split_url_credential, with_url_credential
from benchmax._vocabulary import CONTEXT_EXCEEDED, MODEL_ERROR, MODEL_RETRY_EVENT, MODEL_TIMEOUT
from benchmax.auth import ModelAuth, ModelRequestContext

__all__ = [
    "CallFailure",
    "ChatSession",
    "ModelReplyError",
    "ModelStatusError",
    "complete_once",
]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_SECONDS = 600.0
"""The deadline of one attempt when ``model_timeout`` is ``None`` (the OpenAI SDK's default)."""

_SERVER_TEXT_LIMIT = 2000
# Error objects in 200 replies that name no status: what their code or type says.
_STATUS_BY_KEYWORD = (
    ("rate_limit", 429),
    ("overloaded", 503),
    ("unavailable", 503),
    ("timeout", 408),
    ("server_error", 500),
    ("internal", 500),
)


@dataclass(frozen=True, slots=True)
class CallFailure:
    """Why a model call ended the rollout, and what to log about it."""

    termination_reason: str
    error: BaseException
    level: int


class ModelStatusError(ModelHTTPError):
    """The server refused the call: an HTTP error status, or a 200 reply whose body
    is an error object (``{"error": {...}}`` without choices, as gateways send).

    ``status`` is the HTTP status, or the one the error object names (``None`` when
    it names none); ``code`` the error's ``code`` member; ``context_overflow``
    whether it says the prompt does not fit the context window
    (``benchmax._modelhttp.overflow``); the string form carries what the server said.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None,
        code: object,
        retry_after: float | None = None,
        should_retry: bool | None = None,
        context_overflow: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.retry_after = retry_after
        self.should_retry = should_retry
        self.context_overflow = context_overflow

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_status_error,
            (str(self), self.status, self.code, self.context_overflow),
        )


def _rebuild_status_error(
    message: str, status: int | None, code: object, context_overflow: bool = False
) -> ModelStatusError:
    return ModelStatusError(message, status=status, code=code, context_overflow=context_overflow)


class ModelReplyError(ModelHTTPError):
    """A successful status whose body is not a JSON reply (empty, an event stream, or
    not JSON), or a chain of redirects too long to follow."""


def _server_text(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").strip()
    if len(text) > _SERVER_TEXT_LIMIT:
        text = text[:_SERVER_TEXT_LIMIT] + "..."
    return text


def _error_member(body: object) -> object:
    """What the error code is read from: the body's ``error`` member if it has one,
    else the body itself (the OpenAI SDK's rule)."""
    return body.get("error", body) if isinstance(body, Mapping) else body


def _named_status(error: Mapping[str, object]) -> int | None:
    """The HTTP status an error object names (``status``, ``status_code`` or a
    numeric ``code``), else one implied by its code or type (e.g. ``rate_limit``)."""
    for key in ("status", "status_code", "code"):
        value = error.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
        if isinstance(value, str) and value.isdigit() and 100 <= int(value) <= 599:
            return int(value)
    words = " ".join(str(error.get(key) or "") for key in ("code", "type")).lower()
    for keyword, status in _STATUS_BY_KEYWORD:
        if keyword in words:
            return status
    return None


def _status_error(status: int, raw: bytes, headers: Mapping[str, str]) -> ModelStatusError:
    try:
        body = json_codec.decode(raw) if raw else None
    except ValueError:
        body = None
    error = _error_member(body)
    code = error.get("code") if isinstance(error, Mapping) else None
    text = _server_text(raw)
    message = f"Error code: {status} - {text}" if text else f"Error code: {status}"
    should_retry = retries.server_retry_verdict(headers)
    if should_retry is None and status >= 500 and retries.is_validation_failure(text):
        should_retry = False  # a body the server's types refuse fails the same way again
    return ModelStatusError(
        message,
        status=status,
        code=code,
        retry_after=retries.retry_after_seconds(headers),
        should_retry=should_retry,
        context_overflow=is_context_overflow(status, error, text),
    )


def _reply_error(reply: Mapping[str, object], headers: Mapping[str, str]) -> ModelStatusError:
    """The failure a 200 reply carrying an error object stands for."""
    error = reply["error"]
    if isinstance(error, Mapping):
        status = _named_status(error)
        code = error.get("code")
        said = error.get("message")
    else:
        status, code, said = None, None, error
    named = f"status {status}" if status is not None else "no status"
    message = f"reply carried an error object ({named}, code {code!r})"
    if said:
        message += f": {_server_text(str(said).encode())}"
    return ModelStatusError(
        message,
        status=status,
        code=code,
        retry_after=retries.retry_after_seconds(headers),
        should_retry=retries.server_retry_verdict(headers),
        context_overflow=is_context_overflow(status, error),
    )


def _is_transient(error: BaseException) -> bool:
    if isinstance(error, ModelStatusError):
        if error.status is None or error.status == 400:
            return False  # a 400 is never retried, whatever the server says
        if error.should_retry is not None:
            return error.should_retry
        return retries.is_transient_status(error.status)
    return isinstance(
        error,
        aiohttp.ClientConnectionError | aiohttp.ClientPayloadError | AttemptTimedOut,
    )


class ChatSession:
    """The model calls of one rollout; :meth:`aclose` when the rollout ends.

    ``timeout`` bounds each HTTP attempt (``None``: the SDK's 600 s, reported as
    ``model_error`` rather than ``model_timeout``); ``retries`` extra attempts
    follow transient failures.
    """

    __slots__ = (
        "_auth",
        "_closed",
        "_context",
        "_deadline",
        "_given_headers",
        "_plain",
        "_pool",
        "_proxy",
        "_retries",
        "_timeout",
        "_timeout_message",
        "_url",
        "_url_credential",
        "_wire",
    )

    def __init__(
        self,
        pool: LoopPool,
        *,
        base_url: str,
        auth: ModelAuth,
        context: ModelRequestContext,
        timeout: float | None,
        retries: int,
        plain_http: bool = False,
    ) -> None:
        self._pool = pool
        self._closed = False
        # A user:password@ in the URL is sent as Basic authorization, never in the URL.
        url, self._url_credential = split_url_credential(base_url)
        self._url = (url if url.endswith("/") else url + "/") + "chat/completions"
        self._proxy = pool.proxy_for(self._url)
        # plain http:// without a proxy: the lighter keep-alive client (keepalive.py)
        self._plain = PlainTarget.from_url(self._url) if plain_http and not self._proxy else None
        self._auth = auth
        self._context = context
        self._timeout = timeout
        self._deadline = DEFAULT_TIMEOUT_SECONDS if timeout is None else timeout
        self._timeout_message = (
            f"model call exceeded model_timeout of {timeout:g}s"
            if timeout is not None
            else f"model call exceeded the default timeout of {DEFAULT_TIMEOUT_SECONDS:g}s"
        )
        self._retries = retries
        self._given_headers: dict[Any, Any] = {}
        self._wire: dict[str, str] | None = None
        pool.open_use()

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._pool.close_use()

    async def complete(self, body: Mapping[str, object]) -> JSONValue | CallFailure:
        """Call the model once (plus configured retries on transient failures).

        Returns the decoded JSON of a good reply (whatever JSON value it is), or a
        :class:`CallFailure`.
        """
        try:
            data = json_codec.encode(body)
        except (TypeError, ValueError) as error:
            return CallFailure(MODEL_ERROR, error, logging.ERROR)
        retry_number = 0
        while True:
            try:
                return await self._attempt(data)
            except Exception as error:
                if retry_number >= self._retries or not _is_transient(error):
                    return self._classify(error)
                retry_number += 1
                retry_after = getattr(error, "retry_after", None)
                delay = retries.retry_delay(retry_number, retry_after)
                logger.warning(
                    "%s rollout_id=%s attempt=%d retry_in=%.2fs: %s",
                    MODEL_RETRY_EVENT,
                    self._context.rollout_id,
                    retry_number,
                    delay,
                    error,
                )
            await retries.backoff_sleep(delay)

    async def _attempt(self, data: bytes) -> JSONValue:
        given = await self._auth.headers_for_request(self._context)
        if given == self._given_headers and self._wire is not None:
            headers = dict(self._wire)  # the same as the last attempt's: checked then
        else:
            headers = wire_headers(given)
            if self._url_credential is not None:
                headers = with_url_credential(headers, self._url_credential)
            self._given_headers, self._wire = dict(given), dict(headers)
        call = self._post(data, headers)
        return await within_deadline(call, self._deadline, self._timeout_message)

    async def _post(self, data: bytes, headers: dict[str, str]) -> JSONValue:
        try:
            return await self._post_once(data, headers)
        except aiohttp.TooManyRedirects as error:  # aiohttp's own text is "0, message=''"
            raise ModelReplyError(
                f"reply redirected too many times ({len(error.history)} redirects, last to"
                f" {error.request_info.real_url})"
            ) from error

    async def _post_once(self, data: bytes, headers: dict[str, str]) -> JSONValue:
        local = in_process.endpoint_for(self._url)
        if local is not None:  # benchmax serve's own endpoint: no socket
            status, raw = await local(self._url, data)
            if not 200 <= status < 300:
                raise _status_error(status, raw, {})
            return _decoded(raw, status, {})
        if self._plain is not None:
            if not any(name.lower() == "authorization" for name in headers):
                headers = {"Authorization": PLACEHOLDER_AUTHORIZATION, **headers}
            plain = await self._pool.keepalive().post(self._plain, headers, data)
            status = plain.status
            if not (300 <= status < 400 and "location" in plain.headers):
                if not 200 <= status < 300:
                    raise _status_error(status, plain.body, plain.headers)
                content_type = plain.headers.get("content-type", "")
                if content_type.partition(";")[0].strip().lower() == "text/event-stream":
                    raise _event_stream_error(status)
                return _decoded(plain.body, status, plain.headers)
            # a redirect: sent again by aiohttp, which follows it as every other call does
        session = self._pool.session()
        async with session.post(self._url, data=data, headers=headers, proxy=self._proxy) as reply:
            raw = await reply.read()
            status = reply.status
            if not 200 <= status < 300:
                raise _status_error(status, raw, reply.headers)
            if reply.content_type == "text/event-stream":
                raise _event_stream_error(status)
            return _decoded(raw, status, reply.headers)

    def _classify(self, error: Exception) -> CallFailure:
        if isinstance(error, ModelStatusError):
            if error.context_overflow:
                return CallFailure(CONTEXT_EXCEEDED, error, logging.WARNING)
            if error.status == 400:
                return CallFailure(MODEL_ERROR, error, logging.WARNING)
        timed_out = isinstance(error, AttemptTimedOut | asyncio.TimeoutError)
        if timed_out and self._timeout is not None:
            return CallFailure(MODEL_TIMEOUT, error, logging.ERROR)
        return CallFailure(MODEL_ERROR, error, logging.ERROR)


def _event_stream_error(status: int) -> ModelReplyError:
    return ModelReplyError(
        f"reply is an event stream (HTTP {status}, Content-Type: text/event-stream),"
        " but the request did not ask to stream; the chat loop reads whole JSON replies"
    )


def _decoded(raw: bytes, status: int, headers: Mapping[str, str]) -> JSONValue:
    """The JSON of a 2xx reply body; ``ModelReplyError`` for an empty or non-JSON body,
    or an error object without choices."""
    if not raw.strip():
        raise ModelReplyError(f"reply body is empty (HTTP {status})")
    try:
        decoded = json_codec.decode(raw)
    except ValueError as error:
        text = _server_text(raw)
        raise ModelReplyError(f"reply is not JSON (HTTP {status}): {text!r}") from error
    if (
        isinstance(decoded, dict)
        and "error" in decoded
        and not decoded.get("choices")
        and decoded["error"] is not None
    ):
        raise _reply_error(decoded, headers)
    return decoded


async def complete_once(
    body: Mapping[str, object],
    *,
    base_url: str,
    model: str,
    auth: ModelAuth,
    rollout_id: str,
    timeout: float | None,
    retries: int,
) -> JSONValue | CallFailure:
    """One chat call outside a rollout's own session (a preflight, a simulated user's
    turn): what :meth:`ChatSession.complete` returns, on this loop's connection pool,
    with ``rollout_id`` in the request context auth providers see."""
    session = ChatSession(
        loop_pool(),
        base_url=base_url,
        auth=auth,
        context=ModelRequestContext(base_url=base_url, model=model, rollout_id=rollout_id),
        timeout=timeout,
        retries=retries,
    )
    try:
        return await session.complete(body)
    finally:
        await session.aclose()
