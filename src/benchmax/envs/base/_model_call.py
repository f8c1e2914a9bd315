"""One chat-completions call of a rollout: auth per attempt, timeout, retries, classification.

The rollout's SDK client is built per rollout over the event loop's pooled
transport (see ``benchmax.envs._connection_pool``). Failures never raise out of
:meth:`ModelSession.complete` except cancellation and other ``BaseException``
instances; they come back as a :class:`ModelCallFailure` naming the
termination reason, for ``BaseEnv`` to log and settle.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import openai

from benchmax.auth import ModelRequestContext
from benchmax.envs._auth_headers import sendable_auth_headers
from benchmax.envs._connection_pool import PoolLease
from benchmax.envs._sdk_platform import share_platform_probe
from benchmax.envs.shared_types import RolloutRequest

__all__ = ["ModelCallFailure", "ModelSession", "backoff_sleep", "retry_delay"]

logger = logging.getLogger(__name__)

_PLACEHOLDER_API_KEY = "benchmax-runtime-auth"
_BACKOFF_BASE = 0.5
_BACKOFF_CAP = 30.0
_RETRY_AFTER_CAP = 60.0
_TRANSIENT_STATUSES = frozenset({408, 409, 429})
_SERVER_TEXT_LIMIT = 2000


@dataclass(frozen=True, slots=True)
class ModelCallFailure:
    """Why a model call ended the rollout, and what to log about it."""

    termination_reason: str
    error: BaseException
    level: int


class _AttemptTimedOut(Exception):
    """One HTTP attempt outlived ``model_timeout``."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"model call exceeded model_timeout of {seconds:g}s")


async def backoff_sleep(seconds: float) -> None:
    """Wait before a retry (a module-level seam so tests can shorten waits)."""
    await asyncio.sleep(seconds)


def retry_delay(retry_number: int, retry_after: float | None) -> float:
    """Seconds to wait before retry ``retry_number`` (1-based).

    A server's ``Retry-After`` wins (capped at 60 s); otherwise exponential
    backoff from 0.5 s, capped at 30 s, with equal jitter.
    """
    if retry_after is not None:
        return min(retry_after, _RETRY_AFTER_CAP)
    ceiling = min(_BACKOFF_CAP, _BACKOFF_BASE * 2 ** (retry_number - 1))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def _retry_after_seconds(error: BaseException) -> float | None:
    """The wait a failed response asks for (``Retry-After-Ms``, ``Retry-After`` in
    seconds or as an HTTP date), or ``None`` when it names none usable."""
    if not isinstance(error, openai.APIStatusError):
        return None
    headers = error.response.headers
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            seconds = float(millis) / 1000
        except ValueError:
            pass
        else:
            return max(0.0, seconds) if math.isfinite(seconds) else None
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        date = email.utils.parsedate_tz(value)
        if date is None:
            return None
        try:
            seconds = email.utils.mktime_tz(date) - time.time()
        except (OverflowError, ValueError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _is_transient(error: BaseException) -> bool:
    if isinstance(error, openai.APIConnectionError | _AttemptTimedOut):
        return True
    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        return status in _TRANSIENT_STATUSES or status >= 500
    return False


def _note_server_text(error: BaseException) -> None:
    """Make sure a status error's traceback shows what the server said.

    The SDK puts only an OpenAI-style ``message`` field into the error text; a
    plain-text or differently shaped error body is added as a note instead.
    """
    if not isinstance(error, openai.APIStatusError) or str(error) != (
        f"Error code: {error.status_code}"
    ):
        return
    try:
        text = error.response.text.strip()
    except Exception:  # body not read (httpx or httpx2 ResponseNotRead): nothing to add
        return
    if text:
        error.add_note(f"server response: {text[:_SERVER_TEXT_LIMIT]}")


def _bad_request_code(error: openai.BadRequestError) -> object:
    body = error.body
    return body.get("code") if isinstance(body, Mapping) else None


class ModelSession:
    """The model client of one rollout; :meth:`aclose` when the rollout ends."""

    def __init__(
        self,
        request: RolloutRequest[Any],
        lease: PoolLease,
        *,
        timeout: float | None,
        retries: int,
    ) -> None:
        self._request = request
        self._timeout = timeout
        self._retries = retries
        self._context = ModelRequestContext(
            base_url=request.base_url, model=request.model, rollout_id=request.rollout_id
        )
        http_timeout = (
            None if timeout is None else httpx.Timeout(timeout, connect=min(5.0, timeout))
        )
        self._client = openai.AsyncOpenAI(
            api_key=_PLACEHOLDER_API_KEY,
            base_url=request.base_url,
            max_retries=0,
            http_client=lease.client(timeout=http_timeout),
        )
        share_platform_probe(self._client)

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(self, body: dict[str, Any]) -> Any:
        """POST ``body`` once (plus configured retries on transient failures).

        Returns the decoded JSON of a 200 reply (any JSON value), or a
        :class:`ModelCallFailure`.
        """
        retry_number = 0
        while True:
            try:
                return await self._attempt(body)
            except Exception as error:
                if retry_number >= self._retries or not _is_transient(error):
                    return self._classify(error)
                retry_number += 1
                delay = retry_delay(retry_number, _retry_after_seconds(error))
                logger.warning(
                    "base.rollout.model_retry rollout_id=%s attempt=%d retry_in=%.2fs: %s",
                    self._request.rollout_id,
                    retry_number,
                    delay,
                    error,
                )
            await backoff_sleep(delay)

    async def _attempt(self, body: dict[str, Any]) -> Any:
        headers = sendable_auth_headers(
            await self._request.model_auth.headers_for_request(self._context)
        )
        # The reply is read as plain decoded JSON (not SDK models) so that
        # ``benchmax._modelhttp.replies`` sees exactly what the server sent.
        call = self._client.post(
            "/chat/completions", cast_to=httpx.Response, body=body, options={"headers": headers}
        )
        if self._timeout is None:
            response = await call
        else:
            deadline = asyncio.timeout(self._timeout)
            try:
                async with deadline:
                    response = await call
            except TimeoutError as error:
                if deadline.expired():
                    raise _AttemptTimedOut(self._timeout) from error
                raise
        return json.loads(response.content)

    def _classify(self, error: Exception) -> ModelCallFailure:
        _note_server_text(error)
        if isinstance(error, openai.BadRequestError):
            code = _bad_request_code(error)
            reason = "context_exceeded" if code == "context_budget_exceeded" else "model_error"
            return ModelCallFailure(reason, error, logging.WARNING)
        timed_out = isinstance(error, _AttemptTimedOut | openai.APITimeoutError)
        if timed_out and self._timeout is not None:
            return ModelCallFailure("model_timeout", error, logging.ERROR)
        return ModelCallFailure("model_error", error, logging.ERROR)
