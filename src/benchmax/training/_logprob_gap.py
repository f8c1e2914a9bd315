"""The per-step gap between what the sampler recorded and what the trainer recomputed.

TRL's ``GRPOTrainer`` recomputes every completion token's logprob at the sampling
temperature in its loss (its forward with ``fused_lm_head=True`` returns them as
``log_probs``); the sampler's own logprobs reach it as ``sampling_per_token_logps``. A
:class:`LogprobGapProbe` hooks the model's forward while TRL computes a micro-batch's loss
and accumulates ``|sampler logprob - trainer logprob|`` over the sampled tokens (completion
mask x ``env_mask``). In vLLM server mode it also counts the sequences TRL's
importance-sampling mask zeroed (``importance_sampling_ratio`` == 0, TRL's default
``sequence_mask`` mode). :meth:`take` returns a step's numbers and starts the next step.

Only the first forward of each loss computation is read: with gradient checkpointing the
recomputation runs in the backward pass, outside :meth:`watching`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["GAP_KEY", "IS_DROPPED_KEY", "LogprobGapProbe"]

GAP_KEY = "sampling/logprob_gap/mean"
"""The TRL log key :meth:`LogprobGapProbe.take` fills: mean |sampler - trainer| logprob per
sampled token over the step."""

IS_DROPPED_KEY = "sampling/is_masked_sequence_share"
"""The TRL log key of the share of the step's sequences with sampled tokens whose
importance-sampling ratio TRL set to 0 (vLLM server mode only)."""


class LogprobGapProbe:
    """Accumulates one step's sampler-vs-trainer logprob gap (module docs)."""

    def __init__(self) -> None:
        self._gap_sum = 0.0
        self._tokens = 0
        self._masked = 0
        self._sequences = 0

    @contextlib.contextmanager
    def watching(self, model: Any, inputs: Mapping[str, Any]) -> Iterator[None]:
        """Read the logprobs of ``model``'s forward passes inside the block against
        ``inputs`` (one TRL micro-batch: ``completion_ids``, ``completion_mask``,
        optional ``tool_mask``, ``sampling_per_token_logps``, ``importance_sampling_ratio``)."""
        sampled = inputs.get("sampling_per_token_logps")
        completion = inputs.get("completion_ids")
        if sampled is None or completion is None:
            yield
            return
        mask = inputs["completion_mask"]
        if inputs.get("tool_mask") is not None:
            mask = mask * inputs["tool_mask"]
        mask = mask.bool()
        self._count_masked(inputs.get("importance_sampling_ratio"), mask)
        keep = completion.size(1)
        chunks: list[Any] = []

        def hook(module: Any, args: Any, output: Any) -> None:
            logps = getattr(output, "log_probs", None)
            if logps is not None and sum(c.size(0) for c in chunks) < completion.size(0):
                chunks.append(logps[:, -keep:].detach())

        handle = model.register_forward_hook(hook)
        try:
            yield
        finally:
            handle.remove()
        if not chunks:
            return
        import torch

        trainer = torch.cat(chunks, dim=0).float()
        if trainer.shape != sampled.shape:
            return
        delta = (trainer - sampled.float()).abs()
        valid = mask & ~torch.isnan(delta)
        self._gap_sum += float(delta[valid].sum().item())
        self._tokens += int(valid.sum().item())

    def _count_masked(self, ratio: Any, mask: Any) -> None:
        if ratio is None:
            return
        has_tokens = mask.any(dim=1)
        if ratio.dim() == 2 and ratio.size(1) == 1:  # sequence modes: one ratio per sequence
            dropped = (ratio[:, 0] == 0) & has_tokens
        else:  # token modes: a sequence all of whose sampled tokens were masked
            dropped = ((ratio == 0) | ~mask).all(dim=1) & has_tokens
        self._masked += int(dropped.sum().item())
        self._sequences += int(has_tokens.sum().item())

    def take(self) -> dict[str, float]:
        """The step's numbers under :data:`GAP_KEY` and :data:`IS_DROPPED_KEY` (each left
        out when nothing was measured), and a fresh start for the next step."""
        numbers: dict[str, float] = {}
        if self._tokens:
            numbers[GAP_KEY] = self._gap_sum / self._tokens
        if self._sequences:
            numbers[IS_DROPPED_KEY] = self._masked / self._sequences
        self._gap_sum, self._tokens, self._masked, self._sequences = 0.0, 0, 0, 0
        return {key: value for key, value in numbers.items() if math.isfinite(value)}
