"""Judge access: one serializable judge value and its JSON request protocol.

A :class:`Judge` holds only configuration (model, endpoint, auth reference,
timeouts). Every request builds its own OpenAI SDK client over a cheap HTTP
client (of the library the installed SDK is built on: ``httpx2`` for openai 3.x,
``httpx`` for 2.x) that shares the running event loop's pooled connections,
resolves auth headers for each physical request, and closes the SDK client
exactly once. The SDK is imported on first use: ``AsyncOpenAI`` and
``_RequestModelAuth`` (an ``httpx.Auth`` as 0.2 defines it, whichever SDK generation is
installed; under openai 3 the judge sends through an httpx2 twin of it) are module
attributes resolved lazily.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
from collections.abc import AsyncGenerator, Awaitable, Hashable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

from benchmax._cancellation import stray_cancellation_as_error
from benchmax._hook_deadlines import deadline_for
from benchmax._modelhttp import AttemptTimedOut, sendable_auth_headers, within_deadline
from benchmax._url_credentials import UrlCredential, repr_masking_urls, with_url_credential
from benchmax._user_code import caller_location
from benchmax._value_checks import (
    is_finite_number,
    is_int_at_least,
    is_non_empty_str,
    is_numeric,
)
from benchmax.auth import ModelAuth, ModelRequestContext
from benchmax.envs.shared_types import JUDGE_ERROR, RolloutFailure
from benchmax.rewards.text import message_text, reasoning_finished, without_reasoning

__all__ = ["Judge", "JudgeError"]

logger = logging.getLogger(__name__)

# The SDK insists on an API key; real credentials come from the auth hook,
# which overwrites the Authorization header this placeholder produces.
_PLACEHOLDER_API_KEY = "benchmax-explicit-auth"
_FENCE = "```"
_AUTH_RETRY_DELAY_SECONDS = 0.5

DEFAULT_MAX_CONCURRENT_REQUESTS = 64
"""Requests one judge (equal judges count as one) has in flight on an event loop
at most; the rest wait their turn. Group size x rubrics can be hundreds."""


def __getattr__(name: str) -> Any:
    """Resolve the SDK-dependent module attributes on first use (importing the
    OpenAI SDK costs most of a second)."""
    if name == "AsyncOpenAI":
        from openai import AsyncOpenAI

        globals()[name] = AsyncOpenAI
        return AsyncOpenAI
    if name == "_RequestModelAuth":
        auth_class = _request_model_auth_class()
        globals()[name] = auth_class
        return auth_class
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class JudgeError(RolloutFailure):
    """No reliable reward could be obtained from the judge (termination reason ``judge_error``)."""

    def __init__(self, message: str) -> None:
        super().__init__(JUDGE_ERROR, message)


@dataclass(frozen=True, slots=True)
class Judge:
    """Where and how to reach an LLM judge. Holds no client or connection state.

    ``timeout`` (seconds, or ``None``) is a total deadline for each attempt.
    ``max_concurrent_requests`` (keyword-only, default 64) caps this judge's
    requests in flight on one event loop; equal judges share the cap.
    """

    model: str
    base_url: str
    auth: ModelAuth
    timeout: float | None = 60.0
    max_retries: int = 3
    auth_attempts: int = 3
    max_concurrent_requests: int = field(default=DEFAULT_MAX_CONCURRENT_REQUESTS, kw_only=True)

    def __post_init__(self) -> None:
        if not is_non_empty_str(self.model):
            raise ValueError("judge model must be non-empty")
        if not is_non_empty_str(self.base_url):
            raise ValueError("judge base_url must be non-empty")
        if not isinstance(self.auth, ModelAuth):
            raise TypeError("judge auth must implement ModelAuth")
        if self.timeout is not None and not (is_numeric(self.timeout) and self.timeout > 0):
            raise ValueError("judge timeout must be positive or None")
        if not is_int_at_least(self.max_retries, 0):
            raise ValueError("judge max_retries must be non-negative")
        if not is_int_at_least(self.auth_attempts, 1):
            raise ValueError("judge auth_attempts must be positive")
        if not is_int_at_least(self.max_concurrent_requests, 1):
            raise ValueError("judge max_concurrent_requests must be positive")

    def __repr__(self) -> str:
        return repr_masking_urls(self, "base_url")  # a password in the URL: user:***@

    async def request_json(
        self,
        prompt: str,
        *,
        request_id: str,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> tuple[dict[str, object], str]:
        """Send ``prompt`` and return ``(parsed JSON object, stripped raw text)``.

        Authentication failures (401/403) are retried with freshly resolved
        credentials up to ``auth_attempts`` times; any other failure raises
        :class:`JudgeError` at once (transient retries belong to the SDK's
        ``max_retries``). ``timeout`` is a total deadline for each attempt
        (SDK retries included), not a per-read timeout. At most
        ``max_concurrent_requests`` requests of this judge run at once on a loop.
        """
        request = self._build_request(
            prompt, request_id=request_id, temperature=temperature, max_tokens=max_tokens
        )
        from openai import AuthenticationError, PermissionDeniedError

        from benchmax._modelhttp import loop_pool

        last_auth_error: AuthenticationError | PermissionDeniedError | None = None
        for attempt in range(self.auth_attempts):
            try:
                with stray_cancellation_as_error(f"judge request {request_id}"):
                    async with loop_pool().limiter(
                        self._limiter_key(), self.max_concurrent_requests
                    ):
                        return await self._attempt(request, request_id=request_id)
            except (AuthenticationError, PermissionDeniedError) as error:
                last_auth_error = error
                logger.warning(
                    "judge.auth_rejected request_id=%s attempt=%d/%d status=%s",
                    request_id,
                    attempt + 1,
                    self.auth_attempts,
                    error.status_code,
                )
            except Exception as error:
                logger.exception("judge.request_failed request_id=%s", request_id)
                raise JudgeError(f"judge request failed: {_failure_text(error)}") from error
            if attempt + 1 < self.auth_attempts:
                await asyncio.sleep(_AUTH_RETRY_DELAY_SECONDS * (attempt + 1))
        logger.error(
            "judge.auth_failed request_id=%s attempts=%d",
            request_id,
            self.auth_attempts,
            exc_info=last_auth_error,
        )
        raise JudgeError(f"judge authentication failed: {last_auth_error}") from last_auth_error

    def _limiter_key(self) -> Hashable:
        try:
            hash(self)
        except TypeError:  # an unhashable auth object: this judge value alone
            return ("judge", id(self))
        return ("judge", self)

    def _build_request(
        self,
        prompt: str,
        *,
        request_id: str,
        temperature: float,
        max_tokens: int | None,
    ) -> dict[str, object]:
        if not is_non_empty_str(prompt):
            raise ValueError("judge prompt must be non-empty")
        if not is_non_empty_str(request_id):
            raise ValueError("judge request_id must be non-empty")
        if not is_numeric(temperature):
            raise TypeError("judge temperature must be numeric")
        if not is_finite_number(temperature):
            raise ValueError("judge temperature must be finite")
        if max_tokens is not None and not is_int_at_least(max_tokens, 1):
            raise ValueError("judge max_tokens must be positive or None")
        request: dict[str, object] = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": temperature,
            "timeout": self.timeout,
        }
        if max_tokens is not None:
            request["max_tokens"] = max_tokens
        return request

    async def _attempt(
        self, request: dict[str, object], *, request_id: str
    ) -> tuple[dict[str, object], str]:
        """One authorization attempt with its own context, HTTP client and SDK client."""
        context = ModelRequestContext(
            base_url=self.base_url, model=self.model, rollout_id=request_id
        )
        from benchmax._modelhttp import sdk_http_client
        from benchmax._url_credentials import split_url_credential

        # A user:password@ in the URL is sent as Basic authorization, never in the URL.
        base_url, url_credential = split_url_credential(self.base_url)
        auth = _sdk_auth_class()(self.auth, context)
        if url_credential is not None:
            auth.url_credential = url_credential
        http_client = sdk_http_client(auth=auth, timeout=self.timeout)
        factory = globals().get("AsyncOpenAI") or __getattr__("AsyncOpenAI")
        try:
            client = factory(
                base_url=base_url,
                api_key=_PLACEHOLDER_API_KEY,
                http_client=http_client,
                max_retries=self.max_retries,
            )
        except BaseException:
            await http_client.aclose()
            raise
        try:
            call = client.chat.completions.create(**request)
            deadline = deadline_for("judge", self.timeout)
            if deadline.seconds is None:
                response = await call
            elif not deadline.default:
                message = f"judge request timed out after {self.timeout:g}s (total deadline)"
                response = await within_deadline(call, deadline.seconds, message)
            else:
                response = await _within_default_deadline(call, deadline.seconds)
            raw = _response_text(response)
            if not raw:
                raise ValueError("judge returned an empty response")
            return _parse_json_object(raw), raw
        finally:
            await client.close()


async def _within_default_deadline[T](call: Awaitable[T], seconds: float) -> T:
    """``call`` under the runner's default judge deadline (the judge sets no ``timeout``);
    the failure names the code that asked for the verdict."""
    try:
        return await within_deadline(call, seconds, "")
    except AttemptTimedOut as error:
        message = (
            f"judge request did not answer within the runner's default deadline of "
            f"{seconds:g}s (Judge.timeout is None); called from {caller_location() or 'unknown'}"
        )
        raise AttemptTimedOut(message, seconds) from error


def _failure_text(error: BaseException) -> str:
    """``error``'s text, with its direct cause's when it hides it (openai 2.x wraps an
    auth hook's exception in ``APIConnectionError("Connection error.")``)."""
    text = str(error)
    cause = error.__cause__
    if cause is not None and str(cause) and str(cause) not in text:
        text += f" ({type(cause).__name__}: {cause})"
    return text


class _ReplyMessage(Protocol):
    @property
    def content(self) -> object: ...


class _ReplyChoice(Protocol):
    @property
    def message(self) -> _ReplyMessage: ...


class _ChatReply(Protocol):
    """What the judge reads of the SDK's chat completion (or a stand-in for it)."""

    @property
    def choices(self) -> Sequence[_ReplyChoice]: ...


def _response_text(response: _ChatReply) -> str:
    """The stripped text of the first choice (``""`` when there is none).

    The content may be a string, ``None`` or a list of parts
    (:func:`~benchmax.rewards.text.message_text`). Only truthiness and index 0
    are used on ``choices``, so minimal stand-in response objects work.
    """
    if not response.choices:
        return ""
    return message_text(response.choices[0].message.content).strip()


def _request_model_auth_class() -> type[Any]:
    """``_RequestModelAuth``: an ``httpx.Auth``, as 0.2 defines it, whichever SDK
    generation is installed (the judge of an httpx2-based SDK uses its twin)."""
    import httpx

    return _auth_class_for(httpx)


def _sdk_auth_class() -> type[Any]:
    """The auth class for the HTTP library the installed SDK uses: ``_RequestModelAuth``
    (the module attribute, a patch seam) for httpx, its httpx2 twin for openai 3."""
    from benchmax._modelhttp import sdk_http_module

    module = sdk_http_module()
    if module.__name__ == "httpx":
        auth_class: type[Any] = globals().get("_RequestModelAuth") or __getattr__(
            "_RequestModelAuth"
        )
        return auth_class
    return _auth_class_for(module)


@functools.cache
def _auth_class_for(http: ModuleType) -> type[Any]:
    """An ``Auth`` subclass of ``http`` (httpx or httpx2) resolving ``ModelAuth`` headers."""

    # The base class comes from the HTTP library given.
    class _RequestModelAuth(http.Auth):  # type: ignore[misc, name-defined]
        """Resolves ``auth`` headers for every request that flows through a client."""

        url_credential: UrlCredential | None = None
        """The judge's base URL credential, sent as its ``Authorization`` (set by the judge)."""

        def __init__(self, auth: ModelAuth, context: ModelRequestContext) -> None:
            self._auth = auth
            self._context = context

        async def async_auth_flow(self, request: Any) -> AsyncGenerator[Any, Any]:
            """Set freshly resolved auth headers on ``request`` (never cached), then send it."""
            headers = sendable_auth_headers(await self._auth.headers_for_request(self._context))
            if self.url_credential is not None:
                headers = with_url_credential(headers, self.url_credential)
            for name, value in headers.items():
                request.headers[name] = value
            yield request

    _RequestModelAuth.__module__ = __name__
    _RequestModelAuth.__qualname__ = "_RequestModelAuth"
    return _RequestModelAuth


def _parse_json_object(raw: str) -> dict[str, object]:
    """Return the JSON object a judge answered with; never repairs malformed JSON.

    Reasoning is never the verdict: ``<think>…</think>`` blocks (any case, with
    attributes) and everything before a lone ``</think>`` are dropped, and a reply
    whose ``<think>`` is never closed raises ValueError. In what remains, a
    surrounding code fence is removed; the whole text if it is one object, else the
    *last* outermost ``{…}`` (braces inside JSON strings do not count; an object cut
    off at the end of the text counts) is the verdict, and it must parse: an earlier
    draft is never used in its place (``beyond.md`` §9).

    Raises:
        ValueError: no object after the reasoning, the last one does not parse, or
            the reasoning never ended.
    """
    if not reasoning_finished(raw):
        raise ValueError(
            "judge response ended inside <think> reasoning: no verdict after the reasoning"
        )
    text = without_reasoning(raw).strip()
    if text.startswith(_FENCE) and text.endswith(_FENCE):
        lines = text.splitlines()
        if len(lines) >= 2:
            text = "\n".join(lines[1:-1]).strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        pass
    else:
        if isinstance(value, dict):
            return value
    last = _last_outermost_object(text)
    if last is None:
        raise ValueError(_NO_OBJECT)
    try:
        verdict = json.loads(last)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{_NO_OBJECT}: its last object does not parse ({error.msg}); an earlier draft"
            " is never used"
        ) from None
    if not isinstance(verdict, dict):  # pragma: no cover - a "{...}" span decodes to a dict
        raise ValueError(_NO_OBJECT)
    return verdict


_NO_OBJECT = "judge response did not contain a valid JSON object"
_OBJECT_SYNTAX = re.compile(r'[{}"\\]')


def _last_outermost_object(text: str) -> str | None:
    """The text of the last outermost ``{…}`` in ``text`` (running to the end when it is
    never closed), or ``None``. Outside objects, quotes are prose; inside, JSON strings
    (with backslash escapes) are skipped, so a brace in a string does not count."""
    last: str | None = None
    depth = 0
    start = 0
    in_string = False
    skip_to = 0
    for match in _OBJECT_SYNTAX.finditer(text):
        index = match.start()
        if index < skip_to:
            continue
        char = match.group()
        if depth == 0:
            if char == "{":
                depth, start, in_string = 1, index, False
            continue
        if in_string:
            if char == "\\":
                skip_to = index + 2
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                last = text[start : index + 1]
    if depth:
        return text[start:]
    return last
