"""Batched sampling from a causal language model's current weights (torch, imported lazily).

:class:`BatchDecoder` owns one worker thread. Requests (prompt ids + :class:`SamplingParams`)
queue up; the worker gathers the ones arriving together (until a pause of
``gather_seconds`` or ``max_batch_size`` rows), prefills them as one left-padded batch and
decodes the whole batch one token per forward pass with a key/value cache
(``_kv_batch.KVBatch``). Between two forward passes, rows that finished (EOS, a stop token
or string, ``max_tokens``, the context window) are answered and leave the batch, and
requests that arrived meanwhile join it (continuous batching, when the model's cache
layers allow it), so the rollouts in flight share every forward pass.

Each row draws from its own random stream (``_next_token``), seeded by the request's
``seed`` and its prompt ids: a seeded request samples the same tokens whatever else is in
flight (up to floating-point differences between batch shapes, as on any batching server),
and the turns of one conversation sending one seed still draw independently. The reported
logprob of each token (and its ``top_logprobs``) is ``log_softmax(logits / temperature)``
of the distribution the row samples from, before top-k, top-p and ``allowed_tokens``
restrict it: what TRL's ``GRPOTrainer`` recomputes from the same weights (it divides the
logits by its ``temperature`` before ``log_softmax``). Greedy rows (temperature 0) report
the raw ``log_softmax``.

The model is sampled under ``torch.no_grad()`` in eval mode; the mode it had is restored
whenever the worker runs out of rows. The caller must not change the weights while rows
are decoding (a trainer calling ``rollout_func`` waits for its rollouts before stepping).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import queue
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from benchmax.training._kv_batch import KVBatch, ModelCalls
from benchmax.training._next_token import AllowedTokens, next_tokens

__all__ = ["AllowedTokens", "BatchDecoder", "DecoderStats", "Sampled", "SamplingParams"]

_GATHER_LIMIT_SECONDS = 0.1


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """How to sample one completion. ``max_tokens`` >= 1; ``temperature`` >= 0 (0:
    greedy); ``top_p`` in (0, 1]; ``top_k`` 0 for all tokens; ``stop`` strings end the
    completion (the text is cut before them, the ids keep the token that completed one);
    ``stop_token_ids`` end it like EOS; ``top_logprobs`` alternatives per token (0-20)."""

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    top_logprobs: int = 0


@dataclass(frozen=True, slots=True)
class Sampled:
    """One finished completion. ``completion_ids`` include the EOS or stop token that
    ended it; ``logprobs`` one per id; ``top_logprobs`` per id the ``(token id,
    logprob)`` alternatives asked for; ``text`` the decoded completion (special tokens
    skipped, cut before a stop string); ``stop_reason`` the stop string or token id that
    matched (``None`` for EOS and ``length``); ``weights_version`` when it started."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    top_logprobs: tuple[tuple[tuple[int, float], ...], ...]
    text: str
    finish_reason: Literal["stop", "length"]
    stop_reason: str | int | None
    weights_version: int


@dataclass(slots=True)
class DecoderStats:
    """Counters since start: ``prefills`` (groups of rows entering together), ``joins``
    (prefills merged into a running batch), ``rows``, ``steps`` (sampling steps),
    ``tokens`` sampled, and ``busy_seconds`` the worker spent with rows to decode."""

    prefills: int = 0
    joins: int = 0
    rows: int = 0
    steps: int = 0
    tokens: int = 0
    busy_seconds: float = 0.0

    @property
    def mean_batch(self) -> float:
        """Rows sampled together per step, on average (0.0 before the first step)."""
        return self.tokens / self.steps if self.steps else 0.0


@dataclass(slots=True)
class _Row:
    prompt_ids: tuple[int, ...]
    params: SamplingParams
    future: concurrent.futures.Future[Sampled]
    rng: random.Random
    version: int = 0
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top: list[tuple[tuple[int, float], ...]] = field(default_factory=list)

    @property
    def temperature(self) -> float:
        return self.params.temperature

    @property
    def top_p(self) -> float:
        return self.params.top_p

    @property
    def top_k(self) -> int:
        return self.params.top_k


