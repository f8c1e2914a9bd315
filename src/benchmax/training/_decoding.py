"""Batched sampling from a causal language model's current weights (torch, imported lazily).

:class:`BatchDecoder` owns one worker thread. Requests (prompt ids + :class:`SamplingParams`)
queue up; the worker takes every request waiting (up to ``max_batch_size``, after a short
gathering pause while requests keep arriving) as one *wave*: the prompts are left-padded
into one batch with an attention mask, prefilled once, then decoded one token per step for
the whole batch with a key/value cache. A row that finishes (EOS, a stop token or string,
``max_tokens``, the context window) is answered at once and dropped from the batch (its
cache rows too); requests arriving meanwhile wait for the next wave.

Sampling follows vLLM's order: temperature, then top-k, then top-p (nucleus), then the
structured-output restriction (``allowed_tokens``), then one draw by inverse CDF from a
uniform number of the request's own random stream, seeded by its ``seed`` and its prompt
ids: a seeded request samples the same tokens whatever else is in flight (up to
floating-point differences between batch shapes, as on any batching server), and the turns
of one conversation sending one seed still draw independently. Temperature 0 is greedy.
The reported logprob of each token is the model's raw ``log_softmax`` (vLLM's default
``raw_logprobs``), the quantity a trainer recomputes from the same weights.

The model is sampled under ``torch.no_grad()`` in eval mode; the mode it had is restored
after every wave. The caller must not change the weights while a wave runs (a trainer
calling ``rollout_func`` waits for its rollouts before its optimizer step).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import inspect
import queue
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["AllowedTokens", "BatchDecoder", "DecoderStats", "Sampled", "SamplingParams"]

AllowedTokens = Callable[[Sequence[int]], Sequence[int] | None]
"""Structured output: given a row's completion ids so far, the token ids it may sample
next (``None``: any). The draw is renormalized over them; logprobs stay the model's own."""

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
    matched (``None`` for EOS and ``length``)."""

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
    """Counters since start: waves run, rows decoded, tokens sampled, and seconds the
    worker spent in waves (``busy_seconds``)."""

    waves: int = 0
    rows: int = 0
    tokens: int = 0
    busy_seconds: float = 0.0

    @property
    def mean_batch(self) -> float:
        """Rows per wave (0.0 before the first)."""
        return self.rows / self.waves if self.waves else 0.0


@dataclass(slots=True)
class _Row:
    prompt_ids: tuple[int, ...]
    params: SamplingParams
    future: concurrent.futures.Future[Sampled]
    rng: random.Random
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top: list[tuple[tuple[int, float], ...]] = field(default_factory=list)


class BatchDecoder:
    """Samples completions from ``model`` in waves on a worker thread (module docs).

    ``version()`` names the weights a wave samples from (read when it starts).
    ``max_model_len`` is the context window (prompt + completion tokens); ``seed`` seeds
    the draws of requests that bring none (``None``: from the OS).
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
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_model_len = max_model_len
        self.stats = DecoderStats()
        self._version = version
        self._max_batch = max_batch_size
        self._allowed = allowed_tokens
        self._gather_seconds = gather_seconds
        self._seeds = random.Random(seed)
        self._eos = _eos_ids(model, tokenizer)
        pad = getattr(tokenizer, "pad_token_id", None)
        self._pad = pad if isinstance(pad, int) else next(iter(sorted(self._eos)), 0)
        self._cache_kwarg, self._keeps_logits = _forward_kwargs(model)
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
        """Stop the worker after its current wave; queued requests fail (idempotent)."""
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
        pending: list[_Row] = []
        while not self._closed.is_set():
            if not pending:
                first = self._queue.get()
                if first is None:
                    return
                pending.append(first)
            self._gather(pending)
            wave, pending = pending[: self._max_batch], pending[self._max_batch :]
            wave = [row for row in wave if row.future.set_running_or_notify_cancel()]
            if not wave:
                continue
            started = time.perf_counter()
            try:
                self._run_wave(wave)
            except BaseException as error:  # the model failed: every unanswered row fails
                for row in wave:
                    if not row.future.done():
                        row.future.set_exception(error)
                if not isinstance(error, Exception):
                    raise
            finally:
                self.stats.waves += 1
                self.stats.rows += len(wave)
                self.stats.busy_seconds += time.perf_counter() - started

    def _gather(self, pending: list[_Row]) -> None:
        """Add requests arriving while they keep arriving (a pause of ``gather_seconds``
        ends it), up to the batch size and ``_GATHER_LIMIT_SECONDS`` in all."""
        deadline = time.monotonic() + _GATHER_LIMIT_SECONDS
        while len(pending) < self._max_batch:
            timeout = min(self._gather_seconds, deadline - time.monotonic())
            if timeout <= 0:
                return
            try:
                row = self._queue.get(timeout=timeout)
            except queue.Empty:
                return
            if row is None:
                self._queue.put(None)  # seen again by the loop, after this wave
                return
            pending.append(row)

    def _run_wave(self, rows: list[_Row]) -> None:
        import torch

        model = self.model
        version = self._version()
        was_training = bool(getattr(model, "training", False))
        device = _device(model)
        model.eval()
        try:
            with torch.no_grad():
                width = max(len(row.prompt_ids) for row in rows)
                ids = torch.full((len(rows), width), self._pad, dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                for i, row in enumerate(rows):
                    ids[i, width - len(row.prompt_ids) :] = torch.tensor(row.prompt_ids)
                    mask[i, width - len(row.prompt_ids) :] = 1
                ids, mask = ids.to(device), mask.to(device)
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                cache = _new_cache(model)
                logits = self._forward(ids, mask, positions, cache)
                active = list(rows)
                while True:
                    tokens, finished = self._step(active, logits, version)
                    self.stats.tokens += len(active)
                    if len(finished) == len(active):
                        return
                    keep = [i for i in range(len(active)) if i not in finished]
                    if finished:
                        index = torch.tensor(keep, device=device)
                        cache.batch_select_indices(index)
                        mask = mask.index_select(0, index)
                        positions = positions.index_select(0, index)
                        tokens = tokens.index_select(0, index)
                        active = [active[i] for i in keep]
                    mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=-1)
                    positions = positions[:, -1:] + 1
                    logits = self._forward(tokens[:, None], mask, positions, cache)
        finally:
            model.train(was_training)

    def _forward(self, ids: Any, mask: Any, positions: Any, cache: Any) -> Any:
        kwargs: dict[str, Any] = {
            "input_ids": ids,
            "attention_mask": mask,
            "position_ids": positions,
            "use_cache": True,
            self._cache_kwarg: cache,
        }
        if self._keeps_logits:
            kwargs["logits_to_keep"] = 1
        return self.model(**kwargs).logits[:, -1, :].float()

    def _step(self, rows: list[_Row], logits: Any, version: int) -> tuple[Any, set[int]]:
        """Sample one token for every row; answer the rows that finished. Returns the
        sampled ids (a tensor, one per row) and the indices of the finished rows."""
        import torch

        logprobs = torch.log_softmax(logits, dim=-1)
        tokens = _draw(rows, logits, self._allowed)
        chosen = logprobs.gather(1, tokens[:, None]).squeeze(1).tolist()
        top_wanted = max(row.params.top_logprobs for row in rows)
        top = logprobs.topk(top_wanted, dim=-1) if top_wanted else None
        finished: set[int] = set()
        for i, (row, token, logprob) in enumerate(zip(rows, tokens.tolist(), chosen, strict=True)):
            row.ids.append(token)
            row.logprobs.append(logprob)
            if top is not None and row.params.top_logprobs:
                n = row.params.top_logprobs
                pairs = zip(top.indices[i, :n].tolist(), top.values[i, :n].tolist(), strict=True)
                row.top.append(tuple(pairs))
            else:
                row.top.append(())
            done = self._finish(row, token, version)
            if done is not None:
                finished.add(i)
                row.future.set_result(done)
        return tokens, finished

    def _finish(self, row: _Row, token: int, version: int) -> Sampled | None:
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
            weights_version=version,
        )

    def _text(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))


