"""A rollout's training sequences: the rule every trainer adapter shares.

:func:`rollout_sequences` gives one sequence per branch of the rollout's model calls
(``Trajectory.branches``; one ``benchmax.training.to_training_samples`` sample each), so
every sampled token is in exactly one sequence, however the calls stitched: trainers (TRL
through ``benchmax train``, verl, SkyRL, Atropos) train each with the rollout's reward and
advantage. A rollout a trainer should not learn from (``Trajectory.trainable`` false: an
operational failure) keeps its tokens but gets all-zero masks.

:func:`rollout_sequence` is the older one-sequence form: the *last* branch, the earlier
ones counted in ``dropped_samples`` (lossy when the calls did not stitch into one).
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmax.stitching import BranchStart
from benchmax.training._samples import TrainingSample, to_training_samples
from benchmax.trajectory import Trajectory

__all__ = ["RolloutSequence", "rollout_sequence", "rollout_sequences"]


@dataclass(frozen=True, slots=True)
class RolloutSequence:
    """A rollout's training sequence: ``prompt_ids`` then ``completion_ids``, with
    ``completion_mask`` (1: sampled by the model and trainable, 0: added by the
    environment, or any token of a non-trainable rollout) and ``completion_logprobs``
    (the server's logprob for sampled tokens, ``0.0`` elsewhere), all three aligned.
    ``began``: why its branch began (``benchmax.stitching``); ``dropped_samples``: the
    branches left out (only :func:`rollout_sequence` leaves any out)."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    completion_mask: tuple[int, ...]
    completion_logprobs: tuple[float, ...]
    trainable: bool
    dropped_samples: int
    began: BranchStart = "first"

    @property
    def trained_tokens(self) -> int:
        """Tokens this sequence trains (its mask-1 tokens)."""
        return sum(self.completion_mask)


def rollout_sequences(trajectory: Trajectory) -> tuple[RolloutSequence, ...]:
    """One sequence per branch of the rollout, in the order the branches began; ``()``
    when no model call returned tokens (e.g. the first call failed, or the run did not
    record tokens). ``ValueError`` as ``to_training_samples`` raises it."""
    samples = to_training_samples(trajectory)
    reasons = [branch.began for branch in trajectory.branches] if samples else []
    return tuple(
        _sequence(trajectory, sample, began, dropped=0)
        for sample, began in zip(samples, reasons, strict=True)
    )


def rollout_sequence(trajectory: Trajectory) -> RolloutSequence | None:
    """The rollout's last branch as one sequence (``dropped_samples``: the branches before
    it), or ``None`` when no model call returned tokens. Prefer :func:`rollout_sequences`,
    which loses nothing."""
    samples = to_training_samples(trajectory)
    if not samples:
        return None
    began = trajectory.branches[-1].began
    return _sequence(trajectory, samples[-1], began, dropped=len(samples) - 1)


def _sequence(
    trajectory: Trajectory, sample: TrainingSample, began: BranchStart, *, dropped: int
) -> RolloutSequence:
    completion_ids = tuple(sample["completion_ids"])
    trainable = trajectory.trainable
    mask = tuple(sample["completion_mask"]) if trainable else (0,) * len(completion_ids)
    return RolloutSequence(
        prompt_ids=tuple(sample["prompt_ids"]),
        completion_ids=completion_ids,
        completion_mask=mask,
        completion_logprobs=tuple(float(value) for value in sample["completion_logprobs"]),
        trainable=trainable,
        dropped_samples=dropped,
        began=began,
    )