class BatchDecoder:
    """Samples completions from ``model`` on a worker thread (module docs).

    ``version()`` names the weights a row samples from (read when it enters the batch).
    ``max_model_len`` is the context window (prompt + completion tokens); ``seed`` seeds
    the draws of requests that bring none (``None``: from the OS); ``tokenizer_lock`` is
    held while decoding text (share it with other threads using the same tokenizer).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        version: Callable[[], int],
        max_batch_size: int,
        max_model_len: int,
        allowed_tokens: AllowedTokens | None = None,
        gather_seconds: float = 0.01,
        seed: int | None = None,
        tokenizer_lock: threading.Lock | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.tokenizer_lock = tokenizer_lock or threading.Lock()
        self.max_model_len = max_model_len
        self.stats = DecoderStats()
        self._version = version
        self._max_batch = max_batch_size
        self._allowed = allowed_tokens
        self._gather_seconds = gather_seconds
        self._seeds = random.Random(seed)
        self._eos = _eos_ids(model, tokenizer)
        pad = getattr(tokenizer, "pad_token_id", None)
        self._calls = ModelCalls.of(
            model, pad if isinstance(pad, int) else min(self._eos, default=0)
        )
        self._queue: queue.Queue[_Row | None] = queue.Queue()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._work, name="benchmax-sampler", daemon=True)
        self._thread.start()

    def submit(
        self, prompt_ids: Sequence[int], params: SamplingParams
    ) -> concurrent.futures.Future[Sampled]:
        """Queue one completion; the future gets its :class:`Sampled`, or the exception
        the model raised (``RuntimeError`` once the decoder is closed)."""
        future: concurrent.futures.Future[Sampled] = concurrent.futures.Future()
        if self._closed.is_set():
            future.set_exception(RuntimeError("the sampler is closed"))
            return future
        prompt = tuple(prompt_ids)
        if params.seed is None:
            rng = random.Random(self._seeds.getrandbits(64))
        else:  # the seed and the prompt: each turn of a conversation draws afresh
            digest = hashlib.sha256(f"{params.seed}:{prompt}".encode()).digest()
            rng = random.Random(int.from_bytes(digest[:8], "big"))
        self._queue.put(_Row(prompt, params, future, rng))
        return future

    def close(self) -> None:
        """Stop the worker after its current step; queued requests fail (idempotent)."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._queue.put(None)
        self._thread.join()
        while True:
            try:
                row = self._queue.get_nowait()
            except queue.Empty:
                return
            if row is not None:
                row.future.set_exception(RuntimeError("the sampler is closed"))

    # -- the worker -----------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            first = self._queue.get()
            if first is None or self._closed.is_set():
                if first is not None:
                    first.future.set_exception(RuntimeError("the sampler is closed"))
                return
            rows = self._gather([first])
            if rows:
                self._decode(rows)

    def _gather(self, rows: list[_Row]) -> list[_Row]:
        """Add requests while they keep arriving (a pause of ``gather_seconds`` ends it),
        up to the batch size and ``_GATHER_LIMIT_SECONDS`` in all; cancelled ones dropped."""
        deadline = time.monotonic() + _GATHER_LIMIT_SECONDS
        while len(rows) < self._max_batch:
            timeout = min(self._gather_seconds, deadline - time.monotonic())
            if timeout <= 0:
                break
            try:
                row = self._queue.get(timeout=timeout)
            except queue.Empty:
                break
            if row is None:
                self._queue.put(None)  # seen again by the worker loop
                break
            rows.append(row)
        return [row for row in rows if row.future.set_running_or_notify_cancel()]

    def _waiting(self, room: int) -> list[_Row]:
        """Requests already queued (none waited for), at most ``room``."""
        rows: list[_Row] = []
        while len(rows) < room:
            try:
                row = self._queue.get_nowait()
            except queue.Empty:
                break
            if row is None:
                self._queue.put(None)
                break
            if row.future.set_running_or_notify_cancel():
                rows.append(row)
        return rows

    def _decode(self, rows: list[_Row]) -> None:
        """Decode ``rows`` and every request joining them until none is left."""
        import torch

        model = self.model
        was_training = bool(getattr(model, "training", False))
        started = time.perf_counter()
        taken = list(rows)
        model.eval()
        try:
            with torch.no_grad():
                batch = self._prefill(rows)
                active = list(rows)
                while active and not self._closed.is_set():
                    tokens, finished = self._step(active, batch.logits)
                    kept = [i for i in range(len(active)) if i not in finished]
                    if finished and kept:
                        batch.keep(kept)
                        tokens = tokens.index_select(0, torch.tensor(kept, device=tokens.device))
                    active = [active[i] for i in kept]
                    if active:
                        batch.advance(tokens)
                    room = self._max_batch - len(active)
                    if room > 0 and (not active or batch.joinable):
                        joining = self._waiting(room)
                        taken += joining
                        if joining and active:
                            batch.merge(self._prefill(joining))
                            self.stats.joins += 1
                        elif joining:
                            batch = self._prefill(joining)
                        active += joining
        except BaseException as error:  # the model failed: every unanswered row fails
            for row in taken:
                if not row.future.done():
                    row.future.set_exception(error)
            if not isinstance(error, Exception):
                raise
        finally:
            model.train(was_training)
            self.stats.busy_seconds += time.perf_counter() - started
        for row in taken:  # closed while decoding
            if not row.future.done():
                row.future.set_exception(RuntimeError("the sampler is closed"))

    def _prefill(self, rows: list[_Row]) -> KVBatch:
        version = self._version()
        for row in rows:
            row.version = version
        self.stats.prefills += 1
        self.stats.rows += len(rows)
        return KVBatch.prefill(self._calls, [row.prompt_ids for row in rows])

    def _step(self, rows: list[_Row], logits: Any) -> tuple[Any, set[int]]:
        """Sample one token for every row; answer the rows that finished. Returns the
        sampled ids (a tensor, one per row) and the indices of the finished rows."""
        import torch

        logprobs = torch.log_softmax(logits / _temperatures(rows, logits), dim=-1)
        tokens = next_tokens(rows, logits, self._allowed)
        chosen = logprobs.gather(1, tokens[:, None]).squeeze(1).tolist()
        wanted = max(row.params.top_logprobs for row in rows)
        top = logprobs.topk(wanted, dim=-1) if wanted else None
        self.stats.steps += 1
        self.stats.tokens += len(rows)
        finished: set[int] = set()
        for i, (row, token, logprob) in enumerate(zip(rows, tokens.tolist(), chosen, strict=True)):
            row.ids.append(token)
            row.logprobs.append(logprob)
            n = row.params.top_logprobs
            if top is not None and n:
                pairs = zip(top.indices[i, :n].tolist(), top.values[i, :n].tolist(), strict=True)
                row.top.append(tuple(pairs))
            else:
                row.top.append(())
            done = self._finished(row, token)
            if done is not None:
                finished.add(i)
                row.future.set_result(done)
        return tokens, finished

    def _finished(self, row: _Row, token: int) -> Sampled | None:
        params = row.params
        reason: Literal["stop", "length"] | None = None
        stop_reason: str | int | None = None
        text: str | None = None
        if token in self._eos and not params.ignore_eos:
            reason = "stop"
        elif token in params.stop_token_ids:
            reason, stop_reason = "stop", token
        elif params.stop:
            text = self._text(row.ids)
            hits = [(text.find(stop), stop) for stop in params.stop if stop in text]
            if hits:
                at, stop_reason = min(hits)
                reason, text = "stop", text[:at]
        if reason is None and (
            len(row.ids) >= params.max_tokens
            or len(row.prompt_ids) + len(row.ids) >= self.max_model_len
        ):
            reason = "length"
        if reason is None:
            return None
        return Sampled(
            prompt_ids=row.prompt_ids,
            completion_ids=tuple(row.ids),
            logprobs=tuple(row.logprobs),
            top_logprobs=tuple(row.top),
            text=self._text(row.ids) if text is None else text,
            finish_reason=reason,
            stop_reason=stop_reason,
            weights_version=row.version,
        )

    def _text(self, ids: Sequence[int]) -> str:
        with self.tokenizer_lock:
            return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))


def _temperatures(rows: Sequence[_Row], logits: Any) -> Any:
    """Each row's temperature as a ``[rows, 1]`` tensor beside ``logits`` (1 for greedy
    rows: their logprobs are the raw distribution's)."""
    import torch

    values = [row.temperature if row.temperature > 0 else 1.0 for row in rows]
    return torch.tensor(values, dtype=logits.dtype, device=logits.device)[:, None]


def _eos_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    found: set[int] = set()
    config = getattr(model, "generation_config", None)
    for value in (getattr(config, "eos_token_id", None), getattr(tokenizer, "eos_token_id", None)):
        values = value if isinstance(value, list | tuple) else [value]
        found.update(v for v in values if isinstance(v, int) and not isinstance(v, bool))
    return frozenset(found)
