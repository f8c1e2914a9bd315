"""SkyRL's generator output from benchmax trajectories (a plain function).

:func:`generator_output` returns the fields of SkyRL's ``GeneratorOutput`` TypedDict
(``skyrl/train/generators/base.py``, skyrl 0.4) for a batch of rollouts, one row each, in
the order given (a custom ``GeneratorInterface.generate`` returns it as is):

* ``prompt_token_ids``: the training sample's ``prompt_ids``
* ``response_ids``: ``completion_ids`` (sampled and environment-added tokens)
* ``rewards``: one scalar per rollout: given, else the trajectory's declared scalar
* ``loss_masks``: ``completion_mask``: 1 sampled, 0 added; all 0 for a non-trainable rollout
* ``stop_reasons``: the last model call's ``finish_reason`` (``"stop"``, ``"length"``...),
  else the termination reason
* ``rollout_logprobs``: ``completion_logprobs`` (0.0 at added tokens)
* ``trajectory_ids``: SkyRL's own ``TrajectoryID(instance_id=example_id,
  repetition_id=group_index)`` objects (its trainer reads ``.instance_id`` and
  ``.to_string()``); imported from ``skyrl.train.generators.base`` when the function is
  called, so importing this module needs no SkyRL. Without SkyRL installed they are plain
  dicts with the same two keys.
* ``trajectory_generation_times``: model + tool + reward seconds
* ``trajectory_time_splits``: ``{"llm": model seconds, "env": tool + reward seconds}``
* ``rollout_metrics``, ``env_metrics``: ``None`` / per row ``{"termination_reason",
  "trainable", "token_prefix_breaks"}``
* other fields (experts, sample support, step-wise, images): ``None``

SkyRL's ``apply_overlong_filtering`` zeroes the mask of rows whose stop reason is not
``"stop"``; a non-trainable rollout's mask is already zero, but its reward still enters
its group's baseline: filter on ``env_metrics[i]["trainable"]`` to drop it entirely.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence

from benchmax.integrations._records import required_sequence, scalar_rewards
from benchmax.trajectory import Trajectory

__all__ = ["generator_output"]


def generator_output(
    trajectories: Sequence[Trajectory],
    *,
    rewards: Sequence[float] | None = None,
    reward_weights: Mapping[str, float] | None = None,
) -> dict[str, object]:
    """The ``GeneratorOutput`` fields for ``trajectories`` (table in the module docs).

    ``rewards`` (one per trajectory) default to ``benchmax.training.scalar_reward(t.rewards,
    reward_weights)`` of each (pass the environment's ``reward_weights``; ``None``: the sum).
    ``ValueError`` when a rollout recorded no token ids or ``rewards`` has the wrong length.
    """
    scalars = scalar_rewards(trajectories, rewards, reward_weights, "rewards")
    sequences = [required_sequence(trajectory) for trajectory in trajectories]
    seconds = [_seconds(trajectory) for trajectory in trajectories]
    return {
        "prompt_token_ids": [list(s.prompt_ids) for s in sequences],
        "response_ids": [list(s.completion_ids) for s in sequences],
        "rewards": scalars,
        "loss_masks": [list(s.completion_mask) for s in sequences],
        "stop_reasons": [_stop_reason(trajectory) for trajectory in trajectories],
        "rollout_metrics": None,
        "rollout_logprobs": [list(s.completion_logprobs) for s in sequences],
        "trajectory_ids": _trajectory_ids(trajectories),
        "trajectory_generation_times": [model + env for model, env in seconds],
        "trajectory_time_splits": {
            "llm": [model for model, _ in seconds],
            "env": [env for _, env in seconds],
        },
        "rollout_expert_indices": None,
        "rollout_sample_support": None,
        "is_last_step": None,
        "env_metrics": [
            {
                "termination_reason": t.termination_reason,
                "trainable": s.trainable,
                "token_prefix_breaks": t.token_prefix_breaks,
            }
            for t, s in zip(trajectories, sequences, strict=True)
        ],
        "pixel_values": None,
        "image_grid_thw": None,
    }


def _trajectory_ids(trajectories: Sequence[Trajectory]) -> list[object]:
    try:
        base = importlib.import_module("skyrl.train.generators.base")
    except ImportError:
        return [{"instance_id": t.example_id, "repetition_id": t.group_index} for t in trajectories]
    make = base.TrajectoryID
    return [make(instance_id=t.example_id, repetition_id=t.group_index) for t in trajectories]


def _stop_reason(trajectory: Trajectory) -> str:
    for call in reversed(trajectory.model_calls):
        if call.finish_reason is not None:
            return call.finish_reason
    return trajectory.termination_reason


def _seconds(trajectory: Trajectory) -> tuple[float, float]:
    timings = trajectory.timings
    model = float(timings.get("model_seconds", 0.0))
    env = float(timings.get("tool_seconds", 0.0)) + float(timings.get("reward_seconds", 0.0))
    return model, env
