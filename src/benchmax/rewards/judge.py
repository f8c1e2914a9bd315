"""Judge access: one serializable judge value and its JSON request protocol.

A :class:`Judge` holds only configuration (model, endpoint, auth reference,
timeouts). Every request builds its own OpenAI SDK client over a cheap HTTP
client that shares the running event loop's pooled transport, resolves auth
headers for each physical request, and closes the SDK client exactly once.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import httpx
from openai import AsyncOpenAI, AuthenticationError, PermissionDeniedError

from benchmax._value_checks import (
    is_finite_number,
    is_int_at_least,
    is_non_empty_str,
    is_numeric,
)
from benchmax.auth import ModelAuth, ModelRequestContext
from benchmax.envs._auth_headers import sendable_auth_headers
from benchmax.envs._connection_pool import pooled_http_client
from benchmax.envs._sdk_platform import share_platform_probe
from benchmax.envs.shared_types import RolloutFailure
from benchmax.rewards.text import message_text, reasoning_finished, without_reasoning

__all__ = ["Judge", "JudgeError"]

logger = logging.getLogger(__name__)

# The SDK insists on an API key; real credentials come from the auth hook,
# which overwrites the Authorization header this placeholder produces.
_PLACEHOLDER_API_KEY = "benchmax-explicit-auth"
_FENCE = "```"
_AUTH_RETRY_DELAY_SECONDS = 0.5


class JudgeError(RolloutFailure):
    """No reliable reward could be obtained from the judge (termination reason ``judge_error``)."""

    def __init__(self, message: str) -> None:
        super().__init__("judge_error", message)


@dataclass(frozen=True, slots=True)
class Judge:
    """Where and how to reach an LLM judge. Holds no client or connection state."""

    model: str
    base_url: str
    auth: ModelAuth
    timeout: float | None = 60.0
    max_retries: int = 3
    auth_attempts: int = 3

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

    async def request_json(
        self,
        prompt: str,
        *,
        request_id: str,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> tuple[dict[str, Any], str]:
        """Send ``prompt`` and return ``(parsed JSON object, stripped raw text)``.

        Authentication failures (401/403) are retried with freshly resolved
        credentials up to ``auth_attempts`` times; any other failure raises
        :class:`JudgeError` at once (transient retries belong to the SDK's
        ``max_retries``).
        """
        request = self._build_request(
            prompt, request_id=request_id, temperature=temperature, max_tokens=max_tokens
        )
        last_auth_error: AuthenticationError | PermissionDeniedError | None = None
        for attempt in range(self.auth_attempts):
            try:
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
                raise JudgeError(f"judge request failed: {error}") from error
            if attempt + 1 < self.auth_attempts:
                await asyncio.sleep(_AUTH_RETRY_DELAY_SECONDS * (attempt + 1))
        logger.error(
            "judge.auth_failed request_id=%s attempts=%d",
            request_id,
            self.auth_attempts,
            exc_info=last_auth_error,
        )
        raise JudgeError(f"judge authentication failed: {last_auth_error}") from last_auth_error

    def _build_request(
        self,
        prompt: str,
        *,
        request_id: str,
        temperature: float,
        max_tokens: int | None,
    ) -> dict[str, Any]:
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
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": temperature,
            "timeout": self.timeout,
        }
        if max_tokens is not None:
            request["max_tokens"] = max_tokens
        return request

    async def _attempt(
        self, request: dict[str, Any], *, request_id: str
    ) -> tuple[dict[str, Any], str]:
        """One authorization attempt with its own context, HTTP client and SDK client."""
        context = ModelRequestContext(
            base_url=self.base_url, model=self.model, rollout_id=request_id
        )
        http_client = pooled_http_client(timeout=self.timeout)
        http_client.auth = _RequestModelAuth(self.auth, context)
        try:
            client = AsyncOpenAI(
                base_url=self.base_url,
                api_key=_PLACEHOLDER_API_KEY,
                http_client=http_client,
                max_retries=self.max_retries,
            )
            share_platform_probe(client)
        except BaseException:
            await http_client.aclose()
            raise
        try:
            response = await client.chat.completions.create(**request)
            raw = _response_text(response)
            if not raw:
                raise ValueError("judge returned an empty response")
            return _parse_json_object(raw), raw
        finally:
            await client.close()


def _response_text(response: Any) -> str:
    """The stripped text of the first choice (``""`` when there is none).

    The content may be a string, ``None`` or a list of parts
    (:func:`~benchmax.rewards.text.message_text`). Only truthiness and index 0
    are used on ``choices``, so minimal stand-in response objects work.
    """
    if not response.choices:
        return ""
    return message_text(response.choices[0].message.content).strip()


class _RequestModelAuth(httpx.Auth):
    """Resolves ``auth`` headers for every request that flows through a client."""

    def __init__(self, auth: ModelAuth, context: ModelRequestContext) -> None:
        self._auth = auth
        self._context = context

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        """Set freshly resolved auth headers on ``request`` (never cached), then send it."""
        headers = sendable_auth_headers(await self._auth.headers_for_request(self._context))
        for name, value in headers.items():
            request.headers[name] = value
        yield request


def _parse_json_object(raw: str) -> dict[str, Any]:
    """Return the JSON object a judge answered with; never repairs malformed JSON.

    Reasoning is never the verdict: ``<think>…</think>`` blocks and everything
    before a lone ``</think>`` are dropped, and a reply whose ``<think>`` is
    never closed raises ValueError. In what remains, a surrounding code fence
    is removed; the whole text if it is one object, else the last object
    found (outermost objects only, scanning left to right) is the verdict.

    Raises:
        ValueError: no object after the reasoning, or the reasoning never ended.
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
    decoder = json.JSONDecoder()
    verdict: dict[str, Any] | None = None
    position = text.find("{")
    while position != -1:
        try:
            verdict, end = decoder.raw_decode(text, position)  # a "{" only ever decodes to a dict
        except json.JSONDecodeError:
            end = position + 1
        position = text.find("{", end)
    if verdict is None:
        raise ValueError("judge response did not contain a valid JSON object")
    return verdict
