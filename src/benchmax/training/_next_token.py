"""Choosing each row's next token from its logits (torch, imported lazily).

vLLM's order: temperature, then top-k, then top-p (nucleus), then the structured-output
restriction, then one draw by inverse CDF from a uniform number of the row's own random
stream (so a row's choice depends on its own stream only, never on the rest of the batch).
Temperature 0 is greedy (the restrictions still apply).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol

__all__ = ["AllowedTokens", "Choosing", "next_tokens"]

AllowedTokens = Callable[[Sequence[int]], Sequence[int] | None]
"""Structured output: given a row's completion ids so far, the token ids it may sample
next (``None``: any). The draw is renormalized over them; the reported logprobs stay
those of the temperature-scaled distribution before the restriction."""


class Choosing(Protocol):
    """What the draw needs of a row: its settings, its stream and its completion so far."""

    @property
    def temperature(self) -> float: ...
    @property
    def top_p(self) -> float: ...
    @property
    def top_k(self) -> int: ...
    @property
    def rng(self) -> random.Random: ...
    @property
    def ids(self) -> Sequence[int]: ...


def next_tokens(rows: Sequence[Choosing], logits: Any, allowed: AllowedTokens | None) -> Any:
    """One token id per row (a ``LongTensor`` of ``len(rows)``) from ``logits`` (``[rows,
    vocabulary]``, float32), by the rules in the module docs."""
    import torch

    device = logits.device
    temperatures = torch.tensor([row.temperature for row in rows], device=device)
    greedy = temperatures == 0
    scores = logits / torch.where(greedy, torch.ones_like(temperatures), temperatures)[:, None]
    negative = float("-inf")
    top_k = [min(row.top_k, scores.shape[-1]) if row.top_k > 0 else 0 for row in rows]
    if any(top_k):
        kth = scores.topk(max(top_k), dim=-1).values
        floor = torch.stack(
            [
                kth[i, k - 1] if k else torch.tensor(negative, device=device)
                for i, k in enumerate(top_k)
            ]
        ).to(scores.dtype)
        scores = scores.masked_fill(scores < floor[:, None], negative)
    nucleus = [i for i, row in enumerate(rows) if row.top_p < 1.0]
    if nucleus:
        index = torch.tensor(nucleus, device=device)
        ordered, order = scores.index_select(0, index).sort(dim=-1, descending=True)
        probs = ordered.softmax(dim=-1)
        top_p = torch.tensor([rows[i].top_p for i in nucleus], device=device)
        outside = (probs.cumsum(dim=-1) - probs) > top_p[:, None]  # the first always stays
        ordered = ordered.masked_fill(outside, negative)
        scores[index] = ordered.scatter(-1, order, ordered)
    if allowed is not None:
        for i, row in enumerate(rows):
            choices = allowed(tuple(row.ids))
            if choices is not None:
                picks = torch.tensor(list(choices), dtype=torch.long, device=device)
                kept = torch.full_like(scores[i], negative)
                kept[picks] = scores[i, picks]
                scores[i] = kept
    best = scores.argmax(dim=-1)
    cdf = scores.softmax(dim=-1).double().cumsum(dim=-1)
    uniform = torch.tensor([row.rng.random() for row in rows], dtype=torch.float64, device=device)
    target = (uniform * cdf[:, -1])[:, None]
    drawn = torch.searchsorted(cdf, target, right=True).squeeze(1).clamp(max=cdf.shape[-1] - 1)
    return torch.where(greedy, best, drawn)
