"""One rollout's side of the capture endpoint: ``CaptureSession``.

A session owns a program's credential (its API key), its base URL, the upstream it
forwards to (with the upstream's real credential, which the program never sees), the
rollout's budget (model calls, sampled tokens) and the calls it recorded. The first thing
that ends the rollout (a wrong model name, a spent budget, an upstream failure, a reply
without exact tokens) is kept as ``failure``, and ``ended`` is set so whoever runs the
program can stop it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from benchmax._modelhttp import (
    TOKEN_REQUEST_FIELDS,
    CallFailure,
    CallTokens,
    ChatSession,
    TokenDeficiency,
    loop_pool,
    read_call_tokens,
    reply_weights_version,
)
from benchmax._secret_masking import credential_secrets, mask_secrets
from benchmax._vocabulary import (
    MAX_TURNS_EXCEEDED,
    MODEL_ERROR,
    OUTPUT_EXCEEDED,
    WRONG_MODEL,
)
from benchmax.auth import ModelAuth, ModelRequestContext
from benchmax.capture._calls import CapturedCall

__all__ = ["CaptureFailure", "CaptureSession", "Refusal", "program_reply"]

logger = logging.getLogger("benchmax.capture")

_STREAM_FIELDS: Final = ("stream", "stream_options")
_TOKEN_REPLY_FIELDS: Final = ("prompt_token_ids", "prompt_logprobs", "sglext")
_CHOICE_TOKEN_FIELDS: Final = ("token_ids", "prompt_token_ids", "response_token_ids")


@dataclass(frozen=True, slots=True)
class Refusal:
    """What the program is answered instead of a reply: an HTTP ``status`` and an
    OpenAI-style error ``code`` and one-line ``message``."""

    status: int
    code: str
    message: str

    def body(self) -> dict[str, Any]:
        kind = "invalid_request_error" if self.status < 500 else "upstream_error"
        return {"error": {"message": self.message, "type": kind, "code": self.code}}


@dataclass(frozen=True, slots=True)
class CaptureFailure:
    """Why a session ended its rollout: a termination reason and a one-line message."""

    termination_reason: str
    message: str


class CaptureSession:
    """The capture endpoint's record of one rollout (made by ``CaptureEndpoint.open_session``).

    ``base_url`` and ``api_key`` are what the program is given (``OPENAI_BASE_URL``,
    ``OPENAI_API_KEY``); ``model`` the only model name it may call (``None``: any);
    ``calls`` the calls recorded so far, in the order their replies came; ``failure`` the
    first thing that ended the rollout (``None`` while none did) and ``ended`` an event
    set with it; ``sampled_tokens`` the completion tokens recorded. The key never appears
    in ``repr``.
    """

    __slots__ = (
        "_calls",
        "_chat",
        "_closed",
        "_ended_by_close",
        "_failure",
        "_in_flight",
        "_sampled",
        "_secrets",
        "api_key",
        "base_url",
        "ended",
        "max_calls",
        "max_sampled_tokens",
        "model",
        "rollout_id",
        "sampling_args",
        "started_calls",
    )

    def __init__(
        self,
        *,
        rollout_id: str,
        api_key: str,
        base_url: str,
        model: str | None,
        upstream_url: str,
        upstream_auth: ModelAuth,
        timeout: float | None = None,
        retries: int = 0,
        sampling_args: Mapping[str, Any] = MappingProxyType({}),
        max_calls: int | None = None,
        max_sampled_tokens: int | None = None,
    ) -> None:
        self.rollout_id = rollout_id
        self.api_key = api_key
        self.base_url = base_url
        self.model = model
        self.sampling_args = dict(sampling_args)
        self.max_calls = max_calls
        self.max_sampled_tokens = max_sampled_tokens
        self.started_calls = 0
        self.ended = asyncio.Event()
        self._calls: list[CapturedCall] = []
        self._failure: CaptureFailure | None = None
        self._sampled = 0
        self._closed = False
        # handler tasks waiting for the upstream, and those cancelled by ``aclose``
        self._in_flight: set[asyncio.Task[Any]] = set()
        self._ended_by_close: set[asyncio.Task[Any]] = set()
        # an upstream may echo its credential in an error: masked before anyone sees it
        self._secrets = credential_secrets([upstream_auth], upstream_url, warn=False)
        self._chat = ChatSession(
            loop_pool(),
            base_url=upstream_url,
            auth=upstream_auth,
            context=ModelRequestContext(
                base_url=upstream_url, model=model or "", rollout_id=rollout_id
            ),
            timeout=timeout,
            retries=retries,
            plain_http=True,
        )

    def __repr__(self) -> str:
        return (
            f"CaptureSession(rollout_id={self.rollout_id!r}, base_url={self.base_url!r},"
            f" calls={len(self._calls)}, api_key='***')"
        )

    @property
    def calls(self) -> tuple[CapturedCall, ...]:
        return tuple(self._calls)

    @property
    def failure(self) -> CaptureFailure | None:
        return self._failure

    @property
    def sampled_tokens(self) -> int:
        return self._sampled

    def fail(self, termination_reason: str, message: str) -> None:
        """Settle the rollout as ``termination_reason`` (the first failure wins) and set
        ``ended``."""
        if self._failure is None:
            self._failure = CaptureFailure(termination_reason, message)
            logger.warning(
                "capture.rollout_ended rollout_id=%s termination_reason=%s: %s",
                self.rollout_id,
                termination_reason,
                message,
            )
        self.ended.set()

    async def aclose(self) -> None:
        """Close the session: upstream calls still in flight are abandoned (their program
        is gone with its rollout; nothing waits for a slow upstream)."""
        if not self._closed:
            self._closed = True
            current = asyncio.current_task()
            for task in self._in_flight:  # their upstream call is cancelled, not them
                if task is not current:
                    self._ended_by_close.add(task)
                    task.cancel()
            await self._chat.aclose()

    async def complete(self, body: Mapping[str, Any]) -> CapturedCall | Refusal:
        """Forward one program request upstream (without streaming, asking for exact
        tokens) and record it; or the refusal to answer the program with."""
        refused = self._admitted(body)
        if refused is not None:
            return refused
        self.started_calls += 1
        upstream = {k: v for k, v in body.items() if k not in _STREAM_FIELDS}
        upstream.update(TOKEN_REQUEST_FIELDS)
        upstream.update(self.sampling_args)
        started = time.perf_counter()
        task = asyncio.current_task()
        assert task is not None  # the endpoint's handler runs as a task
        self._in_flight.add(task)
        try:
            decoded = await self._chat.complete(upstream)
        except asyncio.CancelledError:
            if task not in self._ended_by_close or task.uncancel() > 0:
                raise  # the handler itself is cancelled
            return Refusal(409, "rollout_ended", "the rollout ended during this call")
        finally:
            self._in_flight.discard(task)
            self._ended_by_close.discard(task)
        seconds = time.perf_counter() - started
        if isinstance(decoded, CallFailure):
            message = _one_line(
                mask_secrets(f"the upstream call failed: {decoded.error}", self._secrets)
            )
            self.fail(decoded.termination_reason, message)
            return Refusal(502, "upstream_failed", message)
        if not isinstance(decoded, dict):
            message = "the upstream reply is not a JSON object"
            self.fail(MODEL_ERROR, message)
            return Refusal(502, "upstream_failed", message)
        tokens = read_call_tokens(decoded)
        if isinstance(tokens, TokenDeficiency):
            message = (
                f"benchmax capture needs exact token ids and logprobs, but {tokens.message}:"
                " point it at a server that returns them (vLLM, SGLang, benchmax's train"
                " sampler, benchmax.testing.MockModelServer(tokens=True))"
            )
            self.fail(MODEL_ERROR, message)
            return Refusal(502, "tokens_unavailable", message)
        _share_token_ids(decoded, tokens)
        call = CapturedCall(
            request=body,  # decoded for this call alone: nothing else holds it
            reply=decoded,
            tokens=tokens,
            weights_version=reply_weights_version(decoded),
            seconds=seconds,
            streamed=bool(body.get("stream")),
        )
        self._calls.append(call)
        self._sampled += len(tokens.completion_token_ids)
        if self.max_sampled_tokens is not None and self._sampled > self.max_sampled_tokens:
            self.fail(
                OUTPUT_EXCEEDED,
                f"the program's calls sampled {self._sampled} tokens, over the budget of"
                f" {self.max_sampled_tokens}",
            )
        return call

    def _admitted(self, body: Mapping[str, Any]) -> Refusal | None:
        if self._failure is not None:
            return Refusal(409, "rollout_ended", f"the rollout ended: {self._failure.message}")
        if not isinstance(body.get("messages"), list):
            return Refusal(400, "invalid_request", "the body must have a 'messages' list")
        n = body.get("n", 1)
        if n not in (1, None):
            return Refusal(
                400, "unsupported_parameter", "capture records one choice per call: n must be 1"
            )
        if self.model is not None and body.get("model") != self.model:
            message = f"model {body.get('model')!r} is not this rollout's model {self.model!r}"
            self.fail(WRONG_MODEL, message)
            return Refusal(404, "model_not_found", message)
        if self.max_calls is not None and self.started_calls >= self.max_calls:
            message = f"the program made more than {self.max_calls} model calls (max_turns)"
            self.fail(MAX_TURNS_EXCEEDED, message)
            return Refusal(429, "budget_exceeded", message)
        return None


def program_reply(call: CapturedCall) -> dict[str, Any]:
    """The upstream reply as the program gets it: without the token fields capture asked
    for that the program did not (``logprobs`` stays when it asked for them)."""
    request = call.request
    reply = dict(call.reply)
    reply.pop("weights_version", None)
    if request.get("return_token_ids"):
        return reply
    for name in _TOKEN_REPLY_FIELDS:
        reply.pop(name, None)
    choices = reply.get("choices")
    if isinstance(choices, list):
        kept = []
        for choice in choices:
            if isinstance(choice, dict | Mapping):
                choice = {k: v for k, v in choice.items() if k not in _CHOICE_TOKEN_FIELDS}
                if not request.get("logprobs"):
                    choice.pop("logprobs", None)
            kept.append(choice)
        reply["choices"] = kept
    return reply


def _share_token_ids(reply: dict[str, Any], tokens: CallTokens) -> None:
    """Replace the reply's id lists that ``tokens`` was read from with its tuples (the same
    ids): a recorded call then holds each id sequence once, and tuples of integers are
    left alone by the garbage collector, which would otherwise walk every id of every
    recorded prompt again and again while the rollout runs."""
    prompt, completion = tokens.prompt_token_ids, tokens.completion_token_ids
    choice = reply["choices"][0]  # read_call_tokens found it
    if type(reply.get("prompt_token_ids")) is list:
        reply["prompt_token_ids"] = prompt
    elif type(choice.get("prompt_token_ids")) is list:
        choice["prompt_token_ids"] = prompt
    for name in ("token_ids", "response_token_ids"):
        if type(choice.get(name)) is list:
            choice[name] = completion
            break


def _one_line(text: str, limit: int = 500) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
