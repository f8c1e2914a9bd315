"""The rows a model is decoding together: padded ids, attention mask, positions, KV cache.

A :class:`KVBatch` starts from a prefill of left-padded prompts and then advances every row
one token per forward pass. Rows leave when they finish (``keep``: their cache rows go, and
leading columns no row attends to any more are cut), and new rows can join a running batch
(``merge``: the two caches are left-padded to one width and stacked), which is what lets
requests arriving mid-generation share the next forward passes instead of waiting (vLLM's
continuous batching, here at step granularity). Joining needs plain full-attention cache
layers (``transformers``' ``DynamicLayer``); with any other layer kind (sliding windows,
linear attention) :attr:`KVBatch.joinable` is false and new rows wait for the batch to end.

Positions follow each row's own tokens (``cumsum`` of its mask), so padding never shifts
them; logits are computed for the last position only when the model takes
``logits_to_keep``. Works for the causal LMs of ``transformers`` 5 (the cache keyword is
``cache`` from 5.24, ``past_key_values`` before) and PEFT models around them.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["KVBatch", "ModelCalls"]


@dataclass(frozen=True, slots=True)
class ModelCalls:
    """How to call one model: its device, the pad id, and its forward's keyword names."""

    model: Any
    device: Any
    pad_id: int
    cache_keyword: str
    keeps_logits: bool

    @classmethod
    def of(cls, model: Any, pad_id: int) -> ModelCalls:
        import torch

        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        parameters = inspect.signature(base.forward).parameters
        device = next((p.device for p in model.parameters()), torch.device("cpu"))
        return cls(
            model=model,
            device=device,
            pad_id=pad_id,
            cache_keyword="cache" if "cache" in parameters else "past_key_values",
            keeps_logits="logits_to_keep" in parameters,
        )

    def forward(self, ids: Any, mask: Any, positions: Any, cache: Any) -> Any:
        """The last position's logits (``[rows, vocabulary]``, float32)."""
        kwargs: dict[str, object] = {
            "input_ids": ids,
            "attention_mask": mask,
            "position_ids": positions,
            "use_cache": True,
            self.cache_keyword: cache,
        }
        if self.keeps_logits:
            kwargs["logits_to_keep"] = 1
        return self.model(**kwargs).logits[:, -1, :].float()


class KVBatch:
    """Rows being decoded together; :attr:`logits` holds each row's next-token logits."""

    def __init__(self, calls: ModelCalls, cache: Any, mask: Any, positions: Any, logits: Any):
        self._calls = calls
        self.cache = cache
        self.mask = mask  # [rows, width]: 1 where a row has a token
        self.positions = positions  # [rows, 1]: the position of each row's last token
        self.logits = logits

    @classmethod
    def prefill(cls, calls: ModelCalls, prompts: Sequence[Sequence[int]]) -> KVBatch:
        """Run the left-padded ``prompts`` through the model with a fresh cache."""
        import torch
        from transformers import DynamicCache

        width = max(len(prompt) for prompt in prompts)
        ids = torch.full((len(prompts), width), calls.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, prompt in enumerate(prompts):
            ids[i, width - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
            mask[i, width - len(prompt) :] = 1
        ids, mask = ids.to(calls.device), mask.to(calls.device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache(config=getattr(calls.model, "config", None))
        logits = calls.forward(ids, mask, positions, cache)
        return cls(calls, cache, mask, positions[:, -1:], logits)

    @property
    def joinable(self) -> bool:
        """Whether other rows can be merged into this batch (module docs)."""
        from transformers.cache_utils import DynamicLayer

        layers = list(getattr(self.cache, "layers", None) or ())
        return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)

    def keep(self, rows: Sequence[int]) -> None:
        """Keep only ``rows`` (indices, in order), then cut leading all-padding columns."""
        import torch

        index = torch.tensor(list(rows), dtype=torch.long, device=self.mask.device)
        self.cache.batch_select_indices(index)
        self.mask = self.mask.index_select(0, index)
        self.positions = self.positions.index_select(0, index)
        self.logits = self.logits.index_select(0, index)
        if not self.joinable:
            return
        used = self.mask.any(dim=0).nonzero()
        lead = int(used[0]) if len(used) else 0
        if lead > 0:
            self.mask = self.mask[:, lead:]
            for layer in self.cache.layers:
                layer.keys = layer.keys[:, :, lead:]
                layer.values = layer.values[:, :, lead:]

    def advance(self, tokens: Any) -> None:
        """Feed each row its sampled token (``[rows]``); :attr:`logits` becomes the next."""
        self.mask = _cat([self.mask, self.mask.new_ones((len(tokens), 1))], dim=-1)
        self.positions = self.positions + 1
        self.logits = self._calls.forward(tokens[:, None], self.mask, self.positions, self.cache)

    def merge(self, other: KVBatch) -> None:
        """Append ``other``'s rows (both joinable): caches and masks left-padded to one width."""
        import torch.nn.functional as functional

        width = max(self.mask.shape[-1], other.mask.shape[-1])

        def padded(tensor: Any, length: int) -> Any:
            extra = width - length
            if extra == 0:
                return tensor
            if tensor.dim() == 2:  # a mask
                return functional.pad(tensor, (extra, 0))
            return functional.pad(tensor, (0, 0, extra, 0))

        mine, theirs = self.mask.shape[-1], other.mask.shape[-1]
        for layer, joining in zip(self.cache.layers, other.cache.layers, strict=True):
            layer.keys = _cat([padded(layer.keys, mine), padded(joining.keys, theirs)], dim=0)
            layer.values = _cat([padded(layer.values, mine), padded(joining.values, theirs)], dim=0)
        self.mask = _cat([padded(self.mask, mine), padded(other.mask, theirs)], dim=0)
        self.positions = _cat([self.positions, other.positions], dim=0)
        self.logits = _cat([self.logits, other.logits], dim=0)


def _cat(tensors: Sequence[Any], dim: int) -> Any:
    import torch

    return torch.cat(list(tensors), dim=dim)
