"""The data order of each epoch, the same in a resumed run as in an uninterrupted one.

TRL's ``RepeatSampler`` shuffles with one ``torch.Generator`` seeded once (``args.seed``)
and draws one permutation per pass over the data: epoch ``e`` of an uninterrupted run is
the generator's ``e + 1``-th permutation. It has no ``set_epoch``, so a run resumed in
epoch ``e >= 1`` builds a fresh sampler and replays epoch 0's permutation (other examples,
hence other rollout ids, seeds, tokens and weights). :func:`replay_epoch_order`, called as
an epoch begins (before the data loader draws its permutation), re-seeds that generator and
draws the ``e`` permutations before it, so every run draws epoch ``e``'s order, resumed or
not. torch is imported by the caller's module (only ``benchmax train`` uses this).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["epoch_index", "replay_epoch_order"]


def epoch_index(global_step: int, batches_per_epoch: int, accumulation_steps: int) -> int:
    """The epoch an optimizer step count falls in, as ``transformers.Trainer`` counts it
    (``batches_per_epoch // accumulation_steps`` optimizer steps per epoch, at least 1)."""
    steps_per_epoch = max(batches_per_epoch // max(accumulation_steps, 1), 1)
    return global_step // steps_per_epoch


def replay_epoch_order(data_loader: Any, epoch: int) -> bool:
    """Set the shuffling generator of ``data_loader``'s ``RepeatSampler`` (found through
    accelerate's wrappers) to where an uninterrupted run has it at the start of ``epoch``;
    ``False`` (nothing done) when there is no seeded shuffling sampler to set."""
    sampler = _repeat_sampler(data_loader)
    if sampler is None:
        return False
    generator = sampler.generator
    generator.manual_seed(int(sampler.seed))
    for _ in range(epoch):
        torch.randperm(int(sampler.num_samples), generator=generator)
    return True


def _repeat_sampler(data_loader: Any) -> Any:
    batches = getattr(data_loader, "batch_sampler", None)
    candidates = (
        getattr(data_loader, "sampler", None),
        batches,
        getattr(batches, "sampler", None),
        getattr(getattr(batches, "batch_sampler", None), "sampler", None),
    )
    for candidate in candidates:
        if (
            getattr(candidate, "shuffle", False) is True
            and isinstance(getattr(candidate, "seed", None), int)
            and isinstance(getattr(candidate, "generator", None), torch.Generator)
            and isinstance(getattr(candidate, "num_samples", None), int)
        ):
            return candidate
    return None