def _draw(rows: Sequence[_Row], logits: Any, allowed: AllowedTokens | None) -> Any:
    """One token per row (module docs: temperature, top-k, top-p, allowed, draw)."""
    import torch

    params = [row.params for row in rows]
    temperatures = torch.tensor([p.temperature for p in params], device=logits.device)
    greedy = temperatures == 0
    scores = logits / torch.where(greedy, torch.ones_like(temperatures), temperatures)[:, None]
    negative = torch.tensor(float("-inf"), device=logits.device)
    top_k = [min(p.top_k, scores.shape[-1]) if p.top_k > 0 else 0 for p in params]
    if any(top_k):
        kth = scores.topk(max(top_k), dim=-1).values
        floor = torch.stack([kth[i, k - 1] if k else negative for i, k in enumerate(top_k)]).to(
            scores.dtype
        )
        scores = torch.where(scores < floor[:, None], negative, scores)
    nucleus = [i for i, p in enumerate(params) if p.top_p < 1.0]
    if nucleus:
        index = torch.tensor(nucleus, device=logits.device)
        ordered, order = scores.index_select(0, index).sort(dim=-1, descending=True)
        probs = ordered.softmax(dim=-1)
        top_p = torch.tensor([params[i].top_p for i in nucleus], device=logits.device)
        outside = (probs.cumsum(dim=-1) - probs) > top_p[:, None]  # the first always stays
        ordered = ordered.masked_fill(outside, float("-inf"))
        scores[index] = ordered.scatter(-1, order, ordered)
    if allowed is not None:
        for i, row in enumerate(rows):
            choices = allowed(tuple(row.ids))
            if choices is not None:
                keep = torch.full_like(scores[i], float("-inf"))
                picks = torch.tensor(list(choices), dtype=torch.long, device=logits.device)
                keep[picks] = scores[i, picks]
                scores[i] = keep
    best = scores.argmax(dim=-1)
    cdf = scores.softmax(dim=-1).double().cumsum(dim=-1)
    uniform = torch.tensor([row.rng.random() for row in rows], dtype=torch.float64)
    target = (uniform.to(cdf.device) * cdf[:, -1])[:, None]
    drawn = torch.searchsorted(cdf, target, right=True).squeeze(1).clamp(max=cdf.shape[-1] - 1)
    return torch.where(greedy, best, drawn)


def _eos_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    found: set[int] = set()
    config = getattr(model, "generation_config", None)
    for value in (getattr(config, "eos_token_id", None), getattr(tokenizer, "eos_token_id", None)):
        values = value if isinstance(value, list | tuple) else [value]
        found.update(v for v in values if isinstance(v, int) and not isinstance(v, bool))
    return frozenset(found)


def _device(model: Any) -> Any:
    import torch

    for parameter in model.parameters():
        return parameter.device
    return torch.device("cpu")


def _new_cache(model: Any) -> Any:
    from transformers import DynamicCache

    return DynamicCache(config=getattr(model, "config", None))


def _forward_kwargs(model: Any) -> tuple[str, bool]:
    """The name the model's forward takes the cache by (``cache`` from transformers 5.24,
    ``past_key_values`` before) and whether it takes ``logits_to_keep``."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    parameters = inspect.signature(base.forward).parameters
    cache = "cache" if "cache" in parameters else "past_key_values"
    return cache, "logits_to_keep" in parameters
