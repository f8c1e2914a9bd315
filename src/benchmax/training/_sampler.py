"""The embedded sampler: a model's current weights behind an OpenAI-compatible endpoint.

:class:`PolicySampler` serves a live ``transformers`` model (the very object a trainer
updates) on ``host:port`` with aiohttp on a background thread, and samples it with
:class:`benchmax.training._decoding.BatchDecoder`: every request in flight is decoded in
one batch (padding, attention mask, key/value cache). Routes:

* ``POST /v1/chat/completions``: vLLM-shaped replies with exact token ids and logprobs
  (``benchmax._modelhttp.tokens`` reads them; fields in ``_chat_format``);
* ``POST /rollouts/{rollout_id}/v1/chat/completions`` (and ``GET .../v1/models``): the same,
  for the calls of one rollout, each continuing the previous call's exact ids
  token-in/token-out (``_continuation``): a chat template that re-renders earlier turns
  causes no token-prefix break. :attr:`PolicySampler.rollout_url` is that base URL with
  ``{rollout_id}`` left in, as ``RolloutFunc`` fills it;
* ``GET /v1/models``: the one model, ``model_name``, with its ``max_model_len``;
* ``POST /tokenize``: vLLM's ``{"count", "max_model_len", "tokens"}`` for ``messages``
  (rendered as a chat request would be) or a ``prompt`` string;
* ``GET /health``: 200.

Errors are OpenAI-shaped ``{"error": {"message", "type", "param", "code"}}``: 400 for a bad
request (the context overflow in vLLM's words, which benchmax reads as
``context_exceeded``), 404 for another model name or route, 500 when the model raised, 503
once closing. torch and transformers are imported when the sampler starts.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

import orjson
from aiohttp import web

from benchmax.training._chat_format import (
    RequestError,
    chat_reply,
    parse_chat_request,
    render_prompt,
)
from benchmax.training._continuation import RolloutTurns
from benchmax.training._decoding import AllowedTokens, BatchDecoder, DecoderStats, Sampled

__all__ = ["PolicySampler", "RequestFilter"]

RequestFilter = Callable[[Mapping[str, str], Mapping[str, object]], tuple[int, str] | None]
"""Called with a chat request's headers and body before it is sampled; an ``(HTTP status,
message)`` refuses it with that error (fault injection in tests, admission rules)."""

_DEFAULT_CONTEXT = 2048
_MAX_BODY_BYTES = 64 * 1024 * 1024


class PolicySampler:
    """Serves ``model``'s current weights over an OpenAI-compatible endpoint (vLLM-shaped
    token ids and logprobs), batching the requests in flight (module docs).

    ``model`` is a ``transformers`` causal LM (or a PEFT model around one) and
    ``tokenizer`` its tokenizer with a chat template. ``model_name`` is the only model
    name accepted; ``port`` 0 picks a free port; ``max_batch_size`` caps the rows decoded
    together. Keyword options: ``allowed_tokens`` (structured output: the ids a row may
    sample next given its completion so far), ``request_filter`` (see
    :data:`RequestFilter`), ``on_completion`` (called on the server's thread with every
    :class:`~benchmax.training._decoding.Sampled` before its reply is sent),
    ``max_model_len`` (default: the config's ``max_position_embeddings``), ``seed`` (for
    requests without one), ``gather_seconds`` (how long a pause in arrivals ends the
    gathering of a batch) and ``max_sequence_tokens`` (a token budget per sequence below
    the context window: a reply is cut where prompt + completion reach it, with
    ``finish_reason`` ``length``; a prompt that already fills it gets the context-length 400).

    Use it as a context manager or call :meth:`start` and :meth:`close`. The trainer calls
    :meth:`weights_updated` after each optimizer step; each reply carries the
    ``weights_version`` it was sampled with. ``ValueError`` for a ``max_batch_size`` or
    ``max_model_len`` below 1; ``OSError`` from :meth:`start` when the port is taken.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        model_name: str = "policy",
        host: str = "127.0.0.1",
        port: int = 0,
        max_batch_size: int = 64,
        allowed_tokens: AllowedTokens | None = None,
        request_filter: RequestFilter | None = None,
        on_completion: Callable[[Sampled], None] | None = None,
        max_model_len: int | None = None,
        seed: int | None = None,
        gather_seconds: float = 0.01,
        max_sequence_tokens: int | None = None,
    ) -> None:
        if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int):
            raise ValueError(f"max_batch_size must be an integer, got {max_batch_size!r}")
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}")
        if not isinstance(model_name, str) or not model_name:
            raise ValueError("model_name must be a non-empty string")
        if max_sequence_tokens is not None and (
            isinstance(max_sequence_tokens, bool)
            or not isinstance(max_sequence_tokens, int)
            or max_sequence_tokens < 1
        ):
            raise ValueError(
                f"max_sequence_tokens must be a positive integer, got {max_sequence_tokens!r}"
            )
        context = _context_length(model, tokenizer) if max_model_len is None else max_model_len
        if isinstance(context, bool) or not isinstance(context, int) or context < 1:
            raise ValueError(f"max_model_len must be a positive integer, got {context!r}")
        self.model = model
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.max_model_len = context
        self.max_sequence_tokens = max_sequence_tokens
        self._host = host
        self._port = port
        self._max_batch = max_batch_size
        self._allowed = allowed_tokens
        self._filter = request_filter
        self._on_completion = on_completion
        self._seed = seed
        self._gather_seconds = gather_seconds
        self._version = 0
        self._version_lock = threading.Lock()
        # A tokenizer is not safe to use from two threads at once: HTTP and sampling share it.
        self._tokenizer_lock = threading.Lock()
        self._decoder: BatchDecoder | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._bound_port: int | None = None
        self._closing = False
        self._turns = RolloutTurns(tokenizer)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start sampling and listening; ``RuntimeError`` when already started (a closed
        sampler does not start again)."""
        if self._loop is not None:
            raise RuntimeError("the sampler was already started")
        self._decoder = BatchDecoder(
            self.model,
            self.tokenizer,
            version=lambda: self.weights_version,
            max_batch_size=self._max_batch,
            max_model_len=self.max_model_len,
            allowed_tokens=self._allowed,
            gather_seconds=self._gather_seconds,
            seed=self._seed,
            tokenizer_lock=self._tokenizer_lock,
        )
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=loop.run_forever, name="benchmax-sampler-http", daemon=True
        )
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._listen(), loop).result()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop listening and sampling; requests still queued are refused (idempotent)."""
        self._closing = True
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            if self._runner is not None:
                asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop).result()
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
        if loop is not None and not loop.is_closed():
            loop.close()
        if self._decoder is not None:
            self._decoder.close()

    def __enter__(self) -> PolicySampler:
        if self._loop is None:  # entering a sampler already started is fine
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- what callers read ----------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1`` (``RuntimeError`` before :meth:`start`)."""
        if self._bound_port is None:
            raise RuntimeError("the sampler is not started")
        return f"http://{self._host}:{self._bound_port}/v1"

    @property
    def rollout_url(self) -> str:
        """``http://HOST:PORT/rollouts/{rollout_id}/v1``: the base URL for one rollout's
        calls, with ``{rollout_id}`` to fill in (``RolloutFunc`` does); each call of a
        rollout continues the previous call's exact ids (module docs). ``RuntimeError``
        before :meth:`start`."""
        if self._bound_port is None:
            raise RuntimeError("the sampler is not started")
        return f"http://{self._host}:{self._bound_port}/rollouts/{{rollout_id}}/v1"

    @property
    def turns(self) -> RolloutTurns:
        """The rollouts' last turns (``continued`` / ``rendered`` count the calls of known
        rollouts that did and did not continue their previous call)."""
        return self._turns

    @property
    def weights_version(self) -> int:
        """How many times :meth:`weights_updated` was called (0 at start)."""
        return self._version

    def weights_updated(self) -> None:
        """Say the model's weights changed (after an optimizer step): later waves report
        the next ``weights_version``."""
        with self._version_lock:
            self._version += 1

    @property
    def stats(self) -> DecoderStats:
        """Waves, rows, tokens and busy seconds so far (``RuntimeError`` before start)."""
        if self._decoder is None:
            raise RuntimeError("the sampler is not started")
        return self._decoder.stats

    # -- HTTP -----------------------------------------------------------------------------

    async def _listen(self) -> None:
        app = web.Application(client_max_size=_MAX_BODY_BYTES)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/rollouts/{rollout}/v1/chat/completions", self._chat)
        app.router.add_get("/rollouts/{rollout}/v1/models", self._models)
        app.router.add_post("/tokenize", self._tokenize)
        app.router.add_get("/health", self._health)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        self._runner = runner
        site = web.TCPSite(runner, self._host, self._port)
        await site.start()
        address = runner.addresses[0]
        self._bound_port = int(address[1])

    async def _chat(self, request: web.Request) -> web.Response:
        if self._closing or self._decoder is None:
            return _error(503, "the sampler is closing")
        body = await _json_body(request)
        if isinstance(body, web.Response):
            return body
        if self._filter is not None and isinstance(body, Mapping):
            refusal = self._filter(request.headers, body)
            if refusal is not None:
                return _error(refusal[0], refusal[1])
        rollout = request.match_info.get("rollout")
        try:
            with self._tokenizer_lock:
                continued = None if rollout is None else self._turns.prompt_ids(rollout, body)
                parsed = parse_chat_request(
                    self.tokenizer,
                    body,
                    model_name=self.model_name,
                    max_model_len=self.max_model_len,
                    max_sequence_tokens=self.max_sequence_tokens,
                    prompt_ids=continued,
                )
        except RequestError as error:
            return _error(error.status, str(error))
        try:
            sampled = await asyncio.wrap_future(
                self._decoder.submit(parsed.prompt_ids, parsed.params)
            )
        except Exception as error:
            return _error(500, f"sampling failed: {type(error).__name__}: {error}")
        if self._on_completion is not None:
            self._on_completion(sampled)
        with self._tokenizer_lock:
            reply = chat_reply(self.tokenizer, parsed, sampled)
        if rollout is not None and isinstance(body, Mapping):
            self._turns.record(
                rollout,
                body,
                sampled.prompt_ids,
                sampled.completion_ids,
                ended_by_token=sampled.finish_reason == "stop"
                and not isinstance(sampled.stop_reason, str),
                reply=_reply_message(reply),
            )
        return _json(200, reply)

    async def _models(self, request: web.Request) -> web.Response:
        card = {
            "id": self.model_name,
            "object": "model",
            "created": 0,
            "owned_by": "benchmax",
            "max_model_len": self.max_model_len,
        }
        return _json(200, {"object": "list", "data": [card]})

    async def _tokenize(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        if isinstance(body, web.Response):
            return body
        if not isinstance(body, Mapping):
            return _error(400, "the body must be a JSON object")
        try:
            with self._tokenizer_lock:
                if "messages" in body:
                    tokens = render_prompt(self.tokenizer, body)
                elif isinstance(body.get("prompt"), str):
                    special = body.get("add_special_tokens", True) is not False
                    tokens = list(self.tokenizer.encode(body["prompt"], add_special_tokens=special))
                else:
                    raise RequestError("tokenize needs messages or a prompt string")
        except RequestError as error:
            return _error(error.status, str(error))
        reply = {"count": len(tokens), "max_model_len": self.max_model_len, "tokens": tokens}
        return _json(200, reply)

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=503 if self._closing else 200)


async def _json_body(request: web.Request) -> object:
    try:
        return orjson.loads(await request.read())
    except orjson.JSONDecodeError as error:
        return _error(400, f"the body is not JSON: {error}")


def _json(status: int, payload: object) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(payload), content_type="application/json")


_ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 503: "ServiceUnavailableError"}


def _error(status: int, message: str) -> web.Response:
    kind = _ERROR_TYPES.get(status, "InternalServerError" if status >= 500 else "BadRequestError")
    payload = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return _json(status, payload)


def _reply_message(reply: Mapping[str, object]) -> Mapping[str, object]:
    choices = reply["choices"]
    assert isinstance(choices, list)
    message = choices[0]["message"]
    assert isinstance(message, Mapping)
    return message


def _context_length(model: Any, tokenizer: Any) -> int:
    config = getattr(model, "config", None)
    value = getattr(config, "max_position_embeddings", None)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    value = getattr(tokenizer, "model_max_length", None)
    if isinstance(value, int) and 0 < value < 10_000_000:
        return value
    return _DEFAULT_CONTEXT
