"""``BranchingGRPOTrainer``: TRL's ``GRPOTrainer`` training every branch of a rollout.

TRL 1.16 computes GRPO advantages over rows, one per (prompt, generation), in groups of
``num_generations`` rows (``_generate_and_score_completions``). A rollout whose model calls
did not stitch into one sequence has several branches (``benchmax.stitching``), each its
own training sequence. A :class:`~benchmax.training.RolloutFunc` made with
``every_branch=True`` returns, in order, one row per rollout (its last branch) and then
every other branch of every rollout as an *extra* row, with ``benchmax_branch_rows`` (one
count per rollout: its rows) among its fields. TRL tensorizes all rows (it pads
whatever it is given; old, reference and sampling logprobs, the importance-sampling ratio
and the token count of the loss cover every row), while its reward functions and group
statistics see the one row per rollout (``benchmax_reward`` returns one reward per
prompt). This subclass then gives each extra row the advantage of its rollout, so every
branch trains with the rollout's advantage and the group statistics saw one reward per
rollout. When TRL splits a generation batch into ``steps_per_generation`` micro-batches
(which drops a remainder), the batch is filled up to a multiple with rows whose loss mask
is 0.

Imports torch and TRL: reached only through ``benchmax train`` or, lazily, as
``benchmax.training.BranchingGRPOTrainer``. Not for vision inputs (their per-row image
fields are not expanded; a batch carrying them is refused) nor for ``log_completions``
(TRL's completions table would pair the extra rows with no prompt). Written against TRL
1.16's ``GRPOTrainer`` (the method it extends is TRL's own, not a public hook); the
``train``-marker test pins what TRL computes the loss on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from trl import GRPOTrainer

__all__ = ["BRANCH_ROWS_KEY", "BranchingGRPOTrainer", "with_branch_rows"]

BRANCH_ROWS_KEY = "benchmax_branch_rows"
"""The ``RolloutFunc`` field holding, per rollout, how many rows (branches) it returned."""

_ROW_FREE = {"num_items_in_batch"}  # batch-level values, not one per row


class BranchingGRPOTrainer(GRPOTrainer):  # type: ignore[misc]  # trl is untyped here
    """``GRPOTrainer`` that trains the extra branch rows of a ``RolloutFunc(...,
    every_branch=True)`` with their rollout's advantage (see the module docs). With any
    other ``rollout_func`` (no ``benchmax_branch_rows`` field) it is ``GRPOTrainer``."""

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output: dict[str, Any] = super()._generate_and_score_completions(inputs)
        counts = [row.get(BRANCH_ROWS_KEY, 1) for row in inputs]
        multiple = self.args.steps_per_generation if self.model.training else 1
        return with_branch_rows(output, counts, multiple=multiple)


def with_branch_rows(
    output: Mapping[str, Any], counts: Sequence[int], *, multiple: int = 1
) -> dict[str, Any]:
    """TRL's scored batch ``output`` (``advantages`` one per rollout, the other per-row
    tensors one per row: the rollouts' rows, then their extra rows in rollout order) with
    ``advantages`` given to every row: each extra row gets its rollout's. Then, when
    ``multiple`` > 1, rows with an all-zero loss mask are added until the row count is a
    multiple of it. ``ValueError`` when the row count is not ``sum(counts)``, a count is
    below 1, or a per-row value is not a tensor (vision inputs)."""
    advantages = output["advantages"]
    rollouts = len(counts)
    rows = int(output["prompt_ids"].shape[0])
    if any(not isinstance(c, int) or c < 1 for c in counts):
        raise ValueError(f"{BRANCH_ROWS_KEY} must be counts >= 1, got {list(counts)}")
    if int(advantages.shape[0]) != rollouts or rows != sum(counts):
        raise ValueError(
            f"the rollout_func returned {rows} rows for {rollouts} rollouts whose "
            f"{BRANCH_ROWS_KEY} add up to {sum(counts)}"
        )
    expanded = dict(output)
    if rows != rollouts:
        extra = torch.tensor([c - 1 for c in counts], device=advantages.device)
        origin = torch.repeat_interleave(torch.arange(rollouts, device=advantages.device), extra)
        expanded["advantages"] = torch.cat([advantages, advantages[origin]])
    filler = -rows % multiple if multiple > 1 else 0
    if filler:
        expanded = _filled(expanded, rows, filler)
    return expanded


def _filled(output: dict[str, Any], rows: int, filler: int) -> dict[str, Any]:
    """``output`` with ``filler`` more rows copied from row 0, their loss masked out."""
    filled: dict[str, Any] = {}
    for key, value in output.items():
        scalar = isinstance(value, torch.Tensor) and not value.dim()
        if key in _ROW_FREE or value is None or scalar:
            filled[key] = value
            continue
        if not isinstance(value, torch.Tensor) or value.shape[0] != rows:
            raise ValueError(f"cannot add masked rows to the batch: its {key!r} is not per row")
        copies = value[:1].expand(filler, *value.shape[1:]).clone()
        if key in ("completion_mask", "tool_mask", "advantages"):
            copies.zero_()
        filled[key] = torch.cat([value, copies])
    return filled
