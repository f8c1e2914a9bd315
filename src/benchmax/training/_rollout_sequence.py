"""One training sequence per rollout: the rule every trainer adapter shares.

Trainers that take one sequence per rollout (TRL, verl, SkyRL, Atropos) get the rollout's
*last* training sample (``benchmax.training.to_training_samples``): the whole rollout when
its calls stitch (the usual case), else the part after the last token-prefix break, the
earlier parts being counted in ``dropped_samples``. A rollout a trainer should not learn
from (``Trajectory.trainable`` false: an operational failure) keeps its tokens but gets an
all-zero mask.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmax.training._samples import to_training_samples
from benchmax.trajectory import Trajectory

__all__ = ["RolloutSequence", "rollout_sequence"]


@dataclass(frozen=True, slots=True)
class RolloutSequence:
    """A rollout as one sequence: ``prompt_ids`` then ``completion_ids``, with
    ``completion_mask`` (1: sampled by the model and trainable, 0: added by the
    environment, or any token of a non-trainable rollout) and ``completion_logprobs``
    (the server's logprob for sampled tokens, ``0.0`` elsewhere), all three aligned."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    completion_mask: tuple[int, ...]
    completion_logprobs: tuple[float, ...]
    trainable: bool
    dropped_samples: int


def rollout_sequence(trajectory: Trajectory) -> RolloutSequence | None:
    """The rollout's last training sample as one sequence, or ``None`` when no model call
    returned tokens (e.g. the first call failed, or the run did not record tokens)."""
    samples = to_training_samples(trajectory)
    if not samples:
        return None
    last = samples[-1]
    completion_ids = tuple(last["completion_ids"])
    trainable = trajectory.trainable
    mask = tuple(last["completion_mask"]) if trainable else (0,) * len(completion_ids)
    return RolloutSequence(
        prompt_ids=tuple(last["prompt_ids"]),
        completion_ids=completion_ids,
        completion_mask=mask,
        completion_logprobs=tuple(float(value) for value in last["completion_logprobs"]),
        trainable=trainable,
        dropped_samples=len(samples) - 1,
    )
